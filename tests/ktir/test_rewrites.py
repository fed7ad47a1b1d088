"""Rewrite rules (ktir/patterns/): a fused K-loop gives the bits of the loop run trip by trip, and
the rule that fired is observable."""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import load, program, store, tile, ty, view

from ktir_models import ktir
from ktir_models.ktir import patterns

RNG = np.random.default_rng(17)


def kloop_gemm(M: int, K: int, N: int, KB: int, transpose_b: bool, acc_elem: str = "f16",
               grid: int = 1, accumulates: bool = False, init: str = "0.5") -> ktir.Function:
    """out[M, N] = sum over K blocks of A[:, k:k+KB] @ B-block, each core its own M rows; the
    matmul into a zero tensor plus an addf, or (``accumulates``) into the carried value."""
    mm = "linalg.matmul_transpose_b" if transpose_b else "linalg.matmul"
    bshape, bblock, bidx = ((N, K), (N, KB), "%c0, %k") if transpose_b else \
        ((K, N), (KB, N), "%k, %c0")
    acc_t = f"tensor<{ty((M, N), acc_elem)}>"
    body = (view("va", "a", (grid * M, K)) + view("vb", "b", bshape)
            + view("vo", "o", (grid * M, N), acc_elem)
            + "    %g:3 = ktdp.get_compute_tile_id : index, index, index\n"
            + f"    %cm = arith.constant {M} : index\n    %row = arith.muli %g#0, %cm : index\n"
            + f"    %K = arith.constant {K} : index\n    %KB = arith.constant {KB} : index\n"
            + f"    %z = arith.constant dense<0.0> : {acc_t}\n"
            + f"    %init = arith.constant dense<{init}> : {acc_t}\n"
            + f"    %r = scf.for %k = %c0 to %K step %KB iter_args(%acc = %init) -> ({acc_t}) {{\n"
            + tile("ta", "va", (grid * M, K), (M, KB), "%row, %k")
            + tile("tb", "vb", bshape, bblock, bidx)
            + load("x", "ta", (M, KB)) + load("w", "tb", bblock)
            + f"    %p = {mm} ins(%x, %w : tensor<{ty((M, KB))}>, tensor<{ty(bblock)}>) "
              f"outs({'%acc' if accumulates else '%z'} : {acc_t}) -> {acc_t}\n"
            + ("" if accumulates else f"    %n = arith.addf %acc, %p : {acc_t}\n")
            + f"    scf.yield {'%p' if accumulates else '%n'} : {acc_t}\n    }}\n"
            + tile("to", "vo", (grid * M, N), (M, N), "%row, %c0", acc_elem)
            + store("r", "to", (M, N), acc_elem))
    return program("%a: index, %b: index, %o: index", body, grid=f"[{grid}]")


def run_gemm(fn, a, b, out_shape, out_dtype, native: bool, grid_batching: bool):
    m = ktir.Machine(native_matmul=native, grid_batching=grid_batching)
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo = m.hbm.allocate(out_shape, out_dtype, name="o")
    m.compile(fn).run([ba.address, bb.address, bo.address])
    return bo.read()


@pytest.mark.parametrize("transpose_b,acc_elem,grid", [
    (True, "f16", 1), (False, "f16", 1), (True, "f32", 1), (True, "f16", 4)])
def test_kloop_rule_is_bit_identical_to_the_plain_loop(native_matmul, transpose_b, acc_elem,
                                                       grid):
    M, K, N, KB = 2, 96, 40, 16
    fn = kloop_gemm(M, K, N, KB, transpose_b, acc_elem, grid)
    a = (RNG.standard_normal((grid * M, K)) * 4).astype(np.float16)
    b = (RNG.standard_normal((N, K) if transpose_b else (K, N)) * 4).astype(np.float16)
    out_shape, out_dtype = (grid * M, N), np.dtype(acc_elem.replace("f", "float"))
    rule = "gemm-kloop-native" if native_matmul else "gemm-kloop-blas"
    for grid_batching in (False, True):
        before = patterns.MATCHED[rule]
        fused = run_gemm(fn, a, b, out_shape, out_dtype, native_matmul, grid_batching)
        assert patterns.MATCHED[rule] > before  # the rule fired when this plan was compiled
        with patterns.disabled():
            before = sum(patterns.MATCHED.values())
            plain = run_gemm(fn, a, b, out_shape, out_dtype, native_matmul, grid_batching)
            assert sum(patterns.MATCHED.values()) == before  # no rule fired
        assert fused.dtype == plain.dtype == out_dtype
        np.testing.assert_array_equal(fused.view(np.uint8), plain.view(np.uint8))


@pytest.mark.parametrize("transpose_b,acc_elem,grid,init", [
    (True, "f32", 1, "0.0"), (True, "f16", 1, "0.5"), (False, "f32", 1, "-0.0"),
    (True, "f32", 4, "0.0"), (True, "f16", 4, "-1.5")])
