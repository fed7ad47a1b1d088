"""Synthetic checkpoints: determinism, caching, atomic writes, and a trained-looking forward
(measured with transformers on the exact SmolLM2 / Llama-3.2 architectures)."""

import os

import numpy as np
import pytest
import torch

from ktir_models.model.weights import synthetic
from ktir_models.model.inputs.runtime_inputs import golden_token_ids
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.synthetic import ensure_synthetic, synthetic_dir, tiny_config, write_synthetic
from ktir_models.model.weights.checkpoint import load_local


def _all_f16(directory, cfg):
    ckpt = load_local(directory, cfg)
    return {name: ckpt.read_f16(name) for name in ckpt.tensor_names()}


def test_same_seed_same_values_whatever_the_sharding(tmp_path):
    cfg = tiny_config()
    write_synthetic(tmp_path / "a", cfg, seed=7)
    write_synthetic(tmp_path / "b", cfg, seed=7, max_shard_bytes=30_000)
    write_synthetic(tmp_path / "c", cfg, seed=8)
    a, b, c = (_all_f16(tmp_path / x, cfg) for x in "abc")
    assert a.keys() == b.keys() == c.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    assert not np.array_equal(a["model.layers.0.mlp.up_proj.weight"], c["model.layers.0.mlp.up_proj.weight"])


def test_recipe_scales(tmp_path):
    cfg = tiny_config(hidden_size=256, intermediate_size=512, num_attention_heads=8, num_key_value_heads=2,
                      head_dim=32, num_hidden_layers=4, vocab_size=2048)
    write_synthetic(tmp_path, cfg)
    w = _all_f16(tmp_path, cfg)
    norms = np.linalg.norm(w["model.embed_tokens.weight"].astype(np.float32), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=2e-3)  # unit rows (f16 rounding)
    ln = w["model.layers.2.input_layernorm.weight"].astype(np.float32)
    assert abs(ln.mean() - 1) < 0.02 and 0.02 < ln.std() < 0.1
    up = w["model.layers.1.mlp.up_proj.weight"].astype(np.float32)
    assert abs(up.std() * np.sqrt(256) - 1) < 0.05  # 1/sqrt(fan_in)
    s = np.linalg.svd(up, compute_uv=False)
    assert s[3] > 2 * s[4]  # the shared rank-4 structure stands out of the noise


def test_cache_is_reused_and_keyed_by_config_and_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path))
    cfg = tiny_config()
    first = ensure_synthetic("tiny", cfg, seed=1)
    assert first.parent == tmp_path / "synthetic" and first.name.startswith("tiny-")
    os.utime(first / "model.safetensors", ns=(10**9, 10**9))  # a rewrite would bear a new mtime
    assert ensure_synthetic("tiny", cfg, seed=1) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == 10**9  # not rewritten
    assert ensure_synthetic("tiny", cfg, seed=2) != first
    assert ensure_synthetic("tiny", tiny_config(rms_norm_eps=1e-6), seed=1) != first


def test_killed_generation_leaves_no_checkpoint(tmp_path, monkeypatch):
    cfg = tiny_config()

    def dies_halfway(out_dir, *args, **kwargs):
        (out_dir / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(synthetic, "write_synthetic", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        ensure_synthetic("tiny", cfg, cache_root=tmp_path)
    assert os.listdir(tmp_path / "synthetic") == []  # no final dir, no temp dir
    monkeypatch.undo()
    final = ensure_synthetic("tiny", cfg, cache_root=tmp_path)
    assert final == synthetic_dir("tiny", cfg, cache_root_dir=tmp_path)
    assert load_local(final, cfg).tensor_names()


def test_transformers_loads_every_tensor(tmp_path):
    from transformers import LlamaForCausalLM

    cfg = tiny_config(tie_word_embeddings=False)
    write_synthetic(tmp_path, cfg)
    model, info = LlamaForCausalLM.from_pretrained(tmp_path, output_loading_info=True, local_files_only=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def _forward_stats(directory, cfg, m):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(
        directory, dtype=torch.float32, attn_implementation="eager", local_files_only=True
    )
    ids = torch.as_tensor(golden_token_ids(m, cfg.vocab_size)).reshape(1, -1)
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
    logits = out.logits[0].numpy()
    hidden_std = [float(h[0].std()) for h in out.hidden_states[:-1]]  # last one is after the final norm
    top2 = np.sort(logits, axis=1)[:, -2:]
    return logits, hidden_std, top2[:, 1] - top2[:, 0]


def _check_trained_look(logits, hidden_std, margins, cfg):
    assert np.isfinite(logits).all()
    logit_std = logits.std(axis=1)
    assert (0.7 < logit_std).all() and (logit_std < 3).all(), logit_std  # spread over several units
    spread = logits.max(axis=1) - logits.min(axis=1)
    assert (spread > 8).all(), spread
    # clear top-1 margins: f16 rounding in an emulated forward (~1e-2) cannot flip them
    assert margins.min() > 1.0 and np.median(margins) > 3.0, margins
    # the residual stream neither explodes nor vanishes: starts at 1/sqrt(h) per element (unit
    # embedding rows) and grows smoothly, by at most ~10x over all layers
    embed_std = 1 / np.sqrt(cfg.hidden_size)
    assert abs(hidden_std[0] / embed_std - 1) < 0.05
    ratios = np.array(hidden_std) / embed_std
    assert (ratios >= 0.9).all() and (ratios < 10).all(), ratios
    assert (np.diff(ratios) > -0.2).all(), ratios  # no collapse between layers


def test_smollm2_synthetic_forward_looks_trained(tmp_path):
    cfg = resolve_model("smollm2-135m").config
    write_synthetic(tmp_path, cfg)
    logits, hidden_std, margins = _forward_stats(tmp_path, cfg, m=16)
    _check_trained_look(logits, hidden_std, margins, cfg)


@pytest.mark.slow
def test_llama_32_1b_synthetic_forward_looks_trained(tmp_path):
    cfg = resolve_model("llama-3.2-1b").config
    write_synthetic(tmp_path, cfg)
    size = (tmp_path / "model.safetensors").stat().st_size
    assert size > cfg.f16_weight_bytes  # + header
    logits, hidden_std, margins = _forward_stats(tmp_path, cfg, m=4)
    _check_trained_look(logits, hidden_std, margins, cfg)
