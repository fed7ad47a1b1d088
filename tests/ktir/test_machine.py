"""Execution tests against numpy references written from the semantics, plus runtime faults."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.errors import UserError

RNG = np.random.default_rng(1234)


def box(shape) -> str:
    dims = ", ".join(f"d{k}" for k in range(len(shape)))
    cons = ", ".join(f"d{k} >= 0, -d{k} + {n - 1} >= 0" for k, n in enumerate(shape))
    return f"affine_set<({dims}) : ({cons})>"


def ident(rank) -> str:
    dims = ", ".join(f"d{k}" for k in range(rank))
    return f"affine_map<({dims}) -> ({dims})>"


def ty(shape, elem="f16") -> str:
    return "x".join(map(str, shape)) + "x" + elem


def view(name, ptr, shape, elem="f16", space="#ktdp.memory_space<global>") -> str:
    strides = [int(np.prod(shape[k + 1:])) for k in range(len(shape))]
    return (f"    %{name} = ktdp.construct_memory_view %{ptr}, sizes: {list(shape)}, strides: "
            f"{strides} {{coordinate_set = {box(shape)}, memory_space = {space}}} "
            f": memref<{ty(shape, elem)}>\n")


def tile(name, v, vshape, tshape, idx, elem="f16", order=None, rshape=None) -> str:
    """An access tile over the box ``tshape``; ``rshape`` is the result shape (default tshape)."""
    order = order or ident(len(tshape))
    return (f"    %{name} = ktdp.construct_access_tile %{v}[{idx}] {{access_tile_set = "
            f"{box(tshape)}, access_tile_order = {order}}} : memref<{ty(vshape, elem)}> -> "
            f"!ktdp.access_tile<{ty(rshape or tshape, 'index')}>\n")


def load(name, t, shape, elem="f16") -> str:
    return (f"    %{name} = ktdp.load %{t} : !ktdp.access_tile<{ty(shape, 'index')}> -> "
            f"tensor<{ty(shape, elem)}>\n")


def store(val, t, shape, elem="f16") -> str:
    return (f"    ktdp.store %{val}, %{t} : tensor<{ty(shape, elem)}>, "
            f"!ktdp.access_tile<{ty(shape, 'index')}>\n")


def program(args: str, body: str, grid: str = "[1]") -> ktir.Function:
    text = (f"module {{\n  func.func @k({args}) attributes {{grid = {grid}}} {{\n"
            f"    %c0 = arith.constant 0 : index\n{body}    return\n  }}\n}}\n")
    module = ktir.parse_text(text, "k.mlir")
    ktir.verify(module)
    return module.function("k")


def run(fn, machine, *args):
    return machine.compile(fn).run(list(args))


def f16(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float16)


# -- elementwise -----------------------------------------------------------------------------

def elementwise_prog(op: str, shape=(4, 64)):
    s = ty(shape)
    body = (view("va", "a", shape) + view("vb", "b", shape) + view("vo", "o", shape)
            + tile("ta", "va", shape, shape, "%c0, %c0") + tile("tb", "vb", shape, shape, "%c0, %c0")
            + tile("to", "vo", shape, shape, "%c0, %c0")
            + load("x", "ta", shape) + load("y", "tb", shape)
            + (f"    %r = {op} %x, %y : tensor<{s}>\n" if op != "math.exp"
               else f"    %r = math.exp %x : tensor<{s}>\n")
            + store("r", "to", shape))
    return program("%a: index, %b: index, %o: index", body)


@pytest.mark.parametrize("op, ref", [
    ("arith.addf", lambda a, b: a.astype(np.float64) + b.astype(np.float64)),
    ("arith.subf", lambda a, b: a.astype(np.float64) - b.astype(np.float64)),
    ("arith.mulf", lambda a, b: a.astype(np.float64) * b.astype(np.float64)),
    ("arith.divf", lambda a, b: a.astype(np.float64) / b.astype(np.float64)),
    ("arith.maximumf", lambda a, b: np.maximum(a, b)),
    ("math.exp", lambda a, b: np.exp(a.astype(np.float32))),
])
def test_f16_elementwise_rounds_once(op, ref):
    a = f16(RNG.standard_normal((4, 64)) * 3)
    b = f16(RNG.standard_normal((4, 64)) * 3 + 0.1)
    m = ktir.Machine()
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo = m.hbm.allocate((4, 64), "float16", name="o")
    run(elementwise_prog(op), m, ba.address, bb.address, bo.address)
    # a correctly rounded f16 result is the exact (f64) result rounded once
    np.testing.assert_array_equal(bo.read(), ref(a, b).astype(np.float16))


def test_f16_overflow_and_minus_1e38_are_infinite():
    body = (view("vo", "o", (4,)) + tile("to", "vo", (4,), (4,), "%c0")
            + "    %n = arith.constant -1.0e38 : f16\n"
            + "    %big = arith.constant 70000.0 : f32\n"
            + "    %bh = arith.truncf %big : f32 to f16\n"
            + "    %bits = arith.constant 0xFF800000 : i32\n"
            + "    %ni = arith.bitcast %bits : i32 to f32\n"
            + "    %nh = arith.truncf %ni : f32 to f16\n"
            + "    %h = arith.constant 1.0 : f16\n"
            + "    %r = tensor.from_elements %n, %bh, %nh, %h : tensor<4xf16>\n"
            + store("r", "to", (4,)))
    m = ktir.Machine()
    bo = m.hbm.allocate((4,), "float16", name="o")
    run(program("%o: index", body), m, bo.address)
    np.testing.assert_array_equal(bo.read(), f16([-np.inf, np.inf, -np.inf, 1.0]))


def test_integer_division_semantics():
    body = (view("vo", "o", (4,), "i32") + tile("to", "vo", (4,), (4,), "%c0", "i32")
            + "    %a = arith.constant -7 : i32\n    %b = arith.constant 2 : i32\n"
            + "    %q1 = arith.divsi %a, %b : i32\n    %q2 = arith.floordivsi %a, %b : i32\n"
            + "    %q3 = arith.remsi %a, %b : i32\n    %q4 = arith.ceildivsi %a, %b : i32\n"
            + "    %r = tensor.from_elements %q1, %q2, %q3, %q4 : tensor<4xi32>\n"
            + store("r", "to", (4,), "i32"))
    m = ktir.Machine()
    bo = m.hbm.allocate((4,), "int32", name="o")
    run(program("%o: index", body), m, bo.address)
    np.testing.assert_array_equal(bo.read(), [-3, -4, -1, -3])


# -- linalg ------------------------------------------------------------------------------------

def test_matmul_transpose_b_f32_accumulate_round_once():
    M, K, N = 3, 64, 40
    body = (view("va", "a", (M, K)) + view("vb", "b", (N, K)) + view("vo", "o", (M, N))
            + tile("ta", "va", (M, K), (M, K), "%c0, %c0")
            + tile("tb", "vb", (N, K), (N, K), "%c0, %c0")
            + tile("to", "vo", (M, N), (M, N), "%c0, %c0")
            + load("x", "ta", (M, K)) + load("w", "tb", (N, K))
            + f"    %z = arith.constant dense<0.5> : tensor<{ty((M, N))}>\n"
            + f"    %r = linalg.matmul_transpose_b ins(%x, %w : tensor<{ty((M, K))}>, "
              f"tensor<{ty((N, K))}>) outs(%z : tensor<{ty((M, N))}>) -> tensor<{ty((M, N))}>\n"
            + store("r", "to", (M, N)))
    a, b = f16(RNG.standard_normal((M, K))), f16(RNG.standard_normal((N, K)))
    m = ktir.Machine()
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo = m.hbm.allocate((M, N), "float16", name="o")
    run(program("%a: index, %b: index, %o: index", body), m, ba.address, bb.address, bo.address)
    exact = a.astype(np.float64) @ b.astype(np.float64).T + 0.5
    got = bo.read().astype(np.float64)
    # f32 accumulation of 64 products + one f16 rounding: within one f16 ulp of the exact value
    assert np.all(np.abs(got - exact) <= np.spacing(np.abs(exact).astype(np.float16)) * 1.01)


def test_k_loop_rounds_once_per_iteration():
    M, K, N, KB = 1, 128, 32, 32
    body = (view("va", "a", (M, K)) + view("vb", "b", (N, K)) + view("vo", "o", (M, N))
            + "    %K = arith.constant 128 : index\n    %KB = arith.constant 32 : index\n"
            + f"    %z = arith.constant dense<0.0> : tensor<{ty((M, N))}>\n"
            + f"    %mm = scf.for %k = %c0 to %K step %KB iter_args(%acc = %z) -> "
              f"(tensor<{ty((M, N))}>) {{\n"
            + tile("ta", "va", (M, K), (M, KB), "%c0, %k") + tile("tb", "vb", (N, K), (N, KB),
                                                                  "%c0, %k")
            + load("x", "ta", (M, KB)) + load("w", "tb", (N, KB))
            + f"    %p = linalg.matmul_transpose_b ins(%x, %w : tensor<{ty((M, KB))}>, "
              f"tensor<{ty((N, KB))}>) outs(%z : tensor<{ty((M, N))}>) -> tensor<{ty((M, N))}>\n"
            + f"    %nx = arith.addf %acc, %p : tensor<{ty((M, N))}>\n"
            + f"    scf.yield %nx : tensor<{ty((M, N))}>\n    }}\n"
            + tile("to", "vo", (M, N), (M, N), "%c0, %c0") + store("mm", "to", (M, N)))
    a, b = f16(RNG.standard_normal((M, K))), f16(RNG.standard_normal((N, K)))
    m = ktir.Machine()
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo = m.hbm.allocate((M, N), "float16", name="o")
    fn = program("%a: index, %b: index, %o: index", body)
    plan = m.compile(fn)
    for _ in range(2):  # a second pass replays the same plan (and the cached f32 weight tiles)
        plan.run([ba.address, bb.address, bo.address])
        acc = np.zeros((M, N), np.float16)
        for k in range(0, K, KB):
            part = (a[:, k:k + KB].astype(np.float32) @ b[:, k:k + KB].astype(np.float32).T)
            acc = (acc.astype(np.float32) + part.astype(np.float16).astype(np.float32)).astype(
                np.float16)
        np.testing.assert_array_equal(bo.read(), acc)


def test_reduce_broadcast_transpose_extract_slice():
    body = (view("va", "a", (4, 16)) + view("vo", "o", (16, 4)) + view("vs", "s", (4,))
            + view("vq", "q", (2, 8))
            + tile("ta", "va", (4, 16), (4, 16), "%c0, %c0") + load("x", "ta", (4, 16))
            + "    %zero = arith.constant 0.0 : f16\n"
            + "    %init = tensor.splat %zero : tensor<4xf16>\n"
            + "    %sum = linalg.reduce { arith.addf } ins(%x : tensor<4x16xf16>) "
              "outs(%init : tensor<4xf16>) dimensions = [1]\n"
            + "    %ninf = arith.constant -1.0e38 : f16\n"
            + "    %mi = tensor.splat %ninf : tensor<4xf16>\n"
            + "    %mx = linalg.reduce { arith.maximumf } ins(%x : tensor<4x16xf16>) "
              "outs(%mi : tensor<4xf16>) dimensions = [1]\n"
            + "    %e = tensor.empty() : tensor<4x16xf16>\n"
            + "    %b = linalg.broadcast ins(%mx : tensor<4xf16>) outs(%e : tensor<4x16xf16>) "
              "dimensions = [1]\n"
            + "    %d = arith.subf %x, %b : tensor<4x16xf16>\n"
            + "    %et = tensor.empty() : tensor<16x4xf16>\n"
            + "    %t = linalg.transpose ins(%d : tensor<4x16xf16>) outs(%et : tensor<16x4xf16>) "
              "permutation = [1, 0]\n"
            + "    %sl = tensor.extract_slice %x[1, 4] [2, 8] [2, 1] : tensor<4x16xf16> to "
              "tensor<2x8xf16>\n"
            + tile("to", "vo", (16, 4), (16, 4), "%c0, %c0") + store("t", "to", (16, 4))
            + tile("ts", "vs", (4,), (4,), "%c0") + store("sum", "ts", (4,))
            + tile("tq", "vq", (2, 8), (2, 8), "%c0, %c0") + store("sl", "tq", (2, 8)))
    x = f16(RNG.standard_normal((4, 16)))
    m = ktir.Machine()
    bx = m.hbm.allocate_from(x, name="a")
    bo = m.hbm.allocate((16, 4), "float16", name="o")
    bs = m.hbm.allocate((4,), "float16", name="s")
    bq = m.hbm.allocate((2, 8), "float16", name="q")
    fn = program("%a: index, %o: index, %s: index, %q: index", body)
    run(fn, m, bx.address, bo.address, bs.address, bq.address)
    np.testing.assert_array_equal(bs.read(), x.astype(np.float64).sum(1).astype(np.float16))
    np.testing.assert_array_equal(bo.read(), (x - x.max(1, keepdims=True)).T)
    np.testing.assert_array_equal(bq.read(), x[1:4:2, 4:12])


def test_scf_if_selects_branch_from_scalar_argument():
    body = (view("vo", "o", (2,)) + tile("to", "vo", (2,), (2,), "%c0")
            + "    %c1 = arith.constant 1 : index\n"
            + "    %p = arith.cmpi sgt, %n, %c1 : index\n"
            + "    %one = arith.constant 1.0 : f16\n    %two = arith.constant 2.0 : f16\n"
            + "    %r = scf.if %p -> (f16) {\n      scf.yield %one : f16\n    } else {\n"
              "      scf.yield %two : f16\n    }\n"
            + "    %t = tensor.splat %r : tensor<2xf16>\n" + store("t", "to", (2,)))
    fn = program("%o: index, %n: index", body)
    m = ktir.Machine()
    bo = m.hbm.allocate((2,), "float16", name="o")
    run(fn, m, bo.address, 5)
    np.testing.assert_array_equal(bo.read(), [1, 1])
    run(fn, m, bo.address, 0)
    np.testing.assert_array_equal(bo.read(), [2, 2])


def test_multi_core_grid_splits_rows_by_tile_id():
    body = ("    %x, %y = ktdp.get_compute_tile_id : index, index\n"
            + "    %c2 = arith.constant 2 : index\n"
            + "    %row0 = arith.muli %y, %c2 : index\n    %row = arith.addi %row0, %x : index\n"
            + view("va", "a", (8, 16)) + view("vo", "o", (8, 16))
            + tile("ta", "va", (8, 16), (1, 16), "%row, %c0") + load("v", "ta", (1, 16))
            + "    %s = arith.mulf %v, %v : tensor<1x16xf16>\n"
            + tile("to", "vo", (8, 16), (1, 16), "%row, %c0") + store("s", "to", (1, 16)))
    fn = program("%a: index, %o: index", body, grid="[2, 4]")
    assert fn.grid == (2, 4, 1)
    a = f16(RNG.standard_normal((8, 16)))
    m = ktir.Machine()
    ba, bo = m.hbm.allocate_from(a, name="a"), m.hbm.allocate((8, 16), "float16", name="o")
    stats = run(fn, m, ba.address, bo.address)
    assert stats.cores == 8 and len(stats.lx_high_water) == 8
    np.testing.assert_array_equal(bo.read(), a * a)


def test_transposing_order_map_and_stick_addresses():
    order = "affine_map<(d0, d1) -> (d1, d0)>"
    body = (view("va", "a", (2, 64)) + view("vo", "o", (64, 2))
            + tile("ta", "va", (2, 64), (2, 64), "%c0, %c0", order=order, rshape=(64, 2))
            + load("v", "ta", (64, 2))
            + tile("to", "vo", (64, 2), (64, 2), "%c0, %c0") + store("v", "to", (64, 2)))
    fn = program("%a: index, %o: index", body)
    a = f16(RNG.standard_normal((2, 64)))
    m = ktir.Machine(address_unit="stick")
    ba = m.hbm.allocate_from(a, name="a", byte_address=128 * 10)
    bo = m.hbm.allocate((64, 2), "float16", name="o", byte_address=128 * 20)
    assert (ba.address, bo.address) == (10, 20)
    run(fn, m, 10, 20)
    np.testing.assert_array_equal(bo.read(), a.T)


def test_indirect_gather_rows():
    body = (view("vx", "x", (10, 8)) + view("vi", "i", (4,), "i32") + view("vo", "o", (4, 8))
            + "    %g = ktdp.construct_indirect_access_tile intermediate_variables(%p, %q) "
              "%vx[ind(%vi[%p]), (%q)] {variables_space_set = " + box((4, 8))
            + ", variables_space_order = " + ident(2)
            + "} : memref<10x8xf16>, memref<4xi32> -> !ktdp.access_tile<4x8xindex>\n"
            + load("v", "g", (4, 8)) + tile("to", "vo", (4, 8), (4, 8), "%c0, %c0")
            + store("v", "to", (4, 8)))
    fn = program("%x: index, %i: index, %o: index", body)
    x = f16(RNG.standard_normal((10, 8)))
    idx = np.array([7, 0, 7, 3], np.int32)
    m = ktir.Machine()
    bx, bi = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(idx, name="idx")
    bo = m.hbm.allocate((4, 8), "float16", name="o")
    run(fn, m, bx.address, bi.address, bo.address)
    np.testing.assert_array_equal(bo.read(), x[idx])


def test_inter_tile_reduce_sums_partials_of_all_cores():
    text = """
