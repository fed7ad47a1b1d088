"""The back-end vocabulary, function by function: ``TorchBackend("cpu")`` against ``NumpyBackend``.

The op modules state each op's semantics once in this vocabulary (numpy names and meanings), so
the torch back end is faithful exactly when each function gives numpy's result. Promised
(ktir_models/ktir/backends/torch_backend.py):

* bit-identical: f16 + - * / computed in f32 and rounded once (including exact ties and overflow
  to inf), casts, max/min (NaN propagating or not), comparisons, ``where``, data movement,
  creation, bitcasts and the memory primitives, and the result dtype of every mix of tensors with
  numpy or Python scalars;
* within a stated f32 tolerance: sums and products over many terms (summation order),
  matmuls (BLAS order) and transcendental functions (the math library).

Each test runs the same call on both back ends, with the array operands as tensors for torch (as a
compiled plan holds them), and compares the host results.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

from ktir_models.ktir.backends.numpy_backend import NumpyBackend  # noqa: E402
from ktir_models.ktir.backends.torch_backend import TorchBackend  # noqa: E402
from ktir_models.ktir.exec.machine import LXMemory  # noqa: E402

N = NumpyBackend()
T = TorchBackend("cpu")
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
RNG = np.random.default_rng(20261129)
#: f32 results of an operation whose order or library differs may differ by this many f32 ulps
#: of the result (exp, sqrt: the libraries are correctly rounded or within 1 ulp; we allow 2).
F32_ULPS = 2


def on_torch(x):
    """Array operands as the torch back end holds them (tensors); scalars unchanged."""
    return T.asarray(x) if isinstance(x, np.ndarray) and x.ndim > 0 else x


def host(x) -> np.ndarray:
    return T.to_host(x) if isinstance(x, torch.Tensor) else np.asarray(x)


def both(name: str, *args, **kwargs):
    """``name(*args, **kwargs)`` on numpy and on torch; both results on the host."""
    expected = getattr(N, name)(*args, **kwargs)
    got = getattr(T, name)(*[on_torch(a) for a in args], **kwargs)
    return np.asarray(expected), host(got)


def assert_bits(got: np.ndarray, expected: np.ndarray, what: str = "", zero_sign: bool = True) -> None:
    """Same dtype, shape and bits (any NaN matches any NaN; signed zeros must match unless
    ``zero_sign`` is False)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != numpy's {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != numpy's {expected.shape}"
    if expected.dtype.kind == "f" or expected.dtype == ml_dtypes.bfloat16:
        nan_g, nan_e = np.isnan(got), np.isnan(expected)
        assert np.array_equal(nan_g, nan_e), f"{what}: NaN positions differ"
        got, expected = got[~nan_g], expected[~nan_e]
        if not zero_sign:
            got, expected = got + got.dtype.type(0), expected + expected.dtype.type(0)  # -0 -> +0
    bits = np.dtype(f"u{expected.dtype.itemsize}") if expected.dtype != np.bool_ else np.bool_
    diff = np.flatnonzero(got.view(bits) != expected.view(bits))
    assert diff.size == 0, (f"{what}: {diff.size} elements differ, first at {diff[0]}: "
                            f"{got.reshape(-1)[diff[0]]!r} vs numpy {expected.reshape(-1)[diff[0]]!r}")


def assert_f32_close(got: np.ndarray, expected: np.ndarray, bound: np.ndarray, what: str) -> None:
    """Same dtype and shape, |got - expected| <= bound element by element (NaN/inf identical)."""
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape,
                                                                         expected.dtype, expected.shape)
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(got)), f"{what}: non-finite positions differ"
    assert np.array_equal(got[~finite], expected[~finite], equal_nan=True), what
    err = np.abs(got[finite].astype(np.float64) - expected[finite].astype(np.float64))
    excess = err - np.broadcast_to(bound, expected.shape)[finite]
    assert np.all(excess <= 0), f"{what}: max error {err.max():.3g} over the bound"


def f16_specials() -> np.ndarray:
    """Zeros of both signs, subnormals, the largest finite values, infinities and NaN."""
    return np.array([0.0, -0.0, 6e-8, -6e-8, 6.1e-5, 1.0, -1.0, 65504, -65504, np.inf, -np.inf,
                     np.nan], dtype=np.float16)


