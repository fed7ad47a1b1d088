"""``func.call`` between functions of one module and ``scf.parallel`` / ``scf.reduce``, with
MLIR's semantics, against numpy / plain Python; their verification errors; their generic form."""

from __future__ import annotations

import numpy as np
import pytest

ktir = pytest.importorskip("ktir_models.ktir")
from ktir_models.ktir.parse.printer import print_generic  # noqa: E402

HBM = "#ktdp.spyre_memory_space<HBM>"


def row_view(name: str, addr: str, n: int, elem: str = "f16") -> str:
    return (f"    %{name} = ktdp.construct_memory_view {addr}, sizes: [1, {n}], strides: [{n}, 1] "
            f"{{coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, "
            f"-d1 + {n - 1} >= 0)>, memory_space = {HBM}}} : memref<1x{n}x{elem}>\n"
            f"    %{name}_t = ktdp.construct_access_tile %{name}[%c0, %c0] {{access_tile_set = "
            f"affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + {n - 1} >= 0)>}} "
            f": memref<1x{n}x{elem}> -> !ktdp.access_tile<1x{n}xindex>\n")


CALLS = """module {
  func.func @axpy(%a: f16, %x: tensor<1x8xf16>, %y: tensor<1x8xf16>) -> tensor<1x8xf16> {
    %s = tensor.splat %a : tensor<1x8xf16>
    %ax = arith.mulf %s, %x : tensor<1x8xf16>
    %r = arith.addf %ax, %y : tensor<1x8xf16>
    return %r : tensor<1x8xf16>
  }
  func.func @twice(%x: tensor<1x8xf16>, %k: index) -> (tensor<1x8xf16>, index) {
    %two = arith.constant 2.0 : f16
    %r = func.call @axpy(%two, %x, %x) : (f16, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x8xf16>
    %c1 = arith.constant 1 : index
    %k1 = arith.addi %k, %c1 : index
    return %r, %k1 : tensor<1x8xf16>, index
  }
  func.func @main(%in: index, %out: index, %a: f16) {
    %c0 = arith.constant 0 : index
""" + row_view("vi", "%in", 8) + row_view("vo", "%out", 8) + """
    %x = ktdp.load %vi_t : !ktdp.access_tile<1x8xindex> -> tensor<1x8xf16>
    %y = call @axpy(%a, %x, %x) : (f16, tensor<1x8xf16>, tensor<1x8xf16>) -> tensor<1x8xf16>
    %z:2 = func.call @twice(%y, %c0) : (tensor<1x8xf16>, index) -> (tensor<1x8xf16>, index)
    ktdp.store %z#0, %vo_t : tensor<1x8xf16>, !ktdp.access_tile<1x8xindex>
    return
  }
}
"""


def _run_main(module, a: float):
    m = ktir.Machine()
    x = (np.arange(8) / 4 - 1).astype(np.float16).reshape(1, 8)
    src = m.hbm.allocate_from(x, name="in")
    out = m.hbm.allocate((1, 8), "float16", name="out")
    m.compile(module.function("main")).run({"in": src.address, "out": out.address, "a": a})
    return x, out.array


@pytest.mark.parametrize("generic", [False, True])
def test_calls_compute_what_the_callees_say(generic: bool) -> None:
    """y = a*x + x; z = 2*y + y (a callee calling a callee, a call with two results), in f16
    step by step; the generic form of the module gives the same bytes."""
    module = ktir.parse_text(CALLS, "calls.mlir")
    ktir.verify(module)
    if generic:
        module = ktir.parse_text(print_generic(module), "calls.generic")
        ktir.verify(module)
    for a in (0.5, -3.0):
        x, out = _run_main(module, a)
        h = np.float16
        y = (h(a) * x).astype(h) + x
        np.testing.assert_array_equal(out, ((h(2) * y).astype(h) + y).astype(h))


@pytest.mark.parametrize("body, message", [
    ("%r = func.call @nowhere(%x) : (index) -> index", "call to @nowhere, which is not a function"),
    ("%r = func.call @inc(%x, %x) : (index, index) -> index", "call passes (index, index) but "
                                                              "@inc takes (index)"),
    ("%r = func.call @inc(%x) : (index) -> i32", "call expects (i32) but @inc returns (index)"),
])
def test_bad_calls_are_located_errors(body: str, message: str) -> None:
    text = f"""func.func @inc(%v: index) -> index {{
  %c1 = arith.constant 1 : index
  %w = arith.addi %v, %c1 : index
  return %w : index
}}
func.func @f(%x: index) {{
  {body}
  return
}}
"""
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(text, "c.mlir"))
    assert message in str(info.value) and "c.mlir:7:" in str(info.value), str(info.value)


def test_recursion_is_rejected() -> None:
    text = """func.func @a(%x: index) -> index {
  %r = func.call @b(%x) : (index) -> index
  return %r : index
}
func.func @b(%x: index) -> index {
  %r = func.call @a(%x) : (index) -> index
  return %r : index
}
"""
    with pytest.raises(ktir.KtirError, match=r"recursive call \(@a -> @b -> @a\)"):
        ktir.verify(ktir.parse_text(text, "r.mlir"))


def test_return_must_match_the_declared_results() -> None:
    text = "func.func @f(%x: index) -> (index, index) {\n  return %x : index\n}\n"
    with pytest.raises(ktir.KtirError, match=r"return gives \(index\) but @f returns "
                                             r"\(index, index\)"):
        ktir.verify(ktir.parse_text(text, "ret.mlir"))


