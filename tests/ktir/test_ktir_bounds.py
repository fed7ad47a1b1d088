"""Pathological KTIR: every bound of parse/bounds.py gives one located error (never a
RecursionError, a SyntaxError from a generated evaluator, a ValueError from int(), a
MemoryError or a numpy failure at run), and legal but long affine expressions evaluate."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.ir import affine
from ktir_models.ktir.parse import parser
from ktir_models.ktir.parse import bounds, lexer


def _located(text: str, message: str, *, verify: bool = False) -> ktir.errors.Diagnostic:
    with pytest.raises(ktir.KtirError, match=message) as info:
        module = ktir.parse_text(text, "p.mlir")
        if verify:
            ktir.verify(module)
    diag = info.value.diagnostics[0]
    assert diag.loc.file == "p.mlir" and diag.loc.line >= 1 and diag.loc.col >= 1
    return diag


def nested_fors(n: int) -> str:
    lines = ["func.func @f() {", "  %c0 = arith.constant 0 : index",
             "  %c1 = arith.constant 1 : index"]
    lines += [f"  scf.for %i{k} = %c0 to %c1 step %c1 {{" for k in range(n)]
    lines += ["  }"] * n + ["  return", "}"]
    return "\n".join(lines) + "\n"


def test_a_thousand_nested_regions_are_refused_at_the_first_one_too_deep() -> None:
    diag = _located(nested_fors(1000), "nest deeper than 64 levels")
    assert diag.loc.line == 3 + 64  # the 64th scf.for opens the 65th region (the body is 1)


def test_regions_nested_to_the_bound_check_and_run() -> None:
    module = ktir.parse_text(nested_fors(bounds.MAX_NESTING - 1), "p.mlir")
    ktir.verify(module)
    ktir.Machine().compile(module.only_function).run({})


def test_deeply_nested_array_attributes_are_refused() -> None:
    text = ("func.func @f() attributes {x = " + "[" * 10_000 + "]" * 10_000 + "} {\n"
            "  return\n}\n")
    _located(text, "nest deeper than 64 levels")


@pytest.mark.parametrize("arg", ["!ktdp.tile_future<" * 3000 + "tensor<4xf16>" + ">" * 3000,
                                 "<(" * 3000])
def test_deeply_nested_types_are_refused(arg: str) -> None:
    _located(f"func.func @f(%a: {arg}) {{\n  return\n}}\n", "types nest deeper than 64 levels")


def test_deeply_nested_locations_are_refused() -> None:
    loc = "callsite(" * 2000 + '"a":1:1' + ' at "b":2:2)' * 2000
    _located(f"func.func @f() {{\n  return loc({loc})\n}}\n", "locations nest deeper than 64")


def _map(results: str) -> str:
    return f"affine_map<(d0) -> ({results})>"


def _tile_program(order: str) -> str:
    """A 1x4 copy through a tile whose order map is ``order`` (over one dim)."""
    return f"""func.func @f(%a: index, %o: index) {{
  %c0 = arith.constant 0 : index
  %v = ktdp.construct_memory_view %a, sizes: [4], strides: [1] {{coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>, memory_space = #ktdp.memory_space<global>}} : memref<4xf16>
  %w = ktdp.construct_memory_view %o, sizes: [4], strides: [1] {{coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>, memory_space = #ktdp.memory_space<global>}} : memref<4xf16>
  %t = ktdp.construct_access_tile %v[%c0] {{access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>, access_tile_order = {order}}} : memref<4xf16> -> !ktdp.access_tile<4xindex>
  %u = ktdp.construct_access_tile %w[%c0] {{access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>, access_tile_order = {order}}} : memref<4xf16> -> !ktdp.access_tile<4xindex>
  %x = ktdp.load %t : !ktdp.access_tile<4xindex> -> tensor<4xf16>
  ktdp.store %x, %u : tensor<4xf16>, !ktdp.access_tile<4xindex>
  return
}}
"""


@pytest.mark.parametrize("results, value", [
    ("d0" + " * 1" * 200, 5),  # a product of 201 factors (a SyntaxError in the evaluator)
    ("-" * 100_000 + "d0", 5),  # 10^5 signs (a RecursionError)
    ("-" * 99_999 + "d0", -5),
    (" + ".join(["d0"] * 5000), 25_000),  # a sum of 5000 terms
    ("d0 * 2 * 3 * 7" + " + d0" * 30, 5 * 42 + 5 * 30),
])
def test_long_flat_affine_expressions_evaluate(results: str, value: int) -> None:
    m = affine.parse_map(results.join(["(d0) -> (", ")"]))
    assert m((5,)) == (value,)
    assert affine.depth(m.results[0]) <= 20
    np.testing.assert_array_equal(m((np.arange(3, dtype=np.int64),))[0],
                                  np.arange(3) * (value // 5))


def test_parentheses_nest_to_sixteen_levels_in_an_affine_map() -> None:
    m = ktir.parse_text(_tile_program(_map("(" * 15 + "d0" + ")" * 15)), "p.mlir")
    order = m.only_function.body.block.ops[3].attrs["access_tile_order"]
    assert order((3,)) == (3,)


def test_a_long_order_map_runs_in_a_kernel() -> None:
    """The flat order expression of 300 terms (300 * d0) sorts the points like d0."""
    module = ktir.parse_text(_tile_program(_map(" + ".join(["d0"] * 300))), "p.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    a = m.hbm.allocate_from(np.arange(4, dtype=np.float16), name="a")
    o = m.hbm.allocate((4,), "float16", name="o")
    m.compile(module.only_function).run([a.address, o.address])
    np.testing.assert_array_equal(o.array, np.arange(4))


@pytest.mark.parametrize("results, message", [
    ("d0" + " * 2" * 200, "does not fit in 64 bits"),
    ("d0" + " floordiv 2" * 100, "nests deeper than 64"),
    ("(" * 100 + "d0" + ")" * 100, "parentheses nest deeper than 16 levels"),
    ("d0 + " + "9" * 5000, "number literal of 5000 characters is too long"),
])
def test_affine_expressions_beyond_the_bounds_are_located_errors(results: str,
                                                                 message: str) -> None:
    _located(_tile_program(_map(results)), message)


def test_huge_integer_literals_are_located_errors() -> None:
    big = "7" * 5000  # int() refuses more than 4300 digits
    diag = _located(f"func.func @f() {{\n  %c = arith.constant {big} : i64\n  return\n}}\n",
                    "number literal of 5000 characters is too long")
    assert (diag.loc.line, diag.loc.col) == (2, 23)
    _located(f"func.func @f() {{\n  %c = arith.constant dense<[1, {big}]> : tensor<2xi64>\n"
             "  return\n}\n", "number literal of 5000 characters")
    _located(f"func.func @f() {{\n  return loc(\"a\":{big}:1)\n}}\n", "number literal")


def test_a_two_tebibyte_splat_is_refused_by_check() -> None:
    text = ("func.func @f() {\n  %c = arith.constant dense<1.0> : tensor<1048576x1048576xf16>\n"
            "  return\n}\n")
    diag = _located(text, "tensor of 1099511627776 elements", verify=True)
    assert (diag.loc.line, diag.loc.col) == (2, 3)
    fine = text.replace("1048576x1048576", "1024x1024")
    ktir.verify(ktir.parse_text(fine, "p.mlir"))


def test_lines_and_tokens_over_the_bound_are_located(monkeypatch) -> None:
    """The bound is 128 MiB; a smaller one here shows the mechanism on both tokenizers."""
    monkeypatch.setattr(lexer, "MAX_LINE_CHARS", 1000)
    monkeypatch.setattr(lexer, "MAX_TOKEN_CHARS", 1000)
    lexer.LINE_CACHE.clear()
    long_line = "  %c = arith.constant dense<[" + ", ".join(["1"] * 600) + "]> : tensor<600xi32>"
    text = f"func.func @f() {{\n{long_line}\n  return\n}}\n"
    diag = _located(text, r"line of \d+ characters is too long \(at most 1000\)")
    assert (diag.loc.line, diag.loc.col) == (2, 1)
    with pytest.raises(ktir.KtirError, match="too long"):
        parser.parse_text(text, "p.mlir", cached=False)
    # a type written over several lines is one token of the whole text
    split = "func.func @f(%a: memref<\n" + "\n".join(["4x"] * 400) + "4xf16>) {\n  return\n}\n"
    _located(split, r"token of \d+ characters is too long")


def test_text_and_file_size_bounds(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(parser, "MAX_TEXT_CHARS", 100)
    text = "func.func @f() {\n" + "  // a comment\n" * 10 + "  return\n}\n"
    _located(text, r"program text of \d+ characters is too long \(at most 100\)")
    path = tmp_path / "big.mlir"
    path.write_text(text)
    with pytest.raises(ktir.KtirError, match="file larger than 100 bytes") as info:
        ktir.load_module(path)
    assert info.value.diagnostics[0].loc.file == str(path)


def test_op_count_bound(monkeypatch) -> None:
    monkeypatch.setattr(parser, "MAX_OPS", 100)
    body = "".join(f"  %c{k} = arith.constant {k} : index\n" for k in range(100))
    _located(f"func.func @f() {{\n{body}  return\n}}\n", "more than 100 ops in one module")
    ktir.parse_text(f"func.func @f() {{\n{body[:-(len(body) // 100)]}  return\n}}\n", "p.mlir")


def test_line_count_bound_refuses_before_tokenizing(monkeypatch) -> None:
    """A million one-op lines took a minute to tokenize before the op bound could refuse them;
    the line count is checked first."""
    monkeypatch.setattr(parser, "MAX_LINES", 50)
    body = "".join(f"  %c{k} = arith.constant {k} : index\n" for k in range(60))
    diag = _located(f"func.func @f() {{\n{body}  return\n}}\n",
                    "program text of 64 lines is too long")
    assert diag.loc.line == 51
    monkeypatch.setattr(parser, "tokenize", None)  # refused before the tokenizer is called
    _located("\n" * 60, "too long")


def test_bounds_are_far_above_what_real_programs_use() -> None:
    """The measured maxima of the corpus, fixtures and upstream programs (bounds.py's
    docstring) stay far below each bound."""
    assert bounds.MAX_OPS >= 50 * 2786 and bounds.MAX_LINES >= 100 * 3245
    assert bounds.MAX_LINE_CHARS >= 1000 * 18028
    assert bounds.MAX_NESTING >= 10 * 4
    assert bounds.MAX_CONSTANT_ELEMENTS >= 1000 * 1024


@pytest.mark.parametrize("literal, ty, ok", [
    ("300", "i8", False), ("255", "i8", True), ("-128", "i8", True), ("-129", "i8", False),
    ("0x1FF", "i8", False), ("0xFF", "i8", True), ("9223372036854775808", "i64", True),
    ("18446744073709551616", "i64", False), ("2", "i1", False), ("-1", "i1", True),
])
def test_integer_constants_must_fit_their_type(literal: str, ty: str, ok: bool) -> None:
    """MLIR's rule: an integer literal fits the type's width, read signed or unsigned."""
    text = f"func.func @f() {{\n  %c = arith.constant {literal} : {ty}\n  return\n}}\n"
    dense = (f"func.func @f() {{\n  %c = arith.constant dense<[0, {literal}]> : tensor<2x{ty}>"
             "\n  return\n}\n")
    for program in (text, dense):
        if ok:
            ktir.verify(ktir.parse_text(program, "p.mlir"))
        else:
            diag = _located(program, f"is not a valid {ty}: integer constant out of range",
                            verify=True)
            assert (diag.loc.line, diag.loc.col) == (2, 3)