#all = affine_set<(i)[g] : (i >= 0, -i + 3 >= 0)>
module {
  func.func @k(%a: index, %o: index) attributes {grid = [4]} {
    %c0 = arith.constant 0 : index
    %pid = ktdp.get_compute_tile_id : index
""" + view("va", "a", (4, 8)) + tile("ta", "va", (4, 8), (1, 8), "%pid, %c0") + load(
        "v", "ta", (1, 8)) + """
    %f = ktdp.inter_tile_produce producer_tiles_per_group = #all
        : tensor<1x8xf16> -> !ktdp.tile_future<tensor<1x8xf16>, groups = affine_set<(g) : (g == 0)>>
    { ^bb0(%gid: index):
        ktdp.yield_partial %v : tensor<1x8xf16> }
    %z = arith.constant dense<0.0> : tensor<1x8xf16>
    %s = ktdp.inter_tile_reduce(%f) consumer_tiles_per_group = #all, identity(%z : tensor<1x8xf16>)
        : !ktdp.tile_future<tensor<1x8xf16>, groups = affine_set<(g) : (g == 0)>> -> tensor<8xf16>
    { ^bb0(%l: tensor<1x8xf16>, %r: tensor<1x8xf16>):
        %e = tensor.empty() : tensor<1x8xf16>
        %t = linalg.add ins(%l, %r : tensor<1x8xf16>, tensor<1x8xf16>) outs(%e : tensor<1x8xf16>) -> tensor<1x8xf16>
        ktdp.yield_reduced %t : tensor<1x8xf16> }
    %w = arith.cmpi eq, %pid, %c0 : index
    scf.if %w {
""" + view("vo", "o", (8,)) + tile("to", "vo", (8,), (8,), "%c0") + store("s", "to", (8,)) + """
    }
    return
  }
}"""
    module = ktir.parse_text(text, "r.mlir")
    ktir.verify(module, reshaping_reduce=True)  # the 1x8 partials reduce to an 8-vector
    a = f16(RNG.integers(-8, 8, (4, 8)) / 4)  # sums are exact in f16 whatever the order
    m = ktir.Machine()
    ba, bo = m.hbm.allocate_from(a, name="a"), m.hbm.allocate((8,), "float16", name="o")
    m.compile(module.function("k")).run([ba.address, bo.address])
    np.testing.assert_array_equal(bo.read(), a.astype(np.float64).sum(0).astype(np.float16))


# -- faults --------------------------------------------------------------------------------------

def fault_prog():
    """Core c copies row 5c of an 8-row view of ``a``; the callers give ``a`` 4 rows of memory,
    followed by the never-written ``o``: core 1's row 5 lies in ``o`` (a fault). (Rows outside a
    view's coordinate set would be masked, not faults: test_masked_access.py.)"""
    body = ("    %pid = ktdp.get_compute_tile_id : index\n"
            + view("va", "a", (8, 16)) + view("vo", "o", (4, 16))
            + "    %c5 = arith.constant 5 : index\n    %r = arith.muli %pid, %c5 : index\n"
            + tile("ta", "va", (8, 16), (1, 16), "%r, %c0") + load("v", "ta", (1, 16))
            + tile("to", "vo", (4, 16), (1, 16), "%r, %c0") + store("v", "to", (1, 16)))
    return program("%a: index, %o: index", body, grid="[2]")


