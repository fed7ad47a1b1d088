"""The native f16 <-> f32 conversions (backends/f16_convert.py) give numpy's astype bits exactly:
every f16 value, millions of random f32 bit patterns, every rounding midpoint and its
neighbours, overflow, subnormals, signed zeros and NaN payloads (quiet and signalling), on the
AVX-512 and F16C paths and on the portable C path."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.ktir.backends import f16_convert, fastcall, seqmm

RNG = np.random.default_rng(5)


@pytest.fixture(params=["best", "avx2", "portable", "ctypes"])
def native_path(request, monkeypatch):
    """The library on its best path (AVX-512 where the CPU has it), on its F16C path without
    AVX-512 (the cap ``avx2``: the same as best on a CPU without AVX-512), and on its portable C
    path, each called through the extension where it is built (fastcall.py); ``ctypes``: the
    best path called through ctypes (the extension off)."""
    if request.param == "ctypes":
        monkeypatch.setenv("KTIR_MODELS_NATIVE_EXT", "0")
    elif request.param != "best":
        monkeypatch.setenv("KTIR_MODELS_NATIVE", request.param)
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


@pytest.fixture(params=["ext", "ctypes"])
def route(request, monkeypatch):
    """How the library's f16 functions are called: through the extension (skipped where it
    cannot be built) or through ctypes, which leaves small arrays to numpy."""
    if request.param == "ctypes":
        monkeypatch.setenv("KTIR_MODELS_NATIVE_EXT", "0")
    seqmm._reset()
    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    if request.param == "ext" and f16_convert._functions().ext is None:
        pytest.skip(f"the fastcall extension is unavailable: {fastcall.reason}")
    yield request.param
    seqmm._reset()


def test_shapes_tails_and_what_stays_on_numpy(route):
    for n in (2048, 2049, 2055, 4103):  # vector tails
        x = RNG.standard_normal((n,)).astype(np.float32)
        np.testing.assert_array_equal(f16_convert.convert(x, np.float16), x.astype(np.float16))
    x = RNG.standard_normal((32, 3, 96)).astype(np.float32)
    got = f16_convert.convert(x, np.float16)
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, x.astype(np.float16))
    small = x[:, :, ::2].copy()[:10]
    got = f16_convert.convert(small, np.float16)
    if route == "ctypes":
        assert got is None  # small: numpy's own cast is cheaper than a ctypes call
    else:
        np.testing.assert_array_equal(got, small.astype(np.float16))
    assert f16_convert.convert(np.asfortranarray(x), np.float16) is None  # numpy keeps F order
    assert f16_convert.convert(x.astype(np.float64), np.float16) is None
    assert f16_convert.convert(x, np.float64) is None


def _f16_operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random f16 bit patterns (NaNs, infinities, subnormals included) plus hand-picked pairs:
    exact ties after the f32 operation, overflow, underflow to subnormals and zero, 0/0, x/0."""
    bits = RNG.integers(0, 65536, (2, n), dtype=np.uint32).astype(np.uint16)
    a, b = bits[0].view(np.float16), bits[1].view(np.float16)
    special = np.array([[1.0, 2.0**-11], [2048.0, 1.0], [65504.0, 65504.0], [6e-8, 0.5],
                        [0.0, 0.0], [1.0, 0.0], [-0.0, 0.0], [np.inf, -np.inf], [3.0, 7.0],
                        [2.0**-14, 2.0**-10]], np.float16)
    return np.concatenate([a, special[:, 0]]), np.concatenate([b, special[:, 1]])


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide"])
def test_f16_binary_ops_are_numpys(name, native_path):
    a, b = _f16_operands(300_000)
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(a, b, dtype=np.float32).astype(np.float16)
    got = f16_convert.binop(name, a, b)
    assert got is not None and got.dtype == np.float16
    # a NaN with a NaN gives a NaN; whose payload survives is the instruction's operand order,
    # which compilers (numpy's and ours) may swap for commutative operations: not compared
    both_nan = np.isnan(a) & np.isnan(b)
    same = got.view(np.uint16) == expected.view(np.uint16)
    assert same[~both_nan].all(), f"{(~same[~both_nan]).sum()} differ"
    assert np.isnan(got[both_nan]).all() and both_nan.sum() > 50


