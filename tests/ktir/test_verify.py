"""Verifier tests: each rule violation is reported at its op as file:line:col: error: ..."""

from __future__ import annotations

import pytest

from ktir_models import ktir
from ktir_models.errors import UserError

HEAD = "module {\n  func.func @f(%a: index) {\n"
TAIL = "    return\n  }\n}\n"


def errors_of(body: str) -> list[str]:
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(HEAD + body + TAIL, "v.mlir"))
    assert isinstance(info.value, UserError)
    return [str(d) for d in info.value.diagnostics]


VIEW = """    %v = ktdp.construct_memory_view %a, sizes: [4, 8], strides: [8, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<4x8xf16>
    %c0 = arith.constant 0 : index
"""


def test_elementwise_type_mismatch():
    errs = errors_of("""    %x = arith.constant dense<1.0> : tensor<4xf16>
    %y = arith.constant dense<1.0> : tensor<8xf16>
    %z = arith.addf %x, %y : tensor<4xf16>
""")
    assert len(errs) == 1
    assert errs[0].startswith("v.mlir:5:5: error:") and "%y" in errs[0]


def test_matmul_shape_mismatch():
    errs = errors_of("""    %x = arith.constant dense<1.0> : tensor<2x4xf16>
    %w = arith.constant dense<1.0> : tensor<5x3xf16>
    %o = arith.constant dense<0.0> : tensor<2x3xf16>
    %m = linalg.matmul ins(%x, %w : tensor<2x4xf16>, tensor<5x3xf16>) outs(%o : tensor<2x3xf16>) -> tensor<2x3xf16>
""")
    assert errs == ["v.mlir:6:5: error: shape mismatch in linalg.matmul: tensor<2x4xf16> x "
                    "tensor<5x3xf16> -> tensor<2x3xf16>"]


def test_load_shape_must_match_tile():
    errs = errors_of(VIEW + """    %t = ktdp.construct_access_tile %v[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<4x8xf16> -> !ktdp.access_tile<2x8xindex>
    %x = ktdp.load %t : !ktdp.access_tile<2x8xindex> -> tensor<4x8xf16>
""")
    assert len(errs) == 1 and errs[0].startswith("v.mlir:10:5: error: load of")


def test_access_tile_set_may_differ_from_result_type():
    """The dialect ties no extent of access_tile_set to the result type (its own tests build a
    1x64 tile from a 2x64 set): a 4x8 tile over a 2x8 set verifies."""
    text = HEAD + VIEW + """    %t = ktdp.construct_access_tile %v[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<4x8xf16> -> !ktdp.access_tile<4x8xindex>
""" + TAIL
    ktir.verify(ktir.parse_text(text, "v.mlir"))


def test_store_element_type_must_match_view():
    errs = errors_of(VIEW + """    %t = ktdp.construct_access_tile %v[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<4x8xf16> -> !ktdp.access_tile<4x8xindex>
    %x = arith.constant dense<1.0> : tensor<4x8xf32>
    ktdp.store %x, %t : tensor<4x8xf32>, !ktdp.access_tile<4x8xindex>
""")
    assert len(errs) == 1 and "stores f32 into a view of f16" in errs[0]


def test_missing_required_attribute():
    errs = errors_of("""    %v = ktdp.construct_memory_view %a, sizes: [4], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>} : memref<4xf16>
""")
    assert errs == ["v.mlir:3:5: error: 'ktdp.construct_memory_view' needs the attribute "
                    "'memory_space'"]


def test_all_violations_are_reported_together():
    errs = errors_of("""    %x = arith.constant dense<1.0> : tensor<4xf16>
    %y = arith.constant dense<1.0> : tensor<8xf16>
    %z = arith.addf %x, %y : tensor<4xf16>
    %e = tensor.empty() : tensor<3x4xf16>
    %t = linalg.transpose ins(%x : tensor<4xf16>) outs(%e : tensor<3x4xf16>) permutation = [1, 0]
""")
    assert [e.split(":")[1] for e in errs] == ["5", "7"]


def test_yield_types_must_match_loop_results():
    errs = errors_of("""    %c0 = arith.constant 0 : index
    %z = arith.constant dense<0.0> : tensor<4xf16>
    %w = arith.constant dense<0.0> : tensor<4xf32>
    %r = scf.for %i = %c0 to %a step %a iter_args(%acc = %z) -> (tensor<4xf16>) {
      scf.yield %w : tensor<4xf32>
    }
""")
    assert len(errs) == 1 and "scf.yield yields (tensor<4xf32>)" in errs[0]


def test_undefined_value_and_redefinition():
    errs = errors_of("""    %x = arith.addi %a, %nope : index
    %x = arith.addi %a, %a : index
""")
    assert errs[0] == "v.mlir:3:25: error: use of undefined value '%nope'"
    assert errs[1] == "v.mlir:4:5: error: redefinition of value '%x'"


def test_function_must_end_with_return():
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text("module {\n func.func @f() {\n }\n}\n", "r.mlir"))
    assert "must end with 'return'" in str(info.value)


def test_clean_corpus_style_program_verifies():
    module = ktir.parse_text(HEAD + VIEW + TAIL, "ok.mlir")
    ktir.verify(module)
    assert module.function("f").arg_names == ["a"]
    with pytest.raises(ktir.KtirError, match="no function @g"):
        module.function("g")
