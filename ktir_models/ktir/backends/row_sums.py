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


def row_sums(x: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray | None:
    """``np.add.reduce(x, axis=-1)`` for a float32 ``x`` whose last axis is unit-stride and
    whose other axes flatten to rows at one non-zero stride, bit for bit (a new C-contiguous
    array of ``x.shape[:-1]``); with ``lengths`` (a C-contiguous int64 array, one per row, each
    in [0, ``x.shape[-1]``]) row i sums its first ``lengths[i]`` values. None where the native
    library is missing or ``x`` is laid out otherwise (the caller asks numpy)."""
    if type(x) is not np.ndarray or x.dtype != F32 or x.ndim == 0 or x.shape[-1] == 0:
        return None
    if x.strides[-1] != 4 and x.shape[-1] > 1:
        return None
    rows = x.size // x.shape[-1]
    stride = 0 if rows <= 1 else _row_stride(x)
    loaded = seqmm._library()
    if stride is None or loaded.lib is None:
        return None
    if lengths is not None and (type(lengths) is not np.ndarray or lengths.dtype != np.int64 or
                                lengths.shape != (rows,) or not lengths.flags.c_contiguous):
        raise ValueError("row_sums: lengths must be a C-contiguous int64 array, one per row")
    out = np.empty(x.shape[:-1], F32)
    if loaded.ext is not None:  # the three addresses in one call (fastcall.c): ~0.3 us, not ~4
        xp, lp, op = loaded.ext.pointers(x, x if lengths is None else lengths, out)
    else:
        xp, lp, op = x.ctypes.data, 0 if lengths is None else lengths.ctypes.data, out.ctypes.data
    if loaded.lib.seqmm_row_sums_f32(xp, rows, stride, None if lengths is None else lp,
                                     x.shape[-1], op):
        raise ValueError("row_sums: a length lies outside its row")
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
