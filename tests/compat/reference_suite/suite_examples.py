"""A harness in the reference interpreter's style over the ktir-examples kernels.

It imports only ``ktir_cpu`` (the reference's package name) and the numpy references; it runs
on our emulator once ``ktir_models.compat.install_as_ktir_cpu()`` has run, or under
``pytest -p ktir_models.compat.pytest_plugin`` (tests/compat/test_reference_style.py does both).
The file name keeps it out of ordinary collection: without the install ``ktir_cpu`` is not
importable here.

Conventions followed, as reference-style suites do: argument names come from
``interp.arg_names`` and are unpacked by position; shapes from
``interp.tensor_input_output_sizes``; results from the dict ``execute_function`` returns;
kernels with constant addresses are seeded by wrapping ``interp._prepare_execution``.

Kernels left out (docs/compat.md): ``rfc/indirect-access-copy.mlir`` and
``rfc/indirect-scatter.mlir`` place data at stick addresses (the reference's pointer
convention counts elements); ``rfc/paged-tensor-*.mlir`` count bytes and need a 16 MiB tile in the
2 MiB LX.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from references import attention, ffn, llama, rowwise
from references.tolerance import U16, assert_f16_gemm_close, assert_within

from ktir_cpu import KTIRInterpreter
from ktir_cpu.dtypes import stick_to_elem_idx

EXAMPLES = Path(os.environ.get("KTIR_CORPUS", Path(__file__).resolve().parents[4] / "shared"
                               / "corpus")) / "ktir-examples"
CASES: dict[str, object] = {}
SLOW = {"latency/rope_fwd_4x2.mlir", "triton-ktir/layernorm_fwd_ktir.mlir",
        "triton-ktir/softmax_fwd_ktir.mlir"}
NOT_RUN = {"rfc/indirect-access-copy.mlir", "rfc/indirect-scatter.mlir",
           "rfc/paged-tensor-copy.mlir", "rfc/paged-tensor-write.mlir"}


def case(rel: str):
    def register(fn):
        CASES[rel] = fn
        return fn
    return register


def rng(rel: str) -> np.random.Generator:
    return np.random.default_rng(sum(map(ord, rel)))


def f16(a) -> np.ndarray:
    return np.asarray(a).astype(np.float16)


def dyadic(r, shape) -> np.ndarray:
    """k/16 values: f16 sums of a few are exact in any order."""
    return (r.integers(-64, 64, size=shape) / 16).astype(np.float16)


def exact_add(a, b) -> np.ndarray:
    return (a.astype(np.float64) + b.astype(np.float64)).astype(a.dtype)


def loaded(rel: str) -> tuple[KTIRInterpreter, str]:
    interp = KTIRInterpreter()
    interp.load(str(EXAMPLES / rel))
    (name,) = interp.module.functions
    return interp, name


# -- ktir/

@case("ktir/ffn_swiglu.mlir")
@case("ktir/ffn_swiglu_4core.mlir")
def ffn_swiglu(rel: str) -> None:
    interp, fn = loaded(rel)
    x_ptr, wg_ptr, wu_ptr, wd_ptr, out_ptr = interp.arg_names(fn)
    seq, d = interp.tensor_input_output_sizes(fn)[x_ptr]["shape"]
    hidden = 4 * d if "4core" in rel else 2 * d  # the 4-core kernel shards it in 4 views
    r = rng(rel)
    x = f16(r.standard_normal((seq, d)))
    wg, wu = (f16(r.standard_normal((d, hidden)) / np.sqrt(d)) for _ in range(2))
    wd = f16(r.standard_normal((hidden, d)) / np.sqrt(hidden))
    out = interp.execute_function(fn, **{x_ptr: x, wg_ptr: wg, wu_ptr: wu, wd_ptr: wd,
                                         out_ptr: np.zeros((seq, d), np.float16)})[out_ptr]
    ref = ffn.swiglu_ffn_residual(x, wg, wu, wd)
    assert_within(out, ref, 6e-3 + 2 * U16 * np.abs(ref), rel)


@case("ktir/nested_yield.ktir")
def nested_yield(rel: str) -> None:
    interp, fn = loaded(rel)
    (out_ptr,) = interp.arg_names(fn)
    out = interp.execute_function(fn, **{out_ptr: np.zeros(4, np.float32)})[out_ptr]
    np.testing.assert_array_equal(out, np.full(4, 2.0, np.float32))


@case("ktir/reduce_generic.mlir")
def reduce_generic(rel: str) -> None:
    interp, fn = loaded(rel)
    (arg0,) = interp.arg_names(fn)
    data = np.array([[1, 2, 3, 4]], np.float16)
    out = interp.execute_function(fn, **{arg0: data})[arg0]
    np.testing.assert_array_equal(out, np.full((1, 4), 10.0, np.float16))
    np.testing.assert_array_equal(data, [[1, 2, 3, 4]])  # the caller's array is untouched


@case("ktir/reduce_multiop.mlir")
def reduce_multiop(rel: str) -> None:
    interp, fn = loaded(rel)
    (arg0,) = interp.arg_names(fn)
    data = f16(rng(rel).standard_normal((1, 8)))
    out = interp.execute_function(fn, **{arg0: data})[arg0]
    np.testing.assert_array_equal(out, np.full((1, 8), data.max(), np.float16))


@case("ktir/ring_reduce.mlir")
@case("latency/ring_reduce_multi_group.mlir")
def ring_reduce(rel: str) -> None:
    interp, fn = loaded(rel)
    in_ptr, out_ptr = interp.arg_names(fn)
    groups = 4 if "multi_group" in rel else 1
    rows = dyadic(rng(rel), (4 * groups, 128))
    out = interp.execute_function(fn, **{in_ptr: rows,
                                         out_ptr: np.zeros((groups, 128), np.float16)})[out_ptr]
    expected = rows.astype(np.float64).reshape(groups, 4, 128).sum(axis=1)
    np.testing.assert_array_equal(out, expected.astype(np.float16))


@case("ktir/ring_reduce_inner_loop.mlir")
def ring_reduce_inner_loop(rel: str) -> None:
    interp, fn = loaded(rel)
    in_ptr, out_ptr, n_iters = interp.arg_names(fn)
    rows = dyadic(rng(rel), (4, 128))
    for n in (0, 3):
        out = interp.execute_function(fn, **{in_ptr: rows, n_iters: n,
                                             out_ptr: np.zeros((1, 128), np.float16)})[out_ptr]
        expected = n * rows.astype(np.float64).sum(axis=0, keepdims=True)
        np.testing.assert_array_equal(out, expected.astype(np.float16), err_msg=f"n_iters={n}")


@case("ktir/scalar_broadcast.mlir")
def scalar_broadcast(rel: str) -> None:
    interp, fn = loaded(rel)
    in_ptr, out_ptr = interp.arg_names(fn)
    out = interp.execute_function(fn, **{in_ptr: np.array([[1.375]], np.float16),
                                         out_ptr: np.zeros((4, 64), np.float16)})[out_ptr]
    np.testing.assert_array_equal(out, np.full((4, 64), 1.375, np.float16))


def softmax_bound(ref: np.ndarray, width: int) -> np.ndarray:
    """All-f16 softmax row error (the derivation is in tests/ktir/test_examples.py)."""
    return (10.0 + 5.0 * np.sqrt(width / 3.0)) * U16 * np.abs(ref) + 1e-7


@case("ktir/softmax_wide.mlir")
def softmax_wide(rel: str) -> None:
    interp, fn = loaded(rel)
    out_ptr, in_ptr = interp.arg_names(fn)
    rows, cols = interp.tensor_input_output_sizes(fn)[in_ptr]["shape"]
    r = rng(rel)
    x = np.full((rows, cols), -40.0)
    for row in range(rows):  # 512 live entries per row: the f16 row sum is order independent
        x[row, r.choice(cols, size=512, replace=False)] = r.standard_normal(512)
    x = f16(x)
    out = interp.execute_function(fn, **{out_ptr: np.zeros_like(x), in_ptr: x})[out_ptr]
    ref = rowwise.softmax_rows(x)
    assert_within(out, ref, softmax_bound(ref, 512), rel)


# -- latency/

@case("latency/matmul_small.mlir")
def matmul_small(rel: str) -> None:
    interp, fn = loaded(rel)
    a_ptr, b_ptr, c_ptr, k, bm, bn, bk = interp.arg_names(fn)
    r = rng(rel)
    a, b = f16(r.standard_normal((16, 64))), f16(r.standard_normal((64, 64)) / 8.0)
    out = interp.execute_function(fn, **{a_ptr: a, b_ptr: b, c_ptr: np.zeros((16, 64), np.float16),
                                         k: 64, bm: 8, bn: 32, bk: 32})[c_ptr]
    assert_f16_gemm_close(out, a.astype(np.float64) @ b.astype(np.float64), 2, rel)


@case("latency/rmsnorm_4core_2x2.mlir")
@case("latency/rmsnorm_4core_4x1.mlir")
def rmsnorm(rel: str) -> None:
    interp, fn = loaded(rel)
    x_ptr, y_ptr, w_ptr, n, eps, block = interp.arg_names(fn)
    r = rng(rel)
    x = f16(r.standard_normal((256, 4096)))
    w = f16(1.0 + 0.1 * r.standard_normal((256, 4096)))
    out = interp.execute_function(fn, **{x_ptr: x, y_ptr: np.zeros_like(x), w_ptr: w, n: 4096,
                                         eps: 1e-5, block: 1024})[y_ptr]
    ref = rowwise.rms_norm_rows(x, w, float(np.float16(1e-5)))
    assert_within(out, ref, 0.015 * np.abs(ref) + 1e-4, rel)


@case("latency/rope_fwd_4x2.mlir")
def rope(rel: str) -> None:
    interp, fn = loaded(rel)
    x_ptr, cos_ptr, sin_ptr, out_ptr = interp.arg_names(fn)
    heads, seq, dim = 40, 4096, 128
    x = f16(rng(rel).standard_normal((heads * seq, dim)))
    cos_full, sin_full = llama.rope_tables(np.arange(seq), dim, 500000.0)
    cos, sin = f16(cos_full[:, : dim // 2]), f16(sin_full[:, : dim // 2])
    out = interp.execute_function(fn, **{x_ptr: x, cos_ptr: cos, sin_ptr: sin,
                                         out_ptr: np.zeros_like(x)})[out_ptr]
    tokens = x.reshape(heads, seq, dim).transpose(1, 0, 2).reshape(seq, heads * dim)
    ref = llama.rope(tokens, np.concatenate([cos, cos], 1), np.concatenate([sin, sin], 1), dim)
    ref = ref.reshape(seq, heads, dim).transpose(1, 0, 2).reshape(heads * seq, dim)
    halves = np.abs(x.astype(np.float64))
    swapped = np.concatenate([halves[:, dim // 2:], halves[:, : dim // 2]], 1)
    assert_within(out, ref, 2.01 * U16 * (halves + swapped) + 1e-6, rel)


@case("latency/softmax_small.mlir")
@case("latency/softmax_small_explicit.mlir")
@case("triton-ktir/softmax_fwd_ktir.mlir")
def softmax(rel: str) -> None:
    interp, fn = loaded(rel)
    out_ptr, in_ptr, n_rows = interp.arg_names(fn)
    rows, cols = interp.tensor_input_output_sizes(fn)[in_ptr]["shape"]
    x = f16(rng(rel).standard_normal((rows, cols)))
    out = interp.execute_function(fn, **{out_ptr: np.zeros_like(x), in_ptr: x,
                                         n_rows: rows})[out_ptr]
    ref = rowwise.softmax_rows(x)
    assert_within(out, ref, softmax_bound(ref, cols), rel)


# -- rfc/

@case("rfc/add-with-control-flow.mlir")
def add_with_control_flow(rel: str) -> None:
    interp, fn = loaded(rel)
    r = rng(rel)
    a, b = f16(r.standard_normal((96, 64))), f16(r.standard_normal((96, 64)))
    # constant element addresses 1024 / 12288 / 18432 (f16): sticks 16 / 192 / 288
    a_stick, b_stick, c_stick = (e * 2 // 128 for e in (1024, 12288, 18432))
    prepare = interp._prepare_execution

    def seeded(grid):
        prepare(grid)
        interp.memory.hbm.write(a_stick, a)
        interp.memory.hbm.write(b_stick, b)
        interp.memory.hbm.write(c_stick, np.full((96, 64), 7.0, np.float16))

    interp._prepare_execution = seeded
    assert interp.execute_function(fn) == {}
    c = interp.memory.hbm.read(c_stick, 96 * 64, "f16").reshape(96, 64)
    expected = np.full((96, 64), 7.0, np.float16)
    expected[:3] = exact_add(a[:3], b[:3])  # no grid: one core, rows 0..2
    np.testing.assert_array_equal(c, expected)


@case("rfc/distributed-view-copy.mlir")
def distributed_view_copy(rel: str) -> None:
    interp, fn = loaded(rel)
    a = f16(rng(rel).standard_normal((192, 64)))
    lx0 = np.zeros((64, 64), np.float16)  # rows 96..127 column-major, columns of 64 slots
    lx0[:, :32] = a[96:128].T
    prepare = interp._prepare_execution

    def seeded(grid):
        prepare(grid)
        interp.memory.hbm.write(0, a[:96])
        interp.memory.get_lx(0).write(12288 * 2, lx0)
        interp.memory.get_lx(1).write(16384 * 2, a[128:])

    interp._prepare_execution = seeded
    interp.execute_function(fn)
    b = interp.memory.hbm.read(24576 * 2 // 128, 192 * 64, "f16").reshape(192, 64)
    np.testing.assert_array_equal(b, a)


@case("rfc/distributed-view-copy-dynamic.mlir")
@case("rfc/distributed-view-copy-rowmerge-dynamic.mlir")
def distributed_view_copy_dynamic(rel: str) -> None:
    interp, fn = loaded(rel)
    a0_ptr, a1_ptr, b_ptr, s0_in = interp.arg_names(fn)
    rowmerge = "rowmerge" in rel
    r = rng(rel)
    for s0 in ((16, 48) if rowmerge else (16, 32)):
        a0, a1 = f16(r.standard_normal((64, s0))), f16(r.standard_normal((64, s0)))
        full = np.concatenate([a0, a1], axis=0 if rowmerge else 1)
        out = interp.execute_function(fn, **{a0_ptr: a0, a1_ptr: a1, s0_in: np.int32(s0),
                                             b_ptr: np.zeros_like(full)})[b_ptr]
        np.testing.assert_array_equal(out, full, err_msg=f"s0={s0}")


# -- sdsc/

@case("sdsc/sdpa_pv_ksplit.mlir")
def sdpa_pv_ksplit(rel: str) -> None:
    interp, fn = loaded(rel)
    a_ptr, b_ptr, c_ptr = interp.arg_names(fn)
    r = rng(rel)
    p = f16(rowwise.softmax_rows(r.standard_normal((1, 8192))))
    v = f16(r.standard_normal((8192, 128)))
    out = interp.execute_function(fn, **{a_ptr: p, b_ptr: v,
                                         c_ptr: np.zeros((1, 128), np.float16)})[c_ptr]
    assert_f16_gemm_close(out, p.astype(np.float64) @ v.astype(np.float64), 16, rel)


# -- triton-ktir/

@case("triton-ktir/indexed_add.mlir")
def indexed_add(rel: str) -> None:
    interp, fn = loaded(rel)
    x_ptr, y_ptr, index_ptr, out_ptr, dim1_start = interp.arg_names(fn)
    r = rng(rel)
    x = f16(r.standard_normal((128, 64, 8, 128)))
    y = f16(r.standard_normal((2, 32, 8, 128)))
    index = np.array([97, 5], np.int64)
    out = interp.execute_function(fn, **{x_ptr: x, y_ptr: y, index_ptr: index, dim1_start: 0,
                                         out_ptr: np.zeros_like(y)})[out_ptr]
    np.testing.assert_array_equal(out, exact_add(x[index, :32], y))


@case("triton-ktir/layernorm_fwd_ktir.mlir")
def layernorm(rel: str) -> None:
    interp, fn = loaded(rel)
    x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, n, eps, block = interp.arg_names(fn)
    rows, cols = interp.tensor_input_output_sizes(fn)[x_ptr]["shape"]
    r = rng(rel)
    x = f16(0.5 + r.standard_normal((rows, cols)))
    w = f16(1.0 + 0.1 * r.standard_normal((rows, cols)))
    bias = f16(0.1 * r.standard_normal((rows, cols)))
    outs = interp.execute_function(fn, **{
        x_ptr: x, y_ptr: np.zeros_like(x), w_ptr: w, b_ptr: bias,
        mean_ptr: np.zeros(rows, np.float16), rstd_ptr: np.zeros(rows, np.float16),
        n: cols, eps: 1e-5, block: 1024})
    ref_y, ref_mean, ref_rstd = rowwise.layer_norm_rows(x, w, bias, float(np.float16(1e-5)))
    assert_within(outs[mean_ptr], ref_mean, 1e-3 + U16 * np.abs(ref_mean), f"{rel} Mean")
    assert_within(outs[rstd_ptr], ref_rstd, 0.012 * np.abs(ref_rstd), f"{rel} Rstd")
    x_hat_w = np.abs((x.astype(np.float64) - ref_mean[:, None]) * ref_rstd[:, None] * w)
    bound = 0.012 * x_hat_w + 2e-3 + 4 * U16 * (x_hat_w + np.abs(bias.astype(np.float64)))
    assert_within(outs[y_ptr], ref_y, bound, f"{rel} Y")


@case("triton-ktir/matmul_fwd_ktir.mlir")
def matmul_fwd(rel: str) -> None:
    interp, fn = loaded(rel)
    a_ptr, b_ptr, c_ptr, k, bm, bn, bk = interp.arg_names(fn)
    r = rng(rel)
    a = f16(r.standard_normal((64, 2048)))
    b = f16(r.standard_normal((2048, 8192)) / np.sqrt(2048))
    out = interp.execute_function(fn, **{a_ptr: a, b_ptr: b,
                                         c_ptr: np.zeros((64, 8192), np.float16),
                                         k: 2048, bm: 32, bn: 512, bk: 128})[c_ptr]
    ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)
    assert_f16_gemm_close(out, ref, 2048 // 128, rel)


@case("triton-ktir/paged_attention.mlir")
def paged_attention(rel: str) -> None:
    interp, fn = loaded(rel)
    names = interp.arg_names(fn)
    out_ptr, q_ptr, k_ptr, v_ptr, table_ptr = names[:5]
    r = rng(rel)
    query, key_cache, value_cache = (f16(r.standard_normal(shape)) for shape in
                                     ((8, 32, 128), (64, 16, 8, 128), (64, 16, 8, 128)))
    table = r.permutation(64)[:16].astype(np.int32).reshape(1, 16)  # 16 distinct KV blocks
    scale = np.float32(1.0 / np.sqrt(128.0))
    scalars = dict(zip(names[5:], (0, 0, 8, 120, scale)))
    out = interp.execute_function(fn, **{out_ptr: np.zeros((8, 32, 128), np.float16),
                                         q_ptr: query, k_ptr: key_cache, v_ptr: value_cache,
                                         table_ptr: table}, **scalars)[out_ptr]
    ref = attention.paged_decode_attention(query, key_cache, value_cache, table[0], 120,
                                           float(scale))
    assert_within(out, ref, U16 * np.abs(ref) + 1e-4, rel)


@case("triton-ktir/sdpa_2d.mlir")
def sdpa_2d(rel: str) -> None:
    interp, fn = loaded(rel)
    q_ptr, k_ptr, v_ptr, out_ptr = interp.arg_names(fn)
    r = rng(rel)
    q, k, v = (f16(r.standard_normal((32, 64))) for _ in range(3))
    out = interp.execute_function(fn, **{q_ptr: q, k_ptr: k, v_ptr: v,
                                         out_ptr: np.zeros((32, 64), np.float16)})[out_ptr]
    ref = attention.sdpa(q, k, v, 0.125)
    assert_within(out, ref, 6e-3 + 6e-3 * np.abs(ref), rel)


@case("triton-ktir/vector_add_ktir.mlir")
def vector_add(rel: str) -> None:
    interp, fn = loaded(rel)
    x_ptr, y_ptr, out_ptr, block = interp.arg_names(fn)
    (n,) = interp.tensor_input_output_sizes(fn)[x_ptr]["shape"]
    r = rng(rel)
    x, y = f16(r.standard_normal(n)), f16(r.standard_normal(n))
    out = interp.execute_function(fn, **{x_ptr: x, y_ptr: y, out_ptr: np.zeros(n, np.float16),
                                         block: n // 32})[out_ptr]
    np.testing.assert_array_equal(out, exact_add(x, y))


@case("triton-ktir/vector_add_dynamic_ktir.mlir")
def vector_add_dynamic(rel: str) -> None:
    interp, fn = loaded(rel)
    x_ptr, y_ptr, out_ptr, n_elements = interp.arg_names(fn)
    r = rng(rel)
    for n in (1024, 1000):
        x, y = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
        out = interp.execute_function(fn, **{x_ptr: x, y_ptr: y, n_elements: np.int32(n),
                                             out_ptr: np.zeros(n, np.float32)})[out_ptr]
        np.testing.assert_array_equal(out, x + y, err_msg=f"n={n}")


def test_an_unseeded_fixed_address_kernel_fails_located() -> None:
    """A kernel that reads a constant address nothing was written to: a ValueError naming the
    file, line and op (here the paged copy's index-table read)."""
    interp, fn = loaded("rfc/paged-tensor-copy.mlir")
    with pytest.raises(ValueError, match=r"paged-tensor-copy\.mlir:109:9: .*"
                                         r"ktdp\.construct_indirect_access_tile.*no allocated"):
        interp.execute_function(fn)


def test_stick_helper_matches_the_pointer_convention() -> None:
    assert stick_to_elem_idx(3, "f16") == 192 and stick_to_elem_idx(3, "f32") == 96


@pytest.mark.parametrize("rel", [pytest.param(rel, id=rel, marks=[pytest.mark.slow]
                                              if rel in SLOW else []) for rel in sorted(CASES)])
def test_example(rel: str) -> None:
    CASES[rel](rel)
