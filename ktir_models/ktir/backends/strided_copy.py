"""C-order copies of strided arrays of 2-byte elements (f16, bf16), cache-blocked natively.

The weights' N-contiguous and blocked forms (ktir/exec/row_major.py) are transposed copies of
read-only weight boxes, made once per box in a pass's warm-up. numpy copies a transpose one
element at a time from a new cache line each (0.25-0.55 GB/s on a 2-core AMD EPYC VM, for ~3 GB
of copies in the third pass of a llama-3.2-1b decode); ``copy16.c``, built into the seqmm
library, copies whole tiles of lines (measured there: 1.5-2.5 GB/s on the same shapes). A copy:
the bytes are the source's whatever the route, so the choice never changes a result.
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import seqmm

_DIMS = 4  # the native copy's rank: fewer dimensions are padded with leading ones
_Shape = ctypes.c_ssize_t * _DIMS


def _function():
    lib = seqmm._library().lib
    return None if lib is None else lib.seqmm_copy16


def c_order(view: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``view`` (``np.ascontiguousarray``'s result, byte for byte; a
    C-contiguous ``view`` is returned as it is)."""
    if (view.flags.c_contiguous or view.itemsize != 2 or not 2 <= view.ndim <= _DIMS
            or view.size == 0 or any(s % 2 for s in view.strides)):
        return np.ascontiguousarray(view)
    copy = _function()
    if copy is None:
        return np.ascontiguousarray(view)
    pad = _DIMS - view.ndim
    out = np.empty(view.shape, view.dtype)
    copy(view.ctypes.data, out.ctypes.data, _Shape(*((1,) * pad + view.shape)),
         _Shape(*((0,) * pad + tuple(s // 2 for s in view.strides))))
    return out
