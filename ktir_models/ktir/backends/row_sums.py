"""f32 sums over the last axis in numpy's order, natively (``rowsum.c``).

``np.add.reduce(x, axis=-1)`` of a float32 array whose rows are contiguous sums each row pairwise
(``rowsum.c`` says how) from +0.0; the native loop does the same additions in the same order, so
the bits are numpy's, without numpy's per-call and per-row costs (~30-80 us for the 288 rows of
64 a scratchy attention step reduces, ragged rows group by group, against a few us). Rows of their
own lengths (a ragged reduction's groups: ``ktir/exec/ragged_steps.py``) sum each row's leading
values only, as numpy does for the row cut to that length.
"""

from __future__ import annotations

import numpy as np

from . import seqmm

F32 = np.dtype(np.float32)


def _function():
    lib = seqmm._library().lib
    return None if lib is None else lib.seqmm_row_sums_f32


def row_sums(x: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray | None:
    """``np.add.reduce(x, axis=-1)`` for a float32 ``x`` whose last axis is unit-stride and
    whose other axes flatten to rows at one stride, bit for bit (a new C-contiguous array of
    ``x.shape[:-1]``); with ``lengths`` (int64, one per row, each at most ``x.shape[-1]``) row i
    sums its first ``lengths[i]`` values. None where the native library is missing or ``x`` is
    laid out otherwise (the caller asks numpy)."""
    if type(x) is not np.ndarray or x.dtype != F32 or x.ndim == 0 or x.shape[-1] == 0:
        return None
    if x.strides[-1] != 4 and x.shape[-1] > 1:
        return None
    rows = x.size // x.shape[-1]
    if x.ndim == 1 or rows <= 1:
        stride = 0
    else:
        flat = _row_stride(x)
        if flat is None:
            return None
        stride = flat
    function = _function()
    if function is None:
        return None
    if lengths is not None:
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        if lengths.shape != (rows,) or (rows and (lengths.min() < 0 or lengths.max() > x.shape[-1])):
            raise ValueError("row_sums: one length per row, each within the row")
    out = np.empty(x.shape[:-1], F32)
    function(x.ctypes.data, rows, stride, None if lengths is None else lengths.ctypes.data,
             x.shape[-1], out.ctypes.data)
    return out


def _row_stride(x: np.ndarray) -> int | None:
    """The element stride between consecutive rows of ``x`` (its axes but the last, in C order),
    where one non-zero stride walks them all; else None."""
    stride = None
    expect = None
    for n, s in zip(reversed(x.shape[:-1]), reversed(x.strides[:-1])):
        if n == 1:
            continue
        if s % 4 or s == 0:  # numpy's iterator may run a broadcast axis innermost
            return None
        if stride is None:
            stride, expect = s // 4, (s // 4) * n
        elif s // 4 != expect or s % 4:
            return None
        else:
            expect *= n
    return 0 if stride is None else stride
