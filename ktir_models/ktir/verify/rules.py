"""What a verification rule is, and the checks many op kinds share.

A :class:`Rule` states an op kind's operand and result counts, required attributes, number of
regions and an optional ``check(op)`` that raises :class:`Bad` (through :func:`fail`) with the
message of the first violation. Each op kind's rule is registered with the op (registry.py,
part ``verify``) by its dialect module; verify.py is the driver that applies them. This module
imports only the IR, so every dialect module may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir.nodes import (AccessTileType, FLOAT_TYPES, INT_TYPES, MemRefType, Op, ScalarType, TensorType,
                 TileFutureType)


class Bad(Exception):
    pass


def fail(msg: str):
    raise Bad(msg)


@dataclass(frozen=True)
class Rule:
    operands: tuple[int, int | None] = (0, None)  # min, max (None = unbounded)
    results: tuple[int, int | None] = (0, None)
    attrs: tuple[str, ...] = ()
    regions: tuple[int, int] = (0, 0)
    check: Callable[[Op], None] | None = None


def elem(t) -> str | None:
    if isinstance(t, (TensorType, MemRefType)):
        return t.elem
    if isinstance(t, ScalarType):
        return t.name
    return None


def shape(t):
    return t.shape if isinstance(t, (TensorType, MemRefType, AccessTileType)) else ()


def compatible(a, b) -> bool:
    """Equal types, where a dynamic dim matches any size."""
    if a is b or a == b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, ScalarType):
        return a == b
    if isinstance(a, TileFutureType):
        return len(a.partials) == len(b.partials) and \
            all(compatible(x, y) for x, y in zip(a.partials, b.partials))
    sa, sb = shape(a), shape(b)
    if len(sa) != len(sb) or any(x is not None and y is not None and x != y
                                 for x, y in zip(sa, sb)):
        return False
    return elem(a) == elem(b)


def same_shape(a, b) -> bool:
    sa, sb = shape(a), shape(b)
    return len(sa) == len(sb) and all(x is None or y is None or x == y for x, y in zip(sa, sb))


def declared(op: Op, k: int = 0):
    types = op.attrs.get("types") or []
    return types[k] if k < len(types) else (types[-1] if types else None)


def check_declared_operands(op: Op) -> None:
    types = op.attrs.get("types") or []
    if not types:
        return
    if len(types) == 1:  # one type for every operand (arith/math shorthand)
        for v in op.operands:
            if not compatible(v.type, types[0]):
                fail(f"operand {v.name} has type {v.type}, but the op says {types[0]}")
    else:
        for v, t in zip(op.operands, types):
            if not compatible(v.type, t):
                fail(f"operand {v.name} has type {v.type}, but the op says {t}")


def elementwise(op: Op) -> None:
    check_declared_operands(op)
    rt = op.results[0].type
    for v in op.operands:
        if not compatible(v.type, rt):
            fail(f"operand {v.name} of type {v.type} does not match the result type {rt}")
    kind = elem(rt)
    if op.name.startswith("arith.") and op.name[-1] == "f" and kind not in FLOAT_TYPES:
        fail(f"'{op.name}' needs a float type, got {rt}")
    if op.name.startswith("arith.") and op.name[-1] == "i" and kind not in INT_TYPES:
        fail(f"'{op.name}' needs an integer or index type, got {rt}")


def ins_outs(op: Op):
    return op.groups.get("ins", []), op.groups.get("outs", [])


def check_declared_ins_outs(op: Op) -> None:
    ins, outs = ins_outs(op)
    for vals, key in ((ins, "in_types"), (outs, "out_types")):
        types = op.attrs.get(key) or []
        if types and len(types) != len(vals):
            fail(f"{len(vals)} operands but {len(types)} types in {key[:-6]}s(...)")
        for v, t in zip(vals, types):
            if not compatible(v.type, t):
                fail(f"operand {v.name} has type {v.type}, but the op says {t}")
    for r, o in zip(op.results, outs):
        if not compatible(r.type, o.type):
            fail(f"result type {r.type} does not match outs type {o.type}")


def eq(x, y) -> bool:
    return x is None or y is None or x == y


def check_yield(op: Op, block, types: list, yname: str) -> None:
    """The region ``block`` of ``op`` ends with ``yname`` yielding values of ``types`` (a region
    without the terminator is accepted only when nothing is yielded)."""
    last = block.ops[-1] if block.ops else None
    if last is None or last.name != yname:
        if types:
            fail(f"{op.name} region must end with '{yname}' of {len(types)} value(s)")
        return
    vals = last.operands
    if len(vals) != len(types) or not all(compatible(v.type, t) for v, t in zip(vals, types)):
        got = ", ".join(str(v.type) for v in vals) or "nothing"
        want = ", ".join(str(t) for t in types) or "nothing"
        raise Bad(f"{yname} yields ({got}) but {op.name} expects ({want})")
