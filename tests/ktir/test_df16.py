"""``!spyreop.df16`` conversions (backends/df16.py) against a slow scalar reference written here
from the format's definition: 1 sign, 6 exponent, 9 fraction bits, bias 31; zero is E=0,F=0;
no subnormals; E=63,F=511 is the single NaN/infinity pattern (NINF); encoding rounds the exact
value to 10 significant bits, ties to even, then flushes magnitudes below the smallest normal to
a signed zero and values past the largest finite to NINF (docs/emulator.md, section spyreop)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ktir_models.ktir.backends import df16

NINF = 0x7FFF


def ref_decode(bits: int) -> float:
    """The value of one pattern, straight from the field definitions."""
    s, e, f = bits >> 15, (bits >> 9) & 63, bits & 511
    if e == 0 and f == 0:
        return -0.0 if s else 0.0
    if e == 63 and f == 511:
        return math.nan
    mag = Fraction(512 + f, 512) * Fraction(2) ** (e - 31)
    return float(-mag if s else mag)


def ref_encode(x: float) -> int:
    """The pattern of one float: round |x| to 10 significant bits (ties to even), then apply the
    range rules."""
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x) or math.isinf(x):
        return sign | NINF
    if x == 0:
        return sign
    exact = Fraction(abs(x))
    m, e = math.frexp(abs(x))  # |x| = m * 2^e, m in [0.5, 1)
    scaled = exact / Fraction(2) ** (e - 10)  # in [512, 1024)
    n = math.floor(scaled)
    rest = scaled - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = Fraction(n) * Fraction(2) ** (e - 10)
    if r < Fraction(513, 512) * Fraction(2) ** -31:
        return sign
    if r > Fraction(1022, 512) * Fraction(2) ** 32:
        return sign | NINF
    if n == 1024:
        n, e = 512, e + 1
    exp = (e - 1) + 31  # r = (n/512) * 2^(e-1)
    return sign | (exp << 9) | (n - 512)


ALL = np.arange(1 << 16, dtype=np.uint16)


def test_decode_matches_the_definition_on_all_65536_patterns():
    got = df16.decode(ALL)
    assert got.dtype == np.float32
    want = np.array([ref_decode(int(b)) for b in ALL], dtype=np.float64)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert nan.sum() == 2  # 0x7FFF and 0xFFFF only
    # exact: every df16 value is an f32 value, signs of zero included
    assert np.array_equal(got[~nan].astype(np.float64), want[~nan])
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


def test_the_format_constants():
    assert df16.decode(np.uint16(0x7FFE)) == np.float32(df16.MAX_FINITE) == 8573157376.0
    assert df16.decode(np.uint16(0x0001)) == np.float32(df16.MIN_NORMAL)
    assert df16.decode(np.uint16(0x3E00)) == 1.0  # E = 31, F = 0
    assert df16.decode(np.uint16(0xBE00)) == -1.0


def test_encode_inverts_decode_on_all_65536_patterns():
    """The NINF patterns decode to a NaN that keeps their sign, and come back as themselves."""
    assert np.array_equal(df16.encode(df16.decode(ALL)), ALL)
    assert np.signbit(df16.decode(np.uint16(0xFFFF))) and np.isnan(df16.decode(np.uint16(0xFFFF)))


def _ref_encode_all(values) -> np.ndarray:
    return np.array([ref_encode(float(v)) for v in values], dtype=np.uint16)


def _ties_and_neighbours() -> np.ndarray:
    """For every positive finite pattern: the value, the midpoints to its neighbours and the
    f32 values one ulp either side of each midpoint (where rounding decides)."""
    pos = df16.decode(np.arange(1, NINF, dtype=np.uint16)).astype(np.float64)
    nxt = np.append(pos[1:], 2.0 ** 32 * (1 + 511 / 512))  # the NINF slot, were it a number
    mids = (pos + nxt) / 2  # exact in f64; representable in f32 (11 significant bits)
    mid32 = mids.astype(np.float32)
    assert np.array_equal(mid32.astype(np.float64), mids)
    near = [pos.astype(np.float32), mid32, np.nextafter(mid32, np.float32(np.inf)),
            np.nextafter(mid32, np.float32(0))]
    edge = np.array([df16.MIN_NORMAL, 2.0 ** -31, 2.0 ** -31 * (1 + 2 ** -10), 2.0 ** -32,
                     2.0 ** -40, 1e-45, 2.0 ** -149, np.finfo(np.float32).tiny, 0.0,
                     df16.MAX_FINITE, 2.0 ** 32 * (1 + 1021 / 1024), 2.0 ** 33,
                     np.finfo(np.float32).max], dtype=np.float32)
    out = np.concatenate(near + [edge])
    return np.concatenate([out, -out])


def test_encode_f32_matches_the_reference_at_every_tie_and_boundary():
    x = _ties_and_neighbours()
    got = df16.encode(x)
    assert got.dtype == np.uint16
    want = _ref_encode_all(x)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(x[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_encode_f32_dense_sweep():
    """Every 40009th f32 bit pattern (over a hundred thousand, all exponents, both signs, NaNs
    and infinities included)."""
    bits = np.arange(0, 1 << 32, 40009, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    got = df16.encode(x)
    want = _ref_encode_all(x)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, [(float(x[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_rounding_ties_go_to_even_and_the_range_rules():
    one = 1.0
    ulp = 2.0 ** -9
    assert df16.encode(one + ulp / 2) == 0x3E00  # tie between F=0 and F=1: even (0)
    assert df16.encode(one + 3 * ulp / 2) == 0x3E02  # tie between F=1 and F=2: even (2)
    assert df16.encode(one + ulp / 2 + 2.0 ** -30) == 0x3E01  # just above the tie
    # overflow: to NINF, never saturating to the largest finite
    assert df16.encode(df16.MAX_FINITE) == 0x7FFE
    assert df16.encode(np.float32(2.0 ** 32 * (1 + 1021 / 1024))) == 0x7FFE  # tie -> even F=510
    assert df16.encode(np.float32(2.0 ** 33)) == 0x7FFF
    assert df16.encode(-np.inf) == 0xFFFF and df16.encode(np.inf) == 0x7FFF
    assert df16.encode(np.nan) & 0x7FFF == NINF
    # no subnormals: below the smallest normal is a signed zero
    assert df16.encode(2.0 ** -31) == 0x0000
    assert df16.encode(-(2.0 ** -31)) == 0x8000
    assert df16.encode(df16.MIN_NORMAL) == 0x0001
    assert df16.encode(-0.0) == 0x8000


def test_encode_from_f64_rounds_once():
    """A float64 just above a tie rounds up; through f32 it would have rounded to the tie and
    then to even (down)."""
    x = 1.0 + 2.0 ** -10 + 2.0 ** -40
    assert np.float32(x) == np.float32(1.0 + 2.0 ** -10)
    assert df16.encode(x) == 0x3E01
    assert df16.encode(np.float32(x)) == 0x3E00


def test_f16_round_trips():
    """Every f16 value encodes as the reference says, and to_f16 decodes with one rounding."""
    h = ALL.view(np.float16)
    got = df16.encode(h)
    want = _ref_encode_all(h.astype(np.float64))
    assert np.array_equal(got, want)
    back = df16.to_f16(ALL)
    assert back.dtype == np.float16
    with np.errstate(over="ignore"):
        exact = df16.decode(ALL).astype(np.float64).astype(np.float16)
    assert np.array_equal(back.view(np.uint16)[~np.isnan(back)],
                          exact.view(np.uint16)[~np.isnan(exact)])