def test_fault_access_outside_memory_names_function_op_and_core():
    m = ktir.Machine()
    ba = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="a")
    bo = m.hbm.allocate((4, 16), "float16", name="o")
    with pytest.raises(ktir.EmulationFault) as info:
        run(fault_prog(), m, ba.address, bo.address)  # core 1 reads row 5 of 4
    msg = str(info.value)
    assert msg.startswith("k.mlir:")
    assert "function @k, op ktdp.load, core" in msg
    assert info.value.core == 1 and "never-written HBM in region 'o'" in msg
    assert info.value.loc.line == 10  # the load, not the tile construction


def test_fault_read_of_never_written_hbm():
    body = (view("va", "a", (2, 8)) + tile("ta", "va", (2, 8), (2, 8), "%c0, %c0")
            + load("v", "ta", (2, 8)))
    m = ktir.Machine()
    ba = m.hbm.allocate((2, 8), "float16", name="activations")
    with pytest.raises(ktir.EmulationFault, match=r"op ktdp.load, core 0: read of never-written "
                                                  r"HBM in region 'activations'"):
        run(program("%a: index", body), m, ba.address)
    ba.write(np.ones((2, 8)))
    run(program("%a: index", body), m, ba.address)  # fine once written


def test_fault_unmapped_hbm():
    body = (view("va", "a", (2, 8)) + tile("ta", "va", (2, 8), (2, 8), "%c0, %c0")
            + load("v", "ta", (2, 8)))
    with pytest.raises(ktir.EmulationFault, match="no allocated region covers"):
        run(program("%a: index", body), ktir.Machine(), 4096)