def f16_operands(n: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Random f16 pairs over many magnitudes, plus every pair of special values."""
    mag = np.exp2(RNG.integers(-26, 16, size=(2, n))).astype(np.float32)
    with np.errstate(over="ignore"):  # a few draws overflow to inf: welcome extra cases
        a, b = (RNG.standard_normal((2, n)).astype(np.float32) * mag).astype(np.float16)
    s = f16_specials()
    sa, sb = np.meshgrid(s, s)
    return np.concatenate([a, sa.ravel()]), np.concatenate([b, sb.ravel()])


# --------------------------------------------------------------------------------------------
# f16 arithmetic: compute in f32, round once to f16 (what arith.addf & co. run)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide"])
def test_f16_arithmetic_via_f32_is_bit_identical(name: str) -> None:
    a, b = f16_operands()
    with np.errstate(all="ignore"):
        expected = N.astype(getattr(N, name)(a, b, dtype=F32), F16)
    got = host(T.astype(getattr(T, name)(on_torch(a), on_torch(b), dtype=F32), F16))
    assert_bits(got, expected, name)
    # and both are the correctly rounded f16 of the exact result (f64 holds it exactly for + - *)
    if name != "divide":
        with np.errstate(all="ignore"):
            exact = getattr(np, name)(a.astype(F64), b.astype(F64))
            assert_bits(got, exact.astype(F16), f"{name} vs the correctly rounded f16")


@pytest.mark.parametrize("a, b, expected", [
    (1.0, 2.0 ** -11, 1.0),  # 1 + half an ulp: a tie, to even (down)
    (1.0 + 2.0 ** -10, 2.0 ** -11, 1.0 + 2.0 ** -9),  # odd last bit: the tie goes up
    (65504.0, 16.0, np.inf),  # halfway between 65504 and 2^16: to even, i.e. overflow to inf
    (65504.0, 15.0, 65504.0),  # below the halfway point: stays finite
    (-65504.0, -16.0, -np.inf),
    (2.0 ** -24, 2.0 ** -24, 2.0 ** -23),  # subnormals add exactly
], ids=["tie-even-down", "tie-even-up", "overflow-tie", "no-overflow", "negative-overflow",
        "subnormal"])
def test_f16_add_ties_and_overflow(a: float, b: float, expected: float) -> None:
    x, y = np.array([a], F16), np.array([b], F16)
    with np.errstate(over="ignore"):
        n = N.astype(N.add(x, y, dtype=F32), F16)
    t = host(T.astype(T.add(on_torch(x), on_torch(y), dtype=F32), F16))
    assert_bits(t, n, "add")
    assert_bits(n, np.array([expected], F16), "numpy add vs the IEEE result")


def test_f16_multiply_overflow_and_underflow() -> None:
    x = np.array([300.0, -300.0, 1e-4, 2.0 ** -12, 2.0 ** -12], F16)
    y = np.array([300.0, 300.0, 1e-4, 2.0 ** -13, 1.5 * 2.0 ** -13], F16)
    with np.errstate(all="ignore"):
        n = N.astype(N.multiply(x, y, dtype=F32), F16)
    t = host(T.astype(T.multiply(on_torch(x), on_torch(y), dtype=F32), F16))
    assert_bits(t, n, "multiply")
    # 2^-25 is half the smallest subnormal: a tie, to even (zero); 1.5 * 2^-25 rounds up to 2^-24
    assert np.isinf(n[:2]).all() and n[3] == 0 and n[4] == np.float16(2.0 ** -24)


# --------------------------------------------------------------------------------------------
# Scalars mixed with tensors: numpy's result dtype (NEP 50: Python scalars are weak, numpy
# scalars and 0-d arrays are not) and numpy's value


@pytest.mark.parametrize("scalar", [
    pytest.param(1.5, id="py-float"), pytest.param(2, id="py-int"),
    pytest.param(np.float16(1.5), id="np-f16"), pytest.param(np.array(3.0, np.float16), id="0d-f16"),
    pytest.param(np.float32(2.0), id="np-f32"),
    pytest.param(np.float64(0.5), id="np-f64"),
    pytest.param(np.int32(3), id="np-i32"),
])
@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "subtract"])
def test_scalar_with_f16_tensor_keeps_numpy_dtype(name: str, scalar) -> None:
    x = np.array([0.1, -2.0, 3.5, 65504.0], F16)
    with np.errstate(over="ignore"):
        n1, t1 = both(name, x, scalar)
        n2, t2 = both(name, scalar, x)
    assert_bits(t1, n1, f"{name}(tensor, {scalar!r})")
    assert_bits(t2, n2, f"{name}({scalar!r}, tensor)")


@pytest.mark.parametrize("scalar", [
    pytest.param(1.5, id="py-1.5"), pytest.param(np.float16(0.1), id="np-f16-0.1"),
    pytest.param(0.1, id="py-0.1"),
    pytest.param(np.float64(0.1), id="np-f64-0.1"),
])
def test_scalar_with_f16_tensor_and_f32_computation(scalar) -> None:
    """``dtype=float32``: numpy casts the scalar to f32 (not to the tensor's f16 first)."""
    x = np.array([1.0, -3.0, 1000.0], F16)
    n, t = both("add", x, scalar, dtype=F32)
    assert_bits(t, n, f"add(f16 tensor, {scalar!r}, dtype=f32)")


def test_scalar_only_arithmetic_stays_numpy() -> None:
    for name in ("add", "multiply", "maximum", "divide"):
        n = getattr(N, name)(np.float16(3.0), np.float16(0.7))
        t = getattr(T, name)(np.float16(3.0), np.float16(0.7))
        assert not isinstance(t, torch.Tensor) and type(t) is type(n) and n == t, name


def test_integer_tensor_arithmetic() -> None:
    a = RNG.integers(-1000, 1000, 64).astype(np.int32)
    b = RNG.integers(1, 50, 64).astype(np.int32)
    for name in ("add", "subtract", "multiply", "maximum", "minimum"):
        n, t = both(name, a, b)
        assert_bits(t, n, name)
    n, t = both("add", a, np.int32(7))
    assert_bits(t, n, "int32 tensor + int32 scalar")


def test_int32_tensor_plus_int64_scalar_promotes() -> None:
    n, t = both("add", np.arange(8, dtype=np.int32), np.int64(7))
    assert_bits(t, n, "int32 tensor + int64 scalar")


# --------------------------------------------------------------------------------------------
# max / min with NaN, comparisons, where


@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin"])
@pytest.mark.parametrize("dtype", [F16, F32])
def test_max_min_with_nan_are_bit_identical(name: str, dtype) -> None:
    """Bit-identical except the sign of a zero result of max/min(+0, -0): numpy itself answers
    differently for f16 and f32 (its SIMD f32 loops), so that sign is not part of the contract."""
    a, b = f16_operands(512)
    n, t = both(name, a.astype(dtype), b.astype(dtype))
    assert_bits(t, n, f"{name} {dtype}", zero_sign=False)
    assert np.isnan(n).any(), "the operands must hold NaNs to test anything"


@pytest.mark.parametrize("name", ["equal", "not_equal", "greater", "greater_equal", "less", "less_equal"])
def test_comparisons(name: str) -> None:
    a, b = f16_operands(256)
    n, t = both(name, a, b)
    assert_bits(t, n, name)


def test_where_with_tensors_and_scalars() -> None:
    a, b = f16_operands(256)
    cond = a > b
    for args in [(cond, a, b), (cond, a, np.float16(0.0)), (cond, np.float16(-65504), b),
                 (True, a, b)]:
        n, t = both("where", *args)
        assert_bits(t, n, f"where{tuple(type(x).__name__ for x in args)}")


# --------------------------------------------------------------------------------------------
# Unary functions: exact ones bit for bit, transcendentals within F32_ULPS


@pytest.mark.parametrize("name", ["negative", "abs", "floor", "ceil", "trunc", "isnan", "isfinite"])
def test_exact_unary(name: str) -> None:
    a, _ = f16_operands(512)
    for x in (a, a.astype(F32)):
        n, t = both(name, x)
        assert_bits(t, n, f"{name} {x.dtype}")


@pytest.mark.parametrize("name", ["exp", "sqrt", "log", "tanh", "sin", "cos", "exp2", "log2"])
def test_transcendental_f32_within_two_ulps(name: str) -> None:
    x = RNG.standard_normal(4096).astype(F32) * 8
    if name in ("sqrt", "log", "log2"):
        x = np.abs(x)
    x = np.concatenate([x, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.0, -104.0], F32)])
    with np.errstate(all="ignore"):
        n, t = both(name, x)
    bound = F32_ULPS * np.spacing(np.abs(n)).astype(np.float64)
    assert_f32_close(t, n, bound, name)


