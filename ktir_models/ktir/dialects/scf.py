"""scf: for (with iter_args), if, while (with condition), yield, parallel (with reduce). Each op
kind's parts side by side: custom syntax, verification rule, builder, (``scf.for``) stacked form
and cost (registry.py).

Loops replay their compiled body; no per-trip parsing. ``scf.for``'s builder first asks the
rewrite rules (patterns/): a matched cross-op pattern (the K-blocked GEMM loop) runs as one
fused step, bit-identical to the loop run trip by trip under the rule's stated condition.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import patterns
from ..ir import registry
from ..ir.errors import FaultSignal, Location
from ..exec.execute import run_lockstep, run_steps
from ..ir.nodes import INDEX, INT_TYPES, Op, ScalarType, TensorType, Value
from ..parse.ops_custom import h_yield
from ..exec.stacked_values import CoreEnv, Fallback, lift
from ..exec.tape import LoopShape
from ..verify.rules import Rule, check_yield, compatible, elem, fail


def arrow_types(p) -> list:
    """An optional ``-> T`` or ``-> (T, ...)`` (``-> ()`` too): the listed types."""
    if not p.accept("->"):
        return []
    return arrow_types_after(p)


def arrow_types_after(p) -> list:
    """The result part of a function type, after its ``->``: ``T``, ``(T, ...)`` or ``()``."""
    if not p.accept("("):
        return [p.parse_type()]
    if p.accept(")"):
        return []
    types = p.type_list()
    p.expect(")")
    return types


def assignments(p, what: str) -> tuple[list[tuple[str, Location]], list[Value]]:
    """``%a = %x, %b = %y)`` after its ``(``: the names (with locations) and the values."""
    names: list[tuple[str, Location]] = []
    values: list[Value] = []
    while not p.accept(")"):
        ai = p.pos
        names.append((p.expect_kind("ssa", what), p.loc(ai)))
        p.expect("=")
        values.append(p.operand())
        if not p.accept(","):
            p.expect(")", "closing the assignment list")
            break
    return names, values


# -- scf.for ------------------------------------------------------------------------------------

@registry.implements("syntax", "scf.for")
def parse_for(p, op: Op):
    """``scf.for %i = %lb to %ub step %s [iter_args(%a = %init, ...)] [-> T, ...] [: T] {...}``."""
    ivi = p.pos
    iv_name = p.expect_kind("ssa", "the induction variable")
    p.expect("=")
    lb = p.operand()
    p.expect("to")
    ub = p.operand()
    p.expect("step")
    st = p.operand()
    arg_names, inits = [], []
    if p.accept("iter_args"):
        p.expect("(")
        arg_names, inits = assignments(p, "an iter_args name")
    result_types = arrow_types(p)
    iv_type = INDEX
    if p.accept(":"):
        iv_type = p.parse_type()
    if len(result_types) != len(inits):
        p.fail(f"scf.for has {len(inits)} iter_args but {len(result_types)} result types", ivi)
    p.scopes.append({})
    args = [p.define(iv_name, iv_type, p.loc(ivi))]
    for (n, l), t in zip(arg_names, result_types):
        args.append(p.define(n, t, l))
    body = p.parse_region(args, open_scope=False)
    p.scopes.pop()
    op.operands = [lb, ub, st] + inits
    op.groups = {"bounds": [lb, ub, st], "inits": inits}
    op.regions = [body]
    return result_types


def _for(op: Op) -> None:
    lb, ub, st = op.groups["bounds"]
    for v in (lb, ub, st):
        if elem(v.type) not in INT_TYPES or not isinstance(v.type, ScalarType):
            fail(f"loop bound {v.name} must be an integer scalar, got {v.type}")
    inits = op.groups["inits"]
    body = op.regions[0].block
    for init, r in zip(inits, op.results):
        if not compatible(init.type, r.type):
            fail(f"iter_args init {init.name} ({init.type}) does not match result type {r.type}")
    check_yield(op, body, [r.type for r in op.results], "scf.yield")


registry.set_part("verify", "scf.for", Rule((3, None), (0, None), (), (1, 1), check=_for))


@registry.implements("build", "scf.for")
def build_for(c, op):
    lb, ub, st = op.groups["bounds"]
    inits = op.groups["inits"]
    block = op.regions[0].block
    body = c.compile_block(block)
    fused = patterns.rewrite(c, op)  # a cross-op pattern (patterns/) runs as one step
    if fused is not None:
        return fused
    ilb, iub, ist = c.slot(lb), c.slot(ub), c.slot(st)
    iv = c.slot(block.args[0])
    carried = [c.slot(a) for a in block.args[1:]]
    init_slots = [c.slot(v) for v in inits]
    last = block.ops[-1] if block.ops else None
    yields = [c.slot(v) for v in last.operands] if last is not None and last.name == "scf.yield" \
        else []
    results = [c.slot(v) for v in op.results]
    n = len(carried)
    shape = LoopShape(iv, body, carried, init_slots, yields, results, _carry,
                      lambda env: _trip_ivs(env[ilb], env[iub], env[ist]))
    step = _plain_for(ilb, iub, ist, iv, body, carried, init_slots, yields, results, n)
    step.loop = shape
    return step


def _carry(env, dst: list, src: list) -> None:
    """Loop-carried values from slots ``src`` into slots ``dst`` (all read before any write)."""
    vals = [env[k] for k in src]
    for k, v in zip(dst, vals):
        env[k] = v


def _trip_ivs(lo, hi, s):
    if s <= 0:
        raise FaultSignal(f"scf.for step must be positive, got {s}")
    return range(lo, hi, s)


def _plain_for(ilb, iub, ist, iv, body, carried, init_slots, yields, results, n):
    if n == 0:
        def step(env):
            for i in _trip_ivs(env[ilb], env[iub], env[ist]):
                env[iv] = i
                run_steps(body, env)
        return step

    if n == 1:
        (ca,), (ys,), (rs,), (ins,) = carried, yields, results, init_slots

        def step(env):
            acc = env[ins]
            for i in _trip_ivs(env[ilb], env[iub], env[ist]):
                env[iv] = i
                env[ca] = acc
                run_steps(body, env)
                acc = env[ys]
            env[rs] = acc
        return step

    def step(env):
        accs = [env[k] for k in init_slots]
        for i in _trip_ivs(env[ilb], env[iub], env[ist]):
            env[iv] = i
            for k, a in zip(carried, accs):
                env[k] = a
            run_steps(body, env)
            accs = [env[k] for k in yields]
        for k, a in zip(results, accs):
            env[k] = a

    return step


class _Uneven(Fallback):
    """Cores run different trip counts: ``counts`` [C], and the per-core ``lo`` and ``s``."""

    def __init__(self, counts, lo, s):
        super().__init__("cores run different trip counts")
        self.counts, self.lo, self.s = counts, lo, s


@registry.implements("stacked", "scf.for")
def stacked_for(b, op, plain):
    """The loop over the stacked env: every core runs the same trips (a non-positive step sends
    the whole loop core by core before anything ran); carried values uniform so far are
    broadcast over the core axis where the yielded ones vary.

    Trip counts that differ by core (chunks dealt round-robin, ``for j = core to n step grid``)
    send the loop core by core too, unless it carries nothing and yields nothing: then the trips
    every core runs run stacked, and the later trips of the cores that have more run in lock
    step over those cores only, with the body's plain steps (a batched K-loop among them runs
    them in one call). That is the lock-step order of the cores over the trips, so it writes
    the same bytes."""
    c = b.c
    lb, ub, st = op.groups["bounds"]
    block = op.regions[0].block
    body = b.block(block)
    C = b.C
    ilb, iub, ist = c.slot(lb), c.slot(ub), c.slot(st)
    iv = c.slot(block.args[0])
    carried = [(c.slot(a), a.type, b.varies(a)) for a in block.args[1:]]
    inits = [(c.slot(v), b.varies(v)) for v in op.groups["inits"]]
    last = block.ops[-1] if block.ops else None
    ys = [(c.slot(v), b.varies(v)) for v in last.operands] \
        if last is not None and last.name == "scf.yield" else []
    results = [c.slot(v) for v in op.results]
    bounds_vary = b.varies(lb) or b.varies(ub) or b.varies(st)

    def trips(senv):
        """The induction variable's values (ints, or [C] arrays when the bounds vary)."""
        lo, hi, s = senv[ilb], senv[iub], senv[ist]
        if not bounds_vary:
            if s <= 0:
                raise Fallback
            return [lo + k * s for k in range(len(range(lo, hi, s)))]
        # per-core arrays and scalars mix by broadcasting (no broadcast_arrays: ~30 us a call)
        if (np.asarray(s) <= 0).any():
            raise Fallback
        counts = np.maximum(0, -((np.asarray(lo, np.int64) - hi) // s)).reshape(-1)
        if (counts != counts[0]).any():
            raise _Uneven(counts, lo, s)
        return [lo + k * s for k in range(int(counts[0]))]

    plain_body = getattr(getattr(plain, "loop", None), "body", None)
    splits = bounds_vary and not carried and not results and plain_body is not None

    def split(senv):
        """(the induction variable's values in the trips every core runs, the step running the
        later trips); raises Fallback where the loop does not split."""
        try:
            return trips(senv), None
        except _Uneven as u:
            if not splits:
                raise Fallback from None
            counts, lo, s = u.counts, u.lo, u.s
        common = int(counts.min())
        lo_c = np.broadcast_to(np.asarray(lo, np.int64), (C,))
        s_c = np.broadcast_to(np.asarray(s, np.int64), (C,))
        # per later trip k: (core, its induction variable) for each core that runs it
        later = tuple(tuple((int(core), int(lo_c[core] + k * s_c[core]))
                            for core in np.flatnonzero(counts > k))
                      for k in range(common, int(counts.max())))
        vary = b.vary

        def rest(senv):
            for runs in later:
                envs = []
                for core, i in runs:
                    env = CoreEnv(senv, core, vary)
                    env[iv] = i
                    envs.append(env)
                run_lockstep(plain_body, envs)

        rest.op = op
        return [lo + k * s for k in range(common)], rest

    lifted: dict = {}  # position -> (uniform tensor, its broadcast): loop inits are constants

    def lift_at(k, v, t):
        hit = lifted.get(k)
        if hit is not None and hit[0] is v:
            return hit[1]
        out = lift(v, t, C)
        if isinstance(t, TensorType):  # a read-only broadcast view of v (values are immutable)
            lifted[k] = (v, out)
        return out

    def carry(senv, dst, src):
        """Carried values from ``src`` ((slot, varies) pairs) into slots ``dst``, uniform ones
        broadcast where the carried value varies."""
        accs = [senv[k] if vk or not va else lift_at(j, senv[k], t)
                for j, ((k, vk), (_, t, va)) in enumerate(zip(src, carried))]
        for d, a in zip(dst, accs):
            senv[d] = a

    slots = [k for k, _, _ in carried]

    def step(senv):
        ivs, rest = split(senv)
        src = inits
        for i in ivs:
            carry(senv, slots, src)
            senv[iv] = i
            for step_ in body:
                step_(senv)
            src = ys
        carry(senv, results, src)
        if rest is not None:
            rest(senv)

    # a fault inside the body is raised, located, by the body's own steps; only the trip check
    # sends the whole loop core by core, before anything ran
    step.loop = LoopShape(iv, body, slots, inits, ys, results, carry, trips,
                          split if splits else None)
    return step


@registry.implements("cost", "scf.for")
def cost_for(w, op: Op, scale: float) -> None:
    """The loop's own charge, then its body walked once per trip (at most the walker's trip
    limit; past it, once with the trips as scale)."""
    lb, ub, step = (w.env.get(v) for v in op.groups["bounds"])
    body = op.regions[0].block
    iv = body.args[0] if body.args else None
    for r in op.results:
        w.env[r] = None
    for a in body.args[1:]:
        w.env[a] = None
    w.charge(op, scale)
    if not all(isinstance(v, int) for v in (lb, ub, step)) or step <= 0:
        w.note(f"{op.loc}: scf.for bounds unknown before running; one trip assumed")
        w.env[iv] = lb if isinstance(lb, int) else None
        w.block(body, scale)
        return
    trips = max(0, -(-(ub - lb) // step))
    if trips <= w.trip_limit:
        for t in range(trips):
            w.env[iv] = lb + t * step
            w.block(body, scale)
    else:
        w.env[iv] = lb
        w.block(body, scale * trips)


# -- scf.if -------------------------------------------------------------------------------------

@registry.implements("syntax", "scf.if")
def parse_if(p, op: Op):
    """``scf.if %cond [-> T, ...] { ... } [else { ... }]``."""
    op.operands = [p.operand()]
    result_types = arrow_types(p)
    op.regions = [p.parse_region()]
    if p.accept("else"):
        op.regions.append(p.parse_region())
    return result_types


def _if(op: Op) -> None:
    c = op.operands[0]
    if c.type != ScalarType("i1"):
        fail(f"scf.if condition {c.name} must be i1, got {c.type}")
    if op.results and len(op.regions) != 2:
        fail("scf.if with results needs an else region")
    for r in op.regions:
        check_yield(op, r.block, [x.type for x in op.results], "scf.yield")


registry.set_part("verify", "scf.if", Rule((1, 1), (0, None), (), (1, 2), check=_if))


@registry.implements("build", "scf.if")
def build_if(c, op):
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




@registry.implements("cost", "scf.if")
def cost_if(w, op: Op, scale: float) -> None:
    """The branch taken when the condition is known before running, else the costlier one."""
    from ..latency.records import CoreCost
    from ..latency.walker import CoreWalker

    cond = w.env.get(op.operands[0]) if op.operands else None
    for r in op.results:
        w.env[r] = None
    w.charge(op, scale)
    regions = [r for r in op.regions if r.blocks]
    if isinstance(cond, int):
        chosen = regions[0] if cond else (regions[1] if len(regions) > 1 else None)
        if chosen is not None:
            w.block(chosen.block, scale)
        return
    w.note(f"{op.loc}: scf.if condition unknown before running; the costlier branch assumed")
    best, best_cost = None, -1.0
    for r in regions:
        probe = CoreWalker.__new__(CoreWalker)
        probe.__dict__.update(w.__dict__)
        probe.cost = CoreCost(w.cost.core)
        probe.env = dict(w.env)
        probe.block(r.block, scale)
        c = probe.cost.total(w.params.pipeline)
        if c > best_cost:
            best, best_cost = r, c
    if best is not None:
        w.block(best.block, scale)


# -- scf.while / scf.condition ------------------------------------------------------------------

@registry.implements("syntax", "scf.while")
def parse_while(p, op: Op):
    """``scf.while [(%a = %init, ...)] : (T, ...) -> (R, ...) { before } do { after }``: the
    before region's arguments are the assigned names with the input types; the after region
    names its arguments in its block label (``^bb0(%b: R, ...):``)."""
    wi = p.pos
    names, inits = [], []
    if p.accept("("):
        names, inits = assignments(p, "a before-region argument")
    p.expect(":", "before scf.while's function type")
    p.expect("(", "opening scf.while's input types")
    in_types = [] if p.accept(")") else p.type_list()
    if in_types:
        p.expect(")", "closing scf.while's input types")
    p.expect("->", "in scf.while's function type")
    result_types = arrow_types_after(p)
    if len(in_types) != len(inits):
        p.fail(f"scf.while has {len(inits)} operands but {len(in_types)} input types", wi)
    p.scopes.append({})
    args = [p.define(n, t, loc) for (n, loc), t in zip(names, in_types)]
    before = p.parse_region(args, open_scope=False)
    p.scopes.pop()
    p.expect("do", "between scf.while's regions")
    after = p.parse_region()
    if p.accept("attributes"):
        op.attrs.update(p.attr_dict())
    op.operands = inits
    op.regions = [before, after]
    return result_types


def _types(vals) -> str:
    return ", ".join(str(v.type) for v in vals) or "nothing"


def _while(op: Op) -> None:
    """MLIR's rules: the before region takes the init types and ends with ``scf.condition``
    (an i1 and the values passed on, typed as the op's results and as the after region's
    arguments); the after region ends with ``scf.yield`` of the init types."""
    before, after = op.regions[0].block, op.regions[1].block
    if len(before.args) != len(op.operands) or \
            not all(compatible(a.type, v.type) for a, v in zip(before.args, op.operands)):
        fail(f"scf.while's before region takes ({_types(before.args)}) but the operands are "
             f"({_types(op.operands)})")
    cond = before.ops[-1] if before.ops else None
    if cond is None or cond.name != "scf.condition":
        fail("scf.while's before region must end with 'scf.condition'")
    passed = cond.operands[1:]
    if len(passed) != len(op.results) or \
            not all(compatible(v.type, r.type) for v, r in zip(passed, op.results)):
        fail(f"scf.condition passes ({_types(passed)}) but scf.while returns "
             f"({_types(op.results)})")
    if len(after.args) != len(passed) or \
            not all(compatible(a.type, v.type) for a, v in zip(after.args, passed)):
        fail(f"scf.while's after region takes ({_types(after.args)}) but scf.condition passes "
             f"({_types(passed)})")
    check_yield(op, after, [v.type for v in op.operands], "scf.yield")


def _condition(op: Op) -> None:
    if not op.operands or op.operands[0].type != ScalarType("i1"):
        got = op.operands[0].type if op.operands else "nothing"
        fail(f"scf.condition's condition must be i1, got {got}")
    types = op.attrs.get("types") or []
    if types and len(types) != len(op.operands):
        fail(f"scf.condition passes {len(op.operands) - 1} values but lists "
             f"{len(types) - 1} types")
    for v, t in zip(op.operands, types):
        if not compatible(v.type, t):
            fail(f"operand {v.name} has type {v.type}, but the op says {t}")


registry.set_part("verify", "scf.while", Rule((0, None), (0, None), (), (2, 2), check=_while))
registry.set_part("verify", "scf.condition", Rule((1, None), (0, 0), check=_condition))
registry.set_part("cost", "scf.condition", "free")


@registry.implements("syntax", "scf.condition")
def parse_condition(p, op: Op):
    """``scf.condition(%cond) [%v, ... : T, ...]``; ``types`` holds every operand's declared
    type (the condition's i1 first), as the generic form lists them."""
    p.expect("(", "opening scf.condition's condition")
    op.operands = [p.operand()]
    p.expect(")", "closing scf.condition's condition")
    op.attrs["types"] = [ScalarType("i1")]
    if p.kind() == "ssa":
        op.operands += p.operand_list()
        p.expect(":", "before the passed values' types")
        op.attrs["types"] += p.type_list()
    return []


@registry.implements("build", "scf.while")
def build_while(c, op):
    """Run the before region on the current values; while its condition holds, run the after
    region on the values scf.condition passes and carry what it yields back to the before
    region; the values passed with a false condition are the results."""
    before, after = op.regions[0].block, op.regions[1].block
    before_steps, after_steps = c.compile_block(before), c.compile_block(after)
    before_args = [c.slot(a) for a in before.args]
    after_args = [c.slot(a) for a in after.args]
    inits = [c.slot(v) for v in op.operands]
    cond_op = before.ops[-1]
    cond = c.slot(cond_op.operands[0])
    passed = [c.slot(v) for v in cond_op.operands[1:]]
    last = after.ops[-1] if after.ops else None
    yields = [c.slot(v) for v in last.operands] if last is not None and last.name == "scf.yield" \
        else []
    results = [c.slot(v) for v in op.results]

    def step(env):
        _carry(env, before_args, inits)
        while True:
            run_steps(before_steps, env)
            if not env[cond]:
                _carry(env, results, passed)
                return
            _carry(env, after_args, passed)
            run_steps(after_steps, env)
            _carry(env, before_args, yields)

    return step


@registry.implements("cost", "scf.while")
def cost_while(w, op: Op, scale: float) -> None:
    """The regions walked trip by trip while the condition is known before running (at most
    the walker's trip limit); otherwise one trip of each region is assumed."""
    before, after = op.regions[0].block, op.regions[1].block
    cond_op = before.ops[-1]
    for r in op.results:
        w.env[r] = None
    w.charge(op, scale)
    vals = [w.env.get(v) for v in op.operands]
    for _ in range(w.trip_limit):
        for a, v in zip(before.args, vals):
            w.env[a] = v
        w.block(before, scale)
        cond = w.env.get(cond_op.operands[0])
        passed = [w.env.get(v) for v in cond_op.operands[1:]]
        if not isinstance(cond, (bool, int)):
            w.note(f"{op.loc}: scf.while condition unknown before running; one trip assumed")
            for a in after.args:
                w.env[a] = None
            w.block(after, scale)
            return
        if not cond:
            for r, v in zip(op.results, passed):
                w.env[r] = v
            return
        for a, v in zip(after.args, passed):
            w.env[a] = v
        w.block(after, scale)
        last = after.ops[-1] if after.ops else None
        vals = [w.env.get(v) for v in last.operands] if last is not None else []
    w.note(f"{op.loc}: scf.while ran past the walker's trip limit; later trips not counted")


# -- scf.parallel / scf.reduce / scf.reduce.return --------------------------------------------

def _paren_operands(p, what: str) -> list[Value]:
    p.expect("(", f"opening the {what}")
    vals = p.operand_list(")")
    p.expect(")", f"closing the {what}")
    return vals


@registry.implements("syntax", "scf.parallel")
def parse_parallel(p, op: Op):
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


def _parallel(op: Op) -> None:
    g = op.groups
    n = len(g["lbs"])
    if n == 0 or len(g["ubs"]) != n or len(g["steps"]) != n:
        fail(f"scf.parallel needs as many lower bounds, upper bounds and steps as induction "
              f"variables (got {n}, {len(g['ubs'])}, {len(g['steps'])})")
    for v in g["lbs"] + g["ubs"] + g["steps"]:
        if v.type != ScalarType("index"):
            fail(f"loop bound {v.name} must be an index, got {v.type}")
    block = op.regions[0].block
    if len(block.args) != n:
        fail(f"scf.parallel has {n} bounds but {len(block.args)} induction variables")
    inits = g["inits"]
    if len(inits) != len(op.results):
        fail(f"scf.parallel has {len(inits)} init values but {len(op.results)} results")
    for init, r in zip(inits, op.results):
        if not compatible(init.type, r.type):
            fail(f"init {init.name} ({init.type}) does not match result type {r.type}")
    last = block.ops[-1] if block.ops else None
    if last is None or last.name != "scf.reduce":
        if inits:
            fail("scf.parallel body must end with 'scf.reduce' of one value per result")
        return
    if len(last.operands) != len(inits):
        fail(f"scf.reduce reduces {len(last.operands)} value(s) but scf.parallel has "
              f"{len(inits)} result(s)")
    for v, r in zip(last.operands, op.results):
        if not compatible(v.type, r.type):
            fail(f"scf.reduce operand {v.name} ({v.type}) does not match result type {r.type}")


registry.set_part("verify", "scf.parallel",
                  Rule((3, None), (0, None), (), (1, 1), check=_parallel))


@registry.implements("build", "scf.parallel")
def build_parallel(c, op):
    """MLIR's scf.parallel: every point of the iteration box runs the body (here in
    lexicographic order, last dimension fastest; the op promises no order), and each value
    given to the body's terminating scf.reduce is folded into its accumulator with that value's
    combiner region, ``acc = combiner(acc, value)``, starting from the init value."""
    g = op.groups
    lbs, ubs, sts = ([c.slot(v) for v in g[k]] for k in ("lbs", "ubs", "steps"))
    block = op.regions[0].block
    ivs = [c.slot(a) for a in block.args]
    body = c.compile_block(block)
    last = block.ops[-1] if block.ops else None
    combiners = []
    if last is not None and last.name == "scf.reduce":
        for v, region in zip(last.operands, last.regions):
            rb = region.block
            lhs, rhs = (c.slot(a) for a in rb.args)
            steps = c.compile_block(rb)
            combiners.append((c.slot(v), lhs, rhs, steps, c.slot(rb.ops[-1].operands[0])))
    inits = [c.slot(v) for v in g["inits"]]
    results = [c.slot(v) for v in op.results]

    def points(env):
        ranges = [_trip_ivs(env[lo], env[hi], env[st]) for lo, hi, st in zip(lbs, ubs, sts)]
        return itertools.product(*ranges)

    def step(env):
        accs = [env[k] for k in inits]
        for point in points(env):
            for k, i in zip(ivs, point):
                env[k] = i
            run_steps(body, env)
            for n, (value, lhs, rhs, steps, out) in enumerate(combiners):
                env[lhs] = accs[n]
                env[rhs] = env[value]
                run_steps(steps, env)
                accs[n] = env[out]
        for k, a in zip(results, accs):
            env[k] = a

    return step


@registry.implements("syntax", "scf.reduce")
def parse_reduce(p, op: Op):
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


@registry.implements("syntax", "scf.reduce.return")
def parse_reduce_return(p, op: Op):
    """``scf.reduce.return %x : T``."""
    op.operands = [p.operand()]
    p.expect(":", "before the returned type")
    op.attrs["types"] = p.type_list()
    return []


def _reduce_op(op: Op) -> None:
    if len(op.regions) != len(op.operands):
        fail(f"scf.reduce needs one combiner region per reduced value ({len(op.operands)}), "
              f"got {len(op.regions)}")
    types = op.attrs.get("types") or []
    for v, t in zip(op.operands, types):
        if not compatible(v.type, t):
            fail(f"operand {v.name} has type {v.type}, but the op says {t}")
    for v, r in zip(op.operands, op.regions):
        b = r.block
        if len(b.args) != 2 or not all(compatible(a.type, v.type) for a in b.args):
            fail(f"the combiner of {v.name} takes two {v.type} arguments")
        check_yield(op, b, [v.type], "scf.reduce.return")


registry.set_part("verify", "scf.reduce", Rule((0, None), (0, 0), (), (0, 64), check=_reduce_op))
registry.set_part("verify", "scf.reduce.return", Rule((1, 1), (0, 0)))


# -- terminators -------------------------------------------------------------------------------

registry.set_part("syntax", "scf.yield", h_yield)
registry.set_part("verify", "scf.yield", Rule())
registry.set_part("cost", "scf.yield", "free")


@registry.implements("build", "scf.reduce", "scf.reduce.return", "scf.yield", "scf.condition")
def build_terminator(c, op):
    return None  # the parent (scf.parallel, scf.for, scf.if, scf.while) reads these slots
