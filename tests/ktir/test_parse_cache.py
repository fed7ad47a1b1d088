"""The parser's caches (tokenized lines, recorded op parses) change nothing but the speed.

Every comparison is against the reference path ``parse_text(..., cached=False)`` (the whole-text
regex tokenizer and a plain recursive-descent parse of every op): the same IR (op names,
attributes, types, operand/result wiring, groups and every Location), the same diagnostics for
broken variants of files whose good version was parsed just before, no mutable IR object shared
between two parses, and every op's Location pointing at the op's own first token in the source.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import corpus_missing_reason, corpus_path
from ktir_models.ktir.parse import parser as P
from ktir_models.ktir.ir.errors import KtirError
from ktir_models.ktir.parse import lexer
from ktir_models.ktir.verify.verifier import verify


def dump(module) -> list:
    """Everything the parser decides, with Values numbered by first appearance (so wiring, not
    object identity, is compared)."""
    ids: dict[int, int] = {}

    def vid(v) -> int:
        return ids.setdefault(id(v), len(ids))

    def value(v) -> tuple:
        return (v.name, repr(v.type), repr(v.loc), v.index, vid(v))

    out: list = [("module", module.filename, repr(module.loc), repr(module.aliases))]

    def region(r) -> None:
        for b in r.blocks:
            out.append(("block", [value(a) for a in b.args]))
            for op in b.ops:
                out.append(("op", op.name, repr(op.loc), repr(op.attrs),
                            [vid(v) for v in op.operands],
                            [(k, [vid(v) for v in vs]) for k, vs in op.groups.items()],
                            [value(r) + (r.owner is op,) for r in op.results]))
                for inner in op.regions:
                    region(inner)

    for fn in module.functions.values():
        out.append(("func", fn.name, repr(fn.loc), fn.grid, repr(fn.attrs),
                    [value(a) for a in fn.args], fn.module is module))
        region(fn.body)
    return out


def tokenized(text: str) -> tuple[list, list, list]:
    """Texts, kinds and offsets of the line-cached tokenizer (offsets computed on demand)."""
    texts, kinds, offs, _ = lexer.tokenize(text)
    return texts, kinds, [offs[i] for i in range(len(texts))]


def outcome(text: str, filename: str, cached: bool):
    """The dump and verifier diagnostics of a parse, or the parse error's text."""
    try:
        module = P.parse_text(text, filename, cached=cached)
    except KtirError as exc:
        return ("error", str(exc))
    try:
        verify(module)
        diags = ""
    except KtirError as exc:
        diags = str(exc)
    return ("ok", dump(module), diags)


def mutable_ids(module) -> set[int]:
    """ids of every op, value and list/dict reachable from the module's IR."""
    found: set[int] = set()

    def attr(x) -> None:
        if isinstance(x, (list, dict)):
            found.add(id(x))
            for y in (x.values() if isinstance(x, dict) else x):
                attr(y)
        elif isinstance(x, tuple):
            for y in x:
                attr(y)

    for fn in module.functions.values():
        for a in fn.args:
            found.add(id(a))
        for op in fn.walk():
            found.update((id(op), id(op.attrs), id(op.operands), id(op.results), id(op.groups)))
            found.update(id(v) for v in op.results)
            found.update(id(g) for g in op.groups.values())
            attr(op.attrs)
    return found


def scratchy_files(program: str, count: int) -> list[Path]:
    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    folder = corpus_path() / "scratchy" / program
    return [folder / f"node{i}.mlir" for i in range(count)]


def corpus_programs() -> list:
    reason = corpus_missing_reason()
    if reason is not None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    return ["scratchy/smollm2-135m", "scratchy/llama-3.2-1b", "ktir-examples",
            pytest.param("scratchy/smollm2-135m-prefill", marks=pytest.mark.slow)]  # ~20 s


