"""Fast exact f16 rounding on f32 arrays (numpy's float32 -> float16 cast is slow here).

:func:`round_to_f16` returns, as float32, exactly ``x.astype(float16).astype(float32)``: round to
nearest, ties to even, f16 subnormals, overflow to ±inf, NaN kept. It works on the bit pattern:
for normal f16 magnitudes, rounding the f32 significand from 23 to 10 bits is an integer add and
mask (a carry into the exponent is the correct result); below 2**-14 (f16 subnormals, spacing
2**-24) adding and subtracting 0.75 rounds to that spacing with ties to even; magnitudes that round
to 2**16 or more overflow to infinity.
"""

from __future__ import annotations

import numpy as np

_F32 = np.float32
_MIN_NORMAL = _F32(2.0 ** -14)
_OVERFLOW = _F32(65536.0)
_SHIFT = _F32(0.75)


def round_to_f16(x: np.ndarray) -> np.ndarray:
    """``x`` (float32 array) rounded to the nearest float16 value, returned as float32."""
    x = np.ascontiguousarray(x, dtype=_F32)
    u = x.view(np.uint32)
    r = ((u + np.uint32(0x0FFF) + ((u >> np.uint32(13)) & np.uint32(1)))
         & np.uint32(0xFFFFE000)).view(_F32)
    small = np.abs(x) < _MIN_NORMAL
    if small.any():
        xs = x[small]
        r[small] = np.copysign((np.abs(xs) + _SHIFT) - _SHIFT, xs)
    big = ~(np.abs(r) < _OVERFLOW)  # also catches NaN/inf inputs
    if big.any():
        xb = x[big]
        r[big] = np.where(np.isnan(xb), xb, np.copysign(_F32(np.inf), xb))
    return r
