"""scf: for (with iter_args), if, yield. Loops replay their compiled body; no per-trip parsing."""

from __future__ import annotations

from . import register


@register("scf.for")
def build_for(c, op):
    from ..compile import run_steps

    lb, ub, st = op.groups["bounds"]
    inits = op.groups["inits"]
    block = op.regions[0].block
    body = c.compile_block(block)
    ilb, iub, ist = c.slot(lb), c.slot(ub), c.slot(st)
    iv = c.slot(block.args[0])
    carried = [c.slot(a) for a in block.args[1:]]
    init_slots = [c.slot(v) for v in inits]
    last = block.ops[-1] if block.ops else None
    yields = [c.slot(v) for v in last.operands] if last is not None and last.name == "scf.yield" \
        else []
    results = [c.slot(v) for v in op.results]
    n = len(carried)

    if n == 0:
        def step(env):
            s = env[ist]
            if s <= 0:
                from ..errors import FaultSignal

                raise FaultSignal(f"scf.for step must be positive, got {s}")
            for i in range(env[ilb], env[iub], s):
                env[iv] = i
                run_steps(body, env)
        return step

    if n == 1:
        (ca,), (ys,), (rs,), (ins,) = carried, yields, results, init_slots

        def step(env):
            s = env[ist]
            if s <= 0:
                from ..errors import FaultSignal

                raise FaultSignal(f"scf.for step must be positive, got {s}")
            acc = env[ins]
            for i in range(env[ilb], env[iub], s):
                env[iv] = i
                env[ca] = acc
                run_steps(body, env)
                acc = env[ys]
            env[rs] = acc
        return step

    def step(env):
        s = env[ist]
        if s <= 0:
            from ..errors import FaultSignal

            raise FaultSignal(f"scf.for step must be positive, got {s}")
        accs = [env[k] for k in init_slots]
        for i in range(env[ilb], env[iub], s):
            env[iv] = i
            for k, a in zip(carried, accs):
                env[k] = a
            run_steps(body, env)
            accs = [env[k] for k in yields]
        for k, a in zip(results, accs):
            env[k] = a

    return step


@register("scf.if")
def build_if(c, op):
    from ..compile import run_steps

    cond = c.slot(op.operands[0])
    branches = []
    for r in op.regions:
        block = r.block
        steps = c.compile_block(block)
        last = block.ops[-1] if block.ops else None
        ys = [c.slot(v) for v in last.operands] if last is not None and last.name == "scf.yield" \
            else []
        branches.append((steps, ys))
    if len(branches) == 1:
        branches.append(([], []))
    (then_steps, then_y), (else_steps, else_y) = branches
    results = [c.slot(v) for v in op.results]

    def step(env):
        if env[cond]:
            run_steps(then_steps, env)
            ys = then_y
        else:
            run_steps(else_steps, env)
            ys = else_y
        for k, y in zip(results, ys):
            env[k] = env[y]

    return step