@pytest.mark.parametrize("program", corpus_programs())
def test_cached_parse_equals_reference_parse_for_every_corpus_file(program, monkeypatch) -> None:
    files = sorted(p for p in (corpus_path() / program).rglob("*")
                   if p.suffix in (".mlir", ".ktir"))
    assert files
    lexer.LINE_CACHE.clear()
    P._OP_TEMPLATES.clear()
    replayed = []  # ops built from a template instead of parsed
    replay = P.OpTemplate.replay

    def counting_replay(self, parser, start):
        op = replay(self, parser, start)
        if op is not None:
            replayed.append(op)
        return op

    monkeypatch.setattr(P.OpTemplate, "replay", counting_replay)
    ops = 0
    for path in files:
        text = path.read_text()
        cached = P.parse_text(text, str(path))
        # tokenizing line by line gives exactly the whole-text regex tokens
        assert tokenized(text) == lexer.tokenize_text(text), path
        assert lexer.tokenize(text)[3] == [0] + [m.end() for m in re.finditer("\n", text)], path
        reference = P.parse_text(text, str(path), cached=False)
        assert dump(cached) == dump(reference), path
        # each op's Location is its own first token: its first result name or its name
        lines = text.split("\n")
        for fn in cached.functions.values():
            for op in fn.walk():
                ops += 1
                head = op.results[0].name.split("#")[0] if op.results else op.name
                at = lines[op.loc.line - 1][op.loc.col - 1:]
                if op.name == "return" and at.startswith("func.return"):
                    continue
                assert at.startswith(head), f"{op.loc}: {at[:40]!r} does not start {head!r}"
    if program.startswith("scratchy/"):
        assert len(replayed) > ops // 2  # the caches are actually exercised


def test_two_cached_parses_share_no_mutable_ir() -> None:
    path = scratchy_files("smollm2-135m", 6)[5]
    text = path.read_text()
    a = P.parse_text(text, "a.mlir")
    b = P.parse_text(text, "b.mlir")  # every op replayed from a's templates
    assert not mutable_ids(a) & mutable_ids(b)
    # and b's locations name b's file
    assert {op.loc.file for fn in b.functions.values() for op in fn.walk()} == {"b.mlir"}


