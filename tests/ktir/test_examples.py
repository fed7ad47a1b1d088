"""Every ktir-examples kernel (33) runs on the emulator and matches numpy.

Each kernel gets a runner below, registered with ``@kernel(path)``: it places inputs the way the
kernel's own comments and code say (pointer arguments, or constant addresses in the kernel's
address unit), runs the whole grid, and compares what the kernel stored with a numpy reference of
what the kernel says it computes (tests/ktir/references/). Data-movement and exactly
representable arithmetic are compared bit for bit; float16 arithmetic with a tolerance justified
next to it.

A kernel that cannot run is listed, with the precise reason, in docs/corpus-coverage.md; the test
``test_not_running_list_is_the_documented_one`` checks that the kernels without a passing runner
are exactly that list, and each listed kernel has a runner that asserts it fails for the
documented reason (so a fix in the emulator shows up as a failing test, not a silent skip).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, corpus_missing_reason, corpus_path
from references import attention, ffn, gather, llama, rowwise
from references.tolerance import U16, assert_f16_gemm_close, assert_within

ktir = pytest.importorskip("ktir_models.ktir")

STICK = 128  # bytes per HBM stick
COVERAGE_DOC = REPO_ROOT / "docs" / "corpus-coverage.md"

# --------------------------------------------------------------------------------------------
# Registry

RUNNERS: dict[str, Callable[[Path], None]] = {}
# Kernels expected NOT to run: their runner asserts the failure; the reason is in the docs table.
EXPECTED_FAILURES: set[str] = set()


def kernel(rel_path: str, *, expected_failure: bool = False):
    """Register the runner of ``ktir-examples/<rel_path>``."""

    def register(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        assert rel_path not in RUNNERS, rel_path
        RUNNERS[rel_path] = fn
        if expected_failure:
            EXPECTED_FAILURES.add(rel_path)
        return fn

    return register


def examples_dir() -> Path:
    return corpus_path() / "ktir-examples"


# ktir-cpu's ring-reduce kernels reduce tensor<1x128xf16> partials to tensor<128xf16>: the
# dialect's verifier rejects that reshape (tests/ktir/test_corpus_parse.py asserts the verdict);
# they run under ktir-cpu's reading, the opt-in reshaping_reduce
RESHAPING_REDUCE = frozenset({"ktir/ring_reduce.mlir", "ktir/ring_reduce_inner_loop.mlir",
                              "latency/ring_reduce_multi_group.mlir"})


@functools.cache
def load_kernel(rel_path: str):
    module = ktir.load_module(examples_dir() / rel_path,
                              reshaping_reduce=rel_path in RESHAPING_REDUCE)
    (fn,) = module.functions.values()
    return fn


def rng_for(rel_path: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, rel_path)))


def run(rel_path: str, machine, args: dict) -> None:
    """Compile and run the kernel's function over its whole grid."""
    machine.compile(load_kernel(rel_path)).run(args)


def f16(a) -> np.ndarray:
    return np.asarray(a).astype(np.float16)


