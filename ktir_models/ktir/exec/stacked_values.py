"""The stacked representation of a grid's values, and the builder of stacked steps over it.

A grid's cores run one step list over a *stacked env* (stacked.py compiles it): a varying value is
held stacked -- a tensor of shape S as an array [C, *S], a scalar as an array [C], any other object
as a :class:`PerCore` list, a box access tile with per-core corners as a :class:`StackedTile` --
and a uniform value as it is. This module holds that representation, the :class:`Builder` that
makes one op's step over it (once when nothing it touches varies, its registered stacked form
when it has one -- the ``stacked`` part of registry.py --, else core by core through
:func:`fallback`), and the conversions between per-core and stacked values (:func:`restack`,
:func:`lift`).

Invariants: every step built here computes, per core, what the op's plain step computes, and
reports a fault for the core the lock-step run (execute.run_lockstep) would report it for. This
module imports only the IR, the registry and execute.py, so the stacked forms (dialects/,
ragged_steps.py) and the drivers (stacked.py, reroll.py) may all import it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.errors import EmulationFault
from .execute import run_lockstep, run_steps
from ..ir.nodes import Op, ScalarType, TensorType
from .memory_views import Tile
from ..ir.registry import implements, part

class PerCore(list):
    """Per-core values of a kind that is not stacked (views, tiles, futures): item c is core c's."""


class Contexts(PerCore):
    """Slot 0 of a stacked env: every core's CoreContext. A step run once for all cores (a
    uniform op) that asks for the context sees core 0's, the first core a fault is reported for."""

    def __getattr__(self, name):
        return getattr(self[0], name)


class StackedTile:
    """Box access tiles of one view, one per core: corners ``los`` [C, rank] (absolute), common
    extents, traversal permutation and data shape (as :class:`~.memory_views.Tile`)."""

    __slots__ = ("view", "los", "ext", "perm", "shape", "key")

    def __init__(self, view, los: np.ndarray, ext: tuple, perm, shape: tuple):
        self.view = view
        self.los = los
        self.ext = ext
        self.perm = perm
        self.shape = shape
        self.key = los.tobytes()

    def __getitem__(self, core: int):
        return Tile(self.view, tuple(int(x) for x in self.los[core]), self.ext, self.perm, None,
                    self.shape)


class CoreEnv:
    """One core's window on a stacked env, for plain steps run core by core: reads give that
    core's value (a varying slot's item ``core``), writes stay local until :func:`fallback`
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


class Fallback(Exception):
    """A stacked step's conditions do not hold: run the op core by core."""


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


class Builder:
    """Stacked steps over ``C`` cores (real ones, or the repeated groups of reroll.py) of the
    values ``vary_ids``; ``grid`` gives the coordinates of ``get_compute_tile_id``."""

    def __init__(self, c, C: int, grid: tuple, vary_ids: set[int]):
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
        # the maker of steps touching those (ragged_steps.ragged_step, set by reroll.py with
        # them): this layer sits below ragged_steps, so it is handed in, not imported
        self.ragged_step = None

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
        if hasattr(plain, "io"):  # plain itself on the stacked env (exec/tape_fusion.py)
            step.io = plain.io
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
                any(id(v) in self.ragged or id(v) in self.shared for v in involved(op)):
            return self.ragged_step(self, op, plain)
        return self.stacked_step(op, plain)

    def stacked_step(self, op: Op, plain):
        """``op``'s step over the stacked env: once when nothing it touches varies, else its
        stacked form when it has one, else core by core."""
        if not any(self.varies(v) for v in involved(op)):
            return self.uniform(op, plain)  # the same on every core: run once
        native = None
        if not hasattr(plain, "batched"):
            maker = part("stacked", op.name)
            native = maker(self, op, plain) if maker is not None else None
        if native is None:
            self.fallback += 1
            return fallback(self, op, plain)
        self.native += 1
        per_core = []  # built on first use: most stacked steps never need it

        def step(senv, native=native):
            try:
                native(senv)
            except EmulationFault:
                raise
            except Exception:  # noqa: BLE001 - conditions unmet or a fault: core by core
                if not per_core:
                    per_core.append(fallback(self, op, plain))
                per_core[0](senv)

        step.op = op
        for name in ("loop", "specialize"):  # for tapes (tape.py)
            if hasattr(native, name):
                setattr(step, name, getattr(native, name))
        if native is plain and hasattr(plain, "io"):  # the plain step on the stacked values:
            step.io = plain.io                         # the same slots (exec/tape_fusion.py)
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


def fallback(b: Builder, op: Op, plain):
    """The op's plain step run for every core in order (its batched form if it has one), results
    stacked."""
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


def involved(op: Op) -> list:
    """Every value ``op`` reads or defines, nested regions included: an op touching none that
    varies computes the same on every core."""
    vals = list(op.operands) + list(op.results)
    for r in op.regions:
        for b in r.blocks:
            vals.extend(b.args)
            for inner in b.ops:
                vals.extend(involved(inner))
    return vals


def native(*names):
    """Register a stacked-step maker for ``names`` (registry part ``stacked``)."""
    return implements("stacked", *names)
