"""mistral's ``sliding_window`` read the way transformers' ``MistralConfig`` reads it: a missing
key is the class default (4096), an explicit null is no window, a number is that window. Each
case is checked against the live config class and, on a tiny checkpoint whose config.json says
exactly that, against a live transformers forward of a prefill longer than a short window."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ktir_models.model.config import ModelConfig
from ktir_models.model.emit.generation import forward_after_prefill
from ktir_models.model.families.mistral import DEFAULT_SLIDING_WINDOW
from ktir_models.model.checks.golden import live_logits, load_transformers_model
from ktir_models.model.weights.synthetic import ensure_synthetic, tiny_config
from ktir_models.model.weights.checkpoint import Checkpoint

from .configs import verdict

transformers = pytest.importorskip("transformers")

SHORT = 3  # shorter than the prefill below
PREFILL = 7
CASES = {"missing": ..., "null": None, "short": SHORT}


def _config_dict(case: str) -> dict:
    d = tiny_config(model_type="mistral", sliding_window=SHORT, num_key_value_heads=1,
                    tie_word_embeddings=False).to_hf_dict()
    del d["sliding_window"]
    if CASES[case] is not ...:
        d["sliding_window"] = CASES[case]
    return d


@pytest.mark.parametrize("case", sorted(CASES))
def test_window_follows_mistral_config(case):
    d = _config_dict(case)
    ours = ModelConfig.from_hf_dict(d, "config.json").features.sliding_window
    theirs = transformers.MistralConfig.from_dict(d).sliding_window
    assert ours == theirs
    assert ours == {"missing": DEFAULT_SLIDING_WINDOW, "null": None, "short": SHORT}[case]


def _checkpoint(tmp_path, case: str) -> Checkpoint:
    """A synthetic tiny mistral whose config.json holds the case's ``sliding_window`` exactly
    (the key removed for ``missing``), read back from that file as a local checkpoint would be."""
    d = _config_dict(case)
    cfg = ModelConfig.from_hf_dict(d, "config.json")
    directory = ensure_synthetic(f"mistral-{case}", cfg, seed=0, cache_root=tmp_path)
    (directory / "config.json").write_text(json.dumps(d), encoding="utf-8")
    return Checkpoint(directory, ModelConfig.from_json(directory / "config.json"), "synthetic:0")


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_window_forward_matches_transformers(tmp_path, monkeypatch, case):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    ckpt = _checkpoint(tmp_path, case)
    assert load_transformers_model(ckpt).config.sliding_window == ckpt.config.features.sliding_window
    out, ids = forward_after_prefill(ckpt, f"mistral-{case}", "prefill", PREFILL, 0)
    golden = live_logits(ckpt, ids)
    result, met = verdict(out.logits, golden)
    assert result.passed, f"{case}: {result.reasons}: {met.summary()}"
    if case == "short":  # same weights without a window: equal until the window is reached
        causal = live_logits(_checkpoint(tmp_path / "null", "null"), ids)
        assert np.array_equal(golden[:SHORT], causal[:SHORT])
        assert not np.array_equal(golden[SHORT:], causal[SHORT:])
