"""Error objects: message formats and their place in the project's error hierarchy."""

from __future__ import annotations

import pytest

from ktir_models import ktir
from ktir_models.cli import main
from ktir_models.errors import UserError
from ktir_models.ktir.ir.errors import Diagnostic, Location


def test_ktir_error_lists_every_diagnostic_one_per_line():
    err = ktir.KtirError([Diagnostic(Location("a.mlir", 3, 7), "first"),
                          Diagnostic(Location("a.mlir", 9, 1), "second")])
    assert isinstance(err, UserError) and err.exit_code == 2
    assert str(err).splitlines() == ["a.mlir:3:7: error: first", "a.mlir:9:1: error: second"]


def test_emulation_fault_names_function_op_location_and_core():
    fault = ktir.EmulationFault("boom", function="f", op="ktdp.load",
                                loc=Location("k.mlir", 4, 5), core=3)
    assert isinstance(fault, UserError)
    assert str(fault) == "k.mlir:4:5: emulation fault in function @f, op ktdp.load, core 3: boom"


def test_parse_error_location_of_first_bad_token():
    with pytest.raises(ktir.KtirError) as info:
        ktir.parse_text("module {\n  func.func @f() {\n    %x = arith.constant 1 index\n", "p.mlir")
    (d,) = info.value.diagnostics
    assert (d.loc.line, d.loc.col) == (3, 27) and "expected ':'" in d.message


def test_bad_affine_text_is_located_inside_the_attribute():
    text = ("module {\n  func.func @f(%a: index) {\n    %v = ktdp.construct_memory_view %a, "
            "sizes: [4], strides: [1] {coordinate_set = affine_set<(d0) : (d0 >= 0, d0 * d0 >= 0)>"
            ", memory_space = #ktdp.memory_space<global>} : memref<4xf16>\n    return\n  }\n}\n")
    with pytest.raises(ktir.KtirError) as info:
        ktir.parse_text(text, "a.mlir")
    (d,) = info.value.diagnostics
    assert d.loc.line == 3 and "non-constant" in d.message


def test_cli_main_turns_user_errors_into_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.mlir"
    bad.write_text("module {\n  func.func @f() {\n    %x = foo.bar\n    return\n  }\n}\n")
    with pytest.raises(SystemExit) as info:
        main(["check", str(bad)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"{bad}:3:10: error: unknown operation 'foo.bar'" in err
