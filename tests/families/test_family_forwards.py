"""Every family's emitted forwards against live transformers (f32 eager, the family's own
``*ForCausalLM`` class) on the same synthetic weights, on the numpy and the torch (cpu) back ends:
decode, prefill m=7 and m=32, decode after a 31-token prefill (``--past``: our prefill program
writes the cache), and 4 greedy generation steps with per-step goldens (a dynamic-position decode
program; for mistral the window slides during the steps)."""

from __future__ import annotations

import pytest

from ktir_models.model.emit.generation import forward_after_prefill, generate
from ktir_models.model.emit.tiling import LX_BYTES
from ktir_models.model.checks.golden import live_logits
from ktir_models.model.inputs.runtime_inputs import golden_token_ids

from .configs import FAMILY_CONFIGS, verdict

pytest.importorskip("transformers")
BACKENDS = ["numpy", "torch"]
PASSES = [("decode", 1, 0), ("prefill", 7, 0), ("prefill", 32, 0), ("decode", 1, 31)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode,m,past", PASSES, ids=["decode", "prefill7", "prefill32", "decode-past31"])
@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_family_forward_matches_transformers(family_checkpoints, family, mode, m, past, backend):
    ckpt = family_checkpoints[family]
    out, ids = forward_after_prefill(ckpt, family, mode, m, past, backend=backend)
    assert out.logits.shape == (m, ckpt.config.vocab_size)
    prefix = golden_token_ids(past, ckpt.config.vocab_size) if past else None
    result, met = verdict(out.logits, live_logits(ckpt, ids, past=past, prefix_ids=prefix))
    assert result.passed, f"{family} {mode} m={m} past={past} {backend}: {result.reasons}: {met.summary()}"
    assert max(out.node_lx) <= LX_BYTES


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_family_generate_matches_transformers_each_step(family_checkpoints, family, backend):
    ckpt = family_checkpoints[family]
    result = generate(ckpt, family, tokens=4, steps=4, golden=True, backend=backend)
    assert [s.step for s in result.steps] == [0, 1, 2, 3, 4]
    for s in result.steps:
        ok, met = verdict(s.logits, s.golden)
        assert ok.passed, f"{family} step {s.step} (past {s.past}) {backend}: {ok.reasons}: {met.summary()}"
    for prev, cur in zip(result.steps, result.steps[1:]):
        assert cur.tokens == [prev.next_token] and cur.past == prev.past + len(prev.tokens)
