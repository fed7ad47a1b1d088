"""llama.cpp's Q/K row order, and its inverse.

llama.cpp's converter stores ``q_proj`` and ``k_proj`` with the rows of each head reordered: the
HF layout rotates halves (row ``t * d/2 + j`` of a head, ``t`` in {0, 1}, pairs with ``j``), while
ggml's RoPE rotates adjacent pairs, so the converter moves HF row ``(t, j)`` of each head to row
``2 j + t``. ``k_proj`` is reordered per KV head (``head_count_kv`` heads), ``q_proj`` per query
head. Only rows move; each row's values are untouched, so the inverse can be applied to quantized
rows before or after dequantizing.

Invariant: ``gguf_rows[hf_row_order(n, heads)]`` is the tensor in HF order, and
``hf_row_order`` is a permutation of ``range(n)``.
"""

from __future__ import annotations

import numpy as np

from ktir_models.errors import UserError


def hf_row_order(rows: int, heads: int, where: str = "") -> np.ndarray:
    """Index array ``order`` such that HF row ``r`` is stored GGUF row ``order[r]``."""
    if heads <= 0 or rows % heads or (rows // heads) % 2:
        raise UserError(f"{where}: {rows} rows cannot be split into {heads} heads of even size")
    half = rows // heads // 2
    # Stored index laid out as [head, j, t]; HF position (head, t, j) holds stored (head, j, t).
    return np.arange(rows).reshape(heads, half, 2).transpose(0, 2, 1).reshape(rows)
