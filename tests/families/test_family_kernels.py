"""The family kernel features on the emulator against numpy written from transformers' semantics
(f32 math, one f16 rounding at the store): the GEMM bias epilogue (qwen2), the multiplier and
divisor scalars (granite), the per-head q/k RMSNorm (qwen3, the rmsnorm kernel on the per-head
view), and attention with a non-default scale and a sliding window (granite, mistral) in the
single-pass and the streaming (key-block) forms, with static and dynamic positions."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.model.emit.kernels.attention import attention_kernel
from ktir_models.model.emit.kernels.gemm import gemm_kernel
from ktir_models.model.emit.kernels.rmsnorm import rmsnorm_kernel
from ktir_models.model.emit.kernels.rows import RowBase
from ktir_models.model.emit.tiling import LX_BYTES
from ktir_models.model.inputs.runtime_inputs import prefix_mask

from emit.harness import close, f16, run_kernel  # tests/emit: the one-kernel harness

rng = np.random.default_rng(11)


def f32(a):
    return np.asarray(a, dtype=np.float32)


@pytest.mark.parametrize("m,k,n", [(1, 64, 96), (7, 128, 200), (33, 64, 2100)])
def test_gemm_bias_epilogue(m, k, n):
    x, w, b = f16(rng, m, k), f16(rng, n, k, scale=0.1), f16(rng, 1, n)
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["w"], out="out", epilogue="bias", bias="b")
    out, stats = run_kernel(kt.text, {"x": x, "w": w, "b": b, "out": np.zeros((m, n))})
    close(out["out"], f32(x) @ f32(w).T + f32(b))
    assert max(stats.lx_high_water) <= LX_BYTES


def test_gemm_bias_into_cache_rows():
    """qwen2's v_proj writes its biased rows straight into the cache at rows past.."""
    m, k, n, rows, past = 3, 64, 32, 10, 4
    x, w, b = f16(rng, m, k), f16(rng, n, k, scale=0.1), f16(rng, 1, n)
    cache = np.full((rows, n), 7.0, dtype=np.float16)
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["w"], out="out", epilogue="bias", bias="b",
                     out_rows=rows, out_base=RowBase(arg="pos"))
    out, _ = run_kernel(kt.text, {"x": x, "w": w, "b": b, "out": cache}, {"pos": past})
    close(out["out"][past:past + m], f32(x) @ f32(w).T + f32(b))
    assert np.all(np.delete(out["out"], range(past, past + m), axis=0) == 7.0)


def test_gemm_residual_multiplier_and_logits_divisor():
    m, k, n = 5, 64, 130
    x, w, res = f16(rng, m, k), f16(rng, n, k, scale=0.1), f16(rng, m, n)
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["w"], out="out", epilogue="residual",
                     residual="res", multiplier=0.22)
    assert "arith.mulf" in kt.text
    out, _ = run_kernel(kt.text, {"x": x, "w": w, "res": res, "out": np.zeros((m, n))})
    close(out["out"], (f32(x) @ f32(w).T) * np.float32(0.22) + f32(res))
    kt = gemm_kernel("k", m=m, k=k, n=n, x="x", weights=["w"], out="out", divisor=8.0)
    assert "arith.divf" in kt.text
    out, _ = run_kernel(kt.text, {"x": x, "w": w, "out": np.zeros((m, n))})
    close(out["out"], (f32(x) @ f32(w).T) / np.float32(8.0))


def test_scalars_of_one_emit_nothing():
    plain = gemm_kernel("k", m=2, k=64, n=64, x="x", weights=["w"], out="out")
    assert gemm_kernel("k", m=2, k=64, n=64, x="x", weights=["w"], out="out",
                       multiplier=1.0, divisor=1.0).text == plain.text