def test_exp_then_round_to_f16_is_nearly_always_identical() -> None:
    """What math.exp on f16 runs: widen to f32, exp, round to f16. An f32 exp one ulp apart can
    land on the other side of an f16 rounding boundary only for a tiny fraction of inputs."""
    x = (RNG.standard_normal(1 << 16) * 4).astype(F16)
    with np.errstate(over="ignore"):  # exp past 65504 is inf in f16, on both back ends
        n = N.astype(N.exp(N.astype(x, F32)), F16)
    t = host(T.astype(T.exp(T.astype(on_torch(x), F32)), F16))
    assert t.dtype == n.dtype == F16
    differ = np.count_nonzero(t.view(np.uint16) != n.view(np.uint16))
    assert differ <= x.size // 1000, f"{differ} of {x.size} f16 exp results differ"
    finite = np.isfinite(n)
    assert np.array_equal(finite, np.isfinite(t)) and np.array_equal(n[~finite], t[~finite])
    n, t = n[finite], t[finite]
    ulp = np.spacing(np.maximum(np.abs(n), np.abs(t))).astype(np.float64)
    assert np.all(np.abs(t.astype(np.float64) - n) <= ulp), "an f16 exp more than one ulp apart"


# --------------------------------------------------------------------------------------------
# Casts


