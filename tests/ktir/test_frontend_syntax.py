"""Syntax today's producers write that is not about one op: MLIR's whole attribute syntax in
function argument, result and function attribute dictionaries, and `check` refusing every op
kind the emulator cannot run, in custom and in generic form, at its location."""

from __future__ import annotations

import pytest

from ktir_models import ktir
from ktir_models.cli import main


def test_function_attribute_dictionaries_take_typed_and_dialect_attributes() -> None:
    text = """func.func @f(%a: index {tt.divisibility = 16 : i32, tt.pointer_range = 32 : i32},
             %n: i32 {llvm.noalias, tt.note = "x"}) -> (index {tt.r = #foo.bar<1>})
    attributes {grid = [2, 1], noinline = false, tt.num_warps = 4 : i32} {
  return %a : index
}
"""
    module = ktir.parse_text(text, "f.mlir")
    ktir.verify(module)
    fn = module.function("f")
    assert fn.grid == (2, 1, 1)
    assert fn.attrs["tt.num_warps"] == 4 and fn.attrs["noinline"] is False
    assert [a.name for a in fn.args] == ["%a", "%n"]


@pytest.mark.parametrize("line, col", [
    ('  "foo.bar"() : () -> ()', 3),
    ('  %x = "foo.bar"(%c) : (index) -> index', 3),
    ('  %x = "test.op"() {a = 1 : i32} : () -> tensor<4xf16>', 3),
    ("  foo.bar", 3),
    ("  %x = foo.bar %c : index", 8),
])
def test_check_refuses_an_unknown_op_in_either_form(tmp_path, capsys, line: str,
                                                    col: int) -> None:
    path = tmp_path / "u.mlir"
    path.write_text(f"func.func @f() {{\n  %c = arith.constant 0 : index\n{line}\n  return\n}}\n")
    with pytest.raises(SystemExit) as info:
        main(["check", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}:3:{col}: error: unknown operation '" in err
    assert "Traceback" not in err


def test_an_op_kind_with_a_rule_but_no_builder_is_refused(monkeypatch) -> None:
    """The verifier asks the registry for a builder, not only a rule: an op kind that parses
    and has a verify rule but that the compiler cannot build does not check clean."""
    from ktir_models.ktir.ir import registry
    from ktir_models.ktir.verify.rules import Rule

    monkeypatch.setitem(registry.REGISTRY, "test.half_done", registry.OpDef(
        "test.half_done", syntax=lambda p, op: [], verify=Rule((0, 0), (0, 0))))
    module = ktir.parse_text("func.func @f() {\n  test.half_done\n  return\n}\n", "h.mlir")
    with pytest.raises(ktir.KtirError, match=r"h\.mlir:2:3: error: unknown operation "
                                             r"'test\.half_done': the emulator does not"):
        ktir.verify(module)
    with pytest.raises(ktir.KtirError):
        ktir.Machine().compile(module.function("f"))
