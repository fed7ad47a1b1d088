"""``ktdp.runtime_arg_extract``: the value, granularity or upper bound of a runtime_arg.

Its parts stand side by side (registry.py): custom syntax, verification rule, builder.

A function argument of type ``!ktdp.runtime_arg<T, granularity=G, upperbound=U>`` is bound like
a scalar of type T (``plan.run({"M": 96})``). Granularity and upper bound are compile-time
constants of the type. The value is checked against the bound each time it is extracted (a
value above U faults, naming the argument and its bound); the granularity is reported, not
enforced: the frontend's definition calls it a constraint without saying on what (the value's
multiple or a tiling step), so the emulator leaves its use to the program.
"""

from __future__ import annotations

from ..ir import registry
from ..ir.errors import FaultSignal
from ..ir.nodes import Op, RuntimeArgType, ScalarType
from ..parse import types as frontend_types
from ..parse.ops_frontend import EXTRACT_KINDS
from ..verify.rules import Rule, declared, fail


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


@registry.implements("syntax", "ktdp.runtime_arg_extract")
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


def _runtime_arg_extract(op: Op) -> None:
    (x,) = op.operands
    t = x.type
    if not isinstance(t, RuntimeArgType):
        fail(f"runtime_arg_extract reads a !ktdp.runtime_arg, but {x.name} is {t}")
    declared_t = declared(op)
    if declared_t is not None and declared_t != t:
        fail(f"operand {x.name} has type {t}, but the op says {declared_t}")
    kind = op.attrs["kind"]
    r = op.results[0].type
    if kind == "value":
        if r != t.underlying:
            fail(f"result type ({r}) must be the runtime_arg's underlying type "
                 f"({t.underlying}) when extracting its value")
        return
    if getattr(t, kind) is None:
        fail(f"cannot extract {kind} from {t}: the runtime_arg type does not have one")
    if r != ScalarType("index"):
        fail(f"result type ({r}) must be index when extracting {kind}")


registry.set_part("verify", "ktdp.runtime_arg_extract",
                  Rule((1, 1), (1, 1), ("kind",), check=_runtime_arg_extract))


@registry.implements("build", "ktdp.runtime_arg_extract")
def build_runtime_arg_extract(c, op):
    (x,) = op.operands
    t: RuntimeArgType = x.type
    kind = op.attrs["kind"]
    if kind != "value":
        c.set_const(op.result, int(getattr(t, kind)))
        return None
    ix, ir = c.slot(x), c.slot(op.result)
    bound = t.upperbound
    cast = t.underlying.dtype.type if t.underlying.is_float else int

    def step(env):
        v = env[ix]
        if bound is not None and v > bound:
            raise FaultSignal(f"runtime_arg {x.name} is {v}, above its upperbound {bound}")
        env[ir] = cast(v)

    return step
