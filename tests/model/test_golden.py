"""Goldens: f16.gz format, comparison metrics, and the live transformers forward (checked against a
numpy llama forward written from the architecture's definition)."""

import gzip
import os

import numpy as np
import pytest

from ktir_models.errors import UserError
from ktir_models.model.checks.golden import Metrics, compare, live_forward, live_logits, read_f16_gz, write_f16_gz
from ktir_models.model.inputs.runtime_inputs import golden_token_ids, rope_inv_freq
from ktir_models.model.weights.synthetic import tiny_config, write_synthetic
from ktir_models.model.weights.checkpoint import load_local


def test_f16_gz_format_is_raw_little_endian_rows(tmp_path):
    a = (np.arange(12, dtype=np.float32).reshape(3, 4) / 3).astype(np.float32)
    path = tmp_path / "t5.f16.gz"
    write_f16_gz(path, a)
    raw = gzip.decompress(path.read_bytes())
    assert raw == a.astype("<f2").tobytes()  # rounded once to f16, row-major, no header
    back = read_f16_gz(path, (3, 4))
    assert back.dtype == np.float16
    np.testing.assert_array_equal(back, a.astype(np.float16))
    first = path.read_bytes()
    write_f16_gz(path, a)
    assert path.read_bytes() == first  # reproducible (no timestamp)
    assert os.listdir(tmp_path) == ["t5.f16.gz"]  # no temporary left behind


def test_f16_gz_errors_name_the_file_and_shape(tmp_path):
    path = tmp_path / "golden.f16.gz"
    write_f16_gz(path, np.zeros((2, 5), np.float16))
    with pytest.raises(UserError, match=r"golden.f16.gz: holds 20 bytes.*expected shape \[2, 6\]"):
        read_f16_gz(path, (2, 6))
    (tmp_path / "plain.f16.gz").write_bytes(b"not gzip at all")
    with pytest.raises(UserError, match="plain.f16.gz"):
        read_f16_gz(tmp_path / "plain.f16.gz", (1,))
    (tmp_path / "cut.f16.gz").write_bytes(path.read_bytes()[:-6])
    with pytest.raises(UserError, match="cut.f16.gz"):
        read_f16_gz(tmp_path / "cut.f16.gz", (2, 5))
    with pytest.raises(UserError, match="absent.f16.gz"):
        read_f16_gz(tmp_path / "absent.f16.gz", (1,))


def test_compare_metrics():
    golden = np.array([[1.0, 3.0, -2.0], [0.5, -4.0, 0.25]])
    logits = np.array([[1.0, 2.5, -2.0], [0.5, -4.0, 0.75]], dtype=np.float16)
    m = compare(logits, golden)
    assert isinstance(m, Metrics)
    assert m.top1_rows == [True, False] and m.top1_agreement == 0.5
    assert m.max_abs == pytest.approx(0.5) and m.max_abs_rel == pytest.approx(0.5 / 4)
    cos = (golden * logits).sum() / np.linalg.norm(golden) / np.linalg.norm(logits.astype(np.float64))
    assert m.cosine == pytest.approx(cos)
    assert "top-1 1/2" in m.summary()
    same = compare(golden, golden)
    assert same.top1_agreement == 1 and same.max_abs == 0 and same.cosine == pytest.approx(1)
    broken = compare(np.where(golden > 0, np.nan, golden), golden)
    assert np.isnan(broken.max_abs) and np.isnan(broken.cosine) and broken.top1_rows == [False, False]
    nan_at_golden_top = compare(np.where(golden == 3.0, np.nan, golden), golden)
    assert nan_at_golden_top.top1_rows == [False, True]
    with pytest.raises(UserError, match=r"\[2, 2\].*\[2, 3\]"):
        compare(golden[:, :2], golden)


def test_compare_forgives_only_f16_ties_of_the_golden():
    # 2.0 and 2.0004 are the same f16 number: the golden cannot rank them, either pick agrees.
    golden = np.array([[2.0, 2.0004, -1.0], [2.0, 2.01, -1.0]])
    logits = np.array([[1.9, 2.2, 0.0], [2.2, 1.9, 0.0]])
    assert compare(logits, golden).top1_rows == [True, False]


