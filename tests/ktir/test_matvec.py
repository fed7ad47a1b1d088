"""linalg.matvec, the worked example of docs/adding-an-op.md: y[i] += sum_k A[i, k] x[k] (MLIR's
linalg semantics), with linalg.matmul's numerics for an M x K by K x 1 product: f32 products and
sums, the accumulator added in f32, one rounding to the result type."""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import load, store, tile, ty, view

from ktir_models import ktir
from ktir_models.ktir.latency import function_latency

RNG = np.random.default_rng(29)


def matvec_text(M: int, K: int, elem: str = "f16", x_shape: tuple | None = None) -> str:
    """A kernel loading A [M, K], x [K] and y [M], storing y + A x; ``x_shape`` gives x another
    shape (for the verifier)."""
    xs = x_shape or (K,)
    body = (view("va", "a", (M, K), elem) + view("vx", "x", xs, elem)
            + view("vy", "y", (M,), elem)
            + tile("ta", "va", (M, K), (M, K), "%c0, %c0", elem)
            + tile("tx", "vx", xs, xs, ", ".join(["%c0"] * len(xs)), elem)
            + tile("ty", "vy", (M,), (M,), "%c0", elem)
            + load("A", "ta", (M, K), elem) + load("X", "tx", xs, elem)
            + load("Y", "ty", (M,), elem)
            + f"    %r = linalg.matvec ins(%A, %X : tensor<{ty((M, K), elem)}>, "
              f"tensor<{ty(xs, elem)}>) outs(%Y : tensor<{ty((M,), elem)}>) "
              f"-> tensor<{ty((M,), elem)}>\n"
            + store("r", "ty", (M,), elem))
    return ("module {\n  func.func @k(%a: index, %x: index, %y: index) attributes "
            "{grid = [1]} {\n    %c0 = arith.constant 0 : index\n" + body
            + "    return\n  }\n}\n")


def run_matvec(A, x, y, native: bool) -> np.ndarray:
    module = ktir.parse_text(matvec_text(*A.shape, elem="f16" if A.dtype == np.float16
                                         else "f32"), "mv.mlir")
    ktir.verify(module)
    m = ktir.Machine(native_matmul=native)
    ba, bx = m.hbm.allocate_from(A, name="a"), m.hbm.allocate_from(x, name="x")
    by = m.hbm.allocate_from(y.copy(), name="y")
    m.compile(module.function("k")).run([ba.address, bx.address, by.address])
    return by.read()


def reference(A, x, y, native: bool) -> np.ndarray:
    """The matmul numerics, literally: f32 products, f32 sums (over k in order on the native
    kernel; numpy's f32 matmul of the M x K by K x 1 product on BLAS), y added in f32, one
    rounding to y's type."""
    A32, x32 = A.astype(np.float32), x.astype(np.float32)
    if native:
        s = np.zeros(A.shape[0], np.float32)
        for k in range(A.shape[1]):
            s = s + A32[:, k] * x32[k]
    else:
        s = (A32 @ x32[:, None])[:, 0]
    return (s + y.astype(np.float32)).astype(y.dtype)


@pytest.mark.parametrize("M,K", [(8, 64), (5, 300), (1, 1)])
def test_matvec_runs_with_matmul_numerics(native_matmul, M, K):
    A = (RNG.standard_normal((M, K)) * 3).astype(np.float16)
    x = (RNG.standard_normal(K) * 3).astype(np.float16)
    y = (RNG.standard_normal(M) * 3).astype(np.float16)
    got = run_matvec(A, x, y, native_matmul)
    want = reference(A, x, y, native_matmul)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    # the accumulation into outs is part of the result: not A x alone
    assert not np.array_equal(got, reference(A, x, np.zeros_like(y), native_matmul))


def test_matvec_is_the_matmul_of_a_column():
    """Bit for bit the linalg.matmul of A [M, K] by x as [K, 1] into y as [M, 1] (both orders)."""
    M, K = 6, 200
    A = (RNG.standard_normal((M, K)) * 5).astype(np.float16)
    x = (RNG.standard_normal(K) * 5).astype(np.float16)
    y = (RNG.standard_normal(M)).astype(np.float16)
    s2, sk, sm = ty((M, K)), ty((K, 1)), ty((M, 1))
    mm = ("module {\n  func.func @k(%a: index, %x: index, %y: index) attributes {grid = [1]} {\n"
          "    %c0 = arith.constant 0 : index\n"
          + view("va", "a", (M, K)) + view("vx", "x", (K, 1)) + view("vy", "y", (M, 1))
          + tile("ta", "va", (M, K), (M, K), "%c0, %c0") + tile("tx", "vx", (K, 1), (K, 1),
                                                                "%c0, %c0")
          + tile("ty", "vy", (M, 1), (M, 1), "%c0, %c0")
          + load("A", "ta", (M, K)) + load("X", "tx", (K, 1)) + load("Y", "ty", (M, 1))
          + f"    %r = linalg.matmul ins(%A, %X : tensor<{s2}>, tensor<{sk}>) "
            f"outs(%Y : tensor<{sm}>) -> tensor<{sm}>\n"
          + store("r", "ty", (M, 1)) + "    return\n  }\n}\n")
    module = ktir.parse_text(mm, "mm.mlir")
    ktir.verify(module)
    for native in (False, True):
        from ktir_models.ktir.backends import seqmm

        if native and not seqmm.available():
            continue
        m = ktir.Machine(native_matmul=native)
        ba, bx = m.hbm.allocate_from(A, name="a"), m.hbm.allocate_from(x[:, None].copy(), name="x")
        by = m.hbm.allocate_from(y[:, None].copy(), name="y")
        m.compile(module.function("k")).run([ba.address, bx.address, by.address])
        np.testing.assert_array_equal(run_matvec(A, x, y, native).view(np.uint16),
                                      by.read()[:, 0].view(np.uint16))


