"""The grid as a batch dimension: one run of a function for all cores, values stacked by core.

An SPMD function runs the same steps on every core; only values derived from the core id differ.
:func:`varying_values` finds those values (data flow from ``ktdp.get_compute_tile_id`` and from
per-core LX views). :func:`compile_stacked` then builds a second step list over the *same* slots
as the plain plan, run once per grid instead of once per core:

* a *uniform* value (not derived from the core id) is stored as it is in the plain plan, and an op
  whose operands are all uniform runs its plain step once (its result is the same on every core;
  a store of uniform data to a uniform place writes the same bytes every core would write);
* a *varying* value is stored stacked: a tensor of shape S as an array [C, *S], a scalar as an
  array [C], any other object (a view, a tile) as a :class:`~.stacked_values.PerCore` list, a
  box access tile with per-core corners as a :class:`~.stacked_values.StackedTile`;
* an op with a varying operand runs a *stacked* step when its kind has one (elementwise ops and
  matmuls broadcast over the leading core axis as they are; transpose, reduce, broadcast, splat,
  extract, reshapes, access tiles, loads, stores and ``scf.for`` have their own, each in its
  dialect module, registered as the op's ``stacked`` part), and otherwise falls back to its
  plain step run core by core (:class:`~.stacked_values.CoreEnv` shows one core's slice of the
  stacked values), whose results are stacked again (stacked_values.py holds these forms and
  the builder).

Invariants:

* bit-identical to running the cores one after the other in lock step (execute.run_lockstep):
  every stacked step computes, per core, what the plain step computes (the same numpy ufuncs on
  the same values; matmuls broadcast over the core axis make the same per-core BLAS calls);
* a varying slot always holds the stacked form (uniform values flowing into loop-carried or
  yielded varying slots are broadcast first);
* a stacked step checks everything it can fault on before it writes memory; on any failure it
  reruns the op core by core, which raises the located fault of the first failing core, as the
  lock-step run would (a step that succeeds core by core after its stacked form failed is
  simply continued: the stacked form's conditions, e.g. non-overlapping stores, were not met).
"""

from __future__ import annotations

from .. import dialects  # noqa: F401  (registers each op kind's stacked form)
from ..backends.capabilities import caps_of
from ..ir.nodes import Function, Op
from .stacked_values import Builder, StackedPlan

# ---------------------------------------------------------------------------------------------
# which values depend on the core


def _outside_uses(op: Op) -> list:
    """Operands of ``op`` and of every op nested in its regions (values from outside included)."""
    vals = list(op.operands)
    for r in op.regions:
        for b in r.blocks:
            for inner in b.ops:
                vals.extend(_outside_uses(inner))
    return vals


def varying_values(fn: Function, seeds: set[int] | None = None, ops: list | None = None) \
        -> set[int]:
    """ids of the values that may differ between cores (a fixpoint over loops' carried values):
    results of ``get_compute_tile_id`` and per-core LX views, or, given ``seeds`` (value ids),
    those, and everything computed from them by ``ops`` (default: the function body)."""
    vary: set[int] = set(seeds or ())
    seed_ops = seeds is None

    def visit_block(block) -> bool:
        changed = False
        for op in block.ops:
            changed |= visit_op(op)
        return changed

    def visit_op(op: Op) -> bool:
        changed = False
        for r in op.regions:
            for b in r.blocks:
                changed |= visit_block(b)
        seeded = seed_ops and (op.name == "ktdp.get_compute_tile_id" or (
            op.name == "ktdp.construct_memory_view" and
            getattr(op.attrs.get("memory_space"), "core", 0) is None and
            getattr(op.attrs.get("memory_space"), "kind", "hbm") != "hbm"))
        dep = seeded or any(id(v) in vary for v in _outside_uses(op))
        if op.name == "scf.for" and op.regions:
            loops[0] = True
            block = op.regions[0].block
            lb, ub, st = op.groups["bounds"]
            if (id(lb) in vary or id(st) in vary) and id(block.args[0]) not in vary:
                vary.add(id(block.args[0]))
                changed = True
            last = block.ops[-1] if block.ops else None
            ys = last.operands if last is not None and last.name == "scf.yield" else []
            for k, (arg, init) in enumerate(zip(block.args[1:], op.groups["inits"])):
                carried = id(init) in vary or (k < len(ys) and id(ys[k]) in vary)
                if carried and id(arg) not in vary:
                    vary.add(id(arg))
                    changed = True
        if dep or (op.regions and any(id(v) in vary for r in op.regions for b in r.blocks
                                      for o in b.ops if o.name.endswith("yield")
                                      for v in o.operands)):
            for v in op.results:
                if id(v) not in vary:
                    vary.add(id(v))
                    changed = True
        return changed

    class _Ops:  # a block-like view of the ops analysed
        pass

    body = fn.body.block
    if ops is not None:
        body = _Ops()
        body.ops = ops
    # straight-line code is settled by one pass in order; loops' carried values need a fixpoint
    loops = [False]
    while visit_block(body) and loops[0]:
        pass
    return vary


# ---------------------------------------------------------------------------------------------
# compiling (the builder: stacked_values.py; each op kind's stacked form: dialects/)


def compile_stacked(c, fn: Function) -> StackedPlan | None:
    """The stacked steps of ``fn`` (compiled by ``c``), or None when stacking cannot pay: a single
    core, or no op with a stacked form."""
    if fn.num_cores < 2 or not caps_of(c.xp).stacked:
        return None
    b = Builder(c, fn.num_cores, fn.grid, varying_values(fn))
    steps = b.block(fn.body.block)
    if b.native == 0:
        return None
    return b.finish(steps)


