"""Teacher-forced text metrics (model/checks/text_metrics.py) against torch's own log-softmax / KL and
hand-counted top-5 sets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ktir_models.model.checks.text_metrics import next_token_targets, text_metrics


def test_identical_logits_have_zero_kl_and_equal_perplexity() -> None:
    g = np.random.default_rng(0).normal(size=(4, 50)).astype(np.float32)
    tm = text_metrics(g, g, [3, 7, -1, 9])
    assert tm.kl == pytest.approx([0.0] * 4, abs=1e-12)
    assert tm.top5_overlap == [1.0] * 4
    assert len(tm.nll_golden) == 3 and tm.nll_golden == tm.nll_emulated
    assert tm.perplexity_golden == tm.perplexity_emulated


def test_against_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    g = rng.normal(size=(5, 40)) * 3
    a = g + rng.normal(size=g.shape) * 0.5
    targets = [1, 2, 3, 4, -1]
    tm = text_metrics(a, g, targets)
    lg = torch.log_softmax(torch.tensor(g), dim=1)
    la = torch.log_softmax(torch.tensor(a), dim=1)
    kl = torch.nn.functional.kl_div(la, lg, reduction="none", log_target=True).sum(dim=1)
    assert tm.kl == pytest.approx(kl.tolist(), rel=1e-9)
    nll_g = [-float(lg[i, t]) for i, t in enumerate(targets) if t >= 0]
    nll_a = [-float(la[i, t]) for i, t in enumerate(targets) if t >= 0]
    assert tm.nll_golden == pytest.approx(nll_g) and tm.nll_emulated == pytest.approx(nll_a)
    assert tm.perplexity_golden == pytest.approx(math.exp(np.mean(nll_g)))
    assert tm.perplexity_emulated == pytest.approx(math.exp(np.mean(nll_a)))
    assert tm.kl_max == pytest.approx(max(kl.tolist())) and tm.kl_mean == pytest.approx(float(kl.mean()))


def test_top5_overlap_counts_shared_tokens() -> None:
    g = np.arange(10, dtype=np.float64)[None, :]  # golden top-5: 9, 8, 7, 6, 5
    a = g.copy()
    a[0, 9], a[0, 0] = -1.0, 100.0  # ours: 0, 8, 7, 6, 5 -> 4 shared
    assert text_metrics(a, g, [-1]).top5_overlap == [0.8]


def test_nan_logits_are_not_hidden() -> None:
    g = np.zeros((1, 8))
    a = g.copy()
    a[0, 2] = np.nan
    tm = text_metrics(a, g, [2])
    assert math.isnan(tm.kl[0]) and math.isnan(tm.top5_overlap[0]) and math.isnan(tm.perplexity_emulated)


def test_next_token_targets() -> None:
    ids = [1, 10, 11, 12, 13]
    assert next_token_targets(ids, past=0, m=3) == [10, 11, 12]
    assert next_token_targets(ids, past=2, m=3) == [12, 13, -1]