def test_matvec_with_a_bad_shape_is_one_located_error():
    module = ktir.parse_text(matvec_text(8, 64, x_shape=(32,)), "bad.mlir")
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(module)
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("bad.mlir:")
    assert "error: shape mismatch in linalg.matvec: tensor<8x64xf16> x tensor<32xf16>" in lines[0]
    line = int(lines[0].split(":")[1])
    assert "linalg.matvec" in matvec_text(8, 64, x_shape=(32,)).splitlines()[line - 1]


def test_matvec_rank_and_element_checks():
    with pytest.raises(ktir.KtirError, match="takes a matrix and two vectors"):
        ktir.verify(ktir.parse_text(matvec_text(4, 16, x_shape=(16, 1)), "rank.mlir"))
    text = matvec_text(4, 16).replace("xf16", "xi32")
    with pytest.raises(ktir.KtirError, match="must be float tensors"):
        ktir.verify(ktir.parse_text(text, "int.mlir"))


def test_the_latency_model_charges_matvec_as_2mk_flops():
    M, K = 8, 64
    fn = ktir.parse_text(matvec_text(M, K), "mv.mlir").function("k")
    lat = function_latency(fn)
    (cost,) = [c for c in lat.top_ops if c.op == "linalg.matvec"]
    assert cost.flops == lat.flops == 2 * M * K
    assert cost.cycles["matmul"] > 0 and lat.category_cycles["matmul"] == cost.cycles["matmul"]
    assert not any("linalg.matvec" in n for n in lat.notes)  # a handler, not the fallback


def test_matvec_on_a_grid_runs_the_same_bits_in_every_tier(native_matmul):
    """Each of 4 cores computes its rows; core by core and grid-batched (stacked runs from the
    second run on) give the same bits, those of the one-core reference."""
    M, K, G = 4, 32, 4
    body = (view("va", "a", (G * M, K)) + view("vx", "x", (K,)) + view("vy", "y", (G * M,))
            + "    %g:3 = ktdp.get_compute_tile_id : index, index, index\n"
            + f"    %cm = arith.constant {M} : index\n    %row = arith.muli %g#0, %cm : index\n"
            + tile("ta", "va", (G * M, K), (M, K), "%row, %c0")
            + tile("tx", "vx", (K,), (K,), "%c0") + tile("ty", "vy", (G * M,), (M,), "%row")
            + load("A", "ta", (M, K)) + load("X", "tx", (K,)) + load("Y", "ty", (M,))
            + f"    %r = linalg.matvec ins(%A, %X : tensor<{ty((M, K))}>, tensor<{ty((K,))}>) "
              f"outs(%Y : tensor<{ty((M,))}>) -> tensor<{ty((M,))}>\n"
            + store("r", "ty", (M,)))
    module = ktir.parse_text(
        "module {\n  func.func @k(%a: index, %x: index, %y: index) attributes {grid = [4]} {\n"
        "    %c0 = arith.constant 0 : index\n" + body + "    return\n  }\n}\n", "grid.mlir")
    ktir.verify(module)
    A = RNG.standard_normal((G * M, K)).astype(np.float16)
    x = RNG.standard_normal(K).astype(np.float16)
    y = RNG.standard_normal(G * M).astype(np.float16)
    want = reference(A, x, y, native_matmul)
    for grid_batching in (False, True):
        m = ktir.Machine(native_matmul=native_matmul, grid_batching=grid_batching)
        ba, bx = m.hbm.allocate_from(A, name="a"), m.hbm.allocate_from(x, name="x")
        by = m.hbm.allocate_from(y.copy(), name="y")
        plan = m.compile(module.function("k"))
        for _ in range(3):  # the batched tiers take over from the second run
            by.write(y.copy())
            plan.run([ba.address, bx.address, by.address])
            np.testing.assert_array_equal(by.read().view(np.uint16), want.view(np.uint16))
