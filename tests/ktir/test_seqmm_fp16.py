"""The native K-loop kernel on small K blocks with f16 partials and an f16 accumulator (the
scratchy prefill lm_head: trips=144 x kb=4 over [32 x 576] @ [16384 x 576]^T).

Where the CPU has AVX512-FP16 the kernel closes such trips with an f16 add and, for transpose_b
with 16+ rows, runs the m-vector layout (seqmm.c); elsewhere these cases run the other paths.
Every case is compared BIT FOR BIT (any NaN matches any NaN) with kloop_reference, on the default
path and with the path capped below FP16 (KTIR_MODELS_NATIVE=avx512), and the data is checked to
depend on the per-trip rounding, so a kernel that skipped or reordered a rounding would fail.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

from ktir_models.ktir.backends import seqmm

F16, F32 = np.float16, np.float32

needs_native = pytest.mark.skipif(not seqmm.available(),
                                  reason=f"native kernel unavailable: {seqmm.unavailable_reason()}")


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "NaN positions differ"
    bad = (got.view(np.uint16) != want.view(np.uint16)) & ~nan
    assert not bad.any(), (f"{int(bad.sum())} of {bad.size} differ, first at "
                           f"{np.argwhere(bad)[0].tolist()}: {got[bad][:4]} vs {want[bad][:4]}")


@pytest.fixture(params=["default", "avx512"])
def path(request, monkeypatch):
    """The default path (AVX512-FP16 where the CPU has it) and the path capped below it."""
    if request.param != "default":
        monkeypatch.setenv("KTIR_MODELS_NATIVE", request.param)
    seqmm._reset()
    assert seqmm.available()
    yield request.param
    monkeypatch.undo()
    seqmm._reset()


def _values(rng, shape, kind):
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "ties":   # coarse dyadic values: partial and chained sums often land on ties
        return rng.choice([1.0, -1.0, 2.0, 0.5, -0.5, 1.5, 2.0**-11, 3 * 2.0**-12, 1024.0], size=shape)
    if kind == "subnormal":
        return rng.standard_normal(shape) * 2.0**-7
    if kind == "overflow":  # partials and chained sums past 65504: +-inf, and inf - inf = NaN
        return rng.standard_normal(shape) * 60
    if kind == "special":
        x = rng.standard_normal(shape)
        x.flat[::11] = np.inf
        x.flat[5::13] = -np.inf
        x.flat[7::17] = np.nan
        x.flat[2::23] = -0.0
        return x
    if kind == "negzero":  # tiny negative products: partials round to -0.0
        return -np.abs(rng.standard_normal(shape)) * 2.0**-14
    raise ValueError(kind)


def _case(rng, C, M, N, trips, kb, kind, acc):
    K = trips * kb
    a = _values(rng, (C, M, K), kind).astype(F16)
    b = _values(rng, (C, N, K), "normal" if kind == "negzero" else kind)
    if kind == "negzero":
        b = np.abs(b) * 2.0**-14
    b = b.astype(F16)
    if acc == "zero":
        accv = np.zeros((C, M, N), F16)
    elif acc == "random":
        accv = (rng.standard_normal((C, M, N)) * 4).astype(F16)
    else:
        accv = None
    return a, b, accv


def _check(a, b, acc, threads=None, **kw):
    kw = dict(transpose_b=True, part_dtype=F16, acc_dtype=F16, **kw)
    want = seqmm.kloop_reference(a, b, acc, **kw)
    got = seqmm.kloop(a, b, acc, threads=threads, **kw)
    _same_bits(got, want)
    return got, want


def _unrounded(a, b, acc, trips, kb):
    """The same sums with no rounding between trips (f32 throughout, one rounding at the end)."""
    s = seqmm.kloop_reference(a, b, None if acc is None else acc.astype(F32), trips=1,
                              kb=trips * kb, transpose_b=True, part_dtype=F32, acc_dtype=F32)
    with np.errstate(over="ignore"):
        return s.astype(F16)


@needs_native
@pytest.mark.parametrize("M", [1, 2, 32])
@pytest.mark.parametrize("kind", ["normal", "ties", "subnormal", "overflow", "special", "negzero"])
def test_small_blocks_value_kinds(path, kind, M):
    """kb 1, 2, 4, 8 (unrolled trips), 3 and 5 (trips across slab ends), 64 (trips spanning
    slabs); 32 rows (the prefill lm_head's stacked cores: the m-vector layout) and 1 or 2 rows
    (decode: the few-rows tiles), with and without an accumulator."""
    rng = np.random.default_rng(21)
    finite = nonfinite = False
    for (trips, kb), acc in itertools.product([(40, 1), (36, 2), (20, 4), (9, 8), (23, 3), (13, 5), (2, 64)],
                                              ("none", "zero", "random")):
        a, b, accv = _case(rng, 1, M, 45 if M > 2 else 160, trips, kb, kind, acc)
        got, want = _check(a, b, accv, trips=trips, kb=kb)
        if kind in ("normal", "ties") and trips > 1:
            # the data depends on the per-trip rounding: skipping it changes the bits
            assert not np.array_equal(_unrounded(a, b, accv, trips, kb).view(np.uint16), want.view(np.uint16))
        finite |= bool(np.isfinite(want).any())
        nonfinite |= bool((~np.isfinite(want)).any())
    if kind == "overflow":   # some outputs overflowed (inf, or NaN from inf - inf), not all
        assert finite and nonfinite


@needs_native
@pytest.mark.parametrize("M", [16, 17, 24, 30, 31, 32, 33, 48, 62, 70])
def test_small_blocks_rows_and_column_tails(path, M):
    """Row counts around the 16-row vectors and 32-row blocks (the m-vector layout runs where at
    most 1/8 of the rows it computes are padding: 16, 30, 31, 32, 48, 62, 70; the others run the
    n-vector tiles), column counts around the 16-column store blocks and the 6-column tiles, K
    with a short last slab (K % 32 != 0)."""
    rng = np.random.default_rng(22)
    for N, (trips, kb) in itertools.product((1, 5, 6, 7, 16, 17, 100, 131), [(12, 4), (7, 5)]):
        a, b, acc = _case(rng, 1, M, N, trips, kb, "normal", "random")
        _check(a, b, acc, trips=trips, kb=kb)


@needs_native
def test_lm_head_as_the_tape_calls_it(path):
    """The stacked cores' A rows as one [1, 32, K] view (stride 0 over c) and a [1, N, K] slice of
    a bigger weight, a zero f16 accumulator, trips x kb = 144 x 4 (the lm_head's K = 576), for 1
    and 2 threads (the threads split columns, never k: the same bits)."""
    rng = np.random.default_rng(23)
    K, N = 576, 700
    weight = (rng.standard_normal((3 * N + 5, K)) * 0.05).astype(F16)
    a_mem = rng.standard_normal((32, K)).astype(F16)
    a = np.lib.stride_tricks.as_strided(a_mem, shape=(1, 32, K), strides=(0,) + a_mem.strides)
    acc = np.zeros((1, 32, N), F16)
    for part in range(3):
        b = weight[5 + part * N:5 + (part + 1) * N][None]
        one, _ = _check(a, b, acc, threads=1, trips=144, kb=4)
        two, _ = _check(a, b, acc, threads=2, trips=144, kb=4)
        assert np.array_equal(one.view(np.uint16), two.view(np.uint16))


@needs_native
def test_small_blocks_strided_and_batched_operands(path):
    """Several c's (a converted per c), a shared by every c (stride 0), a read with k strides
    (a transposed store), a weight with gaps between its rows, 1-3 threads."""
    rng = np.random.default_rng(24)
    C, M, N, trips, kb = 3, 20, 70, 10, 4
    K = trips * kb
    kw = dict(trips=trips, kb=kb)
    a, b, acc = _case(rng, C, M, N, trips, kb, "normal", "random")
    for threads in (1, 2, 3):
        _check(a, b, acc, threads=threads, **kw)
    _check(np.broadcast_to(a[:1], (C, M, K)), b, acc, **kw)
    a_t = np.ascontiguousarray(np.swapaxes(a, 1, 2))          # [C, K, M] storage
    _check(np.swapaxes(a_t, 1, 2), b, None, **kw)               # k stride M, m unit
    store = rng.standard_normal((C, 2 * N, K + 8)).astype(F16)
    _check(a, store[:, ::2, 4:4 + K], acc, **kw)                 # rows 2 (K + 8) apart


@needs_native
def test_f16_chain_add_equals_rounded_f32_sum_on_many_pairs(path):
    """The FP16 closing replaces round_f16(f32(r) + f32(p)) by one f16 add of r and p. With kb = 1
    and two trips every output is round_f16(B0 * a + B1 * a) of two exact products; a = +-2^e
    keeps them exact f16 values, and the f16 bit patterns of B cover the whole range (subnormals,
    ties, overflow, infinities, NaN): 32 rows x 65536 pairs checked against the numpy form."""
    rng = np.random.default_rng(25)
    N = 65536
    bits = rng.integers(0, 1 << 16, size=(1, N, 2), dtype=np.uint16)
    bits[0, :256, 0] = np.arange(256, dtype=np.uint16) * 0x101    # some fixed patterns too
    b = bits.view(F16)
    scales = np.array([1, -1, 2, -2, 0.5, -0.5, 4, 0.25] * 4, F32)
    a = np.repeat(scales[None, :, None], 2, axis=2).astype(F16)   # [1, 32, 2]: the same a twice
    got = seqmm.kloop(a, b, None, trips=2, kb=1, transpose_b=True, part_dtype=F16, acc_dtype=F16)
    with np.errstate(all="ignore"):
        p0 = (a[0, :, :1].astype(F32) * b[0, None, :, 0].astype(F32)).astype(F16)
        p1 = (a[0, :, 1:].astype(F32) * b[0, None, :, 1].astype(F32)).astype(F16)
        want = (p0.astype(F32) + p1.astype(F32)).astype(F16)[None]
    _same_bits(got, want)


@needs_native
def test_fp16_path_is_used_where_the_cpu_has_it():
    """The default path is the best the CPU has; capping it below FP16 changes nothing in the
    results (checked above) and only the path level here."""
    seqmm._reset()
    lib = seqmm._library().lib
    lib.seqmm_simd_level.argtypes = [ctypes.c_int]
    lib.seqmm_simd_level.restype = ctypes.c_int
    best = lib.seqmm_simd_level(0)
    assert lib.seqmm_simd_level(3) == min(best, 2)
    assert best in (0, 1, 2, 3)
