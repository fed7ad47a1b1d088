"""What the linalg op modules share: the element dtypes and the f32 widening of matmul / exp
operands (exact: every f16 and bf16 value is an f32 value)."""

from __future__ import annotations

import numpy as np

from ..arith import NP

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def wide(arr: np.ndarray) -> np.ndarray:
    """``arr`` itself when it is f32 or wider, else its (exact) f32 copy."""
    return arr if arr.dtype.itemsize >= 4 and arr.dtype.kind == "f" else arr.astype(F32)


def wide_of(xp):
    """:func:`wide` for back end ``xp``'s arrays."""
    if isinstance(xp, type(NP)):
        return wide
    astype = xp.astype

    def wide_tensor(arr):
        return arr if arr.dtype.itemsize >= 4 and arr.dtype.is_floating_point else \
            astype(arr, F32)
    return wide_tensor