@pytest.mark.parametrize("src, dst", [(F32, F16), (F16, F32), (F64, F16), (F32, ml_dtypes.bfloat16),
                                      (ml_dtypes.bfloat16, F32), (np.int64, F16), (F16, np.int32),
                                      (np.int32, np.int8), (F16, np.bool_)])
def test_casts_are_bit_identical(src, dst) -> None:
    raw = np.concatenate([RNG.standard_normal(2048) * np.exp2(RNG.integers(-30, 18, 2048)),
                          [0.5 * 2.0 ** -24, 1.5 * 2.0 ** -24, 65519.0, 65520.0, 1.0 + 2.0 ** -11,
                           -0.0]])
    if np.dtype(dst).kind in "iub" or np.dtype(src).kind in "iu":
        raw = np.clip(np.trunc(raw), -100, 100)  # float -> int is only defined in range
    with np.errstate(all="ignore"):  # values past f16's range become inf: wanted cases
        x = raw.astype(F64).astype(src)
        n, t = both("astype", x, dst)
    assert_bits(t, n, f"{np.dtype(src)} -> {np.dtype(dst)}")


def test_view_as_bitcasts() -> None:
    x = f16_operands(64)[0]
    for src, dst in [(x, np.uint16), (x, np.int16), (x.astype(F32), np.int32),
                     (np.arange(16, dtype=np.uint8), F16), (np.arange(16, dtype=np.uint8), F32)]:
        n, t = both("view_as", src, dst)
        assert_bits(t, n, f"view {src.dtype} as {np.dtype(dst)}")


# --------------------------------------------------------------------------------------------
# Reductions


REDUCE_AXES = [(), (0,), (1,), (2,), (0, 2), (0, 1, 2)]


@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
@pytest.mark.parametrize("kind", ["max", "min", "nanmax", "nanmin"])
def test_max_min_reductions_with_nan(kind: str, axis: tuple) -> None:
    x = (RNG.standard_normal((4, 6, 8)) * 10).astype(F16)
    x[0, 0, :3] = np.nan
    x[1, :, 2] = np.nan  # an all-NaN fibre along axis 1
    x[2, 2, :] = np.nan  # an all-NaN fibre along axis 2
    n, t = both("reduce", kind, x, axis)
    assert_bits(t, n, f"{kind} over {axis}")


