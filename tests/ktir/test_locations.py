"""MLIR locations in KTIR: ``loc(...)`` after ops, arguments, block arguments, functions and
the module, ``#loc`` aliases defined before or after their uses, every location form MLIR has;
kept on each Location's ``source``, named by diagnostics and faults, printed back in generic
form (which reads back to the same locations)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from conftest import corpus_path

from ktir_models import ktir
from ktir_models.ktir.parse.printer import print_generic
from ktir_models.ktir.ir.source_loc import CallSiteLoc, FileLoc, FusedLoc, NameLoc, UnknownLoc

# KTIR written by others (read in place): $KTIR_UPSTREAM, else next to the corpus
UPSTREAM = Path(os.environ.get("KTIR_UPSTREAM")
                or corpus_path().parent / "upstream-ktir") / "2026h2"

# Two cores; core c adds rows 4c..4c+3 of A and B (8x16 f16) into O. Every op, argument and
# block carries a location; #loc and #set are defined before use, the rest after the module.
KERNEL = """\
#loc = loc("kernel.py":1:1)
#set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 7 >= 0, d1 >= 0, -d1 + 15 >= 0)>
#tile = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 15 >= 0)>
#map = affine_map<(d0, d1) -> (d0, d1)>
#loc_sum = loc("tmp2"(#loc9))
module {
  func.func @add(%a: index loc("kernel.py":3:10), %b: index loc(#loc), %o: index {tt.divisibility = 16 : i32} loc("kernel.py":3:16)) attributes {grid = [2]} {
    %pid = ktdp.get_compute_tile_id : index loc(#loc1)
    %c0 = arith.constant 0 : index loc(unknown)
    %c4 = arith.constant 4 : index loc(#loc1)
    %r = arith.muli %pid, %c4 : index loc("kernel.py":20:11 to :19)
    %va = ktdp.construct_memory_view %a, sizes: [8, 16], strides: [16, 1] {coordinate_set = #set, memory_space = #ktdp.memory_space<global>} : memref<8x16xf16> loc(#loc2)
    %vb = ktdp.construct_memory_view %b, sizes: [8, 16], strides: [16, 1] {coordinate_set = #set, memory_space = #ktdp.memory_space<global>} : memref<8x16xf16> loc("kernel.py":22:5 to 23:9)
    %vo = ktdp.construct_memory_view %o, sizes: [8, 16], strides: [16, 1] {coordinate_set = #set, memory_space = #ktdp.memory_space<global>} : memref<8x16xf16> loc("kernel.py":24)
    %ta = ktdp.construct_access_tile %va[%r, %c0] {access_tile_order = #map, access_tile_set = #tile} : memref<8x16xf16> -> !ktdp.access_tile<4x16xindex> loc(#loc3)
    %x = ktdp.load %ta : <4x16xindex> -> tensor<4x16xf16> loc(callsite("load"("lib.py":7:3) at "kernel.py":30:5))
    %tb = ktdp.construct_access_tile %vb[%r, %c0] {access_tile_order = #map, access_tile_set = #tile} : memref<8x16xf16> -> !ktdp.access_tile<4x16xindex> loc("tb")
    %y = ktdp.load %tb : <4x16xindex> -> tensor<4x16xf16> loc(callsite(#loc3 at callsite("inner.py":2:2 at "outer.py":9:1)))
    %e = tensor.empty() : tensor<4x16xf16> loc(fused["kernel.py":31:1])
    %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<4x16xf16>, tensor<4x16xf16>) outs(%e : tensor<4x16xf16>) {
    ^bb0(%p: f16 loc("kernel.py":32:1), %q: f16 loc(#loc), %acc: f16 loc(unknown)):
      %t = arith.addf %p, %q : f16 loc(#loc_sum)
      linalg.yield %t : f16 loc(#loc)
    } -> tensor<4x16xf16> loc(#loc_sum)
    %to = ktdp.construct_access_tile %vo[%r, %c0] {access_tile_order = #map, access_tile_set = #tile} : memref<8x16xf16> -> !ktdp.access_tile<4x16xindex> loc(#loc4)
    ktdp.store %s, %to : tensor<4x16xf16>, <4x16xindex> loc(fused<"store">["kernel.py":33:5, #loc4])
    return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc("pid"("kernel.py":18:11))
#loc2 = loc("kernel.py":21:5)
#loc3 = loc("ta"(#loc2))
#loc4 = loc(fused[#loc2, "kernel.py":33:1])
#loc9 = loc("kernel.py":42:17)
"""

SOURCES = {  # op name (first of its kind, in order) -> its source location
    "ktdp.get_compute_tile_id": NameLoc("pid", FileLoc("kernel.py", 18, 11)),
    "arith.constant": UnknownLoc(),
    "arith.muli": FileLoc("kernel.py", 20, 11, None, 19),
    "ktdp.construct_memory_view": FileLoc("kernel.py", 21, 5),
    "ktdp.construct_access_tile": NameLoc("ta", FileLoc("kernel.py", 21, 5)),
    "ktdp.load": CallSiteLoc(NameLoc("load", FileLoc("lib.py", 7, 3)),
                             FileLoc("kernel.py", 30, 5)),
    "tensor.empty": FusedLoc((FileLoc("kernel.py", 31, 1),)),
    "linalg.generic": NameLoc("tmp2", FileLoc("kernel.py", 42, 17)),
    "arith.addf": NameLoc("tmp2", FileLoc("kernel.py", 42, 17)),
    "linalg.yield": FileLoc("kernel.py", 1, 1),
    "ktdp.store": FusedLoc((FileLoc("kernel.py", 33, 5), FusedLoc((
        FileLoc("kernel.py", 21, 5), FileLoc("kernel.py", 33, 1)))), '"store"'),
    "return": FileLoc("kernel.py", 1, 1),
}


def _first_sources(fn) -> dict:
    found: dict = {}
    for op in fn.walk():
        found.setdefault(op.name, op.loc.source)
    return found


def _all_sources(module) -> list:
    out = [module.loc.source]
    for fn in module.functions.values():
        out.append(fn.loc.source)
        out += [a.loc.source for a in fn.args]
        for op in fn.walk():
            out.append(op.loc.source)
            out += [r.loc.source for r in op.results]
            out += [a.loc.source for r in op.regions for b in r.blocks for a in b.args]
    return out


def _run(module, a, b):
    m = ktir.Machine()
    pa = m.hbm.allocate_from(a, name="A")
    pb = m.hbm.allocate_from(b, name="B")
    po = m.hbm.allocate((8, 16), "float16", name="O")
    m.compile(module.function("add")).run([pa.address, pb.address, po.address])
    return po.array


def test_kernel_with_locations_everywhere_checks_runs_and_keeps_them() -> None:
    module = ktir.parse_text(KERNEL, "k.mlir")
    ktir.verify(module)
    fn = module.function("add")
    assert _first_sources(fn) == SOURCES
    assert [a.loc.source for a in fn.args] == [FileLoc("kernel.py", 3, 10),
                                                FileLoc("kernel.py", 1, 1),
                                                FileLoc("kernel.py", 3, 16)]
    assert fn.loc.source == module.loc.source == FileLoc("kernel.py", 1, 1)
    generic = next(op for op in fn.walk() if op.name == "linalg.generic")
    assert [a.loc.source for a in generic.regions[0].block.args] == [
        FileLoc("kernel.py", 32, 1), FileLoc("kernel.py", 1, 1), UnknownLoc()]
    # the KTIR position is still the op's own
    assert (generic.loc.line, generic.loc.col) == (20, 5)
    rng = np.random.default_rng(0)
    a = (rng.integers(-8, 8, (8, 16)) / 4).astype(np.float16)
    b = (rng.integers(-8, 8, (8, 16)) / 4).astype(np.float16)
    np.testing.assert_array_equal(_run(module, a, b), a + b)  # sums of quarters: exact in f16


def test_generic_form_writes_locations_back_and_reads_them_again() -> None:
    module = ktir.parse_text(KERNEL, "k.mlir")
    text = print_generic(module)
    assert 'loc(callsite("load"("lib.py":7:3) at "kernel.py":30:5))' in text
    assert 'loc("kernel.py":20:11 to :19)' in text and "#loc" not in text
    again = ktir.parse_text(text, "k.generic.mlir")
    ktir.verify(again)
    assert _all_sources(again) == _all_sources(module)
    assert all(s is not None for s in _all_sources(again)[:3])


def test_fault_in_the_kernel_names_the_source_location() -> None:
    """A has 6 rows, the last allocation: core 1's load of rows 4..7 runs past it, and the
    fault gives the KTIR position and the producer's source line."""
    module = ktir.parse_text(KERNEL, "k.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    b = m.hbm.allocate_from(np.ones((8, 16), np.float16), name="B")
    o = m.hbm.allocate((8, 16), "float16", name="O")
    a = m.hbm.allocate_from(np.ones((6, 16), np.float16), name="A")
    with pytest.raises(ktir.EmulationFault) as info:
        m.compile(module.function("add")).run([a.address, b.address, o.address])
    msg = str(info.value)
    assert msg.startswith("k.mlir:16:5: emulation fault in function @add, op ktdp.load, core 1")
    assert msg.endswith("(source: 'load' at lib.py:7:3 called from kernel.py:30:5)")


def test_verify_error_names_the_source_location() -> None:
    text = KERNEL.replace("%r = arith.muli %pid, %c4 : index",
                          "%r = arith.muli %pid, %c4, %c4 : index")
    with pytest.raises(ktir.KtirError) as info:
        ktir.verify(ktir.parse_text(text, "k.mlir"))
    lines = str(info.value).splitlines()
    assert any(line.startswith("k.mlir:11:5: error:")
               and line.endswith("(source: kernel.py:20:11-20:19)") for line in lines), lines


def _one_op(loc_text: str, after: str = "") -> object:
    text = (f"func.func @f() {{\n  %c = arith.constant 1 : index loc({loc_text})\n"
            f"  return\n}}\n{after}")
    op = ktir.parse_text(text, "one.mlir").only_function.body.block.ops[0]
    return op.loc.source


@pytest.mark.parametrize("loc_text, after, want, shown", [
    ("unknown", "", UnknownLoc(), None),
    ('"a.py":42:17', "", FileLoc("a.py", 42, 17), "a.py:42:17"),
    ('"a.py":42', "", FileLoc("a.py", 42), "a.py:42"),
    ('"a.py":4:2 to 6:8', "", FileLoc("a.py", 4, 2, 6, 8), "a.py:4:2-6:8"),
    ('"a.py":4:2 to :8', "", FileLoc("a.py", 4, 2, None, 8), "a.py:4:2-4:8"),
    ('"sp\\"ace\\\\d\\0A.py":1:2', "", FileLoc('sp"ace\\d\n.py', 1, 2), 'sp"ace\\d\n.py:1:2'),
    ('"x"', "", NameLoc("x"), "'x'"),
    ('"x"("a.py":1:2)', "", NameLoc("x", FileLoc("a.py", 1, 2)), "'x' at a.py:1:2"),
    ('callsite("f" at "a.py":3:4)', "", CallSiteLoc(NameLoc("f"), FileLoc("a.py", 3, 4)),
     "'f' called from a.py:3:4"),
    ('fused["a.py":1:1, unknown]', "", FusedLoc((FileLoc("a.py", 1, 1), UnknownLoc())),
     "a.py:1:1"),
    ("fused<#foo.bar<1>>[\"a.py\":1:1]", "", FusedLoc((FileLoc("a.py", 1, 1),), "#foo.bar<1>"),
     "a.py:1:1"),
    ("#after", '#after = loc("z.py":9:9)\n', FileLoc("z.py", 9, 9), "z.py:9:9"),
    ("#a", '#a = loc("n"(#b))\n#b = loc(callsite(unknown at "q.py":1:1))\n',
     NameLoc("n", CallSiteLoc(UnknownLoc(), FileLoc("q.py", 1, 1))), "'n' at q.py:1:1"),
])
def test_each_location_form(loc_text: str, after: str, want, shown) -> None:
    source = _one_op(loc_text, after)
    assert source == want
    assert source.describe() == shown
    # MLIR's syntax written back reads to the same record
    assert _one_op(source.mlir()) == want


@pytest.mark.parametrize("loc_text, after, message", [
    ("#nope", "", "undefined location alias '#nope'"),
    ("#a", "#a = loc(#b)\n#b = loc(#a)\n", "refers to itself"),
    ('"a.py":1:2 to', "", "end line or ':column'"),
    ('callsite("a" "b")', "", "expected 'at'"),
    ("42", "", "expected a location"),
])
def test_bad_locations_are_located_errors(loc_text: str, after: str, message: str) -> None:
    with pytest.raises(ktir.KtirError, match=message) as info:
        _one_op(loc_text, after)
    assert info.value.diagnostics[0].loc.line >= 2


def test_location_aliases_nest_within_the_bound() -> None:
    chain = "".join(f"#l{k} = loc(#l{k + 1})\n" for k in range(200)) + '#l200 = loc("a":1:1)\n'
    with pytest.raises(ktir.KtirError, match="nest deeper than 64"):
        _one_op("#l0", chain)
    short = "".join(f"#l{k} = loc(#l{k + 1})\n" for k in range(30)) + '#l30 = loc("a":1:1)\n'
    assert _one_op("#l0", short) == FileLoc("a", 1, 1)


UPSTREAM_WITH_LOCS = sorted(UPSTREAM.glob("*")) if UPSTREAM.is_dir() else []


@pytest.mark.parametrize("path", [p for p in UPSTREAM_WITH_LOCS if "loc(" in p.read_text()]
                         or [None], ids=lambda p: p.name if p else "no-upstream")
def test_upstream_programs_with_locations_are_not_refused_for_them(path) -> None:
    """Triton lowerings that keep their debug info: none is refused because of a location
    (some still wait for ops that are not implemented, e.g. tensor.reshape)."""
    if path is None:
        pytest.skip(f"upstream programs not found at {UPSTREAM}")
    try:
        module = ktir.load_module(path)
    except ktir.KtirError as exc:
        assert "loc" not in str(exc).split("error:")[1].split("(source")[0], str(exc)
        return
    sources = [op.loc.source for fn in module.functions.values() for op in fn.walk()]
    assert all(s is not None for s in sources)
    assert any(isinstance(s, NameLoc) and isinstance(s.child, FileLoc) for s in sources)


def test_replayed_ops_get_their_own_locations() -> None:
    """Ops parsed from a recorded template (same tokens as an earlier op) still read their own
    trailing loc(...); the cached parse equals the reference one."""
    from ktir_models.ktir.parse import parser

    fn = ('func.func @f{k}() {{\n  %c = arith.constant 1 : index loc("r.py":{k}:1)\n'
          '  return\n}}\n')
    text = "".join(fn.format(k=k) for k in range(1, 6))
    for _ in range(2):  # the second parse replays the ops recorded by the first
        cached = parser.parse_text(text, "r.mlir")
        assert [f.body.block.ops[0].loc.source for f in cached.functions.values()] == [
            FileLoc("r.py", k, 1) for k in range(1, 6)]
        assert any(f.body.block.ops[0].origin is not None for f in cached.functions.values())
    reference = parser.parse_text(KERNEL, "k.mlir", cached=False)
    assert _all_sources(parser.parse_text(KERNEL, "k.mlir")) == _all_sources(reference)
