"""spyreop's integer intrinsics (SpyreOp.td): ``addi32toi32``, ``addi64toi64``, ``muli32toi32``
and ``idx32toaddr``, each op kind's parts side by side.

Semantics: two's-complement arithmetic that wraps at the type's width (i32: modulo 2^32, i64:
modulo 2^64), on scalars or, inside a ``linalg.generic`` body, on whole arrays.
``idx32toaddr %i base B stride S`` is ``B + S * i`` in i32 arithmetic. The frontend has written
``B`` and ``S`` two ways: as attributes (``base 0xDEADBEEF stride 4``, the base an unsigned
32-bit literal kept as its i32 bit pattern) and as i32 operands (``base %b stride %s``); both
are read.
"""

from __future__ import annotations

import numpy as np

from ...ir import registry
from ...ir.nodes import Op, ScalarType
from ...verify.rules import Rule, fail
from ..arith import stacked_elementwise
from .intrinsics import check_operand
from .types import I32, Typed, attr_value, build_host

# name -> (element type, numpy function)
INTEGER = {
    "spyreop.addi32toi32": ("i32", np.add),
    "spyreop.addi64toi64": ("i64", np.add),
    "spyreop.muli32toi32": ("i32", np.multiply),
}


def wrap_i32(value: int) -> int:
    """An integer literal as the i32 it denotes (its low 32 bits, two's complement)."""
    v = int(value) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def parse_integer_binary(p, op: Op) -> list:
    """``%a, %b [attr-dict]``: the result type is the op's (i32 / i64), never written."""
    op.operands = p.operand_list()
    if p.peek() == "{" and p.kind() == "punct":
        op.attrs.update(p.attr_dict())
    return [ScalarType(INTEGER[op.name][0])]


def _binary_rule(elem: str) -> Rule:
    def check(op: Op) -> None:
        for k in range(2):
            check_operand(op, k, (elem,))
    return Rule((2, 2), (1, 1), check=check)


def _wrapping(fn, dtype):
    def apply(a, b):
        with np.errstate(over="ignore"):
            return fn(np.asarray(a, dtype), np.asarray(b, dtype), dtype=dtype)
    return apply


for _n, (_elem, _fn) in INTEGER.items():
    registry.set_part("syntax", _n, parse_integer_binary)
    registry.set_part("verify", _n, _binary_rule(_elem))
    registry.set_part("stacked", _n, stacked_elementwise)
    registry.set_part("cost", _n, "vector")


@registry.implements("build", *INTEGER)
def build_integer(c, op: Op):
    elem, fn = INTEGER[op.name]
    return build_host(c, op, _wrapping(fn, ScalarType(elem).dtype))


# -- idx32toaddr ----------------------------------------------------------------------------------

def parse_idx32toaddr(p, op: Op) -> list:
    op.operands = [p.operand()]
    for key in ("base", "stride"):
        i = p.pos
        if p.next() != key:
            p.fail(f"expected '{key}' in 'spyreop.idx32toaddr'", i)
        if p.kind() == "ssa":
            op.operands.append(p.operand())
            continue
        i = p.pos
        value = p.number()
        if isinstance(value, tuple):  # 0x... literal
            value = value[1]
        if not isinstance(value, int):
            p.fail(f"'{key}' takes an integer literal or an i32 value", i)
        if not -(1 << 31) <= value < 1 << 32:
            p.fail(f"'{key}' {value} does not fit in 32 bits", i)
        op.attrs[key] = Typed(wrap_i32(value), I32)
    if p.peek() == "{" and p.kind() == "punct":
        op.attrs.update(p.attr_dict())
    return [ScalarType("i32")]


def _idx32toaddr(op: Op) -> None:
    n_attrs = sum(1 for k in ("base", "stride") if k in op.attrs)
    if len(op.operands) + n_attrs != 3 or len(op.operands) not in (1, 3):
        fail("idx32toaddr takes an i32 index and a base and a stride, both attributes or both "
             "i32 operands")
    for k in range(len(op.operands)):
        check_operand(op, k, ("i32",))
    for key in ("base", "stride"):
        v = op.attrs.get(key)
        if v is not None and (not isinstance(v, Typed) or v.type != I32
                              or isinstance(v.value, bool) or not isinstance(v.value, int)):
            fail(f"attribute '{key}' failed to satisfy constraint: 32-bit signless integer "
                 "attribute")


registry.set_part("syntax", "spyreop.idx32toaddr", parse_idx32toaddr)
registry.set_part("verify", "spyreop.idx32toaddr", Rule((1, 3), (1, 1), check=_idx32toaddr))
registry.set_part("stacked", "spyreop.idx32toaddr", stacked_elementwise)
registry.set_part("cost", "spyreop.idx32toaddr", "vector")

_I32 = np.dtype(np.int32)


def _address(i, base, stride):
    with np.errstate(over="ignore"):
        i, base, stride = (np.asarray(v, _I32) for v in (i, base, stride))
        return np.add(base, np.multiply(stride, i, dtype=_I32), dtype=_I32)


@registry.implements("build", "spyreop.idx32toaddr")
def build_idx32toaddr(c, op: Op):
    if len(op.operands) == 3:
        return build_host(c, op, _address)
    base, stride = (wrap_i32(attr_value(op.attrs[k])) for k in ("base", "stride"))
    return build_host(c, op, lambda i: _address(i, base, stride))
