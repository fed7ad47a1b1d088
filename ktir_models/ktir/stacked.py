"""The grid as a batch dimension: one run of a function for all cores, values stacked by core.

An SPMD function runs the same steps on every core; only values derived from the core id differ.
:func:`varying_values` finds those values (data flow from ``ktdp.get_compute_tile_id`` and from
per-core LX views). :func:`compile_stacked` then builds a second step list over the *same* slots
as the plain plan, run once per grid instead of once per core:

* a *uniform* value (not derived from the core id) is stored as it is in the plain plan, and an op
  whose operands are all uniform runs its plain step once (its result is the same on every core;
  a store of uniform data to a uniform place writes the same bytes every core would write);
* a *varying* value is stored stacked: a tensor of shape S as an array [C, *S], a scalar as an
  array [C], any other object (a view, a tile) as a :class:`PerCore` list, a box access tile with
  per-core corners as a :class:`StackedTile`;
* an op with a varying operand runs a *stacked* step when its kind has one (elementwise ops and
  matmuls broadcast over the leading core axis as they are; transpose, reduce, broadcast, splat,
  extract, reshapes, access tiles, loads, stores and ``scf.for`` have their own, in
  stacked_steps.py), and otherwise
  falls back to its plain step run core by core (:class:`CoreEnv` shows one core's slice of the
  stacked values), whose results are stacked again.

Invariants:

* bit-identical to running the cores one after the other in lock step (compile.run_lockstep):
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

from dataclasses import dataclass

import numpy as np

from .errors import EmulationFault
from .ir import Function, Op, ScalarType, TensorType
from .registry import Table

class PerCore(list):
    """Per-core values of a kind that is not stacked (views, tiles, futures): item c is core c's."""


class Contexts(PerCore):
    """Slot 0 of a stacked env: every core's CoreContext. A step run once for all cores (a
    uniform op) that asks for the context sees core 0's, the first core a fault is reported for."""

    def __getattr__(self, name):
        return getattr(self[0], name)


class StackedTile:
    """Box access tiles of one view, one per core: corners ``los`` [C, rank] (absolute), common
    extents, traversal permutation and data shape (as :class:`ops.ktdp.Tile`)."""

    __slots__ = ("view", "los", "ext", "perm", "shape", "key")

    def __init__(self, view, los: np.ndarray, ext: tuple, perm, shape: tuple):
        self.view = view
        self.los = los
        self.ext = ext
        self.perm = perm
        self.shape = shape
        self.key = los.tobytes()

    def __getitem__(self, core: int):
        from .ops.ktdp import Tile

        return Tile(self.view, tuple(int(x) for x in self.los[core]), self.ext, self.perm, None,
                    self.shape)


class CoreEnv:
    """One core's window on a stacked env, for plain steps run core by core: reads give that
    core's value (a varying slot's item ``core``), writes stay local until :func:`_fallback`
    stacks them."""

    __slots__ = ("senv", "core", "vary", "own")

    def __init__(self, senv: list, core: int, vary: list):
        self.senv = senv
        self.core = core
        self.vary = vary
        self.own: dict = {}

    def __getitem__(self, i):
        own = self.own
        if i in own:
            return own[i]
        v = self.senv[i]
        return v[self.core] if self.vary[i] else v

    def __setitem__(self, i, v):
        self.own[i] = v


class _Fallback(Exception):
    """A stacked step's conditions do not hold: run the op core by core."""


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


def _involved(op: Op) -> list:
    """Every value ``op`` reads or defines, nested regions included: an op touching none that
    varies computes the same on every core."""
    vals = list(op.operands) + list(op.results)
    for r in op.regions:
        for b in r.blocks:
            vals.extend(b.args)
            for inner in b.ops:
                vals.extend(_involved(inner))
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
# compiling


@dataclass
class StackedPlan:
    """Steps over a stacked env of ``C`` cores (slot 0: a :class:`Contexts`); ``vary`` flags the
    varying slots; ``native`` and ``fallback`` count the op steps of each kind (nested ones
    included)."""

    steps: list
    vary: list
    native: int
    fallback: int
    C: int


