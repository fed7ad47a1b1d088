"""Custom-form handlers for ``ktdp.runtime_arg_extract``, ``func.call`` and ``scf.parallel`` /
``scf.reduce`` / ``scf.reduce.return``.

Like the handlers in :mod:`ktir.parser`, each takes the parser positioned after the op name,
fills ``op`` (operands, groups, attrs, regions) and returns the result types.
"""

from __future__ import annotations

from ..ir import INDEX, Op, RuntimeArgType, Value
from . import types as frontend_types

EXTRACT_KINDS = ("value", "granularity", "upperbound")


def _runtime_arg_type(p):
    """A runtime_arg type, written in full or as the frontend prints it, ``<index, ...>``."""
    i = p.pos
    if p.kind() == "anglety":  # `<index>` lexes as a (shape-less) access tile type
        p.pos += 1
        return frontend_types.runtime_arg(p.texts[i][1:-1], lambda m, _o=0: p.fail(m, i))
    if p.peek() == "<" and p.kind() == "punct":
        p.pos += 1
        parts = []
        while p.peek() != ">":
            if p.kind() == "eof":
                p.fail("unexpected end of file in a runtime_arg type", i)
            parts.append(p.next())
        p.pos += 1
        return frontend_types.runtime_arg("".join(parts), lambda m, _o=0: p.fail(m, i))
    t = p.parse_type()
    if not isinstance(t, RuntimeArgType):
        p.fail(f"expected a runtime_arg type, found {t}", i)
    return t


def h_runtime_arg_extract(p, op: Op):
    """``ktdp.runtime_arg_extract <kind> from %x : <runtime_arg type> [attrs] -> T``."""
    ki = p.pos
    kind = p.expect_kind("ident", "value, granularity or upperbound")
    if kind not in EXTRACT_KINDS:
        p.fail(f"runtime_arg_extract kind must be value, granularity or upperbound, not "
               f"'{kind}'", ki)
    op.attrs["kind"] = kind
    p.expect("from")
    op.operands = [p.operand()]
    p.expect(":", "before the runtime_arg type")
    op.attrs["types"] = [_runtime_arg_type(p)]
    if p.kind() == "punct" and p.peek() == "{":
        op.attrs.update(p.attr_dict())
    p.expect("->")
    return [p.parse_type()]


def function_type(p) -> tuple[list, list]:
    """``(T, ...) -> R`` or ``(T, ...) -> (R, ...)``: argument and result types."""
    p.expect("(", "opening the argument types")
    args = [] if p.peek() == ")" else p.type_list()
    p.expect(")", "closing the argument types")
    p.expect("->")
    if p.accept("("):
        results = [] if p.peek() == ")" else p.type_list()
        p.expect(")", "closing the result types")
    else:
        results = [p.parse_type()]
    return args, results


def h_call(p, op: Op):
    """``func.call @callee(%a, ...) [attrs] : (T, ...) -> (R, ...)``."""
    op.attrs["callee"] = p.expect_kind("sym", "the callee (@name)")[1:].strip('"')
    p.expect("(")
    op.operands = p.operand_list(")")
    p.expect(")", "closing the call arguments")
    if p.kind() == "punct" and p.peek() == "{":
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the call's function type")
    args, results = function_type(p)
    op.attrs["types"] = args
    return results


def _paren_operands(p, what: str) -> list[Value]:
    p.expect("(", f"opening the {what}")
    vals = p.operand_list(")")
    p.expect(")", f"closing the {what}")
    return vals


def h_parallel(p, op: Op):
    """``scf.parallel (%i, ...) = (%lb, ...) to (%ub, ...) step (%s, ...) [init (%x, ...)]
    [-> T, ...] { body ending in scf.reduce }``."""
    p.expect("(", "opening the induction variables")
    ivs = []
    while True:
        ii = p.pos
        ivs.append((p.expect_kind("ssa", "an induction variable"), p.loc(ii)))
        if not p.accept(","):
            break
    p.expect(")", "closing the induction variables")
    p.expect("=")
    lbs = _paren_operands(p, "lower bounds")
    p.expect("to")
    ubs = _paren_operands(p, "upper bounds")
    p.expect("step")
    steps = _paren_operands(p, "steps")
    inits: list[Value] = []
    if p.accept("init"):
        inits = _paren_operands(p, "init values")
    results: list = []
    if p.accept("->"):
        if p.accept("("):
            results = p.type_list()
            p.expect(")")
        else:
            results = p.type_list()
    if p.kind() == "punct" and p.peek() == "{" and p.kind(1) == "ident" and p.peek(2) == "=":
        op.attrs.update(p.attr_dict())
    p.scopes.append({})
    args = [p.define(n, INDEX, loc) for n, loc in ivs]
    op.regions = [p.parse_region(args, open_scope=False)]
    p.scopes.pop()
    op.groups = {"lbs": lbs, "ubs": ubs, "steps": steps, "inits": inits}
    op.operands = lbs + ubs + steps + inits
    return results


def h_reduce(p, op: Op):
    """``scf.reduce(%v, ... : T, ...) { combiner }, ...`` (one combiner region per value; the
    older ``scf.reduce(%v) : T { ... }`` spelling too)."""
    types: list = []
    if p.accept("("):
        op.operands = p.operand_list(")")
        if p.accept(":"):
            types = p.type_list()
        p.expect(")", "closing the reduced values")
    if not types and op.operands and p.accept(":"):
        types = p.type_list()
    op.attrs["types"] = types
    while p.kind() == "punct" and p.peek() == "{":
        op.regions.append(p.parse_region())
        if not (p.peek() == "," and p.peek(1) == "{"):
            break
        p.pos += 1
    return []


def h_reduce_return(p, op: Op):
    """``scf.reduce.return %x : T``."""
    op.operands = [p.operand()]
    p.expect(":", "before the returned type")
    op.attrs["types"] = p.type_list()
    return []


HANDLERS = {
    "ktdp.runtime_arg_extract": h_runtime_arg_extract,
    "func.call": h_call,
    "call": h_call,
    "scf.parallel": h_parallel,
    "scf.reduce": h_reduce,
    "scf.reduce.return": h_reduce_return,
}

__all__ = ["HANDLERS", "EXTRACT_KINDS", "function_type"]
