"""linalg.fill and the named elementwise ops (add, sub, mul, div, max, min, exp, copy): each op
kind's parts side by side (syntax, verification rule, builder, cost). Their ``outs`` only give the
result's shape. f16 add/sub/mul/div compute in f32 and round once (the exact f16 result).
"""

from __future__ import annotations

import numpy as np

from ...ir import registry
from ...ir.nodes import Op, ScalarType
from ...verify.rules import Rule, check_declared_ins_outs, fail, ins_outs, same_shape
from ..arith import INT_BINARY, coerce
from .numerics import F32, wide_of
from .syntax import parse_structured


# -- linalg.fill --------------------------------------------------------------------------------

def _fill(op: Op) -> None:
    ins, outs = ins_outs(op)
    if len(ins) != 1 or len(outs) != 1 or not isinstance(ins[0].type, ScalarType):
        fail("linalg.fill takes ins(scalar) outs(tensor)")
    check_declared_ins_outs(op)
    if ins[0].type.name != outs[0].type.elem:
        fail(f"fill value {ins[0].type} does not match {outs[0].type}")


registry.set_part("syntax", "linalg.fill", parse_structured)
registry.set_part("verify", "linalg.fill", Rule((2, 2), (1, 1), check=_fill))
registry.set_part("cost", "linalg.fill", "layout")


@registry.implements("build", "linalg.fill")
def build_fill(c, op):
    (s,), (init,) = ins_outs(op)
    r = op.result
    t = r.type
    if c.is_const(s):
        c.set_const(r, np.full(t.shape, c.const(s), dtype=t.dtype))
        return None
    is_, ir, iinit = c.slot(s), c.slot(r), c.slot(init)
    full = c.xp.full

    def step(env):
        env[ir] = full(env[iinit].shape, env[is_], t.dtype)

    return step


# -- the named elementwise ops ------------------------------------------------------------------

def _named_elementwise(op: Op) -> None:
    ins, outs = ins_outs(op)
    if len(outs) != 1 or not ins:
        fail(f"{op.name} takes ins(...) outs(init)")
    check_declared_ins_outs(op)
    for v in ins:
        if not same_shape(v.type, outs[0].type):
            fail(f"operand {v.name} ({v.type}) does not match the output {outs[0].type}")


for _n in ("add", "sub", "mul", "div", "max", "min", "exp", "copy"):
    registry.set_part("syntax", "linalg." + _n, parse_structured)
    registry.set_part("verify", "linalg." + _n, Rule((2, None), (1, 1), check=_named_elementwise))
    registry.set_part("cost", "linalg." + _n, "layout" if _n == "copy" else "vector")


_NAMED = {
    "linalg.add": "add", "linalg.sub": "subtract", "linalg.mul": "multiply",
    "linalg.div": "divide", "linalg.max": "maximum", "linalg.min": "minimum",
}


@registry.implements("build", *_NAMED, "linalg.exp", "linalg.copy")
def build_named(c, op):
    ins, (init,) = ins_outs(op)
    r = op.result
    t = r.type
    dt = t.dtype
    slots = [c.slot(v) for v in ins]
    ir = c.slot(r)
    xp = c.xp
    astype = xp.astype
    if op.name == "linalg.copy":
        (i0,) = slots

        def step(env):
            env[ir] = coerce(env[i0], t, xp)
        return step
    if op.name == "linalg.exp":
        (i0,) = slots
        exp, wide = xp.exp, wide_of(xp)

        def step(env):
            env[ir] = astype(exp(wide(env[i0])), dt)
        return step
    fn = getattr(xp, _NAMED[op.name])
    i0, i1 = slots
    if dt == np.float16 and op.name in ("linalg.add", "linalg.sub", "linalg.mul", "linalg.div"):
        base = fn

        def fn(a, b):  # f32 then one rounding: the exact f16 result (see dialects/arith.py)
            return base(a, b, dtype=F32)
    if dt.kind in "iu":
        fn = {"linalg.div": INT_BINARY["arith.divsi"](xp)}.get(op.name, fn)

    def step(env):
        env[ir] = astype(fn(env[i0], env[i1]), dt)

    return step