def _mutations(text: str) -> list[tuple[str, str]]:
    """Broken or altered variants of a good node file, each changing one spot."""
    out = []
    uses = [m for m in re.finditer(r"(?<=[ (\[,])%[a-z]\w*", text)]
    for m in uses[3::7][:6]:  # an operand renamed to a name nobody defines
        out.append((f"undefined@{m.start()}", text[:m.start()] + "%nowhere" + text[m.end():]))
    types = [m for m in re.finditer(r"tensor<(\d+)x", text)]
    for m in types[2::9][:4]:  # one type changed: verify must see the mismatch at the right op
        n = int(m.group(1)) + 1
        out.append((f"type@{m.start()}", text[:m.start(1)] + str(n) + text[m.end(1):]))
    colons = [m.start() for m in re.finditer(r" : ", text)]
    for c in colons[1::11][:4]:  # a missing ':'
        out.append((f"colon@{c}", text[:c] + " " + text[c + 3:]))
    lines = text.split("\n")
    for k in (3, len(lines) // 2):  # a duplicated line: redefinition of a value
        out.append((f"dup@{k}", "\n".join(lines[:k + 1] + lines[k:])))
    return out


@pytest.mark.parametrize("node", [0, 1, 2, 5, 7, 9])
def test_broken_variants_report_what_the_reference_parse_reports(node: int) -> None:
    """Parse the good file (its ops become templates), then each variant with the caches warm:
    error texts and locations, verifier diagnostics and IR equal the uncached parse's."""
    path = scratchy_files("smollm2-135m", node + 1)[node]
    good = path.read_text()
    verify(P.parse_text(good, str(path)))  # its ops become templates with verdicts
    variants = _mutations(good)
    assert len(variants) >= 8
    kinds = set()
    for name, text in variants:
        want = outcome(text, "variant.mlir", cached=False)
        got = outcome(text, "variant.mlir", cached=True)
        assert got == want, name
        kinds.add(want[0] if want[0] == "error" else ("diag" if want[2] else "ok"))
    assert "error" in kinds  # the variants do exercise failing parses


def test_error_location_after_a_near_identical_good_file() -> None:
    good = ("func.func @k(%a: index) {\n"
            "  %c0 = arith.constant 0 : index\n"
            "  %x = arith.addi %c0, %c0 : index\n"
            "  %y = arith.addi %x, %c0 : index\n"
            "  return\n"
            "}\n")
    P.parse_text(good, "good.mlir")
    bad = good.replace("%y = arith.addi %x, %c0", "%y = arith.addi %z, %c0")
    with pytest.raises(KtirError) as exc:
        P.parse_text(bad, "bad.mlir")
    assert str(exc.value) == "bad.mlir:4:19: error: use of undefined value '%z'"
    shifted = "\n\n" + good.replace("  %x = arith.addi", "     %x = arith.addi")
    module = P.parse_text(shifted, "shifted.mlir")  # same ops, other positions
    locs = [str(op.loc) for op in module.only_function.walk()]
    assert locs == ["shifted.mlir:4:3", "shifted.mlir:5:6", "shifted.mlir:6:3", "shifted.mlir:7:3"]
    redefined = good.replace("%y = arith.addi %x", "%x = arith.addi %x")
    with pytest.raises(KtirError) as exc:
        P.parse_text(redefined, "re.mlir")
    assert str(exc.value) == "re.mlir:4:3: error: redefinition of value '%x'"


@pytest.mark.parametrize("text", [
    "func.func @k(%a: index) {\n  %e = tensor.empty() : tensor<4x\n8xf16>\n  return\n}\n",
    "func.func @k(%a: index) {\n  %v = ktdp.construct_memory_view %a, sizes: [4], strides: [1] {\n"
    "    coordinate_set = affine_set<(d0) : (d0 >= 0,\n -d0 + 3 >= 0)>,\n"
    "    memory_space = #ktdp.memory_space<global\n>\n  } : memref<4xf16>\n  return\n}\n",
    'func.func @k(%a: index) attributes {note = "one \\\n two"} {\n  return\n}\n',
    "func.func @k(%a: index) {\n  %e = tensor.empty() : tensor<4x8xf16\n  return\n}\n",
], ids=["type", "affine-and-attr", "string", "unclosed"])
def test_tokens_running_across_a_line_end(text: str) -> None:
    """Lines that cannot be tokenized alone send the file to the whole-text tokenizer."""
    assert tokenized(text) == lexer.tokenize_text(text)
    assert outcome(text, "t.mlir", cached=True) == outcome(text, "t.mlir", cached=False)


VIEW_AND_LOAD = """func.func @k(%a: index) {
  %c0 = arith.constant 0 : index
  %view = ktdp.construct_memory_view %a, sizes: [4], strides: [1] {
    coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>,
    memory_space = #ktdp.spyre_memory_space<HBM>
  } : memref<4xf16>
  %acc = ktdp.construct_access_tile %view[%c0] {
    access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>,
    access_tile_order = affine_map<(d0) -> (d0)>
  } : memref<4xf16> -> !ktdp.access_tile<4xindex>
  %v = ktdp.load %acc : !ktdp.access_tile<4xindex> -> tensor<4xf16>
  return
}
"""


def test_verdict_of_a_replayed_op_follows_its_operands_defining_ops() -> None:
    """The load's text and operand types are the same in both files, but the view behind its
    access tile holds f32 in the second: the cached verdict of the first must not be reused."""
    verify(P.parse_text(VIEW_AND_LOAD, "good.mlir"))
    bad = VIEW_AND_LOAD.replace("memref<4xf16>", "memref<4xf32>")
    module = P.parse_text(bad, "bad.mlir")
    load = [op for op in module.only_function.walk() if op.name == "ktdp.load"][0]
    assert load.origin is not None  # the load was replayed from the good file's record
    with pytest.raises(KtirError) as exc:
        verify(module)
    assert str(exc.value) == "bad.mlir:11:3: error: load produces f16 but the view holds f32"
    assert outcome(bad, "bad.mlir", cached=True) == outcome(bad, "bad.mlir", cached=False)
    verify(P.parse_text(VIEW_AND_LOAD, "good2.mlir"))  # and the good verdict still holds
