"""linalg.broadcast and linalg.transpose: each op kind's parts side by side (syntax, verification
rule, builder, stacked form, cost). Their ``outs`` only give the result's shape.
"""

from __future__ import annotations

import numpy as np

from ...ir import registry
from ...ir.nodes import Op
from ...verify.rules import Rule, check_declared_ins_outs, eq, fail, ins_outs
from .syntax import parse_structured


# -- linalg.broadcast ---------------------------------------------------------------------------

def _broadcast(op: Op) -> None:
    ins, outs = ins_outs(op)
    if len(ins) != 1 or len(outs) != 1:
        fail("linalg.broadcast takes ins(x) outs(init)")
    check_declared_ins_outs(op)
    dims = op.attrs.get("dimensions")
    if not isinstance(dims, list):
        fail("linalg.broadcast needs dimensions = [...]")
    x, y = ins[0].type, outs[0].type
    if len(y.shape) != len(x.shape) + len(dims) or any(d < 0 or d >= len(y.shape) for d in dims):
        fail(f"cannot broadcast {x} to {y} with new dimensions {dims}")
    kept = [s for k, s in enumerate(y.shape) if k not in dims]
    if not all(eq(a, b) for a, b in zip(kept, x.shape)) or x.elem != y.elem:
        fail(f"cannot broadcast {x} to {y} with new dimensions {dims}")


registry.set_part("syntax", "linalg.broadcast", parse_structured)
registry.set_part("verify", "linalg.broadcast",
                  Rule((2, 2), (1, 1), ("dimensions",), check=_broadcast))
registry.set_part("cost", "linalg.broadcast", "layout")


@registry.implements("build", "linalg.broadcast")
def build_broadcast(c, op):
    (x,), (init,) = ins_outs(op)
    r = op.result
    dims = tuple(op.attrs["dimensions"])
    shape = r.type.shape
    ix, ir = c.slot(x), c.slot(r)
    if c.is_const(x):
        c.set_const(r, np.broadcast_to(np.expand_dims(c.const(x), dims), shape))
        return None

    expanded = list(shape)
    for d in dims:
        expanded[d] = 1
    expanded = tuple(expanded)
    dt = r.type.dtype
    xp = c.xp
    empty, assign = xp.empty, xp.assign

    def step(env):
        out = empty(shape, dt)
        assign(out, env[ix].reshape(expanded))
        env[ir] = out

    return step


@registry.implements("stacked", "linalg.broadcast")
def stacked_broadcast(b, op, plain):
    (x,) = op.groups["ins"]
    if not b.varies(x):
        return None
    t = op.result.type
    expanded = list(t.shape)
    for d in op.attrs["dimensions"]:
        expanded[d] = 1
    C = b.C
    shape, expanded = (C,) + tuple(t.shape), (C,) + tuple(expanded)
    dt = t.dtype
    ix, ir = b.c.slot(x), b.c.slot(op.result)

    def step(senv):
        out = np.empty(shape, dt)
        out[...] = senv[ix].reshape(expanded)
        senv[ir] = out

    return step


# -- linalg.transpose ---------------------------------------------------------------------------

def _transpose(op: Op) -> None:
    ins, outs = ins_outs(op)
    if len(ins) != 1 or len(outs) != 1:
        fail("linalg.transpose takes ins(x) outs(init)")
    check_declared_ins_outs(op)
    perm = op.attrs.get("permutation")
    x, y = ins[0].type, outs[0].type
    if not isinstance(perm, list) or sorted(perm) != list(range(len(x.shape))):
        fail(f"permutation {perm} is not a permutation of the {len(x.shape)} dims of {x}")
    if len(y.shape) != len(x.shape) or not all(eq(y.shape[k], x.shape[p])
                                               for k, p in enumerate(perm)):
        fail(f"transposing {x} by {perm} does not give {y}")


registry.set_part("syntax", "linalg.transpose", parse_structured)
registry.set_part("verify", "linalg.transpose",
                  Rule((2, 2), (1, 1), ("permutation",), check=_transpose))
registry.set_part("cost", "linalg.transpose", "layout")


@registry.implements("build", "linalg.transpose")
def build_transpose(c, op):
    (x,), (init,) = ins_outs(op)
    r = op.result
    perm = tuple(op.attrs["permutation"])
    ix, ir = c.slot(x), c.slot(r)
    transpose = c.xp.transpose

    def step(env):
        env[ir] = transpose(env[ix], perm)

    return step


@registry.implements("stacked", "linalg.transpose")
def stacked_transpose(b, op, plain):
    (x,), _ = op.groups["ins"], op.groups["outs"]
    if not b.varies(x):
        return None
    perm = (0,) + tuple(p + 1 for p in op.attrs["permutation"])
    ix, ir = b.c.slot(x), b.c.slot(op.result)
    transpose = b.c.xp.transpose

    def step(senv):
        senv[ir] = transpose(senv[ix], perm)

    return step