def test_lx_overflow_and_high_water():
    body = (view("va", "a", (256, 256)) + tile("ta", "va", (256, 256), (256, 256), "%c0, %c0")
            + load("v", "ta", (256, 256))
            + "    %w = arith.mulf %v, %v : tensor<256x256xf16>\n"
            # v is read again, so w cannot take its buffer (tests/ktir/test_lx_liveness.py)
            + "    %z = arith.addf %w, %v : tensor<256x256xf16>\n")
    fn = program("%a: index", body)
    a = np.ones((256, 256), np.float16)
    m = ktir.Machine()  # 2 MiB: 2 x 128 KiB fits
    stats = run(fn, m, m.hbm.allocate_from(a, name="a").address)
    assert stats.lx_high_water == [2 * 256 * 256 * 2]
    small = ktir.Machine(lx_capacity=200 * 1024)
    with pytest.raises(ktir.EmulationFault) as info:
        run(fn, small, small.hbm.allocate_from(a, name="a").address)
    assert "LX scratchpad overflow" in str(info.value)
    assert info.value.op == "arith.mulf" and info.value.core == 0
    assert info.value.function == "k"


def test_generic_with_index_and_reduction_insert_slice_generate():
    body = (view("va", "a", (4, 8), "f32") + view("vo", "o", (4,), "f32")
            + view("vp", "p", (4, 8), "f32") + view("vg", "g", (2, 3), "f32")
            + tile("ta", "va", (4, 8), (4, 8), "%c0, %c0", "f32") + load("x", "ta", (4, 8), "f32")
            # row sums of x[i, j] * j via a generic with a reduction loop and linalg.index
            + "    %z = arith.constant dense<0.0> : tensor<4xf32>\n"
            + "    %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, "
              "affine_map<(d0, d1) -> (d0)>], iterator_types = [\"parallel\", \"reduction\"]} "
              "ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) {\n"
              "    ^bb0(%in: f32, %acc: f32):\n"
              "      %j = linalg.index 1 : index\n"
              "      %ji = arith.index_cast %j : index to i32\n"
              "      %jf = arith.sitofp %ji : i32 to f32\n"
              "      %m = arith.mulf %in, %jf : f32\n"
              "      %n = arith.addf %acc, %m : f32\n"
              "      linalg.yield %n : f32\n    } -> tensor<4xf32>\n"
            # insert a 2x2 block of ones into x at [1, 3]
            + "    %one = arith.constant dense<1.0> : tensor<2x2xf32>\n"
            + "    %ins = tensor.insert_slice %one into %x[1, 3] [2, 2] [1, 1] : tensor<2x2xf32> "
              "into tensor<4x8xf32>\n"
            # generate g[i, j] = 10 * i + j
            + "    %gen = tensor.generate {\n    ^bb0(%i: index, %k: index):\n"
              "      %c10 = arith.constant 10 : index\n      %t = arith.muli %i, %c10 : index\n"
              "      %u = arith.addi %t, %k : index\n      %ui = arith.index_cast %u : index to i32\n"
              "      %uf = arith.sitofp %ui : i32 to f32\n      tensor.yield %uf : f32\n"
              "    } : tensor<2x3xf32>\n"
            + "    %flat = tensor.collapse_shape %gen [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>\n"
            + "    %back = tensor.expand_shape %flat [[0, 1]] output_shape [2, 3] : tensor<6xf32> "
              "into tensor<2x3xf32>\n"
            + tile("to", "vo", (4,), (4,), "%c0", "f32") + store("s", "to", (4,), "f32")
            + tile("tp", "vp", (4, 8), (4, 8), "%c0, %c0", "f32") + store("ins", "tp", (4, 8), "f32")
            + tile("tg", "vg", (2, 3), (2, 3), "%c0, %c0", "f32") + store("back", "tg", (2, 3), "f32"))
    fn = program("%a: index, %o: index, %p: index, %g: index", body)
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    m = ktir.Machine()
    bx = m.hbm.allocate_from(x, name="a")
    bo = m.hbm.allocate((4,), "float32", name="o")
    bp = m.hbm.allocate((4, 8), "float32", name="p")
    bg = m.hbm.allocate((2, 3), "float32", name="g")
    run(fn, m, bx.address, bo.address, bp.address, bg.address)
    ref = np.zeros(4, np.float32)
    for j in range(8):  # sequential f32 fold, as the body is written
        ref = (ref + x[:, j] * np.float32(j)).astype(np.float32)
    np.testing.assert_array_equal(bo.read(), ref)
    expect = x.copy()
    expect[1:3, 3:5] = 1.0
    np.testing.assert_array_equal(bp.read(), expect)
    np.testing.assert_array_equal(bg.read(), [[0, 1, 2], [10, 11, 12]])


