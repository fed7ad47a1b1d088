"""Whole emitted forwards of tiny llama-family models against transformers (f32 eager) on the same
synthetic weights: decode, prefill (odd and even m), decode after a prefill on the cache our
prefill program wrote, and multi-step greedy generation with per-step goldens.

The architectures differ in GQA ratio (1, 2, 4, MQA), head_dim (16, 32, 80), tying, llama3 RoPE
scaling, eps and ragged sizes (see configs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.model.emit.generation import forward_after_prefill, generate
from ktir_models.model.emit.session import Session
from ktir_models.model.emit import cached_program
from ktir_models.model.emit.tiling import LX_BYTES
from ktir_models.model.checks.golden import compare, live_forward, live_logits
from ktir_models.model.inputs.runtime_inputs import golden_token_ids
from ktir_models.model.checks.report import REL_TOLERANCE, judge
from ktir_models.model.weights.synthetic import ensure_synthetic, tiny_config
from ktir_models.model.weights.checkpoint import Checkpoint

from .configs import tiny_configs

TINY = {"tiny-gqa2": tiny_config(), **tiny_configs()}


@pytest.fixture(autouse=True)
def _program_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    return {name: Checkpoint(ensure_synthetic(name, cfg, seed=0, cache_root=root), cfg, "synthetic:0")
            for name, cfg in TINY.items()}


def f16_ties(logits, golden) -> list[int]:
    """Rows whose top-1 differs only because the golden's top two logits are closer than two f16
    ulps (our logits are f16: such a pair can round to the same value). Real differences stay."""
    ours = np.argmax(logits, axis=1)
    theirs = np.argmax(golden, axis=1)
    rows = []
    for i in np.flatnonzero(ours != theirs):
        top = golden[i, theirs[i]]
        ulp = float(np.spacing(np.float16(abs(top))))
        if top - golden[i, ours[i]] <= 2 * ulp:
            rows.append(int(i))
    return rows


def _check(logits, golden):
    """The forward pass rule (report.judge), with exact f16 ties of the golden forgiven."""
    logits = logits.astype(np.float32)
    met = compare(logits, golden)
    ties = f16_ties(logits, golden)
    for i in ties:
        met.top1_rows[i] = True
    verdict = judge(met)
    assert verdict.passed, f"{verdict.reasons}: {met.summary()}"
    return met


@pytest.mark.parametrize("name", sorted(TINY))
@pytest.mark.parametrize("mode,m,past", [("decode", 1, 0), ("prefill", 7, 0), ("prefill", 32, 0), ("decode", 1, 31)])
def test_forward_matches_transformers(checkpoints, name, mode, m, past):
    ckpt = checkpoints[name]
    out, ids = forward_after_prefill(ckpt, name, mode, m, past)
    assert out.logits.shape == (m, ckpt.config.vocab_size)
    prefix = golden_token_ids(past, ckpt.config.vocab_size) if past else None
    _check(out.logits, live_logits(ckpt, ids, past=past, prefix_ids=prefix))
    assert max(out.node_lx) <= LX_BYTES


@pytest.mark.parametrize("m,past", [(70, 0), (66, 5)])
def test_long_prefill_uses_row_blocks(checkpoints, m, past):
    """More than 64 tokens: GEMMs and attention work in row blocks (64 + rest), the causal
    constant of the second block starts mid-triangle; with past > 0 also a chunked prefill."""
    name = "tiny-gqa4-untied-llama3"
    ckpt = checkpoints[name]
    out, ids = forward_after_prefill(ckpt, name, "prefill", m, past)
    prefix = golden_token_ids(past, ckpt.config.vocab_size) if past else None
    _check(out.logits, live_logits(ckpt, ids, past=past, prefix_ids=prefix))


def test_prefill_writes_the_transformers_kv_cache(checkpoints):
    name = "tiny-gqa4-untied-llama3"
    ckpt, cfg = checkpoints[name], TINY[name]
    m = 9
    session = Session(ckpt)
    program = session.load(cached_program(cfg, "prefill", m, 0, capacity=m + 3, name=name))
    ids = golden_token_ids(m, cfg.vocab_size)
    session.run(program, ids, past=0)
    live = live_forward(ckpt, ids)
    for layer in range(cfg.num_hidden_layers):
        k, v = session.cache(layer)
        for ours, theirs in ((k, live.keys[layer]), (v, live.values[layer])):
            np.testing.assert_allclose(ours[:m].astype(np.float32), theirs, rtol=0, atol=0.02 * np.abs(theirs).max())
            assert np.all(ours[m:] == 0)  # spare capacity untouched


@pytest.mark.parametrize("name", ["tiny-mha", "tiny-mqa-hd80"])
def test_generate_matches_transformers_each_step(checkpoints, name):
    ckpt = checkpoints[name]
    seen = []
    result = generate(ckpt, name, tokens=5, steps=4, golden=True, progress=seen.append)
    assert [s.step for s in result.steps] == [0, 1, 2, 3, 4] and seen == result.steps
    for s in result.steps:
        ties = f16_ties(s.logits.astype(np.float32), s.golden)
        rows = [ok or i in ties for i, ok in enumerate(s.metrics.top1_rows)]
        assert all(rows) and s.metrics.max_abs_rel <= REL_TOLERANCE, (s.step, s.metrics.summary())
        assert s.max_node_lx <= LX_BYTES
    # each decode step consumed the token the previous pass chose
    for prev, cur in zip(result.steps, result.steps[1:]):
        assert cur.tokens == [prev.next_token] and cur.past == prev.past + len(prev.tokens)
