"""Each kernel kind on the emulator against numpy written from the semantics (f32 math, one f16
rounding), including ragged column chunks, K blocking, cache-row offsets (static and dynamic),
GQA and the prefix + fresh attention."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.model.emit.kernels.attention import attention_kernel
from ktir_models.model.emit.kernels.gemm import gemm_kernel
from ktir_models.model.emit.kernels.rmsnorm import rmsnorm_kernel
from ktir_models.model.emit.kernels.rope import rope_kernel
from ktir_models.model.emit.kernels.rows import RowBase
from ktir_models.model.emit.tiling import LX_BYTES, plan_gemm
from ktir_models.model.inputs.runtime_inputs import prefix_mask, rope_tables
from ktir_models.model.weights.synthetic import tiny_config

from .harness import close, f16, run_kernel

rng = np.random.default_rng(7)


def f32(a):
    return np.asarray(a, dtype=np.float32)


@pytest.mark.parametrize("m,hidden", [(1, 64), (5, 96), (40, 160)])
def test_rmsnorm(m, hidden):
    x, w = f16(rng, m, hidden, scale=3.0), f16(rng, 1, hidden)
    text = rmsnorm_kernel("k", m=m, hidden=hidden, eps=1e-5, x="x", weight="w", out="out").text
    out, stats = run_kernel(text, {"x": x, "w": w, "out": np.zeros((m, hidden))})
    xf = f32(x)
    want = f32(w) * xf / np.sqrt(np.mean(xf * xf, axis=1, keepdims=True) + np.float32(1e-5))
    close(out["out"], want)
    assert max(stats.lx_high_water) <= LX_BYTES


@pytest.mark.parametrize("m,k,n", [(1, 96, 200), (3, 64, 64), (7, 160, 330), (2, 4096, 96)])
def test_gemm(m, k, n):
    x, w = f16(rng, m, k), f16(rng, n, k, scale=0.1)
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["w"], out="out")
    out, stats = run_kernel(kt.text, {"x": x, "w": w, "out": np.zeros((m, n))})
    close(out["out"], f32(x) @ f32(w).T)
    assert max(stats.lx_high_water) <= LX_BYTES
    assert max(stats.lx_high_water) <= kt.lx_estimate


def test_gemm_plans_ragged_chunks_and_k_blocks():
    plan = plan_gemm(7, 160, 330)
    assert plan.cols.tail == 330 % plan.cols.size and plan.cols.tail > 0
    assert plan_gemm(2, 4096, 96).kblock < 4096 or plan_gemm(64, 8192, 2048).kblock < 8192
    big = plan_gemm(32, 2048, 128256)
    assert big.cols.grid == 32 and big.lx_estimate <= 3 * LX_BYTES // 4


def test_gemm_plans_deal_columns_evenly_where_they_can():
    """The busiest core's columns decide the node's latency: 12800 columns (granite-3.3-8b's
    MLP) are 32 chunks of 400, not 40 of 320 (8 cores with twice the work), and no candidate
    chunk leaves a busier core than the one chosen."""
    plan = plan_gemm(1, 4096, 12800, weights=2, epilogue="silu_mul")
    assert (plan.cols.size, plan.cols.full, plan.cols.tail, plan.cols.grid) == (400, 32, 0, 32)
    assert plan.lx_estimate <= 3 * LX_BYTES // 4
    for m, k, n in [(1, 4096, 12800), (32, 4096, 12800), (32, 2048, 8192), (7, 576, 1536),
                    (1, 4096, 1024), (32, 4096, 14336), (1, 3584, 18944), (32, 2048, 11008)]:
        cols = plan_gemm(m, k, n, weights=2, epilogue="silu_mul").cols
        busiest = -(-cols.full // cols.grid) * cols.size + cols.tail
        assert cols.full * cols.size + cols.tail == n
        assert busiest <= -(-n // 32 // 64) * 64 + 64, (m, k, n, cols)
        if n % 32 == 0 and (n // 32) % 8 == 0:
            assert busiest == n // 32, (m, k, n, cols)


def test_gemm_residual_epilogue():
    m, k, n = 3, 96, 130
    x, w, r = f16(rng, m, k), f16(rng, n, k, scale=0.1), f16(rng, m, n)
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["w"], out="out", epilogue="residual", residual="res")
    out, _ = run_kernel(kt.text, {"x": x, "w": w, "res": r, "out": np.zeros((m, n))})
    close(out["out"], f32(x) @ f32(w).T + f32(r))


def test_gemm_silu_mul_epilogue():
    m, k, n = 4, 64, 96
    x, g, u = f16(rng, m, k), f16(rng, n, k, scale=0.3), f16(rng, n, k, scale=0.3)
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["gate", "up"], out="out", epilogue="silu_mul")
    out, _ = run_kernel(kt.text, {"x": x, "gate": g, "up": u, "out": np.zeros((m, n))})
    a, b = f32(x) @ f32(g).T, f32(x) @ f32(u).T
    close(out["out"], a / (1 + np.exp(-a)) * b)


@pytest.mark.parametrize("dynamic", [False, True])
def test_gemm_writes_cache_rows(dynamic):
    m, k, n, rows, past = 2, 64, 48, 9, 5
    x, w = f16(rng, m, k), f16(rng, n, k, scale=0.2)
    base = RowBase(arg="pos") if dynamic else RowBase(static=past)
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["w"], out="out", out_rows=rows, out_base=base)
    sentinel = np.full((rows, n), 7.0)
    out, _ = run_kernel(kt.text, {"x": x, "w": w, "out": sentinel}, {"pos": past} if dynamic else None)
    close(out["out"][past:past + m], f32(x) @ f32(w).T)
    untouched = np.delete(out["out"], range(past, past + m), axis=0)
    assert np.all(untouched == 7.0)


def _rope_ref(x, cos, sin, heads, hd):
    m = x.shape[0]
    xf = f32(x).reshape(m, heads, hd)
    c, s = f32(cos)[:, None, :], f32(sin)[:, None, :]
    rot = np.concatenate([-xf[..., hd // 2:], xf[..., : hd // 2]], axis=-1)
    return (xf * c + rot * s).reshape(m, heads * hd)


@pytest.mark.parametrize("heads,hd", [(4, 16), (3, 80)])
def test_rope(heads, hd):
    m = 3
    cfg = tiny_config(head_dim=hd, num_attention_heads=heads, num_key_value_heads=heads)
    cos, sin = rope_tables(cfg, np.arange(5, 5 + m))
    x = f16(rng, m, heads * hd)
    text = rope_kernel("k", m=m, heads=heads, head_dim=hd, x="x", cos="cos", sin="sin", out="out").text
    out, _ = run_kernel(text, {"x": x, "cos": cos, "sin": sin, "out": np.zeros((m, heads * hd))})
    close(out["out"], _rope_ref(x, cos, sin, heads, hd))


@pytest.mark.parametrize("dynamic", [False, True])
def test_rope_into_cache(dynamic):
    m, heads, hd, rows, past = 2, 2, 16, 6, 3
    cfg = tiny_config()
    cos, sin = rope_tables(cfg, np.arange(past, past + m))
    x = f16(rng, m, heads * hd)
    base = RowBase(arg="pos") if dynamic else RowBase(static=past)
    text = rope_kernel("k", m=m, heads=heads, head_dim=hd, x="x", cos="cos", sin="sin", out="out",
                       out_rows=rows, out_base=base).text
    out, _ = run_kernel(text, {"x": x, "cos": cos, "sin": sin, "out": np.full((rows, heads * hd), 7.0)},
                        {"pos": past} if dynamic else None)
    close(out["out"][past:past + m], _rope_ref(x, cos, sin, heads, hd))
    assert np.all(np.delete(out["out"], range(past, past + m), axis=0) == 7.0)


def _attention_ref(q, kc, vc, past, m, heads, kv_heads, hd):
    out = np.zeros((m, heads * hd), dtype=np.float32)
    group = heads // kv_heads
    for h in range(heads):
        g = h // group
        qh = f32(q)[:, h * hd:(h + 1) * hd]
        kh, vh = f32(kc)[:, g * hd:(g + 1) * hd], f32(vc)[:, g * hd:(g + 1) * hd]
        for i in range(m):
            keys = past + i + 1  # positions 0 .. past+i
            s = kh[:keys] @ qh[i] * np.float32(hd**-0.5)
            p = np.exp(s - s.max())
            out[i, h * hd:(h + 1) * hd] = (p / p.sum()) @ vh[:keys]
    return out


@pytest.mark.parametrize("m,past,capacity,heads,kv_heads,hd,dynamic", [
    (1, 0, 1, 4, 2, 16, False),     # first decode step
    (5, 0, 5, 4, 2, 16, False),     # prefill
    (1, 6, 7, 4, 4, 16, False),     # decode after a prefill, MHA
    (3, 4, 12, 8, 2, 32, False),    # chunk after a prefix, spare capacity, GQA 4
    (1, 6, 11, 4, 1, 80, True),     # dynamic position, MQA, head_dim 80
])
def test_attention(m, past, capacity, heads, kv_heads, hd, dynamic):
    kv_dim = kv_heads * hd
    q = f16(rng, m, heads * hd)
    kc, vc = f16(rng, capacity, kv_dim), f16(rng, capacity, kv_dim)
    kc[past + m:] = 0  # unused rows hold zeros, as the host binds them
    vc[past + m:] = 0
    fresh = RowBase(arg="pos") if dynamic else RowBase(static=past)
    kt = attention_kernel("k", m=m, capacity=capacity, heads=heads, kv_heads=kv_heads, head_dim=hd,
                          q="q", k_cache="kc", v_cache="vc", mask="mask", out="out", fresh=fresh)
    mask = prefix_mask(capacity, past, rows=m)
    out, stats = run_kernel(kt.text, {"q": q, "kc": kc, "vc": vc, "mask": mask, "out": np.zeros((m, heads * hd))},
                            {"pos": past} if dynamic else None)
    close(out["out"], _attention_ref(q, kc, vc, past, m, heads, kv_heads, hd))
    assert max(stats.lx_high_water) <= LX_BYTES


@pytest.mark.parametrize("m,past,capacity,dynamic", [
    (1, 300, 301, False),   # decode over a long prefix: 4 blocks + a ragged one, then the fresh row
    (3, 130, 140, False),   # a chunk after a prefix
    (1, 200, 260, True),    # dynamic position: all 260 rows stream, the mask hides rows >= 200
])
def test_streaming_attention_over_key_blocks(m, past, capacity, dynamic):
    heads, kv_heads, hd = 4, 2, 32
    kv_dim = kv_heads * hd
    q = f16(rng, m, heads * hd)
    kc, vc = f16(rng, capacity, kv_dim), f16(rng, capacity, kv_dim)
    kc[past + m:] = 0
    vc[past + m:] = 0
    fresh = RowBase(arg="pos") if dynamic else RowBase(static=past)
    budget = 16 * 1024  # forces key blocks at these small sizes
    kt = attention_kernel("k", m=m, capacity=capacity, heads=heads, kv_heads=kv_heads, head_dim=hd,
                          q="q", k_cache="kc", v_cache="vc", mask="mask", out="out", fresh=fresh, budget=budget)
    assert "iter_args(" in kt.text and kt.lx_estimate <= budget
    mask = prefix_mask(capacity, past, rows=m)
    out, stats = run_kernel(kt.text, {"q": q, "kc": kc, "vc": vc, "mask": mask, "out": np.zeros((m, heads * hd))},
                            {"pos": past} if dynamic else None)
    close(out["out"], _attention_ref(q, kc, vc, past, m, heads, kv_heads, hd))
    assert max(stats.lx_high_water) <= kt.lx_estimate


def test_single_pass_attention_with_one_row_blocks():
    """A tight budget splits the query rows into blocks of one: each block still gets its own
    rows of the causal triangle (row 0 sees only the first fresh key)."""
    m, past, capacity, heads, kv_heads, hd = 3, 4, 7, 2, 1, 32
    q = f16(rng, m, heads * hd)
    kc, vc = f16(rng, capacity, kv_heads * hd), f16(rng, capacity, kv_heads * hd)
    kt = attention_kernel("k", m=m, capacity=capacity, heads=heads, kv_heads=kv_heads, head_dim=hd, q="q",
                          k_cache="kc", v_cache="vc", mask="mask", out="out", fresh=RowBase(static=past),
                          budget=3000)
    assert "iter_args(" not in kt.text and kt.text.count("causal") >= 3
    out, _ = run_kernel(kt.text, {"q": q, "kc": kc, "vc": vc, "mask": prefix_mask(capacity, past, rows=m),
                                  "out": np.zeros((m, heads * hd))})
    close(out["out"], _attention_ref(q, kc, vc, past, m, heads, kv_heads, hd))