def test_inter_tile_reduce_without_producers_is_a_deadlock_fault():
    text = """
#none = affine_set<(i)[g] : (i - 10 >= 0, -i + 10 >= 0)>
#all = affine_set<(i)[g] : (i >= 0, -i + 1 >= 0)>
module {
  func.func @k() attributes {grid = [2]} {
    %z = arith.constant dense<0.0> : tensor<1x4xf16>
    %f = ktdp.inter_tile_produce producer_tiles_per_group = #all
        : tensor<1x4xf16> -> !ktdp.tile_future<tensor<1x4xf16>, groups = affine_set<(g) : (g == 0)>>
    { ^bb0(%gid: index):
        ktdp.yield_partial %z : tensor<1x4xf16> }
    %pid = ktdp.get_compute_tile_id : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %pid, %c0 : index
    scf.if %first {
      %g = ktdp.inter_tile_produce producer_tiles_per_group = #all
          : tensor<1x4xf16> -> !ktdp.tile_future<tensor<1x4xf16>, groups = affine_set<(g) : (g == 0)>>
      { ^bb0(%gid: index):
          ktdp.yield_partial %z : tensor<1x4xf16> }
      %s = ktdp.inter_tile_reduce(%g) consumer_tiles_per_group = #all, identity(%z : tensor<1x4xf16>)
          : !ktdp.tile_future<tensor<1x4xf16>, groups = affine_set<(g) : (g == 0)>> -> tensor<4xf16>
      { ^bb0(%l: tensor<1x4xf16>, %r: tensor<1x4xf16>):
          %e = tensor.empty() : tensor<1x4xf16>
          %t = linalg.add ins(%l, %r : tensor<1x4xf16>, tensor<1x4xf16>) outs(%e : tensor<1x4xf16>) -> tensor<1x4xf16>
          ktdp.yield_reduced %t : tensor<1x4xf16> }
    }
    return
  }
}"""
    module = ktir.parse_text(text, "d.mlir")
    ktir.verify(module, reshaping_reduce=True)  # the 1x4 partials reduce to a 4-vector
    with pytest.raises(ktir.EmulationFault) as info:
        ktir.Machine().compile(module.function("k")).run([])
    assert "deadlock" in str(info.value) and info.value.op == "ktdp.inter_tile_reduce"
    assert info.value.core == 0


