"""The inter-tile ops' verifier rules and the legality pass's rules, each refused with a located
error; legal programs accepted; the generic form round trip of the multi-role ops."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.parse.printer import print_generic
from test_cli_ktir import cli
from test_inter_tile import (FIRST_TWO, GROUP, LAST_TWO, LEAD, MIRROR, PREFIX, consume,
                             kernel_text, produce, reduce)

T, TI = "tensor<1x8xf32>", "tensor<1x8xi32>"
ONE = "affine_set<(g) : (g == 0)>"
TWO_GROUPS = "affine_set<(g) : (g >= 0, -g + 1 >= 0)>"
DEP = ", producer_dependency_per_consumer = "


def fut(types: str = f"{T}, {TI}", groups: str = ONE) -> str:
    return f"!ktdp.tile_future<({types}), groups = {groups}>"


def prod(types: str = f"{T}, {TI}", yields: str = f"%d, %i : {T}, {TI}", tiles: str = GROUP,
         groups: str = ONE, arg: str = "%gid: index") -> str:
    return (f"    %f = ktdp.inter_tile_produce producer_tiles_per_group = {tiles}\n"
            f"        -> {fut(types, groups)}\n"
            f"    {{ ^bb0({arg}):\n        ktdp.yield_partial {yields} }}\n")


def cons(consumers: str = GROUP, extra: str = "", results: str = f"{T}, {TI}",
         types: str = f"{T}, {TI}", groups: str = ONE, name: str = "%x, %y") -> str:
    return (f"    {name} = ktdp.inter_tile_consume(%f) consumer_tiles_per_group = {consumers}"
            f"{extra}\n        : {fut(types, groups)} -> {results}\n")


def red(consumers: str = GROUP, extra: str = "", ident: str = f"%z, %zi : {T}, {TI}",
        results: str = f"{T}, {TI}",
        args: str = f"%l0: {T}, %l1: {TI}, %r0: {T}, %r1: {TI}",
        yields: str = f"%s0, %s1 : {T}, {TI}", name: str = "%x, %y") -> str:
    return (f"    {name} = ktdp.inter_tile_reduce(%f) consumer_tiles_per_group = {consumers},"
            f"{extra} identity({ident})\n        : {fut()} -> {results}\n"
            f"    {{ ^bb0({args}):\n"
            f"        %s0 = arith.addf %l0, %r0 : {T}\n        %s1 = arith.maxsi %l1, %r1 : {TI}\n"
            f"        ktdp.yield_reduced {yields} }}\n")


def module_text(body: str) -> str:
    return (f"module {{\n  func.func @k(%d: {T}, %i: {TI}, %z: {T}, %zi: {TI}) "
            f"attributes {{grid = [8]}} {{\n{body}    return\n  }}\n}}\n")


def line_of(text: str, needle: str) -> int:
    return next(k for k, line in enumerate(text.splitlines(), 1) if needle in line)


def refused(text: str, *, legality: bool = False) -> list[ktir.Diagnostic]:
    """The diagnostics ``text`` is refused with: by parse + verify, or (``legality``) by the
    legality pass after verify accepted it."""
    with pytest.raises(ktir.KtirError) as info:
        module = ktir.parse_text(text, "r.mlir")
        ktir.verify(module)
        if legality:
            ktir.check_legality(module)
    diags = info.value.diagnostics
    assert diags and all(d.loc.file == "r.mlir" for d in diags)
    return diags


def the_one(diags: list[ktir.Diagnostic], message: str) -> ktir.Diagnostic:
    """The diagnostic carrying ``message`` (a broken region may also break ops inside it)."""
    (found,) = [d for d in diags if message in d.message]
    return found


# -- the dialect verifier's rules ---------------------------------------------------------------

VERIFIER_CASES = {
    "produce yields fewer values than roles": (
        prod(yields=f"%d : {T}") + cons(),
        "inter_tile_produce", "yield_partial yields 1 values but the future carries 2 partial"),
    "produce yield type": (
        prod(yields=f"%d, %d : {T}, {T}") + cons(),
        "inter_tile_produce", "yield_partial operand #1 type tensor<1x8xf32> does not match"),
    "produce region argument": (
        prod(arg="%gid: i32") + cons(),
        "inter_tile_produce", "producer region must take a single `index` group-id argument"),
    "producer set symbol": (
        prod(tiles="affine_set<(i) : (i >= 0, -i + 3 >= 0)>") + cons(),
        "inter_tile_produce", "`producer_tiles_per_group` must have exactly one symbol"),
    "producer groups disjoint (R1)": (
        prod(tiles="affine_set<(i)[g] : (i - 3*g >= 0, -i + 3*g + 3 >= 0)>", groups=TWO_GROUPS)
        + cons(groups=TWO_GROUPS),
        "inter_tile_produce", "producer_tiles_per_group for groups 0 and 1 are not disjoint"),
    "consume result type": (
        prod() + cons(results=f"{T}, {T}"),
        "inter_tile_consume", "result types must match future partial types"),
    "consume result arity": (
        prod() + cons(results=T, name="%x"),
        "inter_tile_consume", "1 result(s) for 2 partial type(s)"),
    "consumer set symbol": (
        prod() + cons(consumers="affine_set<(i) : (i >= 0, -i + 3 >= 0)>"),
        "inter_tile_consume", "`consumer_tiles_per_group` must have exactly one symbol (the "
                              "group index g)"),
    "consumer set dimension": (
        prod() + cons(consumers="affine_set<(i, j)[g] : (i - 4*g >= 0, j >= 0)>"),
        "inter_tile_consume", "must have exactly one dimension (the tile id i)"),
    "consume dependency symbols": (
        prod() + cons(extra=", producer_dependency_per_consumer = "
                            "affine_set<(p)[c, g, x] : (p - c == 0, x >= 0)>"),
        "inter_tile_consume", "must have one symbol (c) or two symbols (c, g)"),
}
# the reduce cases: the red() clause that breaks a rule, and the rule's message
VERIFIER_CASES.update({name: (prod() + red(**clause), "inter_tile_reduce", message) for
                       name, clause, message in [
    ("reduce dependency dimension",
     {"extra": DEP[1:] + "affine_set<(p, q)[c] : (p - c == 0, q == 0)>,"},
     "must have exactly one dimension (the producer tile id p)"),
    ("reduce identity type", {"ident": f"%z, %z : {T}, {T}"},
     "identity types must match result types"),
    ("reduce identity count", {"ident": f"%z : {T}"}, "identity types must match result types"),
    ("reduce second result type", {"results": f"{T}, {T}"},
     "result #1 is tensor<1x8xf32>, the partial type is"),
    ("reducer region argument count",
     {"args": f"%l0: {T}, %l1: {TI}, %r0: {T}, %r1: {TI}, %e: {T}"},
     "reducer region must take 2*2 arguments, got 5"),
    ("reducer region argument types", {"args": f"%l0: {T}, %l1: {T}, %r0: {T}, %r1: {TI}"},
     "reducer region argument pair #1 must both have partial type"),
    ("yield_reduced count", {"yields": f"%s0 : {T}"},
     "yield_reduced yields 1 values but expected 2"),
]})


@pytest.mark.parametrize("case", sorted(VERIFIER_CASES))
def test_verifier_refuses_with_a_located_error(case):
    body, op, message = VERIFIER_CASES[case]
    text = module_text(body)
    diag = the_one(refused(text), message)
    assert diag.loc.line == line_of(text, op)


@pytest.mark.parametrize("groups, message", [
    ("affine_set<(g, h) : (g == 0, h == 0)>", "tile_future `groups` must have exactly one "
                                              "dimension (g)"),
    ("affine_set<(g)[s] : (g - s == 0)>", "tile_future `groups` must have no symbols"),
])
def test_future_type_groups_are_one_dimension_without_symbols(groups, message):
    text = f"module {{\n  func.func @k(%a: {fut(groups=groups)}) {{\n    return\n  }}\n}}\n"
    diag = the_one(refused(text), message)
    assert diag.loc.line == 2


def test_future_partials_are_ranked_tensors():
    text = f"module {{\n  func.func @k(%a: {fut(types='index')}) {{\n    return\n  }}\n}}\n"
    the_one(refused(text), "expected builtin.tensor), found index")


def test_a_delivery_needs_bounded_groups():
    unbounded = "affine_set<(g) : (g >= 0)>"
    text = module_text(prod(groups=unbounded) + cons(groups=unbounded))
    diags = refused(text)
    assert {d.loc.line for d in diags} == {line_of(text, "inter_tile_produce"),
                                          line_of(text, "inter_tile_consume")}
    assert all("is unbounded: the emulator enumerates the groups" in d.message for d in diags)


def test_one_and_several_partial_spellings_read_and_print_back():
    one = "!ktdp.tile_future<tensor<1x8xf32>, groups = affine_set<(g) : (g == 0)>>"
    text = (f"module {{\n  func.func @k(%a: {one}, %b: {fut()}) {{\n    return\n  }}\n}}\n")
    module = ktir.parse_text(text, "t.mlir")
    ktir.verify(module)
    a, b = module.function("k").args
    assert [str(t) for t in a.type.partials] == [T] and len(b.type.partials) == 2
    printed = print_generic(module)
    assert f"!ktdp.tile_future<({T}), groups" in printed
    assert f"!ktdp.tile_future<({T}, {TI}), groups" in printed
    again = ktir.parse_text(printed, "g.mlir").function("k").args
    assert again[0].type == a.type and again[1].type == b.type


# -- the legality pass -----------------------------------------------------------------------

LEGALITY_CASES = {
    "R2 single-use": (
        prod(tiles=LEAD) + cons() + cons(name="%x2, %y2"), "inter_tile_produce",
        "future result must have exactly one use (it has 2)"),
    "R2 single-use (unused)": (
        prod(), "inter_tile_produce", "future result must have exactly one use (it has 0)"),
    "R3 deps-are-producers": (
        prod(tiles=FIRST_TWO) + cons(LAST_TWO, DEP + "affine_set<(p)[c] : (p - c == 0)>"),
        "inter_tile_consume", "for consumer 2 group 0 references producer tile 2 which is not "
                              "in producer_tiles_per_group"),
    "R4 producers-claimed": (
        prod(tiles="affine_set<(i)[g] : (i >= 0, -i + 1 >= 0)>")
        + cons(extra=DEP + "affine_set<(p)[c] : (p == 0)>"),
        "inter_tile_consume", "for group 0 does not cover producer tile 1 (no consumer has it "
                              "as a dependency)"),
    "R8 single-source (no dependency set)": (
        prod() + cons(), "inter_tile_consume",
        "has 4 producers, so producer_dependency_per_consumer is required"),
    "R8 single-source (two sources)": (
        prod() + cons(extra=DEP + "affine_set<(p)[c] : (p >= 0, -p + 1 >= 0)>"),
        "inter_tile_consume", "consumer tile 0 in group 0 depends on 2 producers"),
    "R13 consumers-produce": (
        prod() + red(consumers="affine_set<(i)[g] : (i - 4*g - 2 >= 0, -i + 4*g + 5 >= 0)>"),
        "inter_tile_reduce", "consumer_tiles_per_group for group 0 is not a subset of "
                             "producer_tiles_per_group (consumer tiles [4, 5] do not produce)"),
    "R14 reduce-mode": (
        prod() + red(consumers=FIRST_TWO), "inter_tile_reduce",
        "reduce-to-subset is unsupported; only all-reduce and reduce-to-one are supported"),
}


@pytest.mark.parametrize("rule", sorted(LEGALITY_CASES))
def test_legality_refuses_each_rule_by_name_at_the_op(rule):
    body, op, message = LEGALITY_CASES[rule]
    text = module_text(body)
    module = ktir.parse_text(text, "r.mlir")
    ktir.verify(module)  # valid IR ...
    (diag,) = refused(text, legality=True)  # ... that the hardware cannot take
    assert diag.message.startswith(f"[{rule.split(' (')[0]}] ")
    assert message in diag.message
    assert diag.loc.line == line_of(text, op)


def test_legality_names_an_op_of_a_dialect_without_a_lowering():
    text = module_text('    "foo.bar"() : () -> ()\n')
    with pytest.raises(ktir.KtirError) as info:
        ktir.check_legality(ktir.parse_text(text, "r.mlir"))
    (diag,) = info.value.diagnostics
    assert diag.message.startswith("[legal-dialect] 'foo.bar'") and diag.loc.line == 3


@pytest.mark.parametrize("body", [
    prod(tiles=LEAD) + cons(),  # broadcast: one producer, no dependency set needed
    prod(tiles=FIRST_TWO) + cons(LAST_TWO, DEP + "affine_set<(p)[c] : (p - c + 2 == 0)>"),
    prod() + cons(extra=DEP + "affine_set<(p)[c, g] : (p + c - 8*g - 3 == 0)>"),
    prod() + red(),  # all-reduce
    prod() + red(consumers=LEAD),  # reduce-to-one
    prod() + red(extra=DEP[1:] + "affine_set<(p)[c] : (p - c == 0)>,"),
    # an unbounded dependency set: coverage (R4) is not judged on what cannot be enumerated
    prod() + red(extra=DEP[1:] + "affine_set<(p)[c] : (p - c >= 0)>,"),
])
def test_legality_accepts_lowerable_programs(body):
    module = ktir.parse_text(module_text(body), "ok.mlir")
    ktir.verify(module)
    ktir.check_legality(module)


def test_cli_check_legality_flag(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text(module_text(prod() + cons()))
    plain = cli("check", str(bad))
    assert plain.returncode == 0, plain.stderr
    strict = cli("check", "--legality", str(bad))
    assert strict.returncode == 2
    assert "bad.mlir:7:5: error: [R8 single-source]" in strict.stderr
    assert "Traceback" not in strict.stderr


# -- the generic form --------------------------------------------------------------------------

@pytest.mark.parametrize("exchange", [consume(4, GROUP, MIRROR), reduce(4, GROUP, PREFIX)])
def test_generic_form_round_trip_runs_to_the_same_bits(exchange):
    module = ktir.parse_text(kernel_text(4, produce(4, GROUP) + exchange), "x.mlir")
    ktir.verify(module)
    printed = print_generic(module)
    again = ktir.parse_text(printed, "g.mlir")
    ktir.verify(again)
    ktir.check_legality(again)
    assert print_generic(again) == printed
    rng = np.random.default_rng(7)
    a = rng.integers(-50, 50, (4, 8)).astype(np.float32)
    b = rng.integers(-50, 50, (4, 8)).astype(np.int32)
    outs = []
    for mod in (module, again):
        m = ktir.Machine()
        ins = [m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")]
        res = [m.hbm.allocate((4, 8), "float32", name="o"),
               m.hbm.allocate((4, 8), "int32", name="p")]
        m.compile(mod.function("k")).run([x.address for x in ins + res])
        outs.append([r.read() for r in res])
    for x, y in zip(*outs):
        assert x.tobytes() == y.tobytes()
