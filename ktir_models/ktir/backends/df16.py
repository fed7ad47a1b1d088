"""IBM's 16-bit DLFloat, ``!spyreop.df16``: the bit layout, and conversions to and from IEEE floats.

A df16 value is held as its 16-bit pattern (``numpy.uint16``): 1 sign bit, 6 exponent bits,
9 fraction bits (the layout SpyreOpTypes.td defines), exponent bias 31. The special patterns
and the rounding are not spelled out by the type's definition (it says "based on the IEEE-754
binary format with the parameters 1-6-9"); this module follows IBM's DLFloat conventions:

* ``E = 0, F = 0`` is zero (signed).
* No subnormals: every other pattern but one is the normal number
  ``(-1)^s * 2^(E - 31) * (1 + F / 512)`` -- ``E = 0`` with ``F != 0`` included (the smallest
  magnitude, ``2^-31 * (1 + 1/512)``), and ``E = 63`` with ``F < 511`` (the largest,
  ``2^32 * (1 + 510/512)`` = 8573157376).
* ``E = 63, F = 511`` (``0x7FFF`` / ``0xFFFF``) is the single not-a-number-or-infinity pattern
  ("NINF"); it decodes to a NaN of the same sign. There are no infinities.

Encoding rounds to nearest, ties to even (IEEE-754's default; IBM's software converters round
ties away from zero, which differs from this only on exact ties). What rounds to a magnitude
below the smallest normal (including what rounds to the ``E = 0, F = 0`` pattern) becomes a zero
of the same sign -- no gradual underflow. What rounds past the largest finite value, and every
infinity or NaN, becomes NINF with the input's sign -- no saturation to the largest finite.

Invariants: :func:`decode` is exact (every df16 value is an f32 value); :func:`encode` rounds
once, from the float64 value of its input (so an f64 result is not rounded twice); encode of
decode is the identity on all 65,536 patterns (NINF decodes to a NaN carrying its sign).
"""

from __future__ import annotations

import numpy as np

BIAS = 31
EXP_BITS = 6
FRAC_BITS = 9
SIGN_MASK = 0x8000
NINF = 0x7FFF  # the not-a-number-or-infinity pattern (without the sign)
MAX_FINITE = float(2.0 ** 32 * (1 + 510 / 512))
MIN_NORMAL = float(2.0 ** -31 * (1 + 1 / 512))

_F64_FRAC = 52
_DROP = _F64_FRAC - FRAC_BITS  # fraction bits an f64 has beyond df16's
_HALF = np.uint64(1 << (_DROP - 1))
_LOW = np.uint64((1 << _DROP) - 1)


def decode(bits) -> np.ndarray:
    """df16 patterns (any integer array or scalar) -> their float32 values (exact)."""
    b = np.asarray(bits).astype(np.uint32)
    sign = (b & 0x8000) << 16
    e = (b >> 9) & 0x3F
    f = b & 0x1FF
    mag = b & 0x7FFF
    # f32 pattern: exponent re-biased from 31 to 127, fraction shifted to the top of 23 bits
    out = sign | ((e + (127 - BIAS)) << 23) | (f << 14)
    out = np.where(mag == 0, sign, out)
    out = np.where(mag == NINF, np.uint32(0x7FC00000) | sign, out)
    return out.astype(np.uint32).view(np.float32)


def encode(values) -> np.ndarray:
    """Float values (f16, f32, f64, any shape) -> df16 patterns (uint16), one rounding."""
    with np.errstate(invalid="ignore"):  # NaN payloads of narrower types
        x = np.asarray(values, dtype=np.float64)
    u = x.view(np.uint64) if x.ndim else x.reshape(1).view(np.uint64)
    sign = ((u >> np.uint64(48)) & np.uint64(SIGN_MASK)).astype(np.uint32)
    e64 = ((u >> np.uint64(_F64_FRAC)) & np.uint64(0x7FF)).astype(np.int64)
    m = u & np.uint64((1 << _F64_FRAC) - 1)
    q = (m >> np.uint64(_DROP)).astype(np.int64)
    rest = m & _LOW
    up = (rest > _HALF) | ((rest == _HALF) & ((q & 1) == 1))
    q = q + up
    e = e64 - 1023 + BIAS + (q >> FRAC_BITS)  # a carry out of the fraction bumps the exponent
    q = q & 0x1FF
    special = e64 == 0x7FF  # infinities and NaNs
    over = special | (e > 63) | ((e == 63) & (q == 0x1FF))
    under = (e64 == 0) | (e < 0)  # f64 zeros / subnormals, and magnitudes below 2^-31
    body = (np.clip(e, 0, 63).astype(np.uint32) << 9) | q.astype(np.uint32)
    body = np.where(under, np.uint32(0), body)
    body = np.where(over, np.uint32(NINF), body)
    out = (sign | body).astype(np.uint16)
    return out.reshape(x.shape)


def to_f16(bits) -> np.ndarray:
    """df16 patterns -> float16 (one rounding of the exact value; NINF -> NaN)."""
    with np.errstate(over="ignore"):  # past f16's range: infinity
        return decode(bits).astype(np.float16)


def is_ninf(bits) -> np.ndarray:
    """Whether each pattern is the not-a-number-or-infinity one."""
    return (np.asarray(bits).astype(np.uint32) & 0x7FFF) == NINF
