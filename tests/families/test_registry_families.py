"""The registry's real checkpoints of each family: their [config] tables read to the family's
features, and their real-size programs emit within one core's LX with the family's nodes.

``KTIR_MODELS_BIG=1`` also runs whole real-size forwards on synthetic weights against live
transformers (f32): minutes each, GBs of RAM; opt-in, not part of CI."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.model.emit.api import _build, pass_shape
from ktir_models.model.emit.tiling import LX_BUDGET
from ktir_models.model.registry import resolve_model

FAMILY_ENTRIES = {
    "granite-3.3-2b": ("granite", dict(embedding_multiplier=12.0, residual_multiplier=0.22,
                                       attention_multiplier=0.015625, logits_scaling=8.0)),
    "granite-3.3-8b": ("granite", dict(embedding_multiplier=12.0, residual_multiplier=0.22,
                                       attention_multiplier=0.0078125, logits_scaling=16.0)),
    "qwen2.5-0.5b": ("qwen2", dict(qkv_bias=True)),
    "qwen2.5-3b": ("qwen2", dict(qkv_bias=True)),
    "qwen3-0.6b": ("qwen3", dict(qk_norm=True)),
    "mistral-7b-v0.1": ("mistral", dict(sliding_window=4096)),
    "mistral-7b-v0.3": ("mistral", dict(sliding_window=None)),
}


@pytest.mark.parametrize("name", sorted(FAMILY_ENTRIES))
def test_registry_entry_reads_to_its_family(name):
    family, expected = FAMILY_ENTRIES[name]
    cfg = resolve_model(name).config
    assert cfg.model_type == family and cfg.family.architecture.endswith("ForCausalLM")
    for field, value in expected.items():
        assert getattr(cfg.features, field) == value, field


@pytest.mark.parametrize("mode,m", [("decode", 1), ("prefill", 32)])
@pytest.mark.parametrize("name", sorted(FAMILY_ENTRIES))
def test_real_size_program_fits_and_has_the_family_nodes(name, mode, m):
    cfg = resolve_model(name).config
    program, extras = _build(cfg, mode, pass_shape(mode, m, 0, None), name)
    per_layer = 11 + (2 if cfg.features.qk_norm else 0)
    assert len(program.nodes) == cfg.num_hidden_layers * per_layer + 2
    assert max(n.lx_estimate for n in program.nodes) <= LX_BUDGET
    layer0 = [n for n in program.nodes if n.layer == 0]
    names = [n.fn.split("_l0_", 1)[1] for n in layer0]
    assert ("q_norm" in names and names.index("q_norm") < names.index("rope_q")) == cfg.features.qk_norm
    biased = [n for n in layer0 if any(a.name == "bias" for a in n.args)]
    assert len(biased) == (3 if cfg.features.qkv_bias else 0)
    host = extras.get("host", {})
    assert host.get("sliding_window") == cfg.features.sliding_window
    assert host.get("embedding_multiplier", 1.0) == cfg.features.embedding_multiplier
    # the first layer's kernels parse and verify (the rest differ only in tensor ids)
    for n in layer0:
        ktir.verify(ktir.parse_text(n.text, n.mlir))


BIG = os.environ.get("KTIR_MODELS_BIG") == "1"


@pytest.mark.slow
@pytest.mark.skipif(not BIG, reason="real-size forwards are opt-in: set KTIR_MODELS_BIG=1 (minutes, GBs of RAM)")
@pytest.mark.parametrize("mode,m", [("decode", 1), ("prefill", 32)])
@pytest.mark.parametrize("name", ["qwen2.5-0.5b", "qwen3-0.6b", "granite-3.3-2b"])
def test_real_size_forward_matches_transformers(tmp_path, monkeypatch, name, mode, m):
    """Synthetic weights of the real architecture; transformers in f32 needs 4x the f16 bytes, so
    the 7B mistral entries are checked for emission only (above)."""
    from ktir_models.model.emit.generation import forward_after_prefill
    from ktir_models.model.checks.golden import live_logits
    from ktir_models.model.weights.synthetic import ensure_synthetic
    from ktir_models.model.weights.checkpoint import Checkpoint

    from .configs import verdict

    monkeypatch.setenv("KTIR_MODELS_CACHE", os.environ.get("KTIR_MODELS_BIG_CACHE", str(tmp_path / "cache")))
    cfg = resolve_model(name).config
    ckpt = Checkpoint(ensure_synthetic(name, cfg, seed=0), cfg, "synthetic:0")
    out, ids = forward_after_prefill(ckpt, name, mode, m, 0)
    result, met = verdict(out.logits, live_logits(ckpt, ids))
    assert result.passed and np.isfinite(out.logits).all(), f"{result.reasons}: {met.summary()}"
