"""func: ``func.call`` between functions of one module, and ``return`` (``func.return``).

Each op kind's parts stand side by side (registry.py): custom syntax, verification rule and, for
the call, the builder. The module-level call checks (the callee exists, types match, no
recursion) and the check of ``return`` against the function's result types are the verifier's
(verify.py), which sees the whole module.

The callee is expanded in place. Each call site compiles the callee's body again with the
caller's compiler: the callee's arguments live in the call operands' slots, its values get slots
of their own for this call site (so constants fold per call site, as if the body were written
there), and the call's results are the slots of the callee's returned values. Verification
rejects recursion, so the expansion ends. The callee's LX use is not added to the caller's static
high-water mark (the accounting in compile.py walks the caller's own ops).
"""

from __future__ import annotations

from ..ir import registry
from ..exec.execute import run_steps
from ..ir.nodes import Op
from ..parse.ops_frontend import function_type
from ..verify.rules import Rule


# -- func.call (also spelled ``call``) ------------------------------------------------------------

@registry.implements("syntax", "func.call", "call")
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


registry.set_part("verify", "func.call", Rule((0, None), (0, None), ("callee",)))


def _callee_values(fn):
    for a in fn.args:
        yield a
    for op in fn.walk():
        yield from op.results
        for r in op.regions:
            for b in r.blocks:
                yield from b.args


@registry.implements("build", "func.call")
def build_call(c, op):
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


# -- return (``func.return`` is read as ``return``) -----------------------------------------------

@registry.implements("syntax", "return")
def h_return(p, op: Op):
    if p.kind() == "ssa":
        op.operands = p.operand_list()
        p.expect(":")
        op.attrs["types"] = p.type_list()
    return []


# operands checked against the function's results by the verifier
registry.set_part("verify", "return", Rule((0, None), (0, 0)))
registry.set_part("cost", "return", "free")


@registry.implements("build", "return")
def build_return(c, op):
    return None  # no step: an inlined call (build_call above) reads the returned slots