def _numpy_llama(ckpt, ids):
    """A float64 llama forward from the definitions (RMSNorm, RoPE, GQA causal attention, SwiGLU)."""
    cfg = ckpt.config

    def w(name):
        return ckpt.read_f16(name).astype(np.float64)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg.rms_norm_eps) * g

    m, hd, nh, nkv = len(ids), cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
    freqs = np.arange(m)[:, None] * rope_inv_freq(cfg).astype(np.float64)[None, :]
    cos, sin = np.cos(np.concatenate([freqs, freqs], 1)), np.sin(np.concatenate([freqs, freqs], 1))

    def rope(t):  # [heads, m, hd]
        rot = np.concatenate([-t[..., hd // 2:], t[..., : hd // 2]], -1)
        return t * cos + rot * sin

    x = w("model.embed_tokens.weight")[ids]
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}."
        h = rms(x, w(p + "input_layernorm.weight"))
        q = rope((h @ w(p + "self_attn.q_proj.weight").T).reshape(m, nh, hd).transpose(1, 0, 2))
        k = rope((h @ w(p + "self_attn.k_proj.weight").T).reshape(m, nkv, hd).transpose(1, 0, 2))
        v = (h @ w(p + "self_attn.v_proj.weight").T).reshape(m, nkv, hd).transpose(1, 0, 2)
        k, v = np.repeat(k, nh // nkv, 0), np.repeat(v, nh // nkv, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + np.triu(np.full((m, m), -np.inf), 1)
        p_att = np.exp(s - s.max(-1, keepdims=True))
        p_att /= p_att.sum(-1, keepdims=True)
        x = x + (p_att @ v).transpose(1, 0, 2).reshape(m, nh * hd) @ w(p + "self_attn.o_proj.weight").T
        h = rms(x, w(p + "post_attention_layernorm.weight"))
        g, u = h @ w(p + "mlp.gate_proj.weight").T, h @ w(p + "mlp.up_proj.weight").T
        x = x + (g / (1 + np.exp(-g)) * u) @ w(p + "mlp.down_proj.weight").T
    return rms(x, w("model.norm.weight")) @ w(ckpt.resolve("lm_head")).T


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    cfg = tiny_config(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    directory = tmp_path_factory.mktemp("tiny")
    write_synthetic(directory, cfg, seed=5)
    return load_local(directory, cfg)


def test_live_logits_match_a_numpy_llama(tiny_ckpt):
    ids = golden_token_ids(12, tiny_ckpt.config.vocab_size)
    logits = live_logits(tiny_ckpt, ids)
    assert logits.dtype == np.float32 and logits.shape == (12, tiny_ckpt.config.vocab_size)
    reference = _numpy_llama(tiny_ckpt, ids)
    np.testing.assert_allclose(logits, reference, atol=2e-4 * np.abs(reference).max())
    assert compare(logits, reference).top1_agreement == 1.0


def test_kv_cache_path_equals_the_full_forward(tiny_ckpt):
    ids = golden_token_ids(10, tiny_ckpt.config.vocab_size)
    full = live_forward(tiny_ckpt, ids)
    tail = live_forward(tiny_ckpt, ids[7:], past=7)  # prefix defaults to the golden ids 0..6
    np.testing.assert_allclose(tail.logits, full.logits[7:], atol=1e-4)
    for layer in range(tiny_ckpt.config.num_hidden_layers):
        assert tail.keys[layer].shape == (10, tiny_ckpt.config.num_key_value_heads * tiny_ckpt.config.head_dim)
        np.testing.assert_allclose(tail.keys[layer], full.keys[layer], atol=1e-5)
        np.testing.assert_allclose(tail.values[layer], full.values[layer], atol=1e-5)
    with pytest.raises(UserError, match="prefix has 3 tokens, expected past=7"):
        live_forward(tiny_ckpt, ids[7:], past=7, prefix_ids=ids[:3])
