"""``spyreop.constant V : T``: its parts side by side.

The float V rounded to T, which is a scalar ``f16`` or ``f32`` (not df16, bf16, f64, an integer
or a tensor: the frontend's ops-invalid tests). Its value is a float attribute of the result's
type (``"spyreop.constant"() {value = 0.0 : f16} : () -> f16`` in the generic form); a hex
literal is the value's bit pattern, as for arith.constant.
"""

from __future__ import annotations

import numpy as np

from ...ir import registry
from ...ir.nodes import DenseConstant, Op, ScalarType
from ...verify.rules import Rule, fail
from ..arith import literal_value
from .types import Typed, attr_value, finish

_CONSTANT_TYPES = ("f16", "f32")


@registry.implements("syntax", "spyreop.constant")
def parse_constant(p, op: Op) -> list:
    """``V [attr-dict] : T`` (V a number or a dense literal; its type is the result's)."""
    i = p.pos
    if p.kind() == "dense":
        p.pos += 1
        value = p.dense(p.texts[i], i)
    else:
        value = p.number()
    if p.peek() == "{" and p.kind() == "punct":
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the constant's type")
    t = p.parse_type()
    op.attrs["value"] = Typed(value, t)
    return [t]


def _constant(op: Op) -> None:
    # counts and the attribute are checked here, with the frontend's messages
    if op.operands:
        fail("requires zero operands")
    if len(op.results) != 1:
        fail("requires one result")
    if "value" not in op.attrs:
        fail("requires attribute 'value'")
    t = op.results[0].type
    if not isinstance(t, ScalarType) or t.name not in _CONSTANT_TYPES:
        fail(f"result #0 must be 16-bit float or 32-bit float, but got '{t}'")
    value = op.attrs["value"]
    vtype = value.type if isinstance(value, Typed) else None
    value = attr_value(value)
    if isinstance(value, DenseConstant) or isinstance(value, bool) or \
            not isinstance(value, (int, float, tuple)):
        fail(f"requires a floating-point value attribute, got {value!r}")
    if vtype != t:
        fail("failed to verify that all of {value, result} have same type")


registry.set_part("verify", "spyreop.constant", Rule(check=_constant))
registry.set_part("cost", "spyreop.constant", "free")


@registry.implements("build", "spyreop.constant")
def build_constant(c, op: Op):
    value = attr_value(op.attrs["value"])
    t = op.result.type
    c.set_const(op.result, finish(np.asarray(literal_value(value, t.name), t.dtype), t))
    return None
