"""Parser unit tests: every syntax variant the corpus uses, on small inline programs."""

from __future__ import annotations

import math

import pytest

from ktir_models import ktir
from ktir_models.ktir.ir.nodes import AccessTileType, MemorySpace, MemRefType, TensorType, TileFutureType


def fn_of(text: str):
    module = ktir.parse_text(text, "t.mlir")
    ktir.verify(module)
    (fn,) = module.functions.values()
    return fn


def ops_of(fn):
    return list(fn.walk())


def view_prog(space: str, sizes_kw: str = "sizes:") -> str:
    return f"""
module {{
  func.func @f(%a: index) attributes {{grid = [2, 1]}} {{
    %v = ktdp.construct_memory_view %a, {sizes_kw} [4, 8], strides: [8, 1] {{
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      memory_space = {space}
    }} : memref<4x8xf16>
    return
  }}
}}"""


@pytest.mark.parametrize("space, expected", [
    ("#ktdp.memory_space<global>", MemorySpace("hbm")),
    ("#ktdp.memory_space<ct_local>", MemorySpace("lx")),
    ("#ktdp.memory_space<ct_local, ct_id = 3>", MemorySpace("lx", 3)),
    ("#ktdp.spyre_memory_space<HBM>", MemorySpace("hbm")),
    ("#ktdp.spyre_memory_space<LX>", MemorySpace("lx")),
    ("#ktdp.spyre_memory_space<LX, core = 5>", MemorySpace("lx", 5)),
    ("#ktdp.spyre_memory_space<L0>", MemorySpace("lx")),
])
def test_memory_space_spellings(space, expected):
    (view, _ret) = ops_of(fn_of(view_prog(space)))
    assert view.attrs["memory_space"] == expected
    assert view.result.type == MemRefType((4, 8), "f16")


@pytest.mark.parametrize("kw", ["sizes:", "sizes :"])
def test_sizes_colon_spacing(kw):
    (view, _ret) = ops_of(fn_of(view_prog("#ktdp.memory_space<global>", kw)))
    assert view.attrs["static_sizes"] == [4, 8]
    assert view.attrs["static_strides"] == [8, 1]


def test_grid_and_args():
    fn = fn_of(view_prog("#ktdp.memory_space<global>"))
    assert fn.grid == (2, 1, 1)
    assert fn.arg_names == ["a"]


TILE_PROG = """
#set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 3 >= 0)>
#ord = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @f(%a: index, %r: index, %j: index) {
    %c0 = arith.constant 0 : index
    %v = ktdp.construct_memory_view %a, sizes: [16, 8], strides: [8, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 15 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      memory_space = #ktdp.memory_space<global>
    } : memref<16x8xf16>
    %t1 = ktdp.construct_access_tile %v[%r + %j, %c0] {
      access_tile_set = #set, access_tile_order = #ord
    } : memref<16x8xf16> -> !ktdp.access_tile<2x4xindex>
    %t2 = ktdp.construct_access_tile %v[%r floordiv 2, 3 * %j - 1] {
      access_tile_set = #set, access_tile_order = #ord
    } : memref<16x8xf16> -> <2x4xindex>
    %x = ktdp.load %t1 : !ktdp.access_tile<2x4xindex> -> tensor<2x4xf16>
    ktdp.store %x, %t2 : tensor<2x4xf16>, <2x4xindex>
    return
  }
}"""


def test_access_tile_subscripts_are_affine_expressions_over_ssa_values():
    fn = fn_of(TILE_PROG)
    t1, t2 = [op for op in ops_of(fn) if op.name == "ktdp.construct_access_tile"]
    # %v[%r + %j, %c0]: map over (%r, %j, %c0)
    assert [v.name for v in t1.groups["indices"]] == ["%r", "%j", "%c0"]
    assert t1.attrs["base_map"]((5, 2, 0)) == (7, 0)
    assert t2.attrs["base_map"]((5, 2)) == (2, 5)
    # with or without the !ktdp.access_tile prefix: the same type
    assert t1.result.type == t2.result.type == AccessTileType((2, 4))


