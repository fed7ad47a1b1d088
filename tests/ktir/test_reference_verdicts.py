"""Verdicts where the dialect and its reference interpreter say what a program means.

1. An intermediate variable of ``construct_indirect_access_tile`` named like a value of an
   enclosing scope (``intermediate_variables(%row, %k)`` with ``%row`` an index defined above)
   stands for that value only while its iterator cannot move: with the variable's range in
   ``variables_space_set`` pinned to [0, 0] the program is accepted and reads through the outer
   value; over any other range it is rejected (iterating would silently replace the value).
2. ``inter_tile_reduce``'s result has the future's partial type: a result that drops the
   partial's leading 1 is rejected (accepted only under the opt-in ``reshaping_reduce``, the
   reading of ktir-cpu's own ring-reduce examples); the same reduce with the partial's type
   runs, against numpy.

The kernels are written here from the semantics (4x4 f16 data, an i32 index table).
"""

from __future__ import annotations

import numpy as np
import pytest

ktir = pytest.importorskip("ktir_models.ktir")

BOX4 = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 3 >= 0)>"


def gather(row_range: str, tile: str, symbols: str = "") -> str:
    """X[IDX[%row + i, k], k] over (i, k) in ``row_range`` x [0, 3], stored to Y."""
    rows = int(tile.split("x")[0])
    return f"""module {{
  func.func @gather(%x: index, %idx: index, %y: index, %n: index) {{
    %row = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %X = ktdp.construct_memory_view %x, sizes: [4, 4], strides: [4, 1] {{
      coordinate_set = {BOX4}, memory_space = #ktdp.spyre_memory_space<HBM>}} : memref<4x4xf16>
    %IDX = ktdp.construct_memory_view %idx, sizes: [4, 4], strides: [4, 1] {{
      coordinate_set = {BOX4}, memory_space = #ktdp.spyre_memory_space<HBM>}} : memref<4x4xi32>
    %Y = ktdp.construct_memory_view %y, sizes: [{rows}, 4], strides: [4, 1] {{
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + {rows - 1} >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>}} : memref<{rows}x4xf16>
    %t = ktdp.construct_indirect_access_tile intermediate_variables(%row, %k)
        %X[ind(%IDX[%row, %k]), (%k)] {symbols} {{
          variables_space_set = {row_range},
          variables_space_order = affine_map<(d0, d1) -> (d0, d1)>
        }} : memref<4x4xf16>, memref<4x4xi32> -> !ktdp.access_tile<{tile}xindex>
    %RUN
    return
  }}
}}
"""


RUN = """%v = ktdp.load %t : !ktdp.access_tile<1x4xindex> -> tensor<1x4xf16>
    %o = ktdp.construct_access_tile %Y[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + 3 >= 0)>
    } : memref<1x4xf16> -> !ktdp.access_tile<1x4xindex>
    ktdp.store %v, %o : tensor<1x4xf16>, !ktdp.access_tile<1x4xindex>"""

def _line_of(text: str, word: str) -> int:
    return next(k for k, line in enumerate(text.split("\n"), 1) if word in line)


PINNED = "affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + 3 >= 0)>"


def test_outer_value_over_a_nonzero_range_is_rejected() -> None:
    text = gather(BOX4, "4x4").replace("%RUN", "")
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(text, "bad.mlir"))
    (diag,) = info.value.diagnostics
    assert diag.loc.line == _line_of(text, "construct_indirect_access_tile")
    assert "%row is an outer SSA value" in diag.message and "[0, 3]" in diag.message


def test_outer_value_over_a_symbolic_range_is_rejected() -> None:
    text = gather("affine_set<(d0, d1)[s0] : (d0 >= 0, -d0 + s0 >= 0, d1 >= 0, -d1 + 3 >= 0)>",
                  "1x4", "symbols(%n)").replace("%RUN", "")
    with pytest.raises(ktir.KtirError, match="outer SSA value"):
        ktir.verify(ktir.parse_text(text, "sym.mlir"))


