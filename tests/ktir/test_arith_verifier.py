"""What MLIR's arith verifier refuses, refused here too: one located error per operand-class rule
and per constant out of its type's range; and what it accepts, accepted."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.cli import main
from ktir_models.errors import UserError

HEAD = "module {\n  func.func @f(%a: index) {\n"
TAIL = "    return\n  }\n}\n"
LINE = 3  # the op under test is the first line of the body


def errors_of(body: str) -> list[str]:
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(HEAD + body + TAIL, "v.mlir"))
    assert isinstance(info.value, UserError)
    return [str(d) for d in info.value.diagnostics]


def args(**types) -> str:
    """Function arguments of the given types, so the op under test is on a known line."""
    return ", ".join(f"%{n}: {t}" for n, t in types.items())


def check_op(op: str, arg_types: dict, expect: str | None) -> None:
    """``op`` (one line) in a function taking ``arg_types``: refused with ``expect`` in one
    located message, or accepted (``expect`` None)."""
    text = (f"module {{\n  func.func @f({args(**arg_types)}) {{\n    {op}\n" + TAIL)
    module = ktir.parse_text(text, "v.mlir")
    if expect is None:
        ktir.verify(module)
        return
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(module)
    errs = [str(d) for d in info.value.diagnostics]
    assert len(errs) == 1, errs
    assert errs[0].startswith("v.mlir:3:5: error:"), errs
    assert expect in errs[0], errs


T16 = "tensor<4xf16>"
TI32 = "tensor<4xi32>"

# (name, op, argument types, expected fragment); each is a rule MLIR's verifier states
REFUSED = [
    ("cmpi-on-floats", "%r = arith.cmpi slt, %x, %y : tensor<4xf16>", {"x": T16, "y": T16},
     "'arith.cmpi' operand #0 must be signless integer or index-like"),
    ("cmpf-on-integers", "%r = arith.cmpf olt, %x, %y : tensor<4xi32>", {"x": TI32, "y": TI32},
     "'arith.cmpf' operand #0 must be float-like"),
    ("addi-on-floats", "%r = arith.addi %x, %y : f32", {"x": "f32", "y": "f32"},
     "'arith.addi' operand #0 must be signless integer or index-like"),
    ("addf-on-integers", "%r = arith.addf %x, %y : i32", {"x": "i32", "y": "i32"},
     "'arith.addf' operand #0 must be float-like"),
    ("negf-on-integers", "%r = arith.negf %x : i32", {"x": "i32"},
     "'arith.negf' operand #0 must be float-like"),
    ("divsi-on-si32", "%r = arith.divsi %x, %y : si32", {"x": "si32", "y": "si32"},
     "must be signless integer or index-like, but got si32"),
    ("addi-on-ui8-tensor", "%r = arith.addi %x, %y : tensor<4xui8>",
     {"x": "tensor<4xui8>", "y": "tensor<4xui8>"}, "but got tensor<4xui8>"),
    ("extf-narrowing", "%r = arith.extf %x : f32 to f16", {"x": "f32"},
     "result type f16 must be wider than the operand type f32"),
    ("extf-same-width", "%r = arith.extf %x : f16 to bf16", {"x": "f16"},
     "must be wider than"),
    ("truncf-widening", "%r = arith.truncf %x : f16 to f32", {"x": "f16"},
     "result type f32 must be narrower than the operand type f16"),
    ("extf-from-integer", "%r = arith.extf %x : i16 to f32", {"x": "i16"},
     "'arith.extf' operand #0 must be float-like"),
    ("extsi-narrowing", "%r = arith.extsi %x : i32 to i8", {"x": "i32"}, "must be wider than"),
    ("extui-to-float", "%r = arith.extui %x : i8 to f32", {"x": "i8"},
     "result must be signless integer-like"),
    ("trunci-widening", "%r = arith.trunci %x : i8 to i32", {"x": "i8"},
     "must be narrower than"),
    ("trunci-from-index", "%r = arith.trunci %x : index to i8", {"x": "index"},
     "'arith.trunci' operand #0 must be signless integer-like"),
    ("sitofp-from-float", "%r = arith.sitofp %x : f16 to f32", {"x": "f16"},
     "'arith.sitofp' operand #0 must be signless integer-like"),
    ("uitofp-to-integer", "%r = arith.uitofp %x : i8 to i32", {"x": "i8"},
     "result must be float-like"),
    ("sitofp-from-index", "%r = arith.sitofp %x : index to f32", {"x": "index"},
     "operand #0 must be signless integer-like"),
    ("fptosi-from-integer", "%r = arith.fptosi %x : i32 to i32", {"x": "i32"},
     "'arith.fptosi' operand #0 must be float-like"),
    ("fptoui-to-float", "%r = arith.fptoui %x : f32 to f16", {"x": "f32"},
     "result must be signless integer-like"),
    ("index-cast-index-to-index", "%r = arith.index_cast %x : index to index", {"x": "index"},
     "casts between index and a signless integer"),
    ("index-cast-int-to-int", "%r = arith.index_cast %x : i32 to i64", {"x": "i32"},
     "casts between index and a signless integer"),
    ("index-castui-from-float", "%r = arith.index_castui %x : f32 to index", {"x": "f32"},
     "'arith.index_castui' operand #0 must be signless integer or index-like"),
    ("index-cast-from-si32", "%r = arith.index_cast %x : si32 to index", {"x": "si32"},
     "but got si32"),
    ("bitcast-width-change", "%r = arith.bitcast %x : f16 to i32", {"x": "f16"},
     "must be as wide as"),
    ("bitcast-from-index", "%r = arith.bitcast %x : index to i64", {"x": "index"},
     "'arith.bitcast' operand #0 must be signless integer or float-like"),
    ("select-condition-shape", "%r = arith.select %c, %x, %y : tensor<2xi1>, tensor<4xf16>",
     {"c": "tensor<2xi1>", "x": T16, "y": T16}, "does not have the result's shape"),
]


@pytest.mark.parametrize("name,op,arg_types,expect", REFUSED, ids=[r[0] for r in REFUSED])
def test_operand_class_rule_is_refused(name, op, arg_types, expect):
    check_op(op, arg_types, expect)


ACCEPTED = [
    ("cmpi-on-index", "%r = arith.cmpi ult, %x, %y : index", {"x": "index", "y": "index"}),
    ("cmpi-on-i1", "%r = arith.cmpi eq, %x, %y : i1", {"x": "i1", "y": "i1"}),
    ("extf-bf16-to-f32", "%r = arith.extf %x : bf16 to f32", {"x": "bf16"}),
    ("truncf-f32-to-bf16", "%r = arith.truncf %x : f32 to bf16", {"x": "f32"}),
    ("extui-i1", "%r = arith.extui %x : i1 to i32", {"x": "i1"}),
    ("bitcast-f16-i16", "%r = arith.bitcast %x : tensor<4xf16> to tensor<4xi16>", {"x": T16}),
    ("index-castui-to-i32", "%r = arith.index_castui %x : index to i32", {"x": "index"}),
    ("shrui-tensor", "%r = arith.shrui %x, %x : tensor<4xi32>", {"x": TI32}),
    ("ceildivui", "%r = arith.ceildivui %x, %x : i64", {"x": "i64"}),
]


@pytest.mark.parametrize("name,op,arg_types", ACCEPTED, ids=[r[0] for r in ACCEPTED])
def test_what_mlir_accepts_is_accepted(name, op, arg_types):
    check_op(op, arg_types, None)


# -- constants ------------------------------------------------------------------------------------

CONSTANT_REFUSED = [
    ("300 : i8", "integer constant out of range [-128, 255]"),
    ("256 : i8", "out of range"),
    ("-129 : i8", "out of range"),
    ("2 : i1", "out of range [-1, 1]"),
    ("dense<128> : tensor<2xsi8>", "out of range [-128, 127]"),
    ("-1 : ui8", "integer type must be signless"),
    ("9223372036854775808 : index", "out of range"),
    ("18446744073709551616 : i64", "out of range"),
    ("1.5 : i32", "a float literal is not an integer"),
    ("true : i32", "true/false are i1 values"),
    ("1 : f32", "a float type needs a float literal"),
    ("0x10000 : f16", "hexadecimal float constant out of range"),
    ("dense<[1, 300]> : tensor<2xi8>", "tensor literal 300 is not a valid i8"),
    ("dense<-1> : tensor<4xui8>", "out of range [0, 255]"),
    ("dense<200> : tensor<4xsi8>", "out of range [-128, 127]"),
    ("5 : si32", "integer type must be signless"),
]


@pytest.mark.parametrize("const,expect", CONSTANT_REFUSED, ids=[c for c, _ in CONSTANT_REFUSED])
def test_constant_out_of_its_types_range_is_refused(const, expect):
    errs = errors_of(f"    %x = arith.constant {const}\n")
    assert len(errs) == 1 and errs[0].startswith(f"v.mlir:{LINE}:5: error:"), errs
    assert expect in errs[0], errs


CONSTANT_ACCEPTED = [
    ("255 : i8", -1), ("-128 : i8", -128), ("127 : i8", 127), ("-1 : i1", True),
    ("1 : i1", True), ("4294967295 : i32", -1), ("18446744073709551615 : i64", -1),
    ("-9223372036854775808 : index", -2**63), ("0xFFFF : i16", -1),
]


def stored(lines: str, elem: str, n: int, dtype) -> np.ndarray:
    """Run ``lines`` (which define ``%t : tensor<n x elem>``) and read ``%t`` back from HBM."""
    text = (f"module {{\n  func.func @f(%o: index) attributes {{grid = [1]}} {{\n"
            f"    %c0 = arith.constant 0 : index\n{lines}"
            f"    %v = ktdp.construct_memory_view %o, sizes: [{n}], strides: [1] {{coordinate_set "
            f"= affine_set<(d0) : (d0 >= 0, -d0 + {n - 1} >= 0)>, memory_space = "
            f"#ktdp.memory_space<global>}} : memref<{n}x{elem}>\n"
            f"    %a = ktdp.construct_access_tile %v[%c0] {{access_tile_set = affine_set<(d0) : "
            f"(d0 >= 0, -d0 + {n - 1} >= 0)>, access_tile_order = affine_map<(d0) -> (d0)>}} : "
            f"memref<{n}x{elem}> -> !ktdp.access_tile<{n}xindex>\n"
            f"    ktdp.store %t, %a : tensor<{n}x{elem}>, !ktdp.access_tile<{n}xindex>\n" + TAIL)
    module = ktir.parse_text(text, "c.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    bo = m.hbm.allocate_from(np.zeros(n, dtype), name="o")
    m.compile(module.function("f")).run([bo.address])
    return bo.read()


def run_constant(const: str, elem: str, dtype) -> np.ndarray:
    """Store scalar constant ``const`` (of element type ``elem``) and read it back."""
    return stored(f"    %x = arith.constant {const}\n"
                  f"    %t = tensor.from_elements %x : tensor<1x{elem}>\n", elem, 1, dtype)


@pytest.mark.parametrize("const,value", CONSTANT_ACCEPTED, ids=[c for c, _ in CONSTANT_ACCEPTED])
def test_constant_in_range_reads_as_its_n_bits(const, value):
    """A signless iN literal may be written as its signed or its unsigned reading; the value is
    the N bits (stored signed)."""
    elem = const.split(": ")[1]
    dtype = {"i8": np.int8, "i1": np.bool_, "i16": np.int16, "i32": np.int32,
             "i64": np.int64, "index": np.int64}[elem]
    assert run_constant(const, elem, dtype)[0] == value


@pytest.mark.parametrize("const,dtype,want", [
    ("dense<[-5, 7]> : tensor<2xsi32>", np.int32, [-5, 7]),
    ("dense<255> : tensor<2xui8>", np.uint8, [255, 255]),
    ("dense<[0, 18446744073709551615]> : tensor<2xui64>", np.uint64, [0, 2**64 - 1]),
    ("dense<[255, -1]> : tensor<2xi8>", np.int8, [-1, -1]),
])
def test_tensor_constants_of_signed_and_unsigned_types_are_dense_values(const, dtype, want):
    """MLIR refuses a scalar si32 constant but not a dense tensor of si32 or ui8; the values are
    the type's (a ui8 255 stays 255, an i8 255 is the bits of -1)."""
    elem = const.rsplit("x", 1)[1].rstrip(">")
    got = stored(f"    %t = arith.constant {const}\n", elem, 2, dtype)
    assert got.tolist() == want


