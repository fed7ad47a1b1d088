"""The legality pass: rules a verified program must also meet to be lowered to the hardware.

A program can be valid IR (``verify`` accepts it, the emulator runs it) and still have no
lowering: the dialect's frontend checks these rules in a separate pass, and so does
:func:`check_legality` (``ktir-models check --legality``). Each violation is a
:class:`~ktir_models.ktir.ir.errors.Diagnostic` at the offending op, its message starting with the
rule's name in brackets (``[R2 single-use] ...``); all are collected and raised together.

The rules, numbered as the dialect's inter-tile design numbers them (R1, producer groups
pairwise disjoint, needs only the produce op and is its verifier's):

* ``legal-dialect`` -- every op belongs to a dialect the hardware lowering takes: ktdp, arith,
  func, linalg, math, memref, scf, tensor, and spyreop (the hardware's own intrinsics; the
  frontend's pass does not list it, and refusing the intrinsics would refuse the programs
  written for the hardware).
* ``R2 single-use`` -- an ``inter_tile_produce`` future has exactly one use, its delivery op.
* ``R3 deps-are-producers`` -- every producer a consumer's
  ``producer_dependency_per_consumer`` names produces in that group.
* ``R4 producers-claimed`` -- every producer of a group is some consumer's dependency.
* ``R8 single-source`` -- each ``inter_tile_consume`` consumer has exactly one source: a group
  of several producers needs the dependency set, and it names one producer per consumer.
* ``R13 consumers-produce`` -- an ``inter_tile_reduce`` consumer is one of its group's producers.
* ``R14 reduce-mode`` -- a reduce is an all-reduce (consumers == producers) or a reduce-to-one.

The tile sets are parameterized; each rule grounds them at the future's group ids and checks
what is statically enumerable. Where a set is unbounded the rule checks nothing there rather
than guess (R4 only runs for a group whose every consumer's dependencies could be read: it
faults a producer for being absent). A delivery op whose future is not a produce op's result (a
function argument) is not checked.
"""

from __future__ import annotations

from ..dialects.ktdp.distributed import (CONSUME, DEPS, PRODUCE, REDUCE, dep_tiles_of,
                                        group_values, tiles_of)
from ..ir.errors import Diagnostic, KtirError
from ..ir.nodes import Function, Module, Op

LEGAL_DIALECTS = frozenset({"ktdp", "arith", "func", "linalg", "math", "memref", "scf",
                            "tensor", "spyreop"})


class _Found(Exception):
    """One rule violation of one op (the op's remaining checks are skipped, as the frontend
    stops at an op's first violation)."""

    def __init__(self, rule: str, message: str):
        super().__init__(f"[{rule}] {message}")


def check_legality(module: Module) -> None:
    """Raise :class:`KtirError` listing every legality violation of a verified ``module``."""
    diags: list[Diagnostic] = []
    for fn in module.functions.values():
        diags += legality_diagnostics(fn)
    if diags:
        raise KtirError(diags)


def legality_diagnostics(fn: Function) -> list[Diagnostic]:
    """The legality violations of one verified function, in op order."""
    diags: list[Diagnostic] = []
    uses: dict[int, int] = {}
    ops = list(fn.walk())
    for op in ops:
        for v in op.operands:
            uses[id(v)] = uses.get(id(v), 0) + 1
    for op in ops:
        try:
            _check_op(op, uses)
        except _Found as found:
            diags.append(Diagnostic(op.loc, str(found)))
    return diags


def _check_op(op: Op, uses: dict[int, int]) -> None:
    # ``return`` / ``call`` are func's ops, named without their dialect in the IR
    dialect = op.name.split(".", 1)[0] if "." in op.name else "func"
    if dialect not in LEGAL_DIALECTS:
        raise _Found("legal-dialect", f"'{op.name}': the {dialect} dialect has no hardware "
                                      "lowering")
    if op.name == PRODUCE and uses.get(id(op.results[0]), 0) != 1:
        raise _Found("R2 single-use", "future result must have exactly one use (it has "
                                      f"{uses.get(id(op.results[0]), 0)})")
    if op.name in (CONSUME, REDUCE):
        _check_delivery(op)


def _check_delivery(op: Op) -> None:
    produce = op.operands[0].owner
    if produce is None or produce.name != PRODUCE:
        return  # a future from outside the function: its producers are not known here
    groups = group_values(op.operands[0].type.groups)
    if groups is None:
        return
    producer_set = produce.attrs["producer_tiles_per_group"]
    consumer_set = op.attrs["consumer_tiles_per_group"]
    dep = op.attrs.get(DEPS)
    for g in groups:
        producers = tiles_of(producer_set, g)
        consumers = tiles_of(consumer_set, g)
        if op.name == REDUCE:
            _reduce_mode(g, producers, consumers)
        else:
            _single_source(op, g, producers, consumers)
    if dep is not None:
        for g in groups:
            _dependencies(dep, g, tiles_of(producer_set, g), tiles_of(consumer_set, g))


def _reduce_mode(g: int, producers: set[int] | None, consumers: set[int] | None) -> None:
    if producers is None or consumers is None:
        return
    if not consumers <= producers:
        raise _Found("R13 consumers-produce",
                     f"consumer_tiles_per_group for group {g} is not a subset of "
                     f"producer_tiles_per_group (consumer tiles {sorted(consumers - producers)} "
                     "do not produce)")
    if consumers != producers and len(consumers) != 1:
        raise _Found("R14 reduce-mode",
                     f"consumer_tiles_per_group for group {g} is a strict subset of "
                     "producer_tiles_per_group with more than one tile (reduce-to-subset is "
                     "unsupported; only all-reduce and reduce-to-one are supported)")


def _single_source(op: Op, g: int, producers: set[int] | None,
                   consumers: set[int] | None) -> None:
    if producers is None or len(producers) <= 1:
        return
    dep = op.attrs.get(DEPS)
    if dep is None:
        raise _Found("R8 single-source",
                     f"producer_tiles_per_group for group {g} has {len(producers)} producers, "
                     "so producer_dependency_per_consumer is required to name each consumer "
                     "tile's single source")
    for c in sorted(consumers or ()):
        declared = dep_tiles_of(dep, c, g)
        if declared is not None and len(declared) != 1:
            raise _Found("R8 single-source",
                         f"consumer tile {c} in group {g} depends on {len(declared)} producers; "
                         "inter_tile_consume delivers one contribution per consumer tile, so "
                         "exactly one is required")


def _dependencies(dep, g: int, producers: set[int] | None,
                  consumers: set[int] | None) -> None:
    if producers is None or consumers is None:
        return
    claimed: set[int] = set()
    complete = True
    for c in sorted(consumers):
        declared = dep_tiles_of(dep, c, g)
        if declared is None:
            complete = False
            continue
        stray = sorted(declared - producers)
        if stray:
            raise _Found("R3 deps-are-producers",
                         f"producer_dependency_per_consumer for consumer {c} group {g} "
                         f"references producer tile {stray[0]} which is not in "
                         "producer_tiles_per_group")
        claimed |= declared
    unclaimed = sorted(producers - claimed)
    if complete and unclaimed:
        raise _Found("R4 producers-claimed",
                     f"producer_dependency_per_consumer for group {g} does not cover producer "
                     f"tile {unclaimed[0]} (no consumer has it as a dependency)")
