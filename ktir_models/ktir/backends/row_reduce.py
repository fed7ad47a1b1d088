"""Row sums and maxima over the last axis with numpy's bits, natively (``rowreduce.c``).

``np.add.reduce(x, axis=-1)`` of a float32 array whose rows are contiguous sums each row pairwise
(``rowreduce.c`` says how) from +0.0; the native loop does the same additions in the same order,
so the bits are numpy's, without numpy's per-call and per-row costs (~30-80 us for the 288 rows
of 64 a scratchy attention step reduces, ragged rows group by group, against a few us). A row
maximum does not depend on the order but where a NaN or zeros of both signs meet; those rows
are left to numpy. Rows of their own lengths (a ragged reduction's groups:
``ktir/exec/ragged_steps.py``) reduce each row's leading values only, as numpy does for the row
cut to that length (or, for a maximum, filled with -inf past it).
"""

from __future__ import annotations

import numpy as np

from . import seqmm

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)


def _rows(x: np.ndarray, lengths, dtypes) -> tuple | None:
    """(rows, row stride in elements, library) for a native row reduction of ``x``, or None
    where it does not apply (layout, dtype, no library); checks ``lengths``."""
    if type(x) is not np.ndarray or x.dtype not in dtypes or x.ndim == 0 or x.shape[-1] == 0:
        return None
    if x.strides[-1] != x.itemsize and x.shape[-1] > 1:
        return None
    rows = x.size // x.shape[-1]
    stride = 0 if rows <= 1 else _row_stride(x)
    loaded = seqmm._library()
    if stride is None or loaded.lib is None:
        return None
    if lengths is not None and (type(lengths) is not np.ndarray or lengths.dtype != np.int64 or
                                lengths.shape != (rows,) or not lengths.flags.c_contiguous):
        raise ValueError("row reductions: lengths must be a C-contiguous int64 array, one per row")
    return rows, stride, loaded


def _call(function, loaded, x, lengths, out, rows: int, stride: int) -> int:
    if loaded.ext is not None:  # the three addresses in one call (fastcall.c): ~0.3 us, not ~4
        xp, lp, op = loaded.ext.pointers(x, x if lengths is None else lengths, out)
    else:
        xp, lp, op = x.ctypes.data, 0 if lengths is None else lengths.ctypes.data, out.ctypes.data
    status = function(xp, rows, stride, None if lengths is None else lp, x.shape[-1], op)
    if status == 1:
        raise ValueError("row reductions: a length lies outside its row")
    return status


def row_sums(x: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray | None:
    """``np.add.reduce(x, axis=-1)`` for a float32 ``x`` whose last axis is unit-stride and
    whose other axes flatten to rows at one non-zero stride, bit for bit (a new C-contiguous
    array of ``x.shape[:-1]``); with ``lengths`` (a C-contiguous int64 array, one per row, each
    in [0, ``x.shape[-1]``]) row i sums its first ``lengths[i]`` values. None where the native
    library is missing or ``x`` is laid out otherwise (the caller asks numpy)."""
    found = _rows(x, lengths, (F32,))
    if found is None:
        return None
    rows, stride, loaded = found
    out = np.empty(x.shape[:-1], F32)
    _call(loaded.lib.seqmm_row_sums_f32, loaded, x, lengths, out, rows, stride)
    return out


def row_max(x: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray | None:
    """``np.maximum.reduce(x, axis=-1)`` of an f16 or f32 ``x`` laid out as :func:`row_sums`
    wants, as f32 values (an f16 maximum is exact in f32), bit for bit; with ``lengths`` each
    row's maximum over its leading ``lengths[i]`` values (-inf for none). None where the layout
    or the library does not allow it, or where numpy alone decides the bits: a row holding a NaN
    (which NaN comes out is numpy's order), or a zero maximum reached by zeros of both signs."""
    found = _rows(x, lengths, (F32, F16))
    if found is None:
        return None
    rows, stride, loaded = found
    out = np.empty(x.shape[:-1], F32)
    function = loaded.lib.seqmm_row_max_f16 if x.dtype == F16 else loaded.lib.seqmm_row_max_f32
    return None if _call(function, loaded, x, lengths, out, rows, stride) else out


def _row_stride(x: np.ndarray) -> int | None:
    """The element stride between consecutive rows of ``x`` (its axes but the last, in C order),
    where one non-zero stride walks them all; else None."""
    size = x.itemsize
    stride = None
    expect = None
    for n, s in zip(reversed(x.shape[:-1]), reversed(x.strides[:-1])):
        if n == 1:
            continue
        if s % size or s == 0:  # numpy's iterator may run a broadcast axis innermost
            return None
        if stride is None:
            stride, expect = s // size, (s // size) * n
        elif s // size != expect:
            return None
        else:
            expect *= n
    return 0 if stride is None else stride