@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
@pytest.mark.parametrize("kind", ["and", "or", "xor"])
def test_bitwise_reductions(kind: str, axis: tuple) -> None:
    x = RNG.integers(0, 1 << 16, (4, 6, 8)).astype(np.int32)
    n, t = both("reduce", kind, x, axis)
    assert_bits(t, n, f"{kind} over {axis}")
    flags = x % 3 == 0
    n, t = both("reduce", kind, flags, axis)
    assert_bits(t, n, f"{kind} of bools over {axis}")


@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
def test_sum_f16_in_f32_and_f32_in_f64(axis: tuple) -> None:
    x = RNG.standard_normal((4, 6, 300)).astype(F16)
    n, t = both("reduce", "sum", x, axis, F32)
    # |error| of an f32 sum of n terms in any order: <= n eps32 sum|x| (both sides: 2x)
    terms = int(np.prod([x.shape[a] for a in axis])) if axis else 1
    bound = 2 * terms * np.finfo(F32).eps * np.add.reduce(np.abs(x.astype(F64)), axis=axis)
    assert_f32_close(t, n, bound, f"f16 sum over {axis}")
    x32 = x.astype(F32) * np.float32(1e3)
    n, t = both("reduce", "sum", x32, axis, N.wide_float)
    assert T.wide_float == N.wide_float == F64
    bound = 2 * terms * np.finfo(F64).eps * np.add.reduce(np.abs(x32.astype(F64)), axis=axis)
    assert_f32_close(t, n, bound, f"f32 sum in f64 over {axis}")
    # rounded to f32 (what the op returns) they agree except at a rare f32 tie
    assert np.mean(n.astype(F32) == t.astype(F32)) > 0.99


@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
def test_prod_and_integer_sum(axis: tuple) -> None:
    x = (1 + 0.01 * RNG.standard_normal((4, 6, 8))).astype(F16)
    n, t = both("reduce", "prod", x, axis, F32)
    terms = int(np.prod([x.shape[a] for a in axis])) if axis else 1
    assert_f32_close(t, n, 2 * terms * np.finfo(F32).eps * np.abs(n.astype(F64)), f"prod {axis}")
    i = RNG.integers(-3, 4, (4, 6, 8)).astype(np.int32)
    for kind in ("sum", "prod"):
        n, t = both("reduce", kind, i, axis, np.int64)
        assert_bits(t, n, f"int {kind} over {axis}")


# --------------------------------------------------------------------------------------------
# matmul


@pytest.mark.parametrize("shapes", [((1, 576), (576, 192)), ((32, 64), (64, 576)),
                                    ((3, 5, 64), (3, 64, 7)), ((9, 128), (128,))], ids=str)
def test_f32_matmul_within_the_summation_bound(shapes) -> None:
    a = RNG.standard_normal(shapes[0]).astype(F32)
    b = RNG.standard_normal(shapes[1]).astype(F32)
    n, t = both("matmul", a, b)
    k = shapes[0][-1]
    # any summation order: |error| <= k eps32 (|a| @ |b|) for each of the two results
    bound = 2 * k * np.finfo(F32).eps * np.matmul(np.abs(a.astype(F64)), np.abs(b.astype(F64)))
    assert_f32_close(t, n, bound, f"matmul {shapes}")


def test_matmul_of_f16_exact_products_is_exact_on_both() -> None:
    """Small integers: every product and partial sum is exact in f32, so order cannot matter."""
    a = RNG.integers(-8, 9, (16, 64)).astype(F16).astype(F32)
    b = RNG.integers(-8, 9, (64, 24)).astype(F16).astype(F32)
    n, t = both("matmul", a, b)
    assert_bits(t, n, "exact matmul")


# --------------------------------------------------------------------------------------------
# Shapes and creation