def test_the_accumulating_kloop_is_fused_on_the_kernel_with_the_loops_bits(
        native_matmul, transpose_b, acc_elem, grid, init):
    """matmul ... outs(%acc) + scf.yield (our emitter's lm_heads): the native rule runs it as one
    kernel call of f32 partials chained into the carried value, bit for bit the loop's (signed
    zeros, f16 rounding of every trip's sum, products that cancel); BLAS leaves it alone."""
    M, K, N, KB = 2, 96, 40, 16
    fn = kloop_gemm(M, K, N, KB, transpose_b, acc_elem, grid, accumulates=True, init=init)
    a = (RNG.standard_normal((grid * M, K)) * 4).astype(np.float16)
    b = (RNG.standard_normal((N, K) if transpose_b else (K, N)) * 4).astype(np.float16)
    a[0, :] = -0.0  # a row of products that are all zero: the trips' sums are +0.0
    b[(slice(None), 0) if transpose_b else (0, slice(None))] *= 2.0**-12  # tiny products
    out_shape, out_dtype = (grid * M, N), np.dtype(acc_elem.replace("f", "float"))
    for grid_batching in (False, True):
        before = dict(patterns.MATCHED)
        fused = run_gemm(fn, a, b, out_shape, out_dtype, native_matmul, grid_batching)
        fired = {k for k, v in patterns.MATCHED.items() if v > before.get(k, 0)}
        assert fired == ({"gemm-kloop-native"} if native_matmul else set())
        with patterns.disabled():
            plain = run_gemm(fn, a, b, out_shape, out_dtype, native_matmul, grid_batching)
        assert fused.dtype == plain.dtype == out_dtype
        np.testing.assert_array_equal(fused.view(np.uint8), plain.view(np.uint8))


def test_the_fused_step_names_its_rule_and_the_plain_loop_none(native_matmul):
    from ktir_models.ktir.exec.compile import Compiler

    fn = kloop_gemm(1, 64, 8, 16, True)
    (loop,) = [op for op in fn.walk() if op.name == "scf.for"]

    def loop_step():
        c = Compiler(ktir.Machine(native_matmul=native_matmul), fn)
        for a in fn.args:
            c.slot(a)
        c.compile_block(fn.body.block)
        return c.step_of[id(loop)]

    rule = "gemm-kloop-native" if native_matmul else "gemm-kloop-blas"
    assert loop_step().rewrite == rule
    with patterns.disabled():
        plain = loop_step()
    assert not hasattr(plain, "rewrite") and plain.loop is not None  # the plain loop


def test_a_loop_that_is_not_the_pattern_is_left_alone():
    """A K-loop whose matmul accumulates into a non-zero tensor is not the pattern: no rule."""
    M, K, N, KB = 1, 32, 8, 16
    acc_t = f"tensor<{ty((M, N))}>"
    body = (view("va", "a", (M, K)) + view("vb", "b", (N, K)) + view("vo", "o", (M, N))
            + f"    %K = arith.constant {K} : index\n    %KB = arith.constant {KB} : index\n"
            + f"    %one = arith.constant dense<1.0> : {acc_t}\n"
            + f"    %r = scf.for %k = %c0 to %K step %KB iter_args(%acc = %one) -> ({acc_t}) {{\n"
            + tile("ta", "va", (M, K), (M, KB), "%c0, %k") + tile("tb", "vb", (N, K), (N, KB),
                                                                  "%c0, %k")
            + load("x", "ta", (M, KB)) + load("w", "tb", (N, KB))
            + f"    %p = linalg.matmul_transpose_b ins(%x, %w : tensor<{ty((M, KB))}>, "
              f"tensor<{ty((N, KB))}>) outs(%one : {acc_t}) -> {acc_t}\n"
            + f"    %n = arith.addf %acc, %p : {acc_t}\n    scf.yield %n : {acc_t}\n    }}\n"
            + tile("to", "vo", (M, N), (M, N), "%c0, %c0") + store("r", "to", (M, N)))
    fn = program("%a: index, %b: index, %o: index", body)
    before = sum(patterns.MATCHED.values())
    a = np.ones((M, K), np.float16)
    b = np.ones((N, K), np.float16)
    out = run_gemm(fn, a, b, (M, N), np.float16, False, False)
    assert sum(patterns.MATCHED.values()) == before
    np.testing.assert_array_equal(out, np.full((M, N), 1.0 + 2 * (16 + 1), np.float16))


@pytest.mark.parametrize("init", ["-1.5", "0.0", "-0.0"])
def test_replayed_runs_of_a_grid_sharing_its_weight_keep_the_init(native_matmul, init):
    """Cores reading one B with their own A rows run as one kernel call on the rows (gemm_kloop's
    fast_rows); its core-invariant init is laid out once and reused by every later run. Runs
    repeated on the same arguments (recorded, then replayed from the tape) give the plain loop's
    bits every time."""
    M, K, N, KB, grid = 1, 96, 40, 16, 4
    fn = kloop_gemm(M, K, N, KB, True, "f16", grid, init=init)
    a = (RNG.standard_normal((grid * M, K)) * 4).astype(np.float16)
    b = (RNG.standard_normal((N, K)) * 4).astype(np.float16)
    with patterns.disabled():
        plain = run_gemm(fn, a, b, (grid * M, N), np.float16, native_matmul, True)
    m = ktir.Machine(native_matmul=native_matmul, grid_batching=True)
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo = m.hbm.allocate((grid * M, N), "float16", name="o")
    plan = m.compile(fn)
    for _ in range(4):
        bo.write(np.zeros((grid * M, N), np.float16))
        plan.run([ba.address, bb.address, bo.address])
        np.testing.assert_array_equal(bo.read().view(np.uint16), plain.view(np.uint16))