def exact_f16_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One correctly rounded f16 add is exactly round(a + b): the reference for bit-exact adds."""
    return (a.astype(np.float64) + b.astype(np.float64)).astype(a.dtype)


def dyadic(rng: np.random.Generator, shape, lo: int = -64, hi: int = 64, denom: int = 16) -> np.ndarray:
    """float16 values k/denom with small integer k: sums of a few of them are exact in f16, so
    reductions can be compared bit for bit whatever their association order."""
    return (rng.integers(lo, hi, size=shape) / denom).astype(np.float16)


def place_at(machine, address: int, unit: int, array: np.ndarray, name: str):
    """Put ``array`` in HBM at ``address`` counted in ``unit``-byte units (constant-address
    kernels); returns the buffer."""
    return machine.hbm.allocate_from(array, name=name, byte_address=address * unit)


def write_lx(machine, core: int, byte_offset: int, array: np.ndarray) -> None:
    """Preload ``array``'s bytes into core ``core``'s LX at ``byte_offset``."""
    machine.lx(core).write(byte_offset, array)


# --------------------------------------------------------------------------------------------
# ktir/


@kernel("ktir/ffn_swiglu.mlir")
def _ffn_swiglu(_: Path) -> None:
    rel = "ktir/ffn_swiglu.mlir"
    r = rng_for(rel)
    x = f16(r.standard_normal((1, 64)))
    wg, wu = (f16(r.standard_normal((64, 128)) / 8.0) for _ in range(2))
    wd = f16(r.standard_normal((128, 64)) / np.sqrt(128))
    m = ktir.Machine()
    bufs = [m.hbm.allocate_from(a, name=n) for a, n in ((x, "x"), (wg, "wg"), (wu, "wu"), (wd, "wd"))]
    out = m.hbm.allocate((1, 64), "float16", name="out")
    run(rel, m, [b.address for b in bufs] + [out.address])
    ref = ffn.swiglu_ffn_residual(x, wg, wu, wd)
    # Three one-shot f16 GEMMs (f32 accumulation, one rounding each) and a chain of five f16
    # elementwise ops: the hidden activations (~0.5) carry <= ~6u relative error, which the down
    # projection (|w| ~ 0.09, 128 terms) turns into <~ 1e-3 absolute; plus the residual add's
    # rounding u|y|. 4e-3 absolute + 2u relative leaves a few x margin.
    assert_within(out.array, ref, 4e-3 + 2 * U16 * np.abs(ref), rel)


@kernel("ktir/ffn_swiglu_4core.mlir")
def _ffn_swiglu_4core(_: Path) -> None:
    rel = "ktir/ffn_swiglu_4core.mlir"
    r = rng_for(rel)
    x = f16(r.standard_normal((4, 256)))
    wg, wu = (f16(r.standard_normal((256, 1024)) / 16.0) for _ in range(2))
    wd = f16(r.standard_normal((1024, 256)) / 32.0)
    m = ktir.Machine()
    bufs = [m.hbm.allocate_from(a, name=n) for a, n in ((x, "x"), (wg, "wg"), (wu, "wu"), (wd, "wd"))]
    out = m.hbm.allocate((4, 256), "float16", name="out")
    run(rel, m, [b.address for b in bufs] + [out.address])
    ref = ffn.swiglu_ffn_residual(x, wg, wu, wd)
    # As ffn_swiglu, plus the down projection split in 4 shards whose f16 partials (~0.5) are
    # summed across cores in f16 (3 more roundings, <= 3u * 0.5 ~ 1e-3).
    assert_within(out.array, ref, 6e-3 + 2 * U16 * np.abs(ref), rel)


@kernel("ktir/nested_yield.ktir")
def _nested_yield(_: Path) -> None:
    rel = "ktir/nested_yield.ktir"
    m = ktir.Machine()
    out = m.hbm.allocate((4,), "float32", name="out")
    run(rel, m, [out.address])
    # Two outer trips each add 1.0 to a zero accumulator; the inner loop's result is unused.
    np.testing.assert_array_equal(out.array, np.full(4, 2.0, np.float32))


@kernel("ktir/reduce_generic.mlir")
def _reduce_generic(_: Path) -> None:
    rel = "ktir/reduce_generic.mlir"
    data = dyadic(rng_for(rel), (1, 4))
    m = ktir.Machine()
    buf = m.hbm.allocate_from(data.copy(), name="arg0")
    run(rel, m, [buf.address])
    # In place: every element becomes the row sum (exact for dyadic inputs).
    np.testing.assert_array_equal(buf.array, np.full((1, 4), data.astype(np.float64).sum(), np.float16))


@kernel("ktir/reduce_multiop.mlir")
def _reduce_multiop(_: Path) -> None:
    rel = "ktir/reduce_multiop.mlir"
    data = f16(rng_for(rel).standard_normal((1, 8)))
    m = ktir.Machine()
    buf = m.hbm.allocate_from(data.copy(), name="arg0")
    run(rel, m, [buf.address])
    np.testing.assert_array_equal(buf.array, np.full((1, 8), data.max(), np.float16))


@kernel("ktir/ring_reduce.mlir")
def _ring_reduce(_: Path) -> None:
    rel = "ktir/ring_reduce.mlir"
    rows = dyadic(rng_for(rel), (4, 128))
    m = ktir.Machine()
    inp = m.hbm.allocate_from(rows, name="in")
    out = m.hbm.allocate((1, 128), "float16", name="out")
    run(rel, m, [inp.address, out.address])
    np.testing.assert_array_equal(out.array, rows.astype(np.float64).sum(axis=0, keepdims=True).astype(np.float16))


@kernel("ktir/ring_reduce_inner_loop.mlir")
def _ring_reduce_inner_loop(_: Path) -> None:
    rel = "ktir/ring_reduce_inner_loop.mlir"
    rows = dyadic(rng_for(rel), (4, 128))
    for n_iters in (0, 3):
        m = ktir.Machine()
        inp = m.hbm.allocate_from(rows, name="in")
        out = m.hbm.allocate_from(np.zeros((1, 128), np.float16), name="out")
        run(rel, m, [inp.address, out.address, n_iters])
        expected = n_iters * rows.astype(np.float64).sum(axis=0, keepdims=True)
        np.testing.assert_array_equal(out.array, expected.astype(np.float16), err_msg=f"n_iters={n_iters}")


@kernel("ktir/scalar_broadcast.mlir")
def _scalar_broadcast(_: Path) -> None:
    rel = "ktir/scalar_broadcast.mlir"
    value = np.array([[1.375]], np.float16)
    m = ktir.Machine()
    inp = m.hbm.allocate_from(value, name="in")
    out = m.hbm.allocate((4, 64), "float16", name="out")
    run(rel, m, [inp.address, out.address])
    np.testing.assert_array_equal(out.array, np.full((4, 64), 1.375, np.float16))


def softmax_inputs(r: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return f16(r.standard_normal(shape))


def softmax_bound(ref: np.ndarray, width: int) -> np.ndarray:
    """Tolerance of an all-f16 softmax row of ``width`` terms: x - max and exp are rounded once
    each (|x - max| <~ 7, so exp's argument carries <= 7u abs error => <= 8u relative on each
    numerator); the denominator is a sequential f16 sum whose roundings (<= ulp(S)/2 <= uS each,
    independent) add up to std <= u*S*sqrt(width/3); 5 sigma of that, plus the divide's u."""
    return (10.0 + 5.0 * np.sqrt(width / 3.0)) * U16 * np.abs(ref) + 1e-7


