"""The native f16 <-> f32 conversions (backends/f16_convert.py) give numpy's astype bits exactly:
every f16 value, millions of random f32 bit patterns, every rounding midpoint and its
neighbours, overflow, subnormals, signed zeros and NaN payloads (quiet and signalling), on the
F16C path and on the portable C path."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.ktir.backends import f16_convert, seqmm

RNG = np.random.default_rng(5)


@pytest.fixture(params=["best", "portable"])
def native_path(request, monkeypatch):
    """The library on its best path, and on its portable C path."""
    if request.param == "portable":
        monkeypatch.setenv("KTIR_MODELS_NATIVE", "portable")
    seqmm._reset()
    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    yield request.param
    seqmm._reset()


def _f32_cases() -> np.ndarray:
    every_f16 = np.arange(65536, dtype=np.uint16).view(np.float16)
    finite = np.unique(every_f16[np.isfinite(every_f16)].astype(np.float64))
    mids = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)  # exact ties (f32 holds them)
    random_bits = RNG.integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32)
    nans = np.array([0x7F800001, 0x7FC00000, 0xFF800001, 0x7F801FFF, 0x7FA00000, 0x7FFFFFFF,
                     0xFFC00001], np.uint32)
    edges = np.array([65504, 65519.99, 65520, -65520, 1e-8, 2.9802322e-8, 2.9802326e-8,
                      5.9604645e-8, 6.1035156e-5, -0.0, 0.0, np.inf, -np.inf], np.float32)
    return np.concatenate([random_bits.view(np.float32), mids, np.nextafter(mids, np.inf),
                           np.nextafter(mids, -np.inf), every_f16.astype(np.float32), edges,
                           nans.view(np.float32)])


def test_f32_to_f16_is_numpys(native_path):
    x = _f32_cases()
    with np.errstate(all="ignore"):
        expected = x.astype(np.float16)
    got = f16_convert.convert(x, np.float16)
    assert got is not None and got.dtype == np.float16 and got.flags.c_contiguous
    bad = np.flatnonzero(got.view(np.uint16) != expected.view(np.uint16))
    assert bad.size == 0, f"{bad.size} differ, e.g. f32 bits {x[bad[:4]].view(np.uint32)}"


def test_f16_to_f32_is_numpys(native_path):
    every_f16 = np.tile(np.arange(65536, dtype=np.uint16).view(np.float16), 2)
    got = f16_convert.convert(every_f16, np.float32)
    assert got is not None and got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32),
                                  every_f16.astype(np.float32).view(np.uint32))


def test_shapes_tails_and_what_stays_on_numpy():
    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    for n in (2048, 2049, 2055, 4103):  # vector tails
        x = RNG.standard_normal((n,)).astype(np.float32)
        np.testing.assert_array_equal(f16_convert.convert(x, np.float16), x.astype(np.float16))
    x = RNG.standard_normal((32, 3, 96)).astype(np.float32)
    got = f16_convert.convert(x, np.float16)
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, x.astype(np.float16))
    assert f16_convert.convert(x[:, :, ::2].copy()[:10], np.float16) is None  # too small
    assert f16_convert.convert(np.asfortranarray(x), np.float16) is None  # numpy keeps F order
    assert f16_convert.convert(x.astype(np.float64), np.float16) is None
    assert f16_convert.convert(x, np.float64) is None