def test_alias_definitions_resolve():
    fn = fn_of(TILE_PROG)
    t1 = next(op for op in ops_of(fn) if op.name == "ktdp.construct_access_tile")
    box = t1.attrs["access_tile_set"].box_bounds()
    assert [(b.lo, b.hi) for b in box] == [(("c", 0), ("c", 1)), (("c", 0), ("c", 3))]


def test_indirect_tile_ind_subscripts():
    text = """
module {
  func.func @g(%x: index, %i: index, %c: index) {
    %X = ktdp.construct_memory_view %x, sizes: [100, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 99 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<100x64xf16>
    %I = ktdp.construct_memory_view %i, sizes: [4], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<4xi32>
    %g = ktdp.construct_indirect_access_tile intermediate_variables(%p, %q)
        %X[ind(%I[%p]), (%q + %c)] {
      variables_space_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      variables_space_order = affine_map<(d0, d1) -> (d0, d1)>
    } : memref<100x64xf16>, memref<4xi32> -> !ktdp.access_tile<4x8xindex>
    return
  }
}"""
    op = next(o for o in ops_of(fn_of(text)) if o.name == "ktdp.construct_indirect_access_tile")
    assert op.attrs["subscript_kinds"] == ["indirect", "direct"]
    # domain = (captured %c, %p, %q): the direct subscript is %q + %c
    direct = op.attrs["subscript_maps"][1]
    assert direct((10, 2, 3)) == (13,)
    assert op.attrs["subscript_maps"][0]((10, 2, 3)) == (2,)


def test_hex_and_inf_constants():
    text = """
module {
  func.func @c() {
    %a = arith.constant 0xFF800000 : i32
    %b = arith.bitcast %a : i32 to f32
    %n = arith.constant -1.0e38 : f16
    %h = arith.constant 0x7C00 : f16
    return
  }
}"""
    fn = fn_of(text)
    m = ktir.Machine()
    plan = m.compile(fn)
    plan.run([])
    consts = {op.result.name: op.attrs["value"].values[0] for op in ops_of(fn)
              if op.name == "arith.constant"}
    assert consts["%a"] == ("hex", 0xFF800000)
    assert consts["%n"] == -1.0e38


def test_scf_for_iter_args_with_and_without_parenthesised_types():
    text = """
module {
  func.func @l(%n: index) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %z = arith.constant dense<0.0> : tensor<4xf32>
    %r1 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<4xf32>) {
      scf.yield %acc : tensor<4xf32>
    }
    %r2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> tensor<4xf32> {
      scf.yield %acc : tensor<4xf32>
    }
    %a:2 = scf.for %i = %c0 to %n step %c1 iter_args(%x = %z, %y = %z) -> (tensor<4xf32>, tensor<4xf32>) {
      scf.yield %y, %x : tensor<4xf32>, tensor<4xf32>
    }
    %b = arith.addf %a#0, %a#1 : tensor<4xf32>
    scf.for %i = %c0 to %n step %c1 : index {
    }
    return
  }
}"""
    fn = fn_of(text)
    fors = [op for op in ops_of(fn) if op.name == "scf.for"]
    assert [len(f.results) for f in fors] == [1, 1, 2, 0]
    add = next(op for op in ops_of(fn) if op.name == "arith.addf")
    assert add.operands == fors[2].results


