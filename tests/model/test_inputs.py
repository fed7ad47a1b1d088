"""Runtime inputs against transformers' own values (rotary embedding, embedding layer, KV cache)."""

import numpy as np
import pytest
import torch

from ktir_models.errors import UserError
from ktir_models.model.checks.golden import live_forward
from ktir_models.model.inputs.runtime_inputs import (
    MASKED, causal_mask, decode_mask, embedding_rows, golden_token_ids, kv_heads_to_cache, prefix_mask,
    rope_inv_freq, rope_tables, zero_kv_prefix)
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.synthetic import tiny_config, write_synthetic
from ktir_models.model.weights.checkpoint import load_local


def _hf_rotary(cfg, positions):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rotary = LlamaRotaryEmbedding(config=LlamaConfig(**cfg.to_hf_dict()))
    pos = torch.as_tensor(np.asarray(positions)).reshape(1, -1)
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), pos)
    return rotary.inv_freq.numpy(), cos[0].numpy(), sin[0].numpy()


@pytest.mark.parametrize("model", ["smollm2-135m", "llama-3.2-1b"])
@pytest.mark.parametrize("positions", [np.arange(64), np.array([0, 1, 2047, 8191, 8192, 20000, 131071])])
def test_rope_tables_match_transformers(model, positions):
    cfg = resolve_model(model).config
    inv_freq, cos_ref, sin_ref = _hf_rotary(cfg, positions)
    np.testing.assert_array_equal(rope_inv_freq(cfg), inv_freq)
    cos, sin = rope_tables(cfg, positions)
    assert cos.dtype == sin.dtype == np.float16 and cos.shape == (len(positions), cfg.head_dim)
    # one rounding from transformers' float32 values: within half an f16 ulp (+ 1 f32 ulp of cos)
    for ours, ref in ((cos, cos_ref), (sin, sin_ref)):
        err = np.abs(ours.astype(np.float64) - ref)
        assert (err <= np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64) / 2 + 1e-7).all()


def test_llama3_scaling_changes_only_low_frequencies():
    cfg = resolve_model("llama-3.2-1b").config
    unscaled = rope_inv_freq(tiny_config(head_dim=64, hidden_size=256, rope_theta=500000.0))
    scaled = rope_inv_freq(cfg)
    wavelen = 2 * np.pi / unscaled
    np.testing.assert_array_equal(scaled[wavelen < 8192 / 4], unscaled[wavelen < 8192 / 4])
    np.testing.assert_allclose(scaled[wavelen > 8192], unscaled[wavelen > 8192] / 32, rtol=1e-6)
    medium = (wavelen >= 2048) & (wavelen <= 8192)
    assert medium.any() and (scaled[medium] < unscaled[medium]).all() and (scaled[medium] > unscaled[medium] / 32).all()


def test_golden_token_ids():
    assert list(golden_token_ids(4, 49152)) == [1001, 1138, 1275, 1412]
    ids = golden_token_ids(1000, 512)
    assert ids.min() >= 1 and ids.max() <= 511
    assert list(golden_token_ids(2, 49152, start=3)) == list(golden_token_ids(5, 49152)[3:])


def test_embedding_rows_match_the_model_embedding(tmp_path):
    from transformers import LlamaForCausalLM

    cfg = tiny_config()
    write_synthetic(tmp_path, cfg, dtype="bfloat16")
    ids = golden_token_ids(9, cfg.vocab_size)
    rows = embedding_rows(load_local(tmp_path, cfg), ids)
    model = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.float32, local_files_only=True)
    ref = model.get_input_embeddings()(torch.as_tensor(ids)).detach().numpy()
    assert rows.dtype == np.float16 and rows.shape == (9, cfg.hidden_size)
    np.testing.assert_array_equal(rows.astype(np.float32), ref)  # bf16 values are exact in f16 here
    with pytest.raises(UserError, match="out of range"):
        embedding_rows(load_local(tmp_path, cfg), [cfg.vocab_size])


def test_masks_and_empty_prefix():
    assert MASKED == np.finfo(np.float16).min
    m = prefix_mask(64)
    assert m.shape == (1, 64) and m.dtype == np.float16 and (m == MASKED).all()  # golden convention
    d = decode_mask(8, 3)
    assert list(d[0]) == [0, 0, 0] + [MASKED] * 5
    c = causal_mask(3, past=2)
    expected = np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]]) * MASKED
    np.testing.assert_array_equal(c, expected.astype(np.float16))
    z = zero_kv_prefix(resolve_model("smollm2-135m").config, 64)
    assert z.shape == (64, 192) and z.dtype == np.float16 and not z.any()
    with pytest.raises(UserError):
        prefix_mask(4, past=5)


def test_kv_cache_layout_is_slot_major_head_minor(tmp_path):
    cfg = tiny_config()
    write_synthetic(tmp_path, cfg)
    ckpt = load_local(tmp_path, cfg)
    ids = golden_token_ids(5, cfg.vocab_size)
    fwd = live_forward(ckpt, ids)
    assert fwd.keys[0].shape == (5, cfg.num_key_value_heads * cfg.head_dim)
    # Recompute layer-0 keys from the weights: k = RoPE(norm(x) @ Wk^T), per head.
    x = embedding_rows(ckpt, ids).astype(np.float64)
    w_norm = ckpt.read_f16("model.layers.0.input_layernorm.weight").astype(np.float64)
    h = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + cfg.rms_norm_eps) * w_norm
    k = h @ ckpt.read_f16("model.layers.0.self_attn.k_proj.weight").astype(np.float64).T
    cos, sin = rope_tables(cfg, np.arange(5))
    half = cfg.head_dim // 2
    heads = k.reshape(5, cfg.num_key_value_heads, cfg.head_dim)
    rotated = np.concatenate([-heads[..., half:], heads[..., :half]], axis=-1)
    k_rope = heads * cos[:, None, :].astype(np.float64) + rotated * sin[:, None, :].astype(np.float64)
    np.testing.assert_allclose(fwd.keys[0], k_rope.reshape(5, -1), atol=2e-3)
    # and the helper's transpose: [heads, seq, dim] -> [seq, heads*dim]
    t = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    assert kv_heads_to_cache(t)[1].tolist() == [4, 5, 6, 7, 16, 17, 18, 19]