def test_per_head_rmsnorm_is_the_rmsnorm_kernel_on_the_head_view():
    m, heads, hd, eps = 7, 4, 32, 1e-6
    x, w = f16(rng, m, heads * hd), (1.5 + 0.2 * rng.standard_normal((1, hd))).astype(np.float16)
    kt = rmsnorm_kernel("k", m=m * heads, hidden=hd, eps=eps, x="x", weight="w", out="out")
    out, _ = run_kernel(kt.text, {"x": x, "w": w, "out": np.zeros((m, heads * hd))})
    heads_x = f32(x).reshape(m, heads, hd)
    ref = heads_x / np.sqrt((heads_x**2).mean(-1, keepdims=True) + np.float32(eps)) * f32(w)[0]
    close(out["out"], ref.reshape(m, heads * hd))


def _windowed_ref(q, kc, vc, past, m, heads, kv_heads, hd, scale, window):
    """Query i (position past+i) over keys j with past+i-window < j <= past+i (all of 0..past+i
    without a window), scores times ``scale``."""
    out = np.zeros((m, heads * hd), dtype=np.float32)
    group = heads // kv_heads
    for h in range(heads):
        g = h // group
        qh = f32(q)[:, h * hd:(h + 1) * hd]
        kh, vh = f32(kc)[:, g * hd:(g + 1) * hd], f32(vc)[:, g * hd:(g + 1) * hd]
        for i in range(m):
            p_ = past + i
            lo = 0 if window is None else max(0, p_ - window + 1)
            s = kh[lo:p_ + 1] @ qh[i] * np.float32(scale)
            p = np.exp(s - s.max())
            out[i, h * hd:(h + 1) * hd] = (p / p.sum()) @ vh[lo:p_ + 1]
    return out


@pytest.mark.parametrize("m,past,capacity,window,dynamic,budget", [
    (9, 0, 9, 3, False, None),        # prefill longer than the window: the causal constant windows
    (4, 6, 12, 5, False, None),       # chunk after a prefix: the mask windows the prefix rows
    (1, 10, 14, 4, True, None),       # dynamic decode: the host mask slides the window with pos
    (1, 150, 151, 70, False, 16384),  # streaming key blocks (64) with the window inside block 1
    (3, 130, 140, None, False, 16384),  # streaming, no window, granite's scale only
])
def test_attention_with_scale_and_window(m, past, capacity, window, dynamic, budget):
    heads, kv_heads, hd, scale = 4, 2, 32, 0.05
    kv_dim = kv_heads * hd
    q = f16(rng, m, heads * hd, scale=3.0)  # large scores: a misplaced window shows
    kc, vc = f16(rng, capacity, kv_dim), f16(rng, capacity, kv_dim)
    kc[past + m:] = 0
    vc[past + m:] = 0
    fresh = RowBase(arg="pos") if dynamic else RowBase(static=past)
    extra = {} if budget is None else {"budget": budget}
    kt = attention_kernel("k", m=m, capacity=capacity, heads=heads, kv_heads=kv_heads, head_dim=hd,
                          q="q", k_cache="kc", v_cache="vc", mask="mask", out="out", fresh=fresh,
                          scale=scale, window=window, **extra)
    if budget is not None:
        assert "iter_args(" in kt.text  # the streaming form
    mask = prefix_mask(capacity, past, rows=m, window=window)
    out, stats = run_kernel(kt.text, {"q": q, "kc": kc, "vc": vc, "mask": mask, "out": np.zeros((m, heads * hd))},
                            {"pos": past} if dynamic else None)
    close(out["out"], _windowed_ref(q, kc, vc, past, m, heads, kv_heads, hd, scale, window))
    assert max(stats.lx_high_water) <= LX_BYTES


def test_window_mask_rule():
    """Row i (position past+i) keeps cache columns past+i-W < j < past; the rest are hidden."""
    mask = prefix_mask(10, past=6, rows=2, window=3)
    visible = [list(np.flatnonzero(row == 0)) for row in mask]
    assert visible == [[4, 5], [5]]
    assert (prefix_mask(10, past=6, rows=2) == prefix_mask(10, past=6, rows=2, window=None)).all()
