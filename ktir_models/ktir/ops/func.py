"""``func.call`` between functions of one module: the callee is expanded in place.

Each call site compiles the callee's body again with the caller's compiler: the callee's
arguments live in the call operands' slots, its values get slots of their own for this call
site (so constants fold per call site, as if the body were written there), and the call's
results are the slots of the callee's returned values. Verification rejects recursion, so the
expansion ends. The callee's LX use is not added to the caller's static high-water mark (the
accounting in compile.py walks the caller's own ops).
"""

from __future__ import annotations

from . import register


def _callee_values(fn):
    for a in fn.args:
        yield a
    for op in fn.walk():
        yield from op.results
        for r in op.regions:
            for b in r.blocks:
                yield from b.args


@register("func.call")
def build_call(c, op):
    from ..compile import run_steps

    callee = c.fn.module.function(op.attrs["callee"])
    for v in _callee_values(callee):
        c.slots.pop(id(v), None)  # fresh slots at every call site
    for inner in callee.walk():
        for v in inner.operands:
            c.users.setdefault(id(v), []).append(inner)
    for a, v in zip(callee.args, op.operands):
        c.alias(a, c.slot(v))
    where = c.where
    steps = c.compile_block(callee.body.block)
    c.where = where
    ret = callee.body.block.ops[-1]
    for r, v in zip(op.results, ret.operands):
        c.alias(r, c.slot(v))
    if not steps:
        return None

    def step(env):
        run_steps(steps, env)  # a fault names the callee's op, not the call

    return step