@pytest.mark.parametrize("n", [32, 20000])  # batched small tiles / per-trip wide tiles
def test_k_loop_plain_matmul_matches_per_trip_reference(n):
    M, K, KB = 2, 96, 32
    body = (view("va", "a", (M, K)) + view("vb", "b", (K, n)) + view("vo", "o", (M, n))
            + "    %K = arith.constant 96 : index\n    %KB = arith.constant 32 : index\n"
            + f"    %init = arith.constant dense<0.25> : tensor<{ty((M, n))}>\n"
            + f"    %mm = scf.for %k = %c0 to %K step %KB iter_args(%acc = %init) -> "
              f"(tensor<{ty((M, n))}>) {{\n"
            + tile("ta", "va", (M, K), (M, KB), "%c0, %k") + tile("tb", "vb", (K, n), (KB, n),
                                                                  "%k, %c0")
            + load("x", "ta", (M, KB)) + load("w", "tb", (KB, n))
            + f"    %z = arith.constant dense<0.0> : tensor<{ty((M, n))}>\n"
            + f"    %p = linalg.matmul ins(%x, %w : tensor<{ty((M, KB))}>, "
              f"tensor<{ty((KB, n))}>) outs(%z : tensor<{ty((M, n))}>) -> tensor<{ty((M, n))}>\n"
            + f"    %nx = arith.addf %p, %acc : tensor<{ty((M, n))}>\n"
            + f"    scf.yield %nx : tensor<{ty((M, n))}>\n    }}\n"
            + tile("to", "vo", (M, n), (M, n), "%c0, %c0") + store("mm", "to", (M, n)))
    a, b = f16(RNG.standard_normal((M, K))), f16(RNG.standard_normal((K, n)))
    m = ktir.Machine()
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo = m.hbm.allocate((M, n), "float16", name="o")
    run(program("%a: index, %b: index, %o: index", body), m, ba.address, bb.address, bo.address)
    acc = np.full((M, n), 0.25, np.float16)
    for k in range(0, K, KB):
        exact = a[:, k:k + KB].astype(np.float64) @ b[k:k + KB].astype(np.float64)
        part = exact.astype(np.float32).astype(np.float16)
        acc = (acc.astype(np.float64) + part.astype(np.float64)).astype(np.float16)
    got = bo.read()
    # each f32 partial may differ from the f64 one in its last f32 bit, which can move the f16
    # rounding of a partial by one ulp in rare ties: allow 1 ulp per trip on those elements
    ulp = np.spacing(np.abs(acc)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - acc.astype(np.float64)) <= 3 * ulp)
    assert np.mean(got == acc) > 0.99