class _Builder:
    """Stacked steps over ``C`` cores (real ones, or the repeated groups of reroll.py) of the
    values ``vary_ids``; ``grid`` gives the coordinates of ``get_compute_tile_id``."""

    def __init__(self, c, C: int, grid: tuple, vary_ids: set[int]):
        from . import stacked_steps  # noqa: F401  (registers the stacked-step makers)

        self.c = c
        self.C = C
        self.grid = grid
        self.vary_ids = vary_ids
        # per slot: does it hold a stacked value? Filled by finish(); the steps built meanwhile
        # read it only at run time
        self.vary: list = []
        self.native = 0
        self.fallback = 0
        self.preset: dict = {}  # id(op) -> a step to use as it is (reroll.py's group constants)
        self.core_of = np.arange(C, dtype=np.int64)  # the real core of each (virtual) core
        # reroll.py's ragged groups: id(value) -> {dimension: per-core valid extent [C]}, and
        # the ids of the values it holds once per real core (ragged_steps.Shared)
        self.ragged: dict = {}
        self.shared: set = set()

    def varies(self, v) -> bool:
        return id(v) in self.vary_ids

    def finish(self, steps: list) -> StackedPlan:
        """The plan, once every step is built (and every slot made)."""
        vary = self.vary
        vary.extend([False] * self.c.n_slots)
        vary[0] = True  # the cores' contexts
        for vid, s in self.c.slots.items():
            if vid in self.vary_ids:
                vary[s] = True
        return StackedPlan(steps, vary, self.native, self.fallback, self.C)

    def uniform(self, op: Op, plain):
        """``plain`` run once; a failure is reported for core 0, as the lock-step run would (every
        core fails alike at a uniform op)."""
        from .compile import run_steps

        vary = self.vary

        def located(run):
            def step(senv):
                try:
                    run(senv)
                except EmulationFault:
                    raise
                except Exception:  # noqa: BLE001 - locate it; run_steps raises the EmulationFault
                    run_steps((plain,), CoreEnv(senv, 0, vary))
                    raise
            return step

        step = located(plain)
        step.op = op
        if hasattr(plain, "specialize"):  # for tapes (tape.py)
            def specialize(senv):
                fast = plain.specialize(senv)
                return None if fast is None else located(fast)
            step.specialize = specialize
        return step

    def block(self, block) -> list:
        steps = []
        for op in block.ops:
            step = self.op(op)
            if step is not None:
                steps.append(step)
        return steps

    def op(self, op: Op):
        c = self.c
        if id(op) in self.preset:
            return self.preset[id(op)]
        plain = c.step_of.get(id(op))
        if plain is None:
            return None  # folded at compile time, or a terminator read by its parent
        if (self.ragged or self.shared) and \
                any(id(v) in self.ragged or id(v) in self.shared for v in _involved(op)):
            from .ragged_steps import ragged_step

            return ragged_step(self, op, plain)
        return self.stacked_step(op, plain)

    def stacked_step(self, op: Op, plain):
        """``op``'s step over the stacked env: once when nothing it touches varies, else its
        stacked form when it has one, else core by core."""
        if not any(self.varies(v) for v in _involved(op)):
            return self.uniform(op, plain)  # the same on every core: run once
        native = None
        if not hasattr(plain, "batched"):
            maker = _NATIVE.get(op.name)
            native = maker(self, op, plain) if maker is not None else None
        if native is None:
            self.fallback += 1
            return _fallback(self, op, plain)
        self.native += 1
        fallback = []  # built on first use: most stacked steps never need it

        def step(senv, native=native):
            try:
                native(senv)
            except EmulationFault:
                raise
            except Exception:  # noqa: BLE001 - conditions unmet or a fault: core by core
                if not fallback:
                    fallback.append(_fallback(self, op, plain))
                fallback[0](senv)

        step.op = op
        for name in ("loop", "specialize"):  # for tapes (tape.py)
            if hasattr(native, name):
                setattr(step, name, getattr(native, name))
        return step


def restack(values: list, t):
    """The cores' values of type ``t`` in stacked form; tensors whose shapes differ between cores
    (dynamic shapes) stay a :class:`PerCore` list, which stacked steps hand to their core-by-core
    fallback."""
    if isinstance(t, TensorType):
        arrays = [np.asarray(v) for v in values]
        if any(a.shape != arrays[0].shape or a.dtype != arrays[0].dtype for a in arrays):
            return PerCore(values)
        return np.stack(arrays)
    if isinstance(t, ScalarType):
        if t.name == "index" or (not t.is_float and t.name != "i1"):
            return np.asarray([int(v) for v in values], dtype=np.int64)
        if t.name == "i1":
            return np.asarray([bool(v) for v in values], dtype=np.bool_)
        return np.asarray(values, dtype=t.dtype)
    return PerCore(values)


def _fallback(b: _Builder, op: Op, plain):
    """The op's plain step run for every core in order (its batched form if it has one), results
    stacked."""
    from .compile import run_lockstep

    C, vary = b.C, b.vary
    outs = [(b.c.slot(v), v.type) for v in op.results]

    def step(senv):
        envs = [CoreEnv(senv, k, vary) for k in range(C)]
        run_lockstep((plain,), envs)
        for s, t in outs:
            senv[s] = restack([e.own[s] for e in envs], t)

    step.op = op
    special = getattr(plain, "specialize_stacked", None)
    if special is not None:  # for tapes (tape.py): the batched K-loop on fixed operands
        step.specialize = lambda senv: special(senv, vary, C)
    return step


def lift(value, t, C: int):
    """A uniform value in stacked form (read-only broadcast for tensors)."""
    if isinstance(t, TensorType):
        arr = np.asarray(value)
        return np.broadcast_to(arr, (C,) + arr.shape)
    if isinstance(t, ScalarType):
        return restack([value] * C, t)
    return PerCore([value] * C)


# ---------------------------------------------------------------------------------------------
# stacked steps, by op kind: stacked_steps.py

_NATIVE = Table("stacked")  # op name -> maker(builder, op, plain) -> step | None (registry.py)


def native(*names):
    """Register a stacked-step maker for ``names`` (the makers live in stacked_steps.py)."""
    def deco(fn):
        for n in names:
            _NATIVE[n] = fn
        return fn
    return deco


def compile_stacked(c, fn: Function) -> StackedPlan | None:
    """The stacked steps of ``fn`` (compiled by ``c``), or None when stacking cannot pay: a single
    core, or no op with a stacked form."""
    if fn.num_cores < 2 or c.xp.name != "numpy":
        return None
    b = _Builder(c, fn.num_cores, fn.grid, varying_values(fn))
    steps = b.block(fn.body.block)
    if b.native == 0:
        return None
    return b.finish(steps)


