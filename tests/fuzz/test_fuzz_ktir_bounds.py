"""Pathological KTIR through ``ktir-models check`` and ``run``: deep nesting (regions, array
attributes, locations, affine parentheses), long flat affine expressions (sign runs, products,
sums), long literals, huge constant tensors and unknown ops, at sizes drawn on both sides of
each bound of parse/bounds.py. Every case keeps harness.py's contract (exit 0/1/2, no traceback,
inputs byte-identical, within the time limit); besides, a case past a bound exits 2 with one
located ``file:line:col: error:`` line, and a case within every bound checks clean."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ktir_models.ktir.parse import bounds

from .harness import CASES, fuzz_case
from .test_fuzz_files import fuzz

_LOCATED = re.compile(r"^\S+:\d+:\d+: error: ")
_BOX = "affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>"


def _kernel(order: str = "affine_map<(d0) -> (d0)>", extra: str = "", attrs: str = "",
            loc: str = "") -> str:
    """A 4-element f16 copy (``extra`` ops before it, ``order`` its tiles' order map)."""
    return f"""func.func @f(%a: index, %o: index){attrs} {{
  %c0 = arith.constant 0 : index
{extra}  %v = ktdp.construct_memory_view %a, sizes: [4], strides: [1] {{coordinate_set = {_BOX}, memory_space = #ktdp.memory_space<global>}} : memref<4xf16>
  %w = ktdp.construct_memory_view %o, sizes: [4], strides: [1] {{coordinate_set = {_BOX}, memory_space = #ktdp.memory_space<global>}} : memref<4xf16>
  %t = ktdp.construct_access_tile %v[%c0] {{access_tile_set = {_BOX}, access_tile_order = {order}}} : memref<4xf16> -> !ktdp.access_tile<4xindex>
  %u = ktdp.construct_access_tile %w[%c0] {{access_tile_set = {_BOX}, access_tile_order = {order}}} : memref<4xf16> -> !ktdp.access_tile<4xindex>
  %x = ktdp.load %t : !ktdp.access_tile<4xindex> -> tensor<4xf16>
  ktdp.store %x, %u : tensor<4xf16>, !ktdp.access_tile<4xindex>
  return{loc}
}}
"""


def _case(data) -> tuple[str, str, bool]:
    """(kind, program text, whether some bound is exceeded)."""
    kind = data.draw(st.sampled_from(["regions", "arrays", "locations", "signs", "product",
                                      "sum", "parens", "literal", "splat", "types",
                                      "unknown op"]),
                     label="kind")
    n = bounds.MAX_NESTING
    if kind == "regions":
        depth = data.draw(st.sampled_from([1, n - 2, n - 1, n, n + 1, 1000]), label="depth")
        body = "".join(f"  scf.for %i{k} = %c0 to %c1 step %c1 {{\n" for k in range(depth))
        extra = "  %c1 = arith.constant 1 : index\n" + body + "  }\n" * depth
        return kind, _kernel(extra=extra), depth + 1 > n
    if kind == "arrays":
        depth = data.draw(st.sampled_from([1, n - 1, n, n + 1, 10_000]), label="depth")
        return kind, _kernel(attrs=f" attributes {{x = {'[' * depth}{']' * depth}}}"), depth > n
    if kind == "locations":
        depth = data.draw(st.sampled_from([1, n - 1, n, n + 1, 5000]), label="depth")
        loc = "callsite(" * (depth - 1) + '"k.py":1:1' + ' at "c.py":2:2)' * (depth - 1)
        return kind, _kernel(loc=f" loc({loc})"), depth > n
    if kind == "signs":
        count = data.draw(st.integers(0, 100_000), label="signs")
        return kind, _kernel(order=f"affine_map<(d0) -> ({'-' * count}d0)>"), False
    if kind == "product":
        factor = data.draw(st.sampled_from([1, 2, 3]), label="factor")
        count = data.draw(st.integers(1, 400), label="factors")
        # 2^63 and beyond do not fit an affine constant
        over = factor ** count >= 1 << 63
        return kind, _kernel(order=f"affine_map<(d0) -> (d0{f' * {factor}' * count})>"), over
    if kind == "sum":
        count = data.draw(st.integers(1, 5000), label="terms")
        return kind, _kernel(order=f"affine_map<(d0) -> ({' + '.join(['d0'] * count)})>"), False
    if kind == "parens":
        depth = data.draw(st.integers(0, 40), label="depth")
        text = "(" * depth + "d0" + ")" * depth
        return kind, _kernel(order=f"affine_map<(d0) -> ({text})>"), depth + 1 > 16
    if kind == "literal":
        digits = data.draw(st.sampled_from([1, 19, bounds.MAX_LITERAL_CHARS,
                                            bounds.MAX_LITERAL_CHARS + 1, 4301, 100_000]),
                           label="digits")
        value = "1" * digits
        ok = digits <= 19  # i64 holds 19 digits of ones; longer ones overflow (still located)
        return kind, _kernel(extra=f"  %big = arith.constant {value} : i64\n"), \
            digits > bounds.MAX_LITERAL_CHARS or not ok
    if kind == "splat":
        rows = data.draw(st.sampled_from([1, 1024, 1 << 14, 1 << 20]), label="rows")
        extra = f"  %s = arith.constant dense<1.0> : tensor<{rows}x{rows}xf16>\n"
        return kind, _kernel(extra=extra), rows * rows > bounds.MAX_CONSTANT_ELEMENTS
    if kind == "types":  # a future of futures is wrong at any depth
        depth = data.draw(st.sampled_from([1, n - 1, n, n + 1, 3000]), label="depth")
        arg = "!ktdp.tile_future<" * depth + "tensor<4xf16>" + ">" * depth
        text = _kernel().replace("%o: index)", f"%o: index, %fut: {arg})")
        return kind, text, depth > 1
    generic = data.draw(st.booleans(), label="generic")
    extra = '  "foo.bar"() : () -> ()\n' if generic else "  foo.bar\n"
    return kind, _kernel(extra=extra), True


@fuzz(90)
@given(data=st.data())
def test_pathological_ktir(data):
    kind, text, beyond = _case(data)
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "p.mlir"
        path.write_text(text)
        result = fuzz_case("pathological ktir", ["check", path], [path])
        if beyond:
            assert result.code == 2, (kind, result.stderr[-2000:])
            assert _LOCATED.match(result.error_lines[0]), (kind, result.error_lines)
        else:
            assert result.code == 0, (kind, result.stderr[-2000:])
    assert CASES["pathological ktir"] > 0
