"""The fixed-order K-block matmul (ktir_models.ktir.backends.seqmm).

The reference is checked against a plain scalar formulation of the definition; the native kernel
(both its AVX2/F16C path and its portable C path) is checked against the reference BIT FOR BIT
(any NaN matches any NaN) on random values, rounding ties, subnormals, overflow, NaN, signed
zeros, every layout and dtype combination, tails, strided and broadcast operands and thread
counts. The native checks skip, with the reason, only when no kernel can be built here.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

from ktir_models.ktir.backends import seqmm

F16, F32 = np.float16, np.float32
KBS = (1, 2, 3, 4, 8, 64, 72)


# ---------------------------------------------------------------- helpers

def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16 if x.dtype == F16 else np.uint32)


def assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bit patterns (so -0.0 != +0.0), except that any NaN matches any NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.flags.c_contiguous
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    bad = (_bits(got) != _bits(want)) & ~nan
    assert not bad.any(), (f"{int(bad.sum())} of {bad.size} elements differ, first at "
                           f"{np.argwhere(bad)[0].tolist()}: {got[bad][:4]} vs {want[bad][:4]}")


def operands(rng, C, M, N, trips, kb, nt, kind="normal"):
    """a [C, M, K] and b ([C, K, N], or [C, N, K] when nt), float16, of one value kind."""
    K = trips * kb
    bshape = (C, N, K) if nt else (C, K, N)
    if kind == "normal":
        a = rng.standard_normal((C, M, K))
        b = rng.standard_normal(bshape) * 0.25
    elif kind == "ties":
        # dyadic values on a coarse grid: partial sums and chained sums land exactly halfway
        # between two f16 values far more often than random data does
        a = rng.choice([1.0, -1.0, 2.0, 0.5, -0.5, 1.5], size=(C, M, K))
        b = rng.choice([1.0, -1.0, 2.0**-11, -(2.0**-11), 3 * 2.0**-12, 2.0**-10, 1024.0,
                        0.5, 2.0**-12], size=bshape)
    elif kind == "subnormal":
        # inputs and results in and around the f16 subnormal range (< 2^-14)
        a = rng.standard_normal((C, M, K)) * 2.0**-6
        b = rng.standard_normal(bshape) * 2.0**-7
        b.flat[:: 7] = rng.integers(-40, 40, size=b.flat[::7].shape) * 2.0**-24
    elif kind == "overflow":
        # partials beyond 65504 round to +-inf; +inf + -inf chains give NaN
        a = rng.standard_normal((C, M, K)) * 200
        b = rng.standard_normal(bshape) * 300
    elif kind == "special":
        a = rng.standard_normal((C, M, K))
        b = rng.standard_normal(bshape)
        a.flat[:: 11] = np.inf
        a.flat[5:: 13] = -np.inf
        b.flat[:: 17] = np.nan
        b.flat[3:: 19] = 0.0
        a.flat[2:: 23] = -0.0
    elif kind == "negzero":
        # tiny negative products: partials round to -0.0 in f16 (and chain as -0.0)
        a = -np.abs(rng.standard_normal((C, M, K))) * 2.0**-14
        b = np.abs(rng.standard_normal(bshape)) * 2.0**-14
        a[:, 0, :] = -0.0  # products all -0.0: a trip's sum starts at +0.0, so it is +0.0
    else:
        raise ValueError(kind)
    return a.astype(F16), b.astype(F16)


def accumulator(rng, C, M, N, dtype, kind="normal"):
    acc = rng.standard_normal((C, M, N)) * (0.0 if kind == "negzero" else 4.0)
    if kind == "negzero":
        acc = -acc  # -0.0 everywhere: -0.0 + -0.0 stays -0.0
    return acc.astype(dtype)


def naive(a, b, acc, *, trips, kb, transpose_b, part_dtype, acc_dtype):
    """The definition with numpy float32 scalars, one element at a time (independent of
    kloop_reference's vectorised form)."""
    C, M, K = a.shape
    N = b.shape[1] if transpose_b else b.shape[2]
    out = np.empty((C, M, N), acc_dtype)
    with np.errstate(all="ignore"):
        for c, m, n in itertools.product(range(C), range(M), range(N)):
            r = None if acc is None else np.float32(acc[c, m, n])
            for t in range(trips):
                s = np.float32(0.0)
                for k in range(t * kb, (t + 1) * kb):
                    w = b[c, n, k] if transpose_b else b[c, k, n]
                    s = np.float32(s + np.float32(np.float32(a[c, m, k]) * np.float32(w)))
                p = np.float32(part_dtype(s))
                r = p if r is None else np.float32(acc_dtype(np.float32(r) + p))
            out[c, m, n] = acc_dtype(r)
    return out


# ---------------------------------------------------------------- the reference

@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("kind", ["normal", "ties", "subnormal", "overflow", "special", "negzero"])
def test_reference_matches_scalar_definition(transpose_b, kind):
    rng = np.random.default_rng(1)
    for (trips, kb), part, accd, with_acc in itertools.product(
            [(3, 2), (2, 3), (1, 5)], (F16, F32), (F16, F32), (False, True)):
        a, b = operands(rng, 2, 2, 3, trips, kb, transpose_b, kind)
        acc = accumulator(rng, 2, 2, 3, accd, kind) if with_acc else None
        kw = dict(trips=trips, kb=kb, transpose_b=transpose_b, part_dtype=part, acc_dtype=accd)
        assert_same_bits(seqmm.kloop_reference(a, b, acc, **kw), naive(a, b, acc, **kw))


def test_reference_rounds_each_partial_and_each_chained_sum():
    # one trip of (1 + 2^-11): the f32 sum is a tie between 1 and 1 + 2^-10 -> 1 (even)
    a = np.ones((1, 1, 2), F16)
    b = np.array([[[1.0], [2.0**-11]]], F16)
    kw = dict(trips=1, kb=2, transpose_b=False)
    assert seqmm.kloop_reference(a, b, None, **kw, part_dtype=F16, acc_dtype=F16)[0, 0, 0] == 1.0
    assert seqmm.kloop_reference(a, b, None, **kw, part_dtype=F32, acc_dtype=F32)[0, 0, 0] == 1 + 2.0**-11
    # two trips of 2^-11 chained onto 1: each f16 step is a tie that rounds back to 1, where
    # one f32 chain would reach 1 + 2^-10
    a = np.ones((1, 1, 2), F16)
    b = np.full((1, 2, 1), 2.0**-11, F16)
    acc = np.ones((1, 1, 1), F16)
    kw = dict(trips=2, kb=1, transpose_b=False)
    assert seqmm.kloop_reference(a, b, acc, **kw, part_dtype=F16, acc_dtype=F16)[0, 0, 0] == 1.0
    assert seqmm.kloop_reference(a, b, acc.astype(F32), **kw, part_dtype=F16,
                                 acc_dtype=F32)[0, 0, 0] == 1 + 2.0**-10


def test_reference_signed_zero_and_plain_matmul():
    rng = np.random.default_rng(2)
    a, b = operands(rng, 1, 3, 4, 2, 4, False, "negzero")
    out = seqmm.kloop_reference(a, b, None, trips=2, kb=4, transpose_b=False,
                                part_dtype=F16, acc_dtype=F16)
    assert (out == 0).all()
    assert not np.signbit(out[0, 0]).any() and np.signbit(out[0, 1:]).all()
    # trips=1, acc=None, f32 partial, f16 result: one matmul rounded once
    a, b = operands(rng, 2, 3, 5, 1, 16, False)
    out = seqmm.kloop_reference(a, b, None, trips=1, kb=16, transpose_b=False,
                                part_dtype=F32, acc_dtype=F16)
    close = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(F16)
    assert np.allclose(out.astype(F32), close.astype(F32), rtol=2e-3, atol=1e-3)


def test_reference_rejects_bad_shapes():
    a = np.zeros((1, 2, 8), F16)
    with pytest.raises(ValueError, match="trips\\*kb"):
        seqmm.kloop_reference(a, np.zeros((1, 8, 3), F16), None, trips=3, kb=2,
                              transpose_b=False, part_dtype=F16, acc_dtype=F16)
    with pytest.raises(ValueError, match="expected"):
        seqmm.kloop_reference(a, np.zeros((1, 3, 8), F16), None, trips=2, kb=4,
                              transpose_b=False, part_dtype=F16, acc_dtype=F16)


# ---------------------------------------------------------------- the native kernel

needs_native = pytest.mark.skipif(not seqmm.available(),
                                  reason=f"native kernel unavailable: {seqmm.unavailable_reason()}")


def _simd_level(force: int) -> int:
    """The path the kernel runs under a cap: 0 portable, 1 AVX2+FMA+F16C, 2 AVX-512, 3 AVX-512
    with AVX512-FP16 (f16 chains closed by f16 adds; nt with 16+ rows in the m-vector layout)."""
    lib = seqmm._library().lib
    lib.seqmm_simd_level.argtypes = [ctypes.c_int]
    lib.seqmm_simd_level.restype = ctypes.c_int
    return lib.seqmm_simd_level(force)


@pytest.fixture(params=["default", "avx512", "avx2", "portable"])
def path(request, monkeypatch):
    """The kernel's default path (AVX-512 with FP16, else AVX-512, else AVX2/F16C, where the CPU
    has it), its AVX-512 path without FP16 (KTIR_MODELS_NATIVE=avx512), its AVX2 path
    (KTIR_MODELS_NATIVE=avx2) and its portable C path. Where the CPU lacks a level, the capped
    paths are the same as the next lower one."""
    if request.param != "default":
        monkeypatch.setenv("KTIR_MODELS_NATIVE", request.param)
    seqmm._reset()
    assert seqmm.available()
    if request.param == "portable":
        assert not seqmm.uses_simd()
    if request.param == "avx2":
        assert seqmm.uses_simd() == bool(seqmm._library().lib.seqmm_has_simd())
    yield request.param
    monkeypatch.undo()
    seqmm._reset()


@pytest.fixture(params=["own", "aids", "no-aids"])
def aids(request, path):
    """Each CPU's own streaming choices, and both vendors' forced (seqmm.force_streaming_aids:
    the next-item prefetch, staged nt rows and 32-row nt decode items as on AMD, or 16-row items
    without them as on Intel), so every machine runs all of them."""
    seqmm.force_streaming_aids({"own": None, "aids": True, "no-aids": False}[request.param])
    yield request.param
    seqmm.force_streaming_aids(None)


def check(a, b, acc, threads=None, **kw):
    """kloop == kloop_reference, and kloop leaves its inputs alone."""
    copies = [None if x is None else np.array(x, copy=True) for x in (a, b, acc)]
    want = seqmm.kloop_reference(a, b, acc, **kw)
    got = seqmm.kloop(a, b, acc, threads=threads, **kw)
    assert_same_bits(got, want)
    for x, x0 in zip((a, b, acc), copies):
        if x is not None:
            assert np.array_equal(_bits(np.asarray(x)), _bits(x0))
    return got


@needs_native
@pytest.mark.parametrize("transpose_b", [False, True])
def test_kernel_all_dtypes_accs_and_block_sizes(path, transpose_b):
    rng = np.random.default_rng(3)
    for kb in KBS:
        trips = max(1, 150 // kb) if kb < 64 else 2
        C, M, N = (2, 3, 37) if kb % 2 else (1, 7, 70)
        for part, accd, with_acc in itertools.product((F16, F32), (F16, F32), (False, True)):
            a, b = operands(rng, C, M, N, trips, kb, transpose_b)
            acc = accumulator(rng, C, M, N, accd) if with_acc else None
            check(a, b, acc, trips=trips, kb=kb, transpose_b=transpose_b,
                  part_dtype=part, acc_dtype=accd)


@needs_native
@pytest.mark.parametrize("kind", ["ties", "subnormal", "overflow", "special", "negzero"])
def test_kernel_special_values(path, kind):
    rng = np.random.default_rng(4)
    saw_negzero = False
    for transpose_b, (trips, kb), part, accd, with_acc in itertools.product(
            (False, True), [(5, 2), (3, 8), (2, 72), (17, 1), (1, 40)], (F16, F32), (F16, F32),
            (False, True)):
        a, b = operands(rng, 2, 5, 45, trips, kb, transpose_b, kind)
        acc = accumulator(rng, 2, 5, 45, accd, kind) if with_acc else None
        got = check(a, b, acc, trips=trips, kb=kb, transpose_b=transpose_b,
                    part_dtype=part, acc_dtype=accd)
        saw_negzero |= bool(((got == 0) & np.signbit(got)).any())
    if kind == "negzero":
        assert saw_negzero  # the data does produce -0.0 results


@needs_native
@pytest.mark.parametrize("M", [1, 2, 3, 6, 7, 13, 32])
def test_kernel_rows_and_column_tails(path, M):
    rng = np.random.default_rng(5)
    for N, transpose_b in itertools.product((1, 9, 31, 33, 100, 515), (False, True)):
        a, b = operands(rng, 1, M, N, 3, 16, transpose_b)
        check(a, b, None, trips=3, kb=16, transpose_b=transpose_b, part_dtype=F16, acc_dtype=F16)
    # a K that is not a multiple of the kernel's k-slab (16) nor of 8
    for K_trips, kb in [(7, 3), (1, 5), (13, 1)]:
        a, b = operands(rng, 1, M, 40, K_trips, kb, True)
        check(a, b, None, trips=K_trips, kb=kb, transpose_b=True, part_dtype=F16, acc_dtype=F32)


@needs_native
def test_kernel_decode_and_lm_head_shapes(path):
    rng = np.random.default_rng(6)
    a, b = operands(rng, 1, 1, 1536, 9, 64, False)
    check(a, b, None, trips=9, kb=64, transpose_b=False, part_dtype=F16, acc_dtype=F16)
    check(a, np.ascontiguousarray(np.swapaxes(b, 1, 2)), None, trips=9, kb=64, transpose_b=True,
          part_dtype=F16, acc_dtype=F16)
    a, b = operands(rng, 1, 1, 700, 288, 2, True)
    check(a, b, None, trips=288, kb=2, transpose_b=True, part_dtype=F16, acc_dtype=F16)


@needs_native
def test_kernel_broadcast_and_strided_operands(path):
    rng = np.random.default_rng(7)
    C, M, N, trips, kb = 3, 4, 50, 4, 8
    K = trips * kb
    kw = dict(trips=trips, kb=kb, part_dtype=F16, acc_dtype=F32)
    a0, b0 = operands(rng, 1, M, N, trips, kb, False)
    # one weight shared by every core (stride 0 over C), and one activation for every core
    a_b = np.broadcast_to(a0, (C, M, K))
    b_b = np.broadcast_to(b0, (C, K, N))
    a, b = operands(rng, C, M, N, trips, kb, False)
    check(a_b, b, None, transpose_b=False, **kw)
    check(a, b_b, None, transpose_b=False, **kw)
    check(a_b, b_b, accumulator(rng, C, M, N, F32), transpose_b=False, **kw)
    bt = np.broadcast_to(np.ascontiguousarray(np.swapaxes(b0, 1, 2)), (C, N, K))
    check(a, bt, None, transpose_b=True, **kw)
    # non-contiguous views: every other row and column, reversed k, transposed storage
    big_a = rng.standard_normal((C, 2 * M, 2 * K)).astype(F16)
    big_b = rng.standard_normal((C, 2 * K, 3 * N)).astype(F16)
    acc_big = accumulator(rng, C, 2 * M, 2 * N, F32)
    check(big_a[:, ::2, ::2], big_b[:, ::2, ::3], acc_big[:, 1::2, ::2], transpose_b=False, **kw)
    check(big_a[:, ::2, ::-2], big_b[:, ::2, :N], None, transpose_b=False, **kw)
    check(a, np.swapaxes(big_b[:, :K, :N], 1, 2), None, transpose_b=True, **kw)  # nt, n unit
    nt_store = rng.standard_normal((C, N, K)).astype(F16)
    check(a, np.swapaxes(nt_store, 1, 2), None, transpose_b=False, **kw)          # nn, k unit
    check(a, big_b[:, :2 * K:2, :N][:, :, ::-1], None, transpose_b=False, **kw)   # n stride -1
    check(a, np.broadcast_to(big_b[:1, :K, ::3][:, :, :N], (C, K, N)), None,
          transpose_b=False, **kw)                                              # shared, strided
    # a leading dim of 1 is shared by every c, as numpy broadcasts it
    want = seqmm.kloop_reference(a_b, b, None, transpose_b=False, **kw)
    assert_same_bits(check(a0, b, None, transpose_b=False, **kw), want)
    acc1 = accumulator(rng, 1, M, N, F32)
    want = seqmm.kloop_reference(a, b_b, np.broadcast_to(acc1, (C, M, N)), transpose_b=False, **kw)
    assert_same_bits(check(a, b0, acc1, transpose_b=False, **kw), want)
    want = seqmm.kloop_reference(a, bt, None, transpose_b=True, **kw)
    assert_same_bits(check(a, bt[:1], None, transpose_b=True, **kw), want)


def test_shared_weight_is_copied_once_not_per_core():
    w = np.zeros((8, 30), F16)[:, ::2]                       # [K, N] with N stride 2
    b = np.broadcast_to(w, (5, 8, 15))
    kernel_b, nt = seqmm._unit_inner(b, False)
    assert not nt and kernel_b.strides[0] == 0 and kernel_b.strides[2] == 2
    assert np.array_equal(kernel_b, b)
    # a transposed view is read as the other layout, without a copy
    store = np.zeros((3, 15, 8), F16)
    kernel_b, nt = seqmm._unit_inner(np.swapaxes(store, 1, 2), False)
    assert nt and np.shares_memory(kernel_b, store)


@needs_native
def test_kernel_threads_do_not_change_bits(path):
    rng = np.random.default_rng(8)
    for transpose_b, (C, M, N) in itertools.product((False, True), [(1, 1, 1536), (3, 5, 300)]):
        a, b = operands(rng, C, M, N, 9, 64, transpose_b)
        kw = dict(trips=9, kb=64, transpose_b=transpose_b, part_dtype=F16, acc_dtype=F16)
        one = seqmm.kloop(a, b, None, threads=1, **kw)
        assert_same_bits(one, seqmm.kloop_reference(a, b, None, **kw))
        for threads in (2, 3, 8, None):
            assert_same_bits(seqmm.kloop(a, b, None, threads=threads, **kw), one)


@needs_native
@pytest.mark.parametrize("transpose_b", [False, True])
def test_kernel_two_threads_same_bits_every_dtype_pair(path, transpose_b):
    """1 and 2 threads on every (part, acc) dtype pair, with and without an accumulator, on a
    decode GEMV ([1 x 576] @ 576 x 1536: columns split between the threads) and a prefill GEMM
    over several cores: the same bits as the reference (the threads split columns, never k)."""
    rng = np.random.default_rng(12)
    for (C, M, N, trips, kb), part, accd, with_acc in itertools.product(
            [(1, 1, 1536, 9, 64), (3, 32, 200, 2, 72)], (F16, F32), (F16, F32), (False, True)):
        a, b = operands(rng, C, M, N, trips, kb, transpose_b)
        acc = accumulator(rng, C, M, N, accd) if with_acc else None
        kw = dict(trips=trips, kb=kb, transpose_b=transpose_b, part_dtype=part, acc_dtype=accd)
        one = check(a, b, acc, threads=1, **kw)
        assert_same_bits(check(a, b, acc, threads=2, **kw), one)


@needs_native
def test_set_threads_fixes_the_count_of_calls_that_do_not_choose(monkeypatch):
    """The size rule, and set_threads overriding it for every call without ``threads`` (the
    count reaches the kernel: a cached call made under the rule is not reused)."""
    monkeypatch.setattr(seqmm, "_DEFAULT_THREADS", 2)
    assert seqmm.default_threads(seqmm._BIG_PROBLEM) == 2
    assert seqmm.default_threads(seqmm._BIG_PROBLEM - 1) == 1
    rng = np.random.default_rng(13)
    a, b = operands(rng, 1, 1, 64, 1, 64, True)  # 4096 multiply-adds: one thread by the rule
    kw = dict(trips=1, kb=64, transpose_b=True, part_dtype=F32, acc_dtype=F16)
    want = seqmm.kloop(a, b, None, **kw)
    seen = []
    real_run = seqmm._run
    def counting_run(lib, call, *arrays):  # call.rest[9]: the thread count given to the kernel
        seen.append(call.rest[9])
        return real_run(lib, call, *arrays)

    monkeypatch.setattr(seqmm, "_run", counting_run)
    try:
        seqmm.set_threads(2)
        assert seqmm.default_threads(1) == 2
        assert_same_bits(seqmm.kloop(a, b, None, **kw), want)
        seqmm.set_threads(None)
        assert_same_bits(seqmm.kloop(a, b, None, **kw), want)
    finally:
        seqmm.set_threads(None)
    assert seen == [2, 1]
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="set_threads"):
            seqmm.set_threads(bad)


@needs_native
def test_kernel_pool_with_changing_thread_counts():
    """The worker pool grows to the largest thread count seen; later calls with fewer threads
    leave workers idle. Alternating counts must never run a part twice or return early (a
    worker left out of one job once could pick up the next job's part under the old job)."""
    rng = np.random.default_rng(10)
    cases = []
    for k in range(6):
        transpose_b = bool(k % 2)
        a, b = operands(rng, 2, 1 + k % 3, 97 + 64 * k, 3, 8, transpose_b)
        kw = dict(trips=3, kb=8, transpose_b=transpose_b, part_dtype=F16, acc_dtype=F32)
        cases.append((a, b, kw, seqmm.kloop_reference(a, b, None, **kw)))
    for round_ in range(40):
        for threads in (8, 2, 3, 1, 5, 2):
            a, b, kw, want = cases[(round_ + threads) % len(cases)]
            assert_same_bits(seqmm.kloop(a, b, None, threads=threads, **kw), want)


@needs_native
def test_kernel_pool_workers_that_wake_late():
    """Calls spaced so that pool workers fall asleep between them: a worker that wakes after the
    caller has run every item must neither delay nor disturb that call or the next one (it finds
    the job closed); either way each call returns the reference bits."""
    import time
    rng = np.random.default_rng(14)
    cases = []
    for C, N in [(3, 64), (1, 130), (5, 33)]:
        a, b = operands(rng, C, 1, N, 2, 48, True)
        kw = dict(trips=2, kb=48, transpose_b=True, part_dtype=F16, acc_dtype=F32)
        cases.append((a, b, kw, seqmm.kloop_reference(a, b, None, **kw)))
    for i in range(60):
        a, b, kw, want = cases[i % len(cases)]
        assert_same_bits(seqmm.kloop(a, b, None, threads=2 + i % 3, **kw), want)
        time.sleep((i % 4) * 0.0004)


@pytest.fixture
def warming():
    """seqmm.set_warming for the test, a fresh call order; the default rule afterwards."""
    yield seqmm.set_warming
    seqmm.set_warming(None)


@needs_native
def test_warming_learns_the_order_and_never_changes_bits(warming):
    """Calls in a repeated order: once the order is learned, each call names the next call's
    weights (the worker prefetches them); the results are the reference's bits with warming on
    and off, when the order changes, and when the named weights are freed before the warming
    runs (prefetches never fault)."""
    rng = np.random.default_rng(21)
    cases = []
    for C, N, K, nt in [(4, 64, 576, True), (9, 64, 576, False), (2, 512, 256, True)]:
        a, b = operands(rng, C, 1, N, K // 64, 64, nt)
        kw = dict(trips=K // 64, kb=64, transpose_b=nt, part_dtype=F16, acc_dtype=F16)
        cases.append((a, b, kw, seqmm.kloop_reference(a, b, None, **kw)))
    warming(True)
    for round_ in range(3):
        for a, b, kw, want in cases:
            assert_same_bits(seqmm.kloop(a, b, None, threads=1 + round_ % 2, **kw), want)
    after = seqmm._Order.after
    for (_, b, _, _), (_, b_next, _, _) in zip(cases, cases[1:] + cases[:1]):
        assert after[b.ctypes.data][0] == b_next.ctypes.data
    cases.reverse()  # another order: the old guesses are wrong once, then relearned
    for a, b, kw, want in cases * 2:
        assert_same_bits(seqmm.kloop(a, b, None, **kw), want)
    assert after[cases[0][1].ctypes.data][0] == cases[1][1].ctypes.data
    gone = np.ones(1 << 22, F16)  # warmed after the next call, then freed before it runs
    a, b, kw, want = cases[0]
    seqmm._Order.after[b.ctypes.data] = (gone.ctypes.data, 1, 0, 1024, 1 << 13, 1 << 13)
    del gone
    assert_same_bits(seqmm.kloop(a, b, None, threads=2, **kw), want)
    seqmm._Order.after[b.ctypes.data] = (64, 1, 0, 1 << 12, 1 << 12, 1 << 12)  # unmapped
    assert_same_bits(seqmm.kloop(a, b, None, threads=2, **kw), want)
    warming(False)
    assert not seqmm._Order.after
    for a, b, kw, want in cases:
        assert_same_bits(seqmm.kloop(a, b, None, **kw), want)
    assert not seqmm._Order.after
    with pytest.raises(ValueError, match="set_warming"):
        seqmm.set_warming(1)


@needs_native
def test_kernel_concurrent_callers():
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(9)
    a, b = operands(rng, 2, 3, 400, 9, 64, True)
    kw = dict(trips=9, kb=64, transpose_b=True, part_dtype=F16, acc_dtype=F16)
    want = seqmm.kloop_reference(a, b, None, **kw)
    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda _: seqmm.kloop(a, b, None, threads=2, **kw), range(16)))
    for got in results:
        assert_same_bits(got, want)


@needs_native
def test_kernel_argument_errors():
    a = np.zeros((1, 2, 8), F16)
    with pytest.raises(TypeError, match="float16"):
        seqmm.kloop(a.astype(F32), np.zeros((1, 8, 3), F16), None, trips=2, kb=4,
                    transpose_b=False, part_dtype=F16, acc_dtype=F16)
    with pytest.raises(TypeError, match="acc must be"):
        seqmm.kloop(a, np.zeros((1, 8, 3), F16), np.zeros((1, 2, 3), F32), trips=2, kb=4,
                    transpose_b=False, part_dtype=F16, acc_dtype=F16)
    with pytest.raises(ValueError, match="acc has shape"):
        seqmm.kloop(a, np.zeros((1, 8, 3), F16), np.zeros((1, 3, 3), F16), trips=2, kb=4,
                    transpose_b=False, part_dtype=F16, acc_dtype=F16)


def test_force_streaming_aids_takes_a_bool_or_none():
    with pytest.raises(ValueError, match="bool or None"):
        seqmm.force_streaming_aids(1)


@needs_native
def test_path_caps():
    """KTIR_MODELS_NATIVE=portable / avx2 / avx512 cap the path; the default is the best the CPU
    has."""
    best = _simd_level(0)
    assert best in (0, 1, 2, 3)
    assert _simd_level(1) == 0
    assert _simd_level(2) == min(best, 1)
    assert _simd_level(3) == min(best, 2)
    assert (best > 0) == bool(seqmm._library().lib.seqmm_has_simd())


@needs_native
@pytest.mark.parametrize("transpose_b", [False, True])
def test_kernel_slab_boundaries_and_panels(path, transpose_b):
    """K around the slab sizes (16, 32; 128 for nn with many rows on the AVX-512 path) and N
    around whole 16-column panels and 8-row groups, with trips that end inside a slab, for one
    row, two rows and many rows."""
    rng = np.random.default_rng(11)
    for (trips, kb), N, M in itertools.product([(1, 31), (1, 32), (1, 33), (3, 24), (2, 48), (5, 13), (2, 256),
                                                (1, 127), (1, 128), (1, 129), (3, 100)],
                                               (15, 16, 17, 24, 48, 130), (1, 2, 9)):
        a, b = operands(rng, 1, M, N, trips, kb, transpose_b)
        check(a, b, None, trips=trips, kb=kb, transpose_b=transpose_b, part_dtype=F16, acc_dtype=F16)


@needs_native
def test_kernel_weight_split_over_cores(path):
    """A decode GEMV as the programs issue it: one [N, K] weight viewed as [C, N/C, K] (each core
    its rows), one activation shared by every core; N/C = 24 is one whole panel and a part."""
    rng = np.random.default_rng(12)
    for C, rows, trips, kb in [(24, 24, 9, 64), (8, 64, 1, 576), (3, 40, 2, 512)]:
        a, w = operands(rng, 1, 1, C * rows, trips, kb, True)
        b = w[0].reshape(C, rows, trips * kb)
        want = seqmm.kloop_reference(np.broadcast_to(a, (C, 1, trips * kb)), b, None, trips=trips,
                                     kb=kb, transpose_b=True, part_dtype=F16, acc_dtype=F16)
        assert_same_bits(check(a, b, None, trips=trips, kb=kb, transpose_b=True, part_dtype=F16,
                               acc_dtype=F16), want)


@needs_native
@pytest.mark.parametrize("transpose_b", [False, True])
def test_kernel_items_claimed_by_threads(path, transpose_b):
    """Many work items (several cores, column tails) handed out to 1-8 threads one at a time,
    each thread prefetching the next item it claimed: weight rows with gaps between them (a
    view of every other row / a column slice), so an item's block is not one contiguous run.
    With several threads each takes the front of its own range of items, then the back of
    another's: with more threads than this machine's cores some start late and their ranges
    are taken by the others; every item is run once, whoever runs it."""
    rng = np.random.default_rng(13)
    C, M, N, trips, kb = 5, 1, 300, 3, 40
    K = trips * kb
    kw = dict(trips=trips, kb=kb, transpose_b=transpose_b, part_dtype=F16, acc_dtype=F32)
    a = rng.standard_normal((1, M, K)).astype(F16)
    if transpose_b:
        store = rng.standard_normal((C, 2 * N, K + 24)).astype(F16)
        b = store[:, ::2, 8:8 + K]                 # rows 2 (K + 24) values apart
    else:
        store = rng.standard_normal((C, K, N + 100)).astype(F16)
        b = store[:, :, 50:50 + N]                 # k rows (N + 100) values apart
    acc = accumulator(rng, C, M, N, F32)
    want = seqmm.kloop_reference(np.broadcast_to(a, (C, M, K)), b, acc, **kw)
    for threads in (1, 2, 3, 4, 7, 8):
        assert_same_bits(seqmm.kloop(a, b, acc, threads=threads, **kw), want)


@needs_native
def test_kernel_items_too_big_to_prefetch_ahead(path, aids):
    """Items of 64 rows x 8192 k's (1 MB, llama's down projection per core): the next item is
    not prefetched ahead (it would crowd L2), the result is the same."""
    rng = np.random.default_rng(15)
    a, b = operands(rng, 2, 1, 70, 2, 4096, True)
    kw = dict(trips=2, kb=4096, transpose_b=True, part_dtype=F16, acc_dtype=F16)
    want = seqmm.kloop_reference(a, b, None, **kw)
    for threads in (1, 2):
        assert_same_bits(seqmm.kloop(a, b, None, threads=threads, **kw), want)


@needs_native
@pytest.mark.parametrize("M", [1, 2, 5])
def test_kernel_rows_a_power_of_two_apart(path, aids, M):
    """nt weights whose rows are a multiple of 2 KB apart (K = 1024, 2048, 8192; the lm_head's
    first half of K at a 4 KB stride) are copied into a staging buffer before the AVX-512
    transposes where the CPU wants streaming aids, and cut into items of 16 rows (the last one
    a 16-row panel with a tail) with M <= 2 where it does not. Every such shape, with a K that ends inside a staging block and inside a slab,
    column tails inside a panel, and trips that cross the blocks, gives the reference's bits."""
    rng = np.random.default_rng(16 + M)
    for (C, N, trips, kb) in ((3, 70, 1, 1024), (2, 33, 2, 1024), (1, 130, 8, 256), (2, 17, 1, 2048)):
        a, b = operands(rng, C, M, N, trips, kb, True)
        for part, acc_t in ((F16, F16), (F32, F32), (F16, F32)):
            kw = dict(trips=trips, kb=kb, transpose_b=True, part_dtype=part, acc_dtype=acc_t)
            acc = accumulator(rng, C, M, N, acc_t)
            for threads in (1, 2):
                check(a, b, acc, threads=threads, **kw)
    # rows 4 KB apart, the first 1000 k's of each (the stride is not K), and a K that is not a
    # multiple of 32 (the last slab and staging block are short)
    wide = rng.standard_normal((1, 96, 2048)).astype(F16)
    a = rng.standard_normal((1, M, 1000)).astype(F16)
    kw = dict(trips=1, kb=1000, transpose_b=True, part_dtype=F32, acc_dtype=F32)
    check(a, wide[:, :, :1000], None, threads=2, **kw)
    a = rng.standard_normal((1, M, 2000)).astype(F16)
    kw = dict(trips=8, kb=250, transpose_b=True, part_dtype=F16, acc_dtype=F16)
    check(a, wide[:, :, :2000], accumulator(rng, 1, M, 96, F16), threads=1, **kw)


# ---------------------------------------------------------------- the portable conversions

def _conversions():
    lib = seqmm._library().lib
    P, I = ctypes.c_void_p, ctypes.c_ssize_t
    lib.seqmm_f2h.argtypes = lib.seqmm_h2f.argtypes = [P, P, I]
    return lib


@needs_native
def test_portable_f16_conversions_exact():
    lib = _conversions()
    # every f16 bit pattern widens exactly
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    f = np.empty(h.size, F32)
    lib.seqmm_h2f(h.ctypes.data, f.ctypes.data, h.size)
    want = h.view(F16).astype(F32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(f), nan)
    assert np.array_equal(f.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    # narrowing: every f16 value, its neighbours in f32 and the exact midpoints (ties) between
    # f16 values, across the whole range (subnormals, overflow, infinities, NaN), plus random bits
    fin = want[np.isfinite(want)].astype(np.float64)
    fin = np.unique(fin)
    mids = (fin[:-1] + fin[1:]) / 2
    xs = np.concatenate([fin, mids, [65520.0, -65520.0, 65519.99, 2.0**-25, -(2.0**-25),
                                     3 * 2.0**-26, 2.0**-26, 1e-30, 1e30]]).astype(F32)
    xs = np.concatenate([xs, np.nextafter(xs, np.inf, dtype=F32), np.nextafter(xs, -np.inf, dtype=F32),
                         np.array([np.inf, -np.inf, np.nan, -0.0], F32),
                         np.random.default_rng(10).integers(0, 1 << 32, 200_000, dtype=np.uint64)
                         .astype(np.uint32).view(F32)])
    y = np.empty(xs.size, np.uint16)
    lib.seqmm_f2h(xs.ctypes.data, y.ctypes.data, xs.size)
    with np.errstate(over="ignore", invalid="ignore"):
        want16 = xs.astype(F16)
    nan = np.isnan(want16)
    assert np.array_equal(np.isnan(y.view(F16)), nan)
    assert np.array_equal(y[~nan], want16.view(np.uint16)[~nan])


# ---------------------------------------------------------------- building and disabling

def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_NATIVE", "0")
    seqmm._reset()
    try:
        assert not seqmm.available()
        assert "KTIR_MODELS_NATIVE" in seqmm.unavailable_reason()
        with pytest.raises(RuntimeError, match="unavailable"):
            seqmm.kloop(np.zeros((1, 1, 2), F16), np.zeros((1, 2, 1), F16), None, trips=1, kb=2,
                        transpose_b=False, part_dtype=F16, acc_dtype=F16)
    finally:
        monkeypatch.undo()
        seqmm._reset()


def test_no_compiler_is_a_reason_not_an_error(monkeypatch, tmp_path):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("KTIR_MODELS_NATIVE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    seqmm._reset()
    try:
        assert not seqmm.available()
        assert "no C compiler" in seqmm.unavailable_reason()
    finally:
        monkeypatch.undo()
        seqmm._reset()


def test_broken_compiler_is_a_reason_not_an_error(monkeypatch, tmp_path):
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\necho 'fakecc: cannot compile' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KTIR_MODELS_NATIVE", raising=False)
    seqmm._reset()
    try:
        assert not seqmm.available()
        assert "cannot compile" in seqmm.unavailable_reason()
        assert not list((tmp_path / "cache" / "native").glob("*seqmm*"))  # no partial library
    finally:
        monkeypatch.undo()
        seqmm._reset()


@needs_native
def test_build_goes_to_the_cache_and_is_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path))
    monkeypatch.delenv("KTIR_MODELS_NATIVE", raising=False)
    seqmm._reset()
    try:
        assert seqmm.available()
        built = sorted((tmp_path / "native").iterdir())
        assert len(built) == 1 and built[0].name.startswith("seqmm-")
        stamp = built[0].stat().st_mtime_ns
        seqmm._reset()
        assert seqmm.available()
        assert sorted((tmp_path / "native").iterdir()) == built
        assert built[0].stat().st_mtime_ns == stamp
    finally:
        monkeypatch.undo()
        seqmm._reset()


@needs_native
@pytest.mark.parametrize("M", [1, 2, 3, 7, 8, 9, 13, 32])
def test_kernel_row_major_item_widths_and_row_tiles(path, M):
    """Rows over a row-major b = [K, N], f16 chains and f32 sums: row counts that leave 1-3 rows
    after a full many-rows tile (split into two smaller tiles), item widths with a 16-column
    last tile (16, 48, 80: read in place) or a tail inside one (45: copied), trips of small and
    large kb, with and without a given accumulator, on one and two threads: the definition's
    bits."""
    rng = np.random.default_rng(12)
    for N, (trips, kb), with_acc, dt in itertools.product(
            (16, 45, 48, 80, 64), [(1, 576), (4, 36), (36, 4), (3, 130)], (False, True),
            (F16, F32)):
        a, b = operands(rng, 2, M, N, trips, kb, False)
        acc = accumulator(rng, 2, M, N, dt) if with_acc else None
        for threads in (1, 2):
            check(a, b, acc, threads=threads, trips=trips, kb=kb, transpose_b=False,
                  part_dtype=dt, acc_dtype=dt)


@needs_native
@pytest.mark.parametrize("M", [16, 32, 48])
def test_kernel_many_rows_every_part_and_acc_dtype(path, M):
    """Prefill rows over b = [N, K] (the GEMMs of our emitted prefill programs: f32 partials
    into an f32 accumulator that is given, all of K in one trip) run the m-vector layout on the
    FP16 path for every (part, acc) pair, not only f16 chains; each must match the definition."""
    rng = np.random.default_rng(11)
    for (trips, kb), part, accd, with_acc, kind in itertools.product(
            [(1, 100), (3, 32), (5, 7), (2, 72)], (F16, F32), (F16, F32), (False, True),
            ("normal", "special")):
        a, b = operands(rng, 2, M, 45, trips, kb, True, kind)
        acc = accumulator(rng, 2, M, 45, accd, kind) if with_acc else None
        for threads in (1, 2):
            check(a, b, acc, threads=threads, trips=trips, kb=kb, transpose_b=True,
                  part_dtype=part, acc_dtype=accd)
    # one A shared by every core (stride 0), as a batched grid passes it
    a, b = operands(rng, 3, M, 70, 1, 160, True)
    acc = accumulator(rng, 3, M, 70, F32)
    check(a[:1], b, acc, trips=1, kb=160, transpose_b=True, part_dtype=F32, acc_dtype=F32)


@needs_native
@pytest.mark.parametrize("M", [1, 2, 32])
def test_kernel_grouped_output_and_acc_in_place(path, M):
    """``groups``: the C items' results side by side in C // groups outputs, the acc read where
    it lies (shared by every output, or one per output), the same bits as the ungrouped call
    with the same values moved into its layout; every dtype pair, nn and nt, both thread
    counts, item widths that are and are not a multiple of 16."""
    rng = np.random.default_rng(40 + M)
    for (Cg, G, N, trips, kb, nt) in ((3, 4, 64, 2, 40, False), (2, 3, 48, 1, 96, True),
                                      (1, 5, 20, 3, 8, False), (4, 2, 16, 1, 1100, True)):
        C = Cg * G
        a, b = operands(rng, C, M, N, trips, kb, nt)
        a = np.broadcast_to(a[:1], a.shape)  # the blocked weights' shared rows
        for part, acc_t, shared in itertools.product((F16, F32), (F16, F32),
                                                     (None, "one", "view", "each")):
            kw = dict(trips=trips, kb=kb, transpose_b=nt, part_dtype=part, acc_dtype=acc_t)
            total = None
            if shared is not None:
                total = accumulator(rng, Cg if shared == "each" else 1, M, G * N, acc_t)
            if shared == "view":  # one block seen by every output (stride 0)
                total = np.broadcast_to(total, (Cg, M, G * N))
            plain_acc = None if total is None else np.ascontiguousarray(
                np.broadcast_to(total, (Cg, M, G * N)).reshape(Cg, M, G, N)
                .transpose(0, 2, 1, 3).reshape(C, M, N))
            want = seqmm.kloop_reference(a, b, plain_acc, **kw)
            want = np.ascontiguousarray(want.reshape(Cg, G, M, N).transpose(0, 2, 1, 3)
                                        .reshape(Cg, M, G * N))
            for threads in (1, 2, 2):  # the second call of a signature: its kept form
                got = seqmm.kloop(a, b, total, threads=threads, groups=G, **kw)
                assert_same_bits(got, want)
    with pytest.raises(ValueError, match="does not divide"):
        seqmm.kloop(a, b, None, groups=5, **kw)


@needs_native
@pytest.mark.parametrize("kind", ["normal", "ties", "special", "negzero"])
def test_kernel_small_blocks_many_rows(path, kind):
    """The lm_heads' shape: many rows (stacked cores, prefill rows) over small K blocks (kb 1, 2,
    4, 8), which the AVX2 path runs with the chained sum held in registers across a slab's trips
    (tile_r, 3-row tiles: row counts 1-3 per tile, column tails within a 16-column strip), over
    several slabs, for every (part, acc) pair, with and without an acc; each must match the
    definition."""
    rng = np.random.default_rng(31)
    for M, kb, N in [(32, 4, 45), (5, 2, 16), (4, 8, 70), (7, 1, 33)]:
        trips = max(1, 100 // kb)
        for part, accd, with_acc, transpose_b in itertools.product(
                (F16, F32), (F16, F32), (False, True), (False, True)):
            a, b = operands(rng, 2, M, N, trips, kb, transpose_b, kind)
            acc = accumulator(rng, 2, M, N, accd, kind) if with_acc else None
            check(a, b, acc, trips=trips, kb=kb, transpose_b=transpose_b, part_dtype=part,
                  acc_dtype=accd)