def test_f16_binary_op_shapes_and_what_stays_on_numpy(route):
    for shape in [(1025,), (9, 2, 64), (7, 5, 31)]:  # vector tails: 1025 = 128 * 8 + 1
        a = RNG.standard_normal(shape).astype(np.float16)
        b = RNG.standard_normal(shape).astype(np.float16)
        got = f16_convert.binop("multiply", a, b)
        assert got.shape == shape
        np.testing.assert_array_equal(got, (a.astype(np.float32) * b).astype(np.float16))
    # broadcast operands and strided views are made contiguous first
    a = RNG.standard_normal((40, 1, 64)).astype(np.float16)
    b = RNG.standard_normal((1, 64)).astype(np.float16)
    b[0, 3], b[0, 5], a[7, 0, 9] = np.inf, np.nan, -np.inf
    for x, y in [(a, b), (b, a), (a, a[:, :, :1]), (a[:, :, ::2], a[:, :, 1::2]),
                 (a.transpose(2, 1, 0), a[:1].transpose(2, 1, 0))]:
        with np.errstate(all="ignore"):
            expected = np.subtract(x, y, dtype=np.float32).astype(np.float16)
        got = f16_convert.binop("subtract", x, y)
        assert got is not None and got.shape == expected.shape
        np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))
    assert f16_convert.binop("add", a, a[:3]) is None  # shapes that do not broadcast
    small = f16_convert.binop("add", a[:1, :, :8], a[:1, :, :8])
    if route == "ctypes":
        assert small is None
    else:
        np.testing.assert_array_equal(small, (a[:1, :, :8].astype(np.float32) * 2)
                                      .astype(np.float16))
    assert f16_convert.binop("add", a.astype(np.float32), a.astype(np.float32)) is None


def test_f16_max_and_min_reductions_select_numpys_values():
    """linalg.reduce max/min of large f16 operands widen natively and reduce in f32: the value
    selected is numpy's float16 one (NaN rows stay NaN; maxnumf/minnumf skip NaN)."""
    from ktir_models.ktir.backends import make_backend
    from ktir_models.ktir.ir.nodes import TensorType
    from ktir_models.ktir.dialects.linalg import fast_reduce as _fast_reduce

    xp = make_backend("numpy")
    x = (RNG.standard_normal((40, 3, 64)) * 100).astype(np.float16)
    x[1, 2, 5] = np.nan
    x[2, 0, :] = -np.inf
    x[3, 1, 7] = np.inf
    init = np.full((40, 3), -np.inf, np.float16)
    t = TensorType((40, 3), "f16")
    for kind, ufunc in [("max", np.maximum), ("min", np.minimum), ("nanmax", np.fmax),
                        ("nanmin", np.fmin)]:
        got = _fast_reduce(kind, x, (2,), init, t, np.float32, xp)
        expected = ufunc(ufunc.reduce(x, axis=2), init)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, expected, err_msg=kind)


def test_f16_all_finite_finds_every_inf_and_nan():
    from ktir_models.ktir.exec.machine import f16_all_finite

    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    every = np.arange(65536, dtype=np.uint16).view(np.float16)
    bad = every[~np.isfinite(every)]
    assert bad.size == 2 * 1024  # exponent all ones: +-inf and every NaN pattern
    for n in (1, 7, 4095, 4096, 4097, 70000):  # chunk edges of the native pass
        x = RNG.standard_normal(n).astype(np.float16)
        assert f16_convert.all_finite(x) is True and f16_all_finite(x)
        for pos in {0, n // 2, n - 1}:
            y = x.copy()
            y[pos] = bad[RNG.integers(bad.size)]
            assert f16_convert.all_finite(y) is False and not f16_all_finite(y)
    x = RNG.standard_normal((64, 64)).astype(np.float16)
    x[5, 6] = np.nan
    assert f16_convert.all_finite(x[:, ::2]) is None  # not contiguous: numpy's test
    assert not f16_all_finite(x[:, ::2]) and f16_all_finite(x[:, 8:])


def test_nonfinite_scan_finds_the_first_array_holding_an_inf_or_nan():
    """One native call over many arrays (a forward's node outputs after the pass): the index of
    the first one holding any inf or NaN pattern, -1 when none does, reading the arrays' bytes
    as they are at each call."""
    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    every = np.arange(65536, dtype=np.uint16).view(np.float16)
    bad = every[~np.isfinite(every)]
    arrays = [RNG.standard_normal(n).astype(np.float16) for n in (1, 4097, 9000, 3, 70000)]
    scan = f16_convert.nonfinite_scan(arrays)
    assert scan is not None and scan() == -1
    arrays[3][2] = bad[RNG.integers(bad.size)]
    assert scan() == 3
    arrays[1][4096] = np.float16(np.inf)
    assert scan() == 1
    arrays[0][0] = np.float16(np.nan)
    assert scan() == 0
    for a in arrays[:4]:
        a[...] = 1.0
    arrays[4][-1] = -np.float16(np.inf)
    assert scan() == 4
    assert f16_convert.nonfinite_scan([]) is not None and f16_convert.nonfinite_scan([])() == -1
    strided = RNG.standard_normal((8, 8)).astype(np.float16)[:, ::2]
    assert f16_convert.nonfinite_scan([arrays[0], strided]) is None  # not contiguous
    assert f16_convert.nonfinite_scan([arrays[0].astype(np.float32)]) is None