def test_outer_value_pinned_to_zero_is_accepted_as_written() -> None:
    """The reference's own shape: a 4x4 tile type over the 1x4 pinned variable space."""
    module = ktir.parse_text(gather(PINNED, "4x4").replace("%RUN", ""), "ok.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    m.hbm.allocate_from(np.zeros((4, 4), np.int32), name="idx")
    m.compile(module.function("gather")).run({"x": 0, "idx": 0, "y": 0, "n": 0})


def test_outer_value_pinned_to_zero_reads_through_the_value() -> None:
    """Y[0, k] = X[IDX[2, k], k]: row 2 of the table, not the iterator's row 0."""
    module = ktir.parse_text(gather(PINNED, "1x4").replace("%RUN", RUN), "read.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    x = np.arange(16, dtype=np.float16).reshape(4, 4)
    idx = np.array([[0, 0, 0, 0], [1, 1, 1, 1], [3, 1, 2, 0], [2, 2, 2, 2]], np.int32)
    xb = m.hbm.allocate_from(x, name="x")
    ib = m.hbm.allocate_from(idx, name="idx")
    yb = m.hbm.allocate((1, 4), "float16", name="y")
    m.compile(module.function("gather")).run(
        {"x": xb.address, "idx": ib.address, "y": yb.address, "n": 0})
    k = np.arange(4)
    np.testing.assert_array_equal(yb.array, x[idx[2, k], k][None, :])


def reduce_kernel(result: str, reshape: str) -> str:
    """Two cores each contribute one 1x8 row; core 0 stores the sum."""
    return f"""#row = affine_set<(d0, d1) : (d0 >= 0, -d0 >= 0, d1 >= 0, -d1 + 7 >= 0)>
#both = affine_set<(i)[g] : (i - 2*g >= 0, -i + 2*g + 1 >= 0)>
func.func @sum2(%in: index, %out: index) attributes {{grid = [2]}} {{
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %pid = ktdp.get_compute_tile_id : index
  %o = arith.muli %pid, %c8 : index
  %p = arith.addi %in, %o : index
  %v = ktdp.construct_memory_view %p, sizes: [1, 8], strides: [8, 1] {{
    coordinate_set = #row, memory_space = #ktdp.spyre_memory_space<HBM>}} : memref<1x8xf16>
  %t = ktdp.construct_access_tile %v[%c0, %c0] {{access_tile_set = #row}} : memref<1x8xf16> -> !ktdp.access_tile<1x8xindex>
  %part = ktdp.load %t : !ktdp.access_tile<1x8xindex> -> tensor<1x8xf16>
  %fut = ktdp.inter_tile_produce producer_tiles_per_group = #both
      : tensor<1x8xf16> -> !ktdp.tile_future<tensor<1x8xf16>, groups = affine_set<(g) : (g == 0)>> {{
    ^bb0(%gid: index):
      ktdp.yield_partial %part : tensor<1x8xf16>
  }}
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<1x8xf16>
  %id = linalg.fill ins(%zero : f16) outs(%e : tensor<1x8xf16>) -> tensor<1x8xf16>
  %r = ktdp.inter_tile_reduce(%fut) consumer_tiles_per_group = #both,
      identity(%id : tensor<1x8xf16>)
      : !ktdp.tile_future<tensor<1x8xf16>, groups = affine_set<(g) : (g == 0)>> -> {result} {{
    ^bb0(%a: tensor<1x8xf16>, %b: tensor<1x8xf16>):
      %s0 = tensor.empty() : tensor<1x8xf16>
      %s = linalg.add ins(%a, %b : tensor<1x8xf16>, tensor<1x8xf16>) outs(%s0 : tensor<1x8xf16>) -> tensor<1x8xf16>
      ktdp.yield_reduced %s : tensor<1x8xf16>
  }}
  %first = arith.cmpi eq, %pid, %c0 : index
  scf.if %first {{
    {reshape}
    %w = ktdp.construct_memory_view %out, sizes: [1, 8], strides: [8, 1] {{
      coordinate_set = #row, memory_space = #ktdp.spyre_memory_space<HBM>}} : memref<1x8xf16>
    %wt = ktdp.construct_access_tile %w[%c0, %c0] {{access_tile_set = #row}} : memref<1x8xf16> -> !ktdp.access_tile<1x8xindex>
    ktdp.store %r2, %wt : tensor<1x8xf16>, !ktdp.access_tile<1x8xindex>
  }}
  return
}}
"""


DROPPED = reduce_kernel("tensor<8xf16>", "%r2 = tensor.expand_shape %r [[0, 1]] output_shape "
                                         "[1, 8] : tensor<8xf16> into tensor<1x8xf16>")
KEPT = reduce_kernel("tensor<1x8xf16>", "%r2 = arith.addf %r, %id : tensor<1x8xf16>")


def _sum2(module) -> None:
    m = ktir.Machine()
    rows = (np.arange(16).reshape(2, 8) / 8).astype(np.float16)
    src = m.hbm.allocate_from(rows, name="in")
    out = m.hbm.allocate((1, 8), "float16", name="out")
    m.compile(module.function("sum2")).run({"in": src.address, "out": out.address})
    np.testing.assert_array_equal(out.array, rows.sum(axis=0, keepdims=True))


def test_reduce_result_dropping_the_leading_one_is_rejected() -> None:
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(DROPPED, "drop.mlir"))
    (diag,) = info.value.diagnostics
    assert diag.loc.line == _line_of(DROPPED, "ktdp.inter_tile_reduce")
    assert "tensor<8xf16> must be the future's partial type tensor<1x8xf16>" in diag.message


def test_reduce_result_with_the_partial_type_runs() -> None:
    module = ktir.parse_text(KEPT, "kept.mlir")
    ktir.verify(module)
    _sum2(module)


def test_reshaping_reduce_is_the_opt_in_reading() -> None:
    module = ktir.parse_text(DROPPED, "drop.mlir")
    ktir.verify(module, reshaping_reduce=True)
    _sum2(module)


def test_loading_a_tile_with_unfilled_positions_faults() -> None:
    """The pinned 1x4 variable space cannot fill a 4x4 tile: loading it is a clear fault, not
    a silently mis-shaped tensor (masked tile positions are not modelled)."""
    run = RUN.replace("1x4xindex> -> tensor<1x4xf16>", "4x4xindex> -> tensor<4x4xf16>")
    run = run.split("\n")[0]  # the load alone
    module = ktir.parse_text(gather(PINNED, "4x4").replace("%RUN", run), "unfilled.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    m.hbm.allocate_from(np.zeros((4, 4), np.int32), name="idx")
    with pytest.raises(ktir.EmulationFault, match="fills 1x4 of the tile type's 4x4 positions"):
        m.compile(module.function("gather")).run({"x": 0, "idx": 0, "y": 0, "n": 0})