def test_a_fault_in_a_callee_names_the_callee_op() -> None:
    text = """func.func @div(%a: index, %b: index) -> index {
  %q = arith.divsi %a, %b : index
  return %q : index
}
func.func @main(%a: index, %b: index) {
  %q = func.call @div(%a, %b) : (index, index) -> index
  return
}
"""
    module = ktir.parse_text(text, "d.mlir")
    ktir.verify(module)
    plan = ktir.Machine().compile(module.function("main"))
    plan.run({"a": 7, "b": 2})
    with pytest.raises(ktir.EmulationFault) as info:
        plan.run({"a": 7, "b": 0})
    assert "d.mlir:2:" in str(info.value) and "arith.divsi" in str(info.value)


# ---------------------------------------------------------------------------------------------
# scf.parallel

PARALLEL = """func.func @p(%n: index, %m: index, %out: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %big = arith.constant -1000 : index
  %s:2 = scf.parallel (%i, %j) = (%c0, %c1) to (%n, %m) step (%c1, %c2) init (%c0, %big) -> (index, index) {
    %ij = arith.muli %i, %j : index
    %v = arith.addi %ij, %i : index
    scf.reduce(%v, %ij : index, index) {
    ^bb0(%l: index, %r: index):
      %t = arith.addi %l, %r : index
      scf.reduce.return %t : index
    }, {
    ^bb0(%l: index, %r: index):
      %t = arith.maxsi %l, %r : index
      scf.reduce.return %t : index
    }
  }
  %view = ktdp.construct_memory_view %out, sizes: [2], strides: [1] {
    coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 1 >= 0)>, memory_space = #ktdp.spyre_memory_space<HBM>} : memref<2xi64>
  %t = ktdp.construct_access_tile %view[%c0] {access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 1 >= 0)>} : memref<2xi64> -> !ktdp.access_tile<2xindex>
  %a = arith.index_cast %s#0 : index to i64
  %b = arith.index_cast %s#1 : index to i64
  %x = tensor.from_elements %a, %b : tensor<2xi64>
  ktdp.store %x, %t : tensor<2xi64>, !ktdp.access_tile<2xindex>
  return
}
"""


@pytest.mark.parametrize("generic", [False, True])
def test_parallel_reduces_every_point(generic: bool) -> None:
    """Two reduced values with their own combiners (sum, max) over a strided 2-D box, including
    an empty box (the results are the inits)."""
    module = ktir.parse_text(PARALLEL, "par.mlir")
    ktir.verify(module)
    if generic:
        module = ktir.parse_text(print_generic(module), "par.generic")
        ktir.verify(module)
    m = ktir.Machine()
    out = m.hbm.allocate((2,), "int64", name="out")
    plan = m.compile(module.function("p"))
    for n, mm in ((3, 7), (5, 2), (0, 9), (4, 6), (4, 6)):  # a repeat replays a tape
        plan.run({"n": n, "m": mm, "out": out.address})
        pts = [(i, j) for i in range(n) for j in range(1, mm, 2)]
        want = [sum(i * j + i for i, j in pts), max([i * j for i, j in pts], default=-1000)]
        want[1] = max(want[1], -1000)
        np.testing.assert_array_equal(out.array, want, err_msg=f"n={n} m={mm}")


def test_parallel_without_results_runs_its_body_at_every_point() -> None:
    text = """func.func @fill(%out: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %view = ktdp.construct_memory_view %out, sizes: [4], strides: [1] {
    coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>, memory_space = #ktdp.spyre_memory_space<HBM>} : memref<4xi64>
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %t = ktdp.construct_access_tile %view[%i] {access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 >= 0)>} : memref<4xi64> -> !ktdp.access_tile<1xindex>
    %sq = arith.muli %i, %i : index
    %v = arith.index_cast %sq : index to i64
    %x = tensor.splat %v : tensor<1xi64>
    ktdp.store %x, %t : tensor<1xi64>, !ktdp.access_tile<1xindex>
    scf.reduce
  }
  return
}
"""
    module = ktir.parse_text(text, "fill.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    out = m.hbm.allocate((4,), "int64", name="out")
    m.compile(module.function("fill")).run({"out": out.address})
    np.testing.assert_array_equal(out.array, [0, 1, 4, 9])


@pytest.mark.parametrize("old, new, message", [
    ("init (%c0, %big) -> (index, index)", "init (%c0) -> (index, index)",
     "1 init values but 2 results"),
    ("scf.reduce(%v, %ij : index, index)", "scf.reduce(%v : index)",
     "scf.reduce reduces 1 value(s) but scf.parallel has 2 result(s)"),
    ("%t = arith.maxsi %l, %r : index\n      scf.reduce.return %t : index",
     "%t = arith.maxsi %l, %r : index\n      %u = arith.index_cast %t : index to i32\n"
     "      scf.reduce.return %u : i32",
     "scf.reduce.return yields (i32) but scf.reduce expects (index)"),
])
def test_bad_parallel_is_a_located_error(old: str, new: str, message: str) -> None:
    assert old in PARALLEL
    with pytest.raises(ktir.KtirError, match=re_escape(message)):
        ktir.verify(ktir.parse_text(PARALLEL.replace(old, new), "bad.mlir"))


def re_escape(s: str) -> str:
    import re

    return re.escape(s)