@kernel("ktir/softmax_wide.mlir")
def _softmax_wide(_: Path) -> None:
    rel = "ktir/softmax_wide.mlir"
    r = rng_for(rel)
    # Two rows of 262144: most entries sit far below the row max (exp underflows to 0 in f16),
    # 512 random ones are ~N(0, 1): the row sum stays small, so the f16 reduction order of the
    # 262144 terms does not matter and the tolerance can stay tight.
    x = np.full((2, 262144), -40.0)
    hot = r.choice(262144, size=(2, 512), replace=False)
    for row in range(2):
        x[row, hot[row]] = r.standard_normal(512)
    x = f16(x)
    m = ktir.Machine()
    inp = m.hbm.allocate_from(x, name="input")
    out = m.hbm.allocate((2, 262144), "float16", name="output")
    run(rel, m, [out.address, inp.address])
    ref = rowwise.softmax_rows(x)
    assert_within(out.array, ref, softmax_bound(ref, 512), rel)


# --------------------------------------------------------------------------------------------
# latency/


@kernel("latency/matmul_small.mlir")
def _matmul_small(_: Path) -> None:
    rel = "latency/matmul_small.mlir"
    r = rng_for(rel)
    a = f16(r.standard_normal((16, 64)))
    b = f16(r.standard_normal((64, 64)) / 8.0)
    m = ktir.Machine()
    ab, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    c = m.hbm.allocate((16, 64), "float16", name="c")
    run(rel, m, [ab.address, bb.address, c.address, 64, 8, 32, 32])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert_f16_gemm_close(c.array, ref, 2, rel)


@kernel("latency/ring_reduce_multi_group.mlir")
def _ring_reduce_multi_group(_: Path) -> None:
    rel = "latency/ring_reduce_multi_group.mlir"
    rows = dyadic(rng_for(rel), (16, 128))
    m = ktir.Machine()
    inp = m.hbm.allocate_from(rows, name="in")
    out = m.hbm.allocate((4, 128), "float16", name="out")
    run(rel, m, [inp.address, out.address])
    expected = rows.astype(np.float64).reshape(4, 4, 128).sum(axis=1).astype(np.float16)
    np.testing.assert_array_equal(out.array, expected)


def rmsnorm_example(rel: str) -> None:
    r = rng_for(rel)
    x = f16(r.standard_normal((256, 4096)))
    w = f16(1.0 + 0.1 * r.standard_normal((256, 4096)))
    eps = 1e-5
    m = ktir.Machine()
    xb, wb = m.hbm.allocate_from(x, name="X"), m.hbm.allocate_from(w, name="W")
    y = m.hbm.allocate((256, 4096), "float16", name="Y")
    run(rel, m, [xb.address, y.address, wb.address, 4096, np.float16(eps), 1024])
    ref = rowwise.rms_norm_rows(x, w, float(np.float16(eps)))
    # The sum of squares S (~4096) is accumulated in f16: a few per-lane adds, then a
    # sequential f16 reduction over 1024 lanes. Each rounding is uniform within +-ulp(s)/2 with
    # ulp(s) <= 2u*s, i.e. std <= u*s/sqrt(3), on a running sum s ~ S*k/1024: the total has std
    # <= u*S*sqrt(1024)/3 ~ 0.52% of S. rsqrt halves that (0.26%, 5 sigma 1.3%); the f16 mean,
    # +eps, rsqrt and the two multiplies add ~5u. So |err| <= 1.5% |ref| (+ a tiny floor).
    assert_within(y.array, ref, 0.015 * np.abs(ref) + 1e-4, rel)


@kernel("latency/rmsnorm_4core_2x2.mlir")
def _rmsnorm_2x2(_: Path) -> None:
    rmsnorm_example("latency/rmsnorm_4core_2x2.mlir")


@kernel("latency/rmsnorm_4core_4x1.mlir")
def _rmsnorm_4x1(_: Path) -> None:
    rmsnorm_example("latency/rmsnorm_4core_4x1.mlir")


