"""Runtime inputs of a forward, computed in numpy from the config: token ids, embedding rows,
RoPE cos/sin tables, KV-cache prefixes and attention masks. All results are float16 (the element
type of the programs' inputs) except token ids (int64).

Conventions (DESIGN.md, "golden conventions"):
- token ids ``(1000 + 137*i) % (vocab - 1) + 1``: never 0, spread over the vocabulary;
- cos/sin ``[m, head_dim]`` in HF layout: ``cat(freqs, freqs)`` along the last axis, where
  ``freqs = position * inv_freq`` (``inv_freq`` with llama3 scaling when the config has it);
- a KV prefix is ``[cache_len, num_key_value_heads * head_dim]`` (row = cache slot, columns head
  major); masked attention scores use ``MASKED`` = -65504, the most negative finite float16;
- family inputs: granite's ``embedding_multiplier`` scales the embedding rows (f32 product,
  rounded once to f16, as the f32 forward's ``inputs_embeds * m``); mistral's sliding window hides
  the cache columns ``j <= position - window`` of each row's query position.

RoPE is evaluated as transformers does it (float32 ``inv_freq``, float32 ``position * inv_freq``,
float32 cos/sin), then rounded once to float16, so the tables are what the golden forward uses, up
to that single rounding.
"""

from __future__ import annotations

import math

import numpy as np

from ktir_models.errors import UserError
from ktir_models.model.config import ModelConfig

MASKED = np.float16(-65504.0)


def golden_token_ids(m: int, vocab: int, start: int = 0) -> np.ndarray:
    """Token ids for positions ``start .. start+m-1``: ``(1000 + 137*i) % (vocab - 1) + 1``."""
    if m < 0 or vocab < 2:
        raise UserError(f"token ids need m >= 0 and vocab >= 2 (got m={m}, vocab={vocab})")
    i = np.arange(start, start + m, dtype=np.int64)
    return (1000 + 137 * i) % (vocab - 1) + 1


def embedding_rows(ckpt, ids) -> np.ndarray:
    """The embedding rows of ``ids`` as float16 ``[len(ids), hidden]`` (only those rows are read)."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    vocab = ckpt.config.vocab_size
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise UserError(f"token id out of range [0, {vocab}): {ids.min()}..{ids.max()}")
    return ckpt.read_rows_f16("model.embed_tokens.weight", ids)


def scaled_embedding_rows(ckpt, ids, multiplier: float) -> np.ndarray:
    """:func:`embedding_rows` times ``multiplier`` (granite's embedding_multiplier): the product in
    f32, rounded once to float16; a product beyond the f16 range is a UserError."""
    rows = embedding_rows(ckpt, ids)
    if multiplier == 1.0:
        return rows
    with np.errstate(over="ignore"):
        scaled = (rows.astype(np.float32) * np.float32(multiplier)).astype(np.float16)
    if not np.isfinite(scaled).all():
        raise UserError(f"embedding_multiplier {multiplier}: embedding rows times it overflow float16")
    return scaled


def hide_outside_window(mask: np.ndarray, past: int, window: int | None) -> np.ndarray:
    """Sliding window on an additive mask ``[rows, cols]`` whose row i is the query at position
    ``past + i``: columns ``j <= past + i - window`` become ``MASKED`` (in place; returned).
    ``window`` None leaves the mask alone."""
    if window is None:
        return mask
    rows, cols = mask.shape
    j = np.arange(cols)[None, :]
    position = past + np.arange(rows)[:, None]
    mask[j <= position - window] = MASKED
    return mask


def rope_inv_freq(cfg: ModelConfig) -> np.ndarray:
    """float32 ``inv_freq [head_dim/2]``, with llama3 frequency scaling when configured.

    llama3 scaling keeps high frequencies (wavelength below ``original / high_freq_factor``),
    divides low frequencies (wavelength above ``original / low_freq_factor``) by ``factor``, and
    blends linearly in between.
    """
    dim = cfg.head_dim
    exponent = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    # theta**exponent correctly rounded to float32 (torch's float32 pow is; numpy's is not always),
    # then a float32 reciprocal, as transformers computes it.
    power = (np.float64(cfg.rope_theta) ** exponent.astype(np.float64)).astype(np.float32)
    inv_freq = (np.float32(1.0) / power).astype(np.float32)
    s = cfg.rope_scaling
    if s is None:
        return inv_freq
    low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
    high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
    wavelen = (2 * math.pi / inv_freq).astype(np.float32)
    scaled = np.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq).astype(np.float32)
    smooth = ((s.original_max_position_embeddings / wavelen - s.low_freq_factor)
              / (s.high_freq_factor - s.low_freq_factor)).astype(np.float32)
    blended = ((1 - smooth) * scaled / s.factor + smooth * scaled).astype(np.float32)
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, blended, scaled).astype(np.float32)


def rope_tables(cfg: ModelConfig, positions) -> tuple[np.ndarray, np.ndarray]:
    """float16 ``cos, sin [len(positions), head_dim]`` in HF layout ``cat(freqs, freqs)``."""
    positions = np.asarray(positions, dtype=np.int64).reshape(-1)
    if positions.size and positions.min() < 0:
        raise UserError(f"RoPE positions must be >= 0 (got {positions.min()})")
    freqs = positions.astype(np.float32)[:, None] * rope_inv_freq(cfg)[None, :]
    emb = np.concatenate([freqs, freqs], axis=1)
    return np.cos(emb).astype(np.float16), np.sin(emb).astype(np.float16)


def zero_kv_prefix(cfg: ModelConfig, cache_len: int) -> np.ndarray:
    """An empty KV-cache prefix ``[cache_len, kv_heads * head_dim]`` of float16 zeros."""
    return np.zeros((cache_len, cfg.num_key_value_heads * cfg.head_dim), dtype=np.float16)


def prefix_mask(cache_len: int, past: int = 0, rows: int = 1, window: int | None = None) -> np.ndarray:
    """Additive mask over the KV-cache slots ``[rows, cache_len]``: 0 for the ``past`` filled slots,
    ``MASKED`` for the empty rest. ``past = 0`` is the golden convention (all masked). With a
    sliding ``window``, filled slots outside each row's window are masked too."""
    if not 0 <= past <= cache_len:
        raise UserError(f"KV prefix length {past} must lie in [0, cache_len={cache_len}]")
    mask = np.full((rows, cache_len), MASKED, dtype=np.float16)
    mask[:, :past] = 0
    return hide_outside_window(mask, past, window)


def decode_mask(cache_len: int, past: int) -> np.ndarray:
    """The ``[1, cache_len]`` prefix mask of one decode step after ``past`` cached tokens."""
    return prefix_mask(cache_len, past, rows=1)


def causal_mask(m: int, past: int = 0) -> np.ndarray:
    """Additive causal mask ``[m, past + m]``: row i (position past+i) sees columns ``<= past+i``."""
    cols = np.arange(past + m)[None, :]
    rows = past + np.arange(m)[:, None]
    return np.where(cols <= rows, np.float16(0), MASKED).astype(np.float16)


def kv_heads_to_cache(k: np.ndarray) -> np.ndarray:
    """HF cache layout ``[kv_heads, seq, head_dim]`` -> ours ``[seq, kv_heads * head_dim]``."""
    heads, seq, dim = k.shape
    return np.ascontiguousarray(np.transpose(k, (1, 0, 2)).reshape(seq, heads * dim))