def test_hbm_regions_alignment_overlap_and_read_only():
    m = ktir.Machine(address_unit="byte")
    a = m.hbm.allocate((10,), "float16", name="a")
    b = m.hbm.allocate((3,), "float32", name="b")
    assert a.byte_address % 128 == 0 and b.byte_address % 128 == 0
    assert b.byte_address >= a.byte_address + 20 and b.address == b.byte_address
    with pytest.raises(UserError, match="overlap"):
        m.hbm.allocate((4,), "float16", name="c", byte_address=a.byte_address)
    with pytest.raises(UserError, match="multiple of 128"):
        m.hbm.allocate((4,), "float16", name="d", byte_address=4100)
    weights = np.arange(16, dtype=np.float16).reshape(2, 8)
    weights.flags.writeable = False
    body = (view("va", "a", (2, 8)) + tile("ta", "va", (2, 8), (2, 8), "%c0, %c0")
            + "    %x = arith.constant dense<1.0> : tensor<2x8xf16>\n" + store("x", "ta", (2, 8)))
    m2 = ktir.Machine()
    w = m2.hbm.allocate_from(weights, name="w")  # adopted without a copy, read-only
    assert np.shares_memory(w.array, weights)
    with pytest.raises(ktir.EmulationFault, match="read-only"):
        run(program("%a: index", body), m2, w.address)


