"""Attention references of the example kernels (float64)."""

from __future__ import annotations

import numpy as np

from .rowwise import softmax_rows


def sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """``softmax(q k^T * scale) v`` without a mask."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    return softmax_rows(q @ k.T * scale) @ v


def paged_decode_attention(
    query: np.ndarray,
    key_cache: np.ndarray,
    value_cache: np.ndarray,
    block_table: np.ndarray,
    context_len: int,
    scale: float,
) -> np.ndarray:
    """Causal GQA attention of new tokens over a paged KV cache (vLLM unified attention).

    ``query`` ``[T, Hq, D]`` holds T new tokens at absolute positions ``context_len + t``;
    ``key_cache``/``value_cache`` ``[blocks, block_size, Hkv, D]``; logical position ``s`` of
    the sequence lives in physical block ``block_table[s // block_size]``, slot
    ``s % block_size``. Token t attends to positions ``0 .. context_len + t``. Returns
    ``[T, Hq, D]``.
    """
    tokens, n_q, dim = query.shape
    block_size, n_kv = key_cache.shape[1], key_cache.shape[2]
    group = n_q // n_kv
    seq_len = context_len + tokens
    positions = np.arange(seq_len)
    blocks = np.asarray(block_table)[positions // block_size]
    keys = np.asarray(key_cache, np.float64)[blocks, positions % block_size]  # [S, Hkv, D]
    values = np.asarray(value_cache, np.float64)[blocks, positions % block_size]
    out = np.zeros((tokens, n_q, dim))
    for t in range(tokens):
        visible = context_len + t + 1
        for h in range(n_q):
            kv = h // group
            scores = keys[:visible, kv] @ np.asarray(query[t, h], np.float64) * scale
            out[t, h] = softmax_rows(scores) @ values[:visible, kv]
    return out
