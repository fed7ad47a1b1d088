"""Our greedy tokens against transformers' greedy generation (model/checks/greedy_golden.py): the first
divergence names both tokens with their golden logits, and a margin inside the near-tie band is
accepted as a near-tie."""

from __future__ import annotations

import math

import numpy as np

from ktir_models.model.checks.greedy_golden import GreedyGolden, first_divergence
from ktir_models.model.checks.report import NEAR_TIE_REL


def _golden(tokens: list[int], vocab: int = 16, runner_up: dict[int, tuple[int, float]] | None = None) -> GreedyGolden:
    """Logits with ``tokens[s]`` on top at 10.0; ``runner_up[s] = (token, logit)``."""
    logits = []
    for s, t in enumerate(tokens):
        row = np.zeros(vocab, dtype=np.float32)
        row[t] = 10.0
        if runner_up and s in runner_up:
            row[runner_up[s][0]] = runner_up[s][1]
        logits.append(row)
    return GreedyGolden(list(tokens), logits)


def test_identical_sequences_have_no_divergence():
    assert first_divergence([3, 4, 5], _golden([3, 4, 5])) is None


def test_divergence_names_step_tokens_and_golden_logits():
    golden = _golden([3, 4, 5], runner_up={1: (9, 7.5)})
    div = first_divergence([3, 9, 2], golden)
    assert (div.step, div.ours, div.theirs) == (1, 9, 4)
    assert (div.ours_logit, div.theirs_logit) == (7.5, 10.0)
    assert math.isclose(div.margin, 2.5) and math.isclose(div.band, NEAR_TIE_REL * 10.0)
    assert not div.near_tie  # 2.5 against a band of 0.156


def test_divergence_inside_the_band_is_a_near_tie():
    golden = _golden([3, 4, 5], runner_up={2: (7, 9.9)})
    div = first_divergence([3, 4, 7], golden)
    assert div.step == 2 and math.isclose(div.margin, 0.1, rel_tol=1e-5) and div.near_tie


def test_one_side_stopping_early_is_a_divergence():
    div = first_divergence([3, 4], _golden([3, 4, 2]))
    assert (div.step, div.ours, div.theirs) == (2, None, 2) and not div.near_tie
    div = first_divergence([3, 4, 2], _golden([3, 4]))
    assert (div.step, div.ours, div.theirs) == (2, 2, None) and not div.near_tie