def test_tile_future_both_spellings_and_comments():
    text = """
// a comment line
#grp = affine_set<(g) : (g == 0)>
#who = affine_set<(i)[g] : (i >= 0, -i + 1 >= 0)>
module {
  func.func @r() attributes {grid = [2]} {   // trailing comment
    %z = arith.constant 0.0 : f16
    %p = tensor.splat %z : tensor<1x4xf16>
    %f1 = ktdp.inter_tile_produce producer_tiles_per_group = #who
        : tensor<1x4xf16> -> !ktdp.tile_future<tensor<1x4xf16>, groups = affine_set<(g) : (g == 0)>>
    { ^bb0(%gid: index):
        ktdp.yield_partial %p : tensor<1x4xf16> }
    %f2 = ktdp.inter_tile_produce producer_tiles_per_group = #who -> <(tensor<1x4xf16>), groups = #grp>
    { ^bb0(%gid: index):
        ktdp.yield_partial %p : tensor<1x4xf16> }
    %s = ktdp.inter_tile_reduce(%f2) consumer_tiles_per_group = #who, identity(%p : tensor<1x4xf16>)
        : <tensor<1x4xf16>, groups = #grp> -> tensor<1x4xf16>
    { ^bb0(%a: tensor<1x4xf16>, %b: tensor<1x4xf16>):
        %e = tensor.empty() : tensor<1x4xf16>
        %c = linalg.add ins(%a, %b : tensor<1x4xf16>, tensor<1x4xf16>) outs(%e : tensor<1x4xf16>) -> tensor<1x4xf16>
        ktdp.yield_reduced %c : tensor<1x4xf16> }
    return
  }
}"""
    fn = fn_of(text)
    f1, f2 = [op for op in ops_of(fn) if op.name == "ktdp.inter_tile_produce"]
    assert isinstance(f1.result.type, TileFutureType)
    assert f1.result.type == f2.result.type
    assert fn.grid == (2, 1, 1)


def test_reduce_shorthand_and_explicit_body_and_linalg_attrs():
    text = """
module {
  func.func @k() {
    %z = arith.constant 0.0 : f16
    %x = tensor.splat %z : tensor<2x8xf16>
    %i = tensor.splat %z : tensor<2xf16>
    %r1 = linalg.reduce { arith.addf } ins(%x : tensor<2x8xf16>) outs(%i : tensor<2xf16>) dimensions = [1]
    %r2 = linalg.reduce ins(%x : tensor<2x8xf16>) outs(%i : tensor<2xf16>) dimensions = [1]
      (%in: f16, %acc: f16) {
        %s = arith.addf %in, %acc : f16
        linalg.yield %s : f16
      }
    %e = tensor.empty() : tensor<8x2xf16>
    %t = linalg.transpose ins(%x : tensor<2x8xf16>) outs(%e : tensor<8x2xf16>) permutation = [1, 0]
    return
  }
}"""
    ops = ops_of(fn_of(text))
    r1, r2 = [o for o in ops if o.name == "linalg.reduce"]
    assert r1.attrs["combiner"] == "arith.addf"
    assert r2.regions and r1.attrs["dimensions"] == r2.attrs["dimensions"] == [1]
    t = next(o for o in ops if o.name == "linalg.transpose")
    assert t.attrs["permutation"] == [1, 0] and t.result.type == TensorType((8, 2), "f16")


def test_ktir_extension_file(tmp_path):
    p = tmp_path / "k.ktir"
    p.write_text("module {\n  func.func @e() {\n    return\n  }\n}\n")
    assert "e" in ktir.load_module(p).functions


def test_locations_are_line_and_column():
    fn = fn_of(TILE_PROG)
    load = next(op for op in ops_of(fn) if op.name == "ktdp.load")
    assert (load.loc.line, load.loc.col) == (17, 5)
    assert load.loc.file == "t.mlir"


def test_float_literal_forms():
    text = """
module {
  func.func @f() {
    %a = arith.constant 1.000000e+00 : f32
    %b = arith.constant -2.5 : f16
    %c = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    return
  }
}"""
    ops = ops_of(fn_of(text))
    assert ops[0].attrs["value"].values == (1.0,)
    assert ops[1].attrs["value"].values == (-2.5,)
    assert ops[2].attrs["value"].values == (1.0, 2.0, 3.0)
    assert not math.isnan(ops[0].attrs["value"].values[0])