def test_data_movement_is_bit_identical() -> None:
    x = f16_operands(4 * 6 * 8 - 144)[0].reshape(4, 6, 8)
    cases = [
        ("transpose", (x,), {}), ("transpose", (x, (2, 0, 1)), {}),
        ("broadcast_to", (x[:, :1, :], (4, 6, 8)), {}),
        ("broadcast_to", (np.array([1.5], F16), (3, 2)), {}),
        ("expand_dims", (x, 0), {}), ("expand_dims", (x, -1), {}), ("expand_dims", (x, (0, 3)), {}),
        ("moveaxis", (x, (0,), (2,)), {}), ("moveaxis", (x, (0, 1), (2, 0)), {}),
        ("reshape", (x, (8, 24)), {}), ("reshape", (x, 192), {}),
        ("ascontiguousarray", (x.transpose(2, 0, 1),), {}), ("copy", (x,), {}),
    ]
    for name, args, kwargs in cases:
        n, t = both(name, *args, **kwargs)
        assert_bits(t, n, f"{name}{[getattr(a, 'shape', a) for a in args]}")


def test_broadcast_of_a_numpy_scalar_keeps_its_dtype() -> None:
    n, t = both("broadcast_to", np.float16(2.5), (3, 2))
    assert_bits(t, n, "broadcast_to(np.float16)")


@pytest.mark.parametrize("value, dtype", [(0.0, F16), (np.float16(-1.5), F16), (np.nan, F32),
                                          (-np.inf, F16), (7, np.int32), (True, np.bool_)], ids=str)
def test_full_and_zeros(value, dtype) -> None:
    n, t = both("full", (3, 5), value, dtype)
    assert_bits(t, n, f"full {value!r}")
    n, t = both("zeros", (2, 4), dtype)
    assert_bits(t, n, "zeros")


# --------------------------------------------------------------------------------------------
# Memory primitives on a uint8 scratchpad (what ktdp.load / ktdp.store run)


def test_memory_typed_strided_take_put_assign() -> None:
    """The same sequence of memory operations on an LX scratchpad of each back end leaves the
    same bytes and reads the same values."""
    initial = RNG.integers(0, 256, 4096).astype(np.uint8)
    results = {}
    for xp in (N, T):
        lx = LXMemory(0, 4096)
        lx.data[:] = initial
        mem = xp.memory(lx)
        assert tuple(mem.shape) == (4096,)
        flat = xp.typed(lx, F16)
        reads = []
        # a strided [4, 8] view from element 10 with row stride 32, read then written
        view = xp.strided(flat, 10, (4, 8), (32, 1))
        reads.append(host(xp.copy(view)))
        xp.assign(view, xp.full((4, 8), np.float16(0.25), F16))
        # a transposed strided view written from a tensor
        tview = xp.strided(flat, 600, (8, 4), (1, 16))
        xp.assign(tview, on_torch(np.arange(32, dtype=F16).reshape(8, 4)) if xp is T
                  else np.arange(32, dtype=F16).reshape(8, 4))
        # a scalar fill
        xp.assign(xp.strided(flat, 900, (3, 3), (5, 1)), np.float16(-7.0))
        # gather and scatter by element offsets (repeated reads, distinct writes)
        offsets = np.array([3, 3, 17, 1000, 2047, 0], dtype=np.int64)
        reads.append(host(xp.take(flat, offsets)))
        values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], F16)
        xp.put(flat, np.array([5, 100, 1500, 1501, 2046, 1], dtype=np.int64),
               on_torch(values) if xp is T else values)
        xp.put(flat, np.array([40, 41], dtype=np.int64), np.float16(9.0))
        # other dtypes over the same bytes
        reads.append(host(xp.take(xp.typed(lx, F32), np.array([0, 511, 1023], dtype=np.int64))))
        reads.append(host(xp.copy(xp.strided(xp.typed(lx, np.dtype(np.uint8)), 1, (5,), (7,)))))
        xp.pull(lx)
        results[xp.name] = (lx.data.copy(), reads)
    (n_bytes, n_reads), (t_bytes, t_reads) = results["numpy"], results["torch"]
    assert_bits(t_bytes, n_bytes, "memory after the writes")
    for k, (t, n) in enumerate(zip(t_reads, n_reads)):
        assert_bits(t, n, f"read {k}")
    assert not np.array_equal(n_bytes, initial), "the writes must have changed memory"
