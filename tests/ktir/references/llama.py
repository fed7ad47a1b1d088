"""A llama decoder layer's pieces, as transformers' modeling_llama computes them.

Conventions (the HF ones): activations are ``[tokens, features]``; a linear layer's weight is
stored ``[out, in]`` and applied as ``x @ W.T``; attention heads are contiguous ``head_dim`` column
blocks of the projection output; GQA maps query head ``h`` to kv head ``h // (n_q / n_kv)``;
RoPE uses the "rotate half" layout with ``cos``/``sin`` tables of width ``head_dim`` whose two
halves are equal. Everything is computed in float64.
"""

from __future__ import annotations

import numpy as np


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x^2) + eps) * weight`` per row (LlamaRMSNorm)."""
    x = f64(x)
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * inv * f64(weight).reshape(-1)


def linear(x: np.ndarray, weight_out_in: np.ndarray, chunk_rows: int = 16384) -> np.ndarray:
    """``x @ W.T`` with W stored ``[out, in]`` (nn.Linear without bias).

    W is widened to float64 a block of output rows at a time, so a 128k-row lm_head never needs a
    float64 copy of the whole matrix.
    """
    xs = f64(x)
    out = np.empty((xs.shape[0], weight_out_in.shape[0]))
    for start in range(0, weight_out_in.shape[0], chunk_rows):
        block = f64(weight_out_in[start : start + chunk_rows])
        out[:, start : start + block.shape[0]] = xs @ block.T
    return out


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, head_dim: int) -> np.ndarray:
    """Apply RoPE to every head of ``x`` ([tokens, heads * head_dim]).

    ``cos``/``sin`` are ``[tokens, head_dim]`` (one row per token position).
    """
    tokens = x.shape[0]
    heads = f64(x).reshape(tokens, -1, head_dim)
    c = f64(cos)[:, None, :]
    s = f64(sin)[:, None, :]
    return (heads * c + rotate_half(heads) * s).reshape(tokens, -1)


def rope_tables(positions: np.ndarray, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """HF default rotary tables ``cos, sin`` of shape ``[len(positions), head_dim]``."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    freqs = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb), np.sin(emb)


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def attention_with_prefix(
    q: np.ndarray,
    k_new: np.ndarray,
    v_new: np.ndarray,
    prefix_k: np.ndarray,
    prefix_v: np.ndarray,
    prefix_mask: np.ndarray,
    n_q_heads: int,
    n_kv_heads: int,
    head_dim: int,
    causal: bool,
) -> np.ndarray:
    """Scaled dot-product attention over a KV-cache prefix plus the fresh keys/values.

    ``q`` is ``[m, n_q * d]``, ``k_new``/``v_new`` ``[m, n_kv * d]``, ``prefix_k``/``prefix_v``
    ``[P, n_kv * d]``, ``prefix_mask`` ``[1, P]`` (additive, applied to the prefix scores of every
    query row). Query row ``i`` attends to every prefix row and to fresh rows ``0..i`` when
    ``causal`` (all fresh rows otherwise). One joint softmax over prefix and fresh scores; scale
    ``1/sqrt(d)``; GQA. Returns ``[m, n_q * d]``.
    """
    m = q.shape[0]
    group = n_q_heads // n_kv_heads
    scale = 1.0 / np.sqrt(head_dim)
    out = np.zeros((m, n_q_heads * head_dim))
    mask = f64(prefix_mask).reshape(1, -1)
    for h in range(n_q_heads):
        kv = h // group
        qs = slice(h * head_dim, (h + 1) * head_dim)
        ks = slice(kv * head_dim, (kv + 1) * head_dim)
        qh = f64(q)[:, qs]
        keys = np.concatenate([f64(prefix_k)[:, ks], f64(k_new)[:, ks]], axis=0)
        values = np.concatenate([f64(prefix_v)[:, ks], f64(v_new)[:, ks]], axis=0)
        scores = qh @ keys.T * scale
        prefix_len = prefix_k.shape[0]
        scores[:, :prefix_len] += mask
        if causal:
            fresh = scores[:, prefix_len:]
            fresh[np.triu_indices(m, k=1)] = -np.inf
        out[:, qs] = _softmax(scores) @ values
    return out


def silu_mul(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``silu(gate) * up`` (LlamaMLP's activation)."""
    g = f64(gate)
    return g / (1.0 + np.exp(-g)) * f64(up)