def test_float_literal_past_the_types_range_rounds_to_infinity_as_mlir_does():
    """MLIR's parser rounds a decimal literal to the type (nearest, ties to even) and keeps an
    overflow as infinity: ``-1.0e38 : f16`` (which the corpus' softmax kernels use as the
    maximum's identity) is -inf, ``70000.0 : f16`` is inf, ``65519.0 : f16`` rounds down to
    the largest finite f16."""
    for lit, want in (("-1.0e38", -np.inf), ("70000.0", np.inf), ("65519.0", 65504.0),
                      ("65520.0", np.inf)):
        got = run_constant(f"{lit} : f16", "f16", np.float16)
        assert got[0] == np.float16(want), (lit, got[0])


def test_cli_check_refuses_an_out_of_range_constant_with_exit_2(tmp_path, capsys):
    path = tmp_path / "k.mlir"
    path.write_text(HEAD + "    %x = arith.constant 300 : i8\n" + TAIL)
    before = path.read_bytes()
    with pytest.raises(SystemExit) as exc:
        main(["check", str(path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert f"k.mlir:{LINE}:5: error:" in err and "out of range" in err
    assert "Traceback" not in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("op,arg_types,expect", [
    ("%r = math.exp %x : tensor<4xi32>", {"x": TI32}, "'math.exp' operand #0 must be float-like"),
    ("%r = math.absi %x : f32", {"x": "f32"}, "'math.absi' operand #0 must be signless integer"),
    ("%r = math.fma %x, %x, %x : i32", {"x": "i32"}, "'math.fma' operand #0 must be float-like"),
    ("%r = math.exp %x : tensor<4xf16>", {"x": T16}, None),
    ("%r = math.absi %x : i32", {"x": "i32"}, None),
], ids=["exp-on-integers", "absi-on-floats", "fma-on-integers", "exp-f16", "absi-i32"])
def test_math_operand_classes(op, arg_types, expect):
    check_op(op, arg_types, expect)