def test_batched_k_loop_is_bit_identical_to_the_plain_loop(monkeypatch):
    from ktir_models.ktir import patterns

    M, K, N, KB = 1, 64, 9000, 2  # lm_head-like: many narrow trips over a wide accumulator
    body = (view("va", "a", (M, K)) + view("vb", "b", (N, K)) + view("vo", "o", (M, N))
            + "    %K = arith.constant 64 : index\n    %KB = arith.constant 2 : index\n"
            + f"    %z = arith.constant dense<0.0> : tensor<{ty((M, N))}>\n"
            + f"    %mm = scf.for %k = %c0 to %K step %KB iter_args(%acc = %z) -> "
              f"(tensor<{ty((M, N))}>) {{\n"
            + tile("ta", "va", (M, K), (M, KB), "%c0, %k") + tile("tb", "vb", (N, K), (N, KB),
                                                                  "%c0, %k")
            + load("x", "ta", (M, KB)) + load("w", "tb", (N, KB))
            + f"    %p = linalg.matmul_transpose_b ins(%x, %w : tensor<{ty((M, KB))}>, "
              f"tensor<{ty((N, KB))}>) outs(%z : tensor<{ty((M, N))}>) -> tensor<{ty((M, N))}>\n"
            + f"    %nx = arith.addf %acc, %p : tensor<{ty((M, N))}>\n"
            + f"    scf.yield %nx : tensor<{ty((M, N))}>\n    }}\n"
            + tile("to", "vo", (M, N), (M, N), "%c0, %c0") + store("mm", "to", (M, N)))
    a = f16(RNG.standard_normal((M, K)) * 30)  # large values: some sums overflow to inf
    b = f16(RNG.standard_normal((N, K)) * 300)
    outs = []
    for batched in (True, False):
        if not batched:
            monkeypatch.setitem(patterns.RULES, "scf.for", [])  # the plain loop
        m = ktir.Machine()
        ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
        bo = m.hbm.allocate((M, N), "float16", name="o")
        run(program("%a: index, %b: index, %o: index", body), m, ba.address, bb.address,
            bo.address)
        outs.append(bo.read())
    assert np.isinf(outs[1]).any()
    np.testing.assert_array_equal(outs[0].view(np.uint16), outs[1].view(np.uint16))


def test_bundled_tile_id_results_and_linear_core_order():
    body = ("    %g:2 = ktdp.get_compute_tile_id : index, index\n"
            + "    %c2 = arith.constant 2 : index\n    %r = arith.muli %g#1, %c2 : index\n"
            + "    %i = arith.addi %r, %g#0 : index\n"
            + "    %ii = arith.index_cast %i : index to i32\n"
            + "    %t = tensor.splat %ii : tensor<1xi32>\n"
            + view("v", "o", (4,), "i32")
            + tile("a", "v", (4,), (1,), "%i", "i32") + store("t", "a", (1,), "i32"))
    fn = program("%o: index", body, grid="[2, 2]")
    m = ktir.Machine()
    o = m.hbm.allocate((4,), "int32", name="o")
    run(fn, m, o.address)
    # core (x, y) writes x + 2*y at that position: every core ran once with its own coordinates
    np.testing.assert_array_equal(o.read(), [0, 1, 2, 3])


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_buffer_all_finite_matches_numpy(dtype):
    """Buffer.all_finite (checked after every node of a forward) against np.isfinite: the f16
    path tests exponent bits, so every f16 class is tried (largest finite, subnormals, zeros,
    +-inf, NaNs with any payload) and a single bad element anywhere is found."""
    m = ktir.Machine()
    specials = np.array([65504, -65504, 6e-8, -6e-8, 0.0, -0.0, 1.0, np.inf, -np.inf, np.nan],
                        dtype=dtype)
    if dtype == np.float16:
        payload_nan = np.array([0x7C01, 0xFE00], np.uint16).view(np.float16)
        specials = np.concatenate([specials, payload_nan])
    base = np.linspace(-3, 3, 999).astype(dtype)
    for value in specials:
        for where in (0, 500, 998):
            data = base.copy()
            data[where] = value
            buf = m.hbm.allocate_from(data.reshape(27, 37), name=f"b{where}")
            assert buf.all_finite() == bool(np.isfinite(data).all()), (value, where)
            m.hbm.free(buf)


def test_matmul_order_names_the_order_and_why_not_native(monkeypatch):
    """Machine(native_matmul=...) and the report line that names the f16 matmuls' summation
    order: disabled on request, unavailable (with the reason), or required and missing (a
    UserError, not a silent fallback)."""
    from ktir_models.ktir.backends import seqmm

    assert ktir.Machine(native_matmul=False).matmul_order().startswith("numpy (cpu) BLAS")
    assert not ktir.Machine(native_matmul=False).native_matmul
    monkeypatch.setenv("KTIR_MODELS_NATIVE", "0")
    seqmm._reset()
    try:
        m = ktir.Machine()
        assert not m.native_matmul
        assert "native kernel unavailable: disabled by KTIR_MODELS_NATIVE=0" in m.matmul_order()
        with pytest.raises(UserError, match="native matmul kernel is unavailable"):
            ktir.Machine(native_matmul=True)
    finally:
        monkeypatch.delenv("KTIR_MODELS_NATIVE")
        seqmm._reset()
    if seqmm.available():
        assert ktir.Machine().matmul_order().startswith("native f16 kernel")