@kernel("latency/rope_fwd_4x2.mlir")
def _rope_fwd(_: Path) -> None:
    rel = "latency/rope_fwd_4x2.mlir"
    r = rng_for(rel)
    heads, seq, dim = 40, 4096, 128
    x = f16(r.standard_normal((heads * seq, dim)))
    cos_full, sin_full = llama.rope_tables(np.arange(seq), dim, 500000.0)
    cos, sin = f16(cos_full[:, : dim // 2]), f16(sin_full[:, : dim // 2])  # [S, D/2] tables
    m = ktir.Machine()
    xb = m.hbm.allocate_from(x, name="x")
    cb, sb = m.hbm.allocate_from(cos, name="cos"), m.hbm.allocate_from(sin, name="sin")
    out = m.hbm.allocate((heads * seq, dim), "float16", name="out")
    run(rel, m, [xb.address, cb.address, sb.address, out.address])
    # Reference: the usual rotate-half RoPE with full-width tables (both halves equal), applied
    # to every head; row (h, s) of the flattened [H*S, D] input is head h at position s.
    tokens_major = x.reshape(heads, seq, dim).transpose(1, 0, 2).reshape(seq, heads * dim)
    full_cos, full_sin = np.concatenate([cos, cos], 1), np.concatenate([sin, sin], 1)
    ref = llama.rope(tokens_major, full_cos, full_sin, dim).reshape(seq, heads, dim)
    ref = ref.transpose(1, 0, 2).reshape(heads * seq, dim)
    got = out.array
    # Two f16 products and one f16 add per element: |err| < 2.01u(|x1 c| + |x2 s|), a hard bound
    # (see the scratchy RoPE nodes); with |c|, |s| <= 1 it is at most 2.01u(|x1| + |x2|).
    halves = np.abs(x.astype(np.float64))
    bound = 2.01 * U16 * (halves + np.concatenate([halves[:, dim // 2 :], halves[:, : dim // 2]], 1))
    assert_within(got, ref, bound + 1e-6, rel)


def softmax_small(rel: str) -> None:
    x = softmax_inputs(rng_for(rel), (64, 64))
    m = ktir.Machine()
    inp = m.hbm.allocate_from(x, name="input")
    out = m.hbm.allocate((64, 64), "float16", name="output")
    run(rel, m, [out.address, inp.address, 64])
    ref = rowwise.softmax_rows(x)
    assert_within(out.array, ref, softmax_bound(ref, 64), rel)


@kernel("latency/softmax_small.mlir")
def _softmax_small(_: Path) -> None:
    softmax_small("latency/softmax_small.mlir")


@kernel("latency/softmax_small_explicit.mlir")
def _softmax_small_explicit(_: Path) -> None:
    softmax_small("latency/softmax_small_explicit.mlir")


# --------------------------------------------------------------------------------------------
# rfc/


@kernel("rfc/add-with-control-flow.mlir")
def _add_with_control_flow(_: Path) -> None:
    rel = "rfc/add-with-control-flow.mlir"
    r = rng_for(rel)
    a, b = f16(r.standard_normal((96, 64))), f16(r.standard_normal((96, 64)))
    sentinel = np.full((96, 64), 7.0, np.float16)
    m = ktir.Machine()
    # Constant addresses 1024 / 12288 / 18432 in f16 elements (the reference convention): A, B
    # and C are disjoint (A ends at element 7168, B at 18432 where C starts).
    place_at(m, 1024, 2, a, "A")
    place_at(m, 12288, 2, b, "B")
    c = place_at(m, 18432, 2, sentinel.copy(), "C")
    run(rel, m, [])
    # No grid attribute: one core (tile id 0) adds rows 0..2 (tile_size = 3); the other rows of
    # C are untouched. (The header's "32 compute tiles" would need grid = [32].)
    expected = sentinel.copy()
    expected[:3] = exact_f16_add(a[:3], b[:3])
    np.testing.assert_array_equal(c.array, expected)


@kernel("rfc/distributed-view-copy.mlir")
def _distributed_view_copy(_: Path) -> None:
    rel = "rfc/distributed-view-copy.mlir"
    a = f16(rng_for(rel).standard_normal((192, 64)))
    m = ktir.Machine()
    place_at(m, 0, 2, a[:96].copy(), "A_HBM")
    # Rows 96..127 live column-major in core 0's LX at element 12288 with strides [1, 64]:
    # element (r, c) at r + 64 c, i.e. columns padded to 64 slots; rows 128..191 row-major in
    # core 1's LX at element 16384.
    lx0 = np.zeros((64, 64), np.float16)  # [column, slot]
    lx0[:, :32] = a[96:128].T
    write_lx(m, 0, 12288 * 2, lx0)
    write_lx(m, 1, 16384 * 2, a[128:])
    b = place_at(m, 24576, 2, np.zeros((192, 64), np.float16), "B")
    run(rel, m, [])
    np.testing.assert_array_equal(b.array, a)


@kernel("rfc/distributed-view-copy-dynamic.mlir")
def _distributed_view_copy_dynamic(_: Path) -> None:
    rel = "rfc/distributed-view-copy-dynamic.mlir"
    r = rng_for(rel)
    for s0 in (16, 32):  # 16: one tile straddles both partitions; 32: each tile in one
        a0, a1 = f16(r.standard_normal((64, s0))), f16(r.standard_normal((64, s0)))
        m = ktir.Machine()
        b0, b1 = m.hbm.allocate_from(a0, name="a0"), m.hbm.allocate_from(a1, name="a1")
        out = m.hbm.allocate((64, 2 * s0), "float16", name="b")
        run(rel, m, [b0.address, b1.address, out.address, np.int32(s0)])
        np.testing.assert_array_equal(out.array, np.concatenate([a0, a1], axis=1), err_msg=f"s0={s0}")


@kernel("rfc/distributed-view-copy-rowmerge-dynamic.mlir")
def _distributed_view_copy_rowmerge(_: Path) -> None:
    rel = "rfc/distributed-view-copy-rowmerge-dynamic.mlir"
    r = rng_for(rel)
    for s0 in (16, 48):
        a0, a1 = f16(r.standard_normal((64, s0))), f16(r.standard_normal((64, s0)))
        m = ktir.Machine()
        b0, b1 = m.hbm.allocate_from(a0, name="a0"), m.hbm.allocate_from(a1, name="a1")
        out = m.hbm.allocate((128, s0), "float16", name="b")
        run(rel, m, [b0.address, b1.address, out.address, np.int32(s0)])
        np.testing.assert_array_equal(out.array, np.concatenate([a0, a1], axis=0), err_msg=f"s0={s0}")


def stick_layout_tables(idx1: np.ndarray, idx2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the two [64, 64] i32 index views of the indirect rfc kernels really read.

    The kernels place IDX1 at stick 64 (byte 8192) and IDX2 at stick 128 (byte 16384), but a
    64x64 i32 table is 16 KiB (128 sticks): IDX1's rows 32..63 are IDX2's rows 0..31. Writing
    IDX1 and then IDX2 leaves IDX1's view reading ``idx1[:32]`` followed by ``idx2[:32]``.
    """
    return np.concatenate([idx1[:32], idx2[:32]]), idx2


def stick_machine():
    return ktir.Machine(address_unit=STICK)


def index_region(idx1: np.ndarray, idx2: np.ndarray) -> np.ndarray:
    """Bytes 8192..32768 (sticks 64..255) as the indirect rfc kernels see them before running:
    IDX1 written at byte 8192, then IDX2 at byte 16384 (overwriting IDX1's second half); Y
    (byte 24576, 8 KiB) is IDX2's second half."""
    raw = np.zeros((32768 - 8192) // 4, np.int32)
    raw[: 64 * 64] = idx1.reshape(-1)
    raw[2048 : 2048 + 64 * 64] = idx2.reshape(-1)
    return raw


def y_of(region) -> np.ndarray:
    """The [64, 64] f16 Y view (byte 24576) inside the index region (which starts at byte 8192)."""
    return region.array.view(np.float16)[(24576 - 8192) // 2 :].reshape(64, 64)


@kernel("rfc/indirect-access-copy.mlir")
def _indirect_access_copy(_: Path) -> None:
    rel = "rfc/indirect-access-copy.mlir"
    r = rng_for(rel)
    x = f16(r.standard_normal((64, 64)))
    idx1 = r.integers(0, 64, (64, 64)).astype(np.int32)
    idx2 = r.integers(0, 64, (64, 64)).astype(np.int32)
    m = stick_machine()
    place_at(m, 0, STICK, x, "X")
    # Y (stick 192 = byte 24576) overlaps IDX2's second half: one region holds the index
    # tables and Y.
    region = place_at(m, 64, STICK, index_region(idx1, idx2), "IDX1+IDX2+Y")
    run(rel, m, [])
    rows, cols = stick_layout_tables(idx1, idx2)
    np.testing.assert_array_equal(y_of(region), gather.gather_2d(x, rows, cols))


@kernel("rfc/indirect-scatter.mlir")
def _indirect_scatter(_: Path) -> None:
    rel = "rfc/indirect-scatter.mlir"
    x = f16(rng_for(rel).standard_normal((64, 64)))
    # Destinations must be distinct for a defined result. With the overlap (IDX1 rows 32..63 =
    # IDX2 rows 0..31) this choice makes (row, col) a permutation of the 64x64 grid:
    #   m < 32:  (idx1, idx2) = ((k - m) % 64, k)
    #   m >= 32: (idx2[m - 32, k], idx2[m, k]) = (k, (k + m) % 64)
    m_i, k_i = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    idx2 = np.where(m_i < 32, k_i, (k_i + m_i) % 64).astype(np.int32)
    idx1 = np.where(m_i < 32, (k_i - m_i) % 64, 0).astype(np.int32)
    rows, cols = stick_layout_tables(idx1, idx2)
    assert len({(int(a), int(b)) for a, b in zip(rows.ravel(), cols.ravel())}) == 64 * 64
    m = stick_machine()
    place_at(m, 0, STICK, x, "X")
    region = place_at(m, 64, STICK, index_region(idx1, idx2), "IDX1+IDX2+Y")
    run(rel, m, [])
    # Every Y element is written (the destinations are a permutation), so Y is fully defined.
    expected = gather.scatter_2d(np.zeros((64, 64), np.float16), rows, cols, x)
    np.testing.assert_array_equal(y_of(region), expected)


PAGED_LX = 64 * 1024 * 1024  # room for the 16 MiB (4x8x2048x128 f16) data tile
PAGES, PAGE_ELEMS = 10000, 8 * 64 * 128


def page_table(r: np.random.Generator) -> np.ndarray:
    return r.choice(PAGES, size=(4, 32), replace=False).astype(np.int32)


def paged_store(m, byte_address: int, name: str):
    """The whole 10000-page tensor as one region: np.zeros is lazily mapped, so only the pages a
    test writes or the kernel touches cost memory. (The emulator wants the view's base, page 0,
    backed by a region even though the kernel never touches it.)"""
    return place_at(m, byte_address, 1, np.zeros((PAGES, 8, 64, 128), np.float16), name)


def run_paged_copy(ids: np.ndarray, pages: dict[int, np.ndarray], lx_capacity: int) -> np.ndarray:
    """Run paged-tensor-copy at its byte addresses; return Y [4, 2048, 8, 128]."""
    m = ktir.Machine(address_unit=1, lx_capacity=lx_capacity)
    x = paged_store(m, 30_000_000, "X")
    for p, page in pages.items():
        x.array[p] = page
    # Idx (byte 20M) lies inside Y (bytes [10M, 26.78M)): one region holds both.
    y_and_idx = np.zeros(4 * 2048 * 8 * 128, np.float16)
    idx_offset = 20_000_000 - 10_000_000  # Idx's byte offset inside Y
    y_and_idx.view(np.uint8)[idx_offset : idx_offset + ids.nbytes] = ids.view(np.uint8).ravel()
    region = place_at(m, 10_000_000, 1, y_and_idx, "Y+Idx")
    run("rfc/paged-tensor-copy.mlir", m, [])
    return region.array.reshape(4, 2048, 8, 128)


@kernel("rfc/paged-tensor-copy.mlir", expected_failure=True)
def _paged_tensor_copy(_: Path) -> None:
    rel = "rfc/paged-tensor-copy.mlir"
    r = rng_for(rel)
    ids = page_table(r)
    pages = {int(p): f16(r.standard_normal((8, 64, 128))) for p in ids.ravel()}
    # As written it needs a 16 MiB data tile in a 2 MiB LX: the emulator must refuse it...
    with pytest.raises(ktir.EmulationFault, match="LX"):
        run_paged_copy(ids, pages, lx_capacity=2 * 1024 * 1024)
    # ...and with a large enough LX it must copy exactly.
    y = run_paged_copy(ids, pages, lx_capacity=PAGED_LX)
    np.testing.assert_array_equal(y, gather.paged_to_contiguous(pages, ids, 64))


def run_paged_write(ids: np.ndarray, x: np.ndarray, lx_capacity: int) -> np.ndarray:
    """Run paged-tensor-write at its byte addresses; return the paged Y [10000, 8, 64, 128]."""
    m = ktir.Machine(address_unit=1, lx_capacity=lx_capacity)
    place_at(m, 10_000_000, 1, x, "X")
    place_at(m, 30_000_000, 1, ids, "Idx")
    y = paged_store(m, 40_000_000, "Y")
    run("rfc/paged-tensor-write.mlir", m, [])
    return y.array


@kernel("rfc/paged-tensor-write.mlir", expected_failure=True)
def _paged_tensor_write(_: Path) -> None:
    rel = "rfc/paged-tensor-write.mlir"
    r = rng_for(rel)
    ids = page_table(r)
    x = f16(r.standard_normal((4, 2048, 8, 128)))
    with pytest.raises(ktir.EmulationFault, match="LX"):
        run_paged_write(ids, x, lx_capacity=2 * 1024 * 1024)
    y = run_paged_write(ids, x, lx_capacity=PAGED_LX)
    expected = gather.contiguous_to_pages(x, ids, 64)
    for p, page in expected.items():
        np.testing.assert_array_equal(y[p], page, err_msg=f"page {p}")
    # Nothing else was written: the other 9872 pages are still zero.
    assert np.count_nonzero(y) == sum(np.count_nonzero(page) for page in expected.values())


# --------------------------------------------------------------------------------------------
# sdsc/


@kernel("sdsc/sdpa_pv_ksplit.mlir")
def _sdpa_pv_ksplit(_: Path) -> None:
    rel = "sdsc/sdpa_pv_ksplit.mlir"
    r = rng_for(rel)
    p = f16(rowwise.softmax_rows(r.standard_normal((1, 8192))))  # attention probabilities
    v = f16(r.standard_normal((8192, 128)))
    m = ktir.Machine()
    pb, vb = m.hbm.allocate_from(p, name="a"), m.hbm.allocate_from(v, name="b")
    c = m.hbm.allocate((1, 128), "float16", name="c")
    run(rel, m, [pb.address, vb.address, c.address])
    ref = p.astype(np.float64) @ v.astype(np.float64)
    # 16 per-core partial products (each one f16 rounding) folded in f16 across cores (15 more
    # roundings): the K-blocked GEMM error model with 16 steps.
    assert_f16_gemm_close(c.array, ref, 16, rel)


# --------------------------------------------------------------------------------------------
# triton-ktir/


@kernel("triton-ktir/indexed_add.mlir")
def _indexed_add(_: Path) -> None:
    rel = "triton-ktir/indexed_add.mlir"
    r = rng_for(rel)
    x = f16(r.standard_normal((128, 64, 8, 128)))
    y = f16(r.standard_normal((2, 32, 8, 128)))
    index = np.array([97, 5], np.int64)
    m = ktir.Machine()
    xb, yb, ib = (m.hbm.allocate_from(a, name=n) for a, n in ((x, "x"), (y, "y"), (index, "index")))
    out = m.hbm.allocate((2, 32, 8, 128), "float16", name="out")
    run(rel, m, [xb.address, yb.address, ib.address, out.address, 0])
    # out[g0, d1, g1, :] = x[index[g0], dim1_start + d1, g1, :] + y[g0, d1, g1, :], dim1_start = 0
    # (y has only 32 rows in dim 1, so 0 is the only start that stays in bounds).
    np.testing.assert_array_equal(out.array, exact_f16_add(x[index, :32], y))


@kernel("triton-ktir/layernorm_fwd_ktir.mlir")
def _layernorm(_: Path) -> None:
    rel = "triton-ktir/layernorm_fwd_ktir.mlir"
    r = rng_for(rel)
    rows, cols = 1151, 8192
    x = f16(0.5 + r.standard_normal((rows, cols)))
    w = f16(1.0 + 0.1 * r.standard_normal((rows, cols)))
    bias = f16(0.1 * r.standard_normal((rows, cols)))
    eps = np.float16(1e-5)
    m = ktir.Machine()
    xb, wb, bb = (m.hbm.allocate_from(a, name=n) for a, n in ((x, "X"), (w, "W"), (bias, "B")))
    y = m.hbm.allocate((rows, cols), "float16", name="Y")
    mean = m.hbm.allocate((rows,), "float16", name="Mean")
    rstd = m.hbm.allocate((rows,), "float16", name="Rstd")
    run(rel, m, [xb.address, y.address, wb.address, bb.address, mean.address, rstd.address, cols, eps, 1024])
    ref_y, ref_mean, ref_rstd = rowwise.layer_norm_rows(x, w, bias, float(eps))
    # Sums of 8192 terms accumulated in f16 (8 per lane, then 1024 lanes sequentially):
    # sum(x) ~ 4096 +- 90 has rounding std ~ sqrt(1024/3)*ulp(4096)/sqrt(12) ~ 0.7 (5 sigma 3.4,
    # i.e. 4e-4 on the mean), sum((x - mean)^2) ~ 8192 has ~ 0.45% std (rstd: 0.23%, 5 sigma
    # 1.2%). mean and rstd are stored as f16 (u relative).
    assert_within(mean.array, ref_mean, 1e-3 + U16 * np.abs(ref_mean), f"{rel} Mean")
    assert_within(rstd.array, ref_rstd, 0.012 * np.abs(ref_rstd), f"{rel} Rstd")
    # y = (x - mean) * rstd * w + b: x - mean is off by the mean error (<= 1e-3), rstd by 1.2%,
    # then four f16 roundings of values <= |x_hat w| + |b|.
    x_hat_w = np.abs((x.astype(np.float64) - ref_mean[:, None]) * ref_rstd[:, None] * w)
    bound = 0.012 * x_hat_w + 2e-3 + 4 * U16 * (x_hat_w + np.abs(bias.astype(np.float64)))
    assert_within(y.array, ref_y, bound, f"{rel} Y")


@kernel("triton-ktir/matmul_fwd_ktir.mlir")
def _matmul_fwd(_: Path) -> None:
    rel = "triton-ktir/matmul_fwd_ktir.mlir"
    r = rng_for(rel)
    a = f16(r.standard_normal((64, 2048)))
    b = f16(r.standard_normal((2048, 8192)) / np.sqrt(2048))
    m = ktir.Machine()
    ab, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    c = m.hbm.allocate((64, 8192), "float16", name="c")
    run(rel, m, [ab.address, bb.address, c.address, 2048, 32, 512, 128])
    ref = a.astype(np.float32) @ b.astype(np.float32)
    assert_f16_gemm_close(c.array, ref.astype(np.float64), 2048 // 128, rel)


@kernel("triton-ktir/paged_attention.mlir")
def _paged_attention(_: Path) -> None:
    rel = "triton-ktir/paged_attention.mlir"
    r = rng_for(rel)
    query = f16(r.standard_normal((8, 32, 128)))
    key_cache = f16(r.standard_normal((64, 16, 8, 128)))
    value_cache = f16(r.standard_normal((64, 16, 8, 128)))
    block_table = r.permutation(64)[:16].astype(np.int32).reshape(1, 16)
    scale = np.float32(1.0 / np.sqrt(128.0))
    m = ktir.Machine()
    out = m.hbm.allocate((8, 32, 128), "float16", name="output")
    qb, kb, vb, tb = (
        m.hbm.allocate_from(a, name=n)
        for a, n in ((query, "query"), (key_cache, "key_cache"), (value_cache, "value_cache"), (block_table, "block_tables"))
    )
    # 8 new tokens after a 120-token context: seq_len 128 = 8 KV tiles of 16.
    run(rel, m, [out.address, qb.address, kb.address, vb.address, tb.address, 0, 0, 8, 120, scale])
    ref = attention.paged_decode_attention(query, key_cache, value_cache, block_table[0], 120, float(scale))
    # All arithmetic is f32 (errors ~1e-6 relative); only the final truncf rounds to f16.
    assert_within(out.array, ref, U16 * np.abs(ref) + 1e-4, rel)


@kernel("triton-ktir/sdpa_2d.mlir")
def _sdpa_2d(_: Path) -> None:
    rel = "triton-ktir/sdpa_2d.mlir"
    r = rng_for(rel)
    q, k, v = (f16(r.standard_normal((32, 64))) for _ in range(3))
    m = ktir.Machine()
    qb, kb, vb = (m.hbm.allocate_from(a, name=n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    out = m.hbm.allocate((32, 64), "float16", name="out")
    run(rel, m, [qb.address, kb.address, vb.address, out.address])
    ref = attention.sdpa(q, k, v, 0.125)
    # All-f16 attention as in the scratchy attention nodes: scores q.k/8 (|s| <~ 4) rounded
    # twice (<= 4e-3 abs, i.e. <= 0.4% on each exp), f16 exp, a sequential f16 sum of 32
    # weights and a divide; the output error, a random-signed mix of weight errors times
    # values ~N(0, 1), is ~1e-3 (observed max 9e-4): 6e-3 + 0.6% keeps a ~5x margin.
    assert_within(out.array, ref, 6e-3 + 6e-3 * np.abs(ref), rel)


@kernel("triton-ktir/softmax_fwd_ktir.mlir")
def _softmax_fwd(_: Path) -> None:
    rel = "triton-ktir/softmax_fwd_ktir.mlir"
    x = softmax_inputs(rng_for(rel), (4096, 1024))
    m = ktir.Machine()
    inp = m.hbm.allocate_from(x, name="input")
    out = m.hbm.allocate((4096, 1024), "float16", name="output")
    run(rel, m, [out.address, inp.address, 4096])
    ref = rowwise.softmax_rows(x)
    assert_within(out.array, ref, softmax_bound(ref, 1024), rel)


@kernel("triton-ktir/vector_add_dynamic_ktir.mlir")
def _vector_add_dynamic(_: Path) -> None:
    rel = "triton-ktir/vector_add_dynamic_ktir.mlir"
    r = rng_for(rel)
    x = r.standard_normal(1024).astype(np.float32)
    y = r.standard_normal(1024).astype(np.float32)
    m = ktir.Machine()
    xb, yb = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(y, name="y")
    out = m.hbm.allocate((1024,), "float32", name="out")
    run(rel, m, [xb.address, yb.address, out.address, np.int32(1024)])
    np.testing.assert_array_equal(out.array, x + y)
    # The header promises masking when n_elements < 1024 (tensor-descriptor semantics): the
    # 24 points past n are neither read nor stored (tests/ktir/test_masked_access.py: more n)
    m = ktir.Machine()
    xb, yb = m.hbm.allocate_from(x[:1000].copy(), name="x"), m.hbm.allocate_from(y[:1000].copy(), name="y")
    out = m.hbm.allocate((1000,), "float32", name="out")
    run(rel, m, [xb.address, yb.address, out.address, np.int32(1000)])
    np.testing.assert_array_equal(out.array, x[:1000] + y[:1000])


@kernel("triton-ktir/vector_add_ktir.mlir")
def _vector_add(_: Path) -> None:
    rel = "triton-ktir/vector_add_ktir.mlir"
    r = rng_for(rel)
    x, y = f16(r.standard_normal(4096)), f16(r.standard_normal(4096))
    m = ktir.Machine()
    xb, yb = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(y, name="y")
    out = m.hbm.allocate((4096,), "float16", name="out")
    run(rel, m, [xb.address, yb.address, out.address, 128])
    np.testing.assert_array_equal(out.array, exact_f16_add(x, y))


# --------------------------------------------------------------------------------------------
# The tests

SLOW_KERNELS = {
    "latency/rope_fwd_4x2.mlir",
    "triton-ktir/layernorm_fwd_ktir.mlir",
    "triton-ktir/softmax_fwd_ktir.mlir",
    "rfc/paged-tensor-copy.mlir",
    "rfc/paged-tensor-write.mlir",
}


def example_files() -> list[str]:
    root = examples_dir()
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in (".mlir", ".ktir") and p.is_file()
    )


def runner_cases() -> list:
    reason = corpus_missing_reason()
    if reason is not None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    return [
        pytest.param(rel, id=rel, marks=[pytest.mark.slow] if rel in SLOW_KERNELS else [])
        for rel in sorted(RUNNERS)
    ]


@pytest.mark.parametrize("rel_path", runner_cases())
def test_example_kernel(rel_path: str) -> None:
    runner = RUNNERS[rel_path]
    runner(examples_dir() / rel_path)


def documented_not_running() -> dict[str, str]:
    """The kernels docs/corpus-coverage.md lists under "Kernels that do not run"."""
    text = COVERAGE_DOC.read_text()
    section = text.split("## Kernels that do not run", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", section, flags=re.MULTILINE)
    return {path: reason.strip() for path, reason in rows}


def test_every_example_has_a_runner(corpus_dir: Path) -> None:
    files = example_files()
    assert len(files) == 33, files
    assert sorted(RUNNERS) == files, "a kernel without a runner would be silently skipped"


def test_not_running_list_is_the_documented_one(corpus_dir: Path) -> None:
    assert documented_not_running().keys() == EXPECTED_FAILURES, (
        "docs/corpus-coverage.md 'Kernels that do not run' must list exactly the kernels whose "
        "runner expects a failure"
    )
