"""Plans for twin functions (twins.py): one compile per twin key and machine, one plan each.

:func:`compile_functions` compiles the first function of every twin key once into a plan and
gives every twin a :meth:`~.compile.Plan.fork` of it: the same compiled steps, its own run state
(tapes, tier-up, stacked and rerolled forms, contexts). The fork runs the first function's IR,
so a :class:`TwinPlan` stands in front of it and speaks the twin's names:

* arguments: the twin's argument names are bound to the first's, one to one, in order (the
  dict the fork receives is the one the first's plan would, so its binding is the same);
* results: ``RunStats.function`` is the twin's name;
* errors: a fault or a binding error names the twin's function, its file and the twin's
  Location of the op (twins.Renaming: same line, column shifted by the renamed tokens before
  it), and every renamed token in its message is the twin's.

Arguments in any other form (positional lists, ``%``-prefixed or unknown names) are rare; they
run on a plan of the twin compiled on its own, so what they bind and report is exactly what
``machine.compile(twin)`` gives.
"""

from __future__ import annotations

import numpy as np

from .compile import compile_function
from .execute import RunStats
from ..ir.errors import EmulationFault, KtirError
from .twins import TwinLoader


class TwinPlan:
    """The plan of twin function ``fn``: ``fork`` (a plan of the key's first function) run in
    ``fn``'s names (see the module docstring)."""

    def __init__(self, fork, fn, renaming):
        self.fn = fn
        self.machine = fork.machine
        self.lx_peak = fork.lx_peak
        self.inter_tile = fork.inter_tile
        self.fork = fork
        self.renaming = renaming
        first_names = fork.fn.arg_names
        self._names = dict(zip(fn.arg_names, first_names))  # twin's name -> first's
        self._own = None  # the twin compiled on its own, for arguments in other forms
        # The last argument dict and its translation: a forward binds each node's dict once
        # and passes the same one every pass. Reused only while that dict is the same object
        # holding equal int items (a snapshot is compared), so a mutated dict is translated
        # and checked again.
        self._seen: tuple | None = None  # (args object, snapshot of its items, translation)

    @property
    def replays(self) -> int:
        return self.fork.replays

    def replayer(self, args):
        """The fork's :meth:`~.plan.Plan.replayer` for ``args`` in this twin's names, its faults
        reported as :meth:`run` reports them; None where :meth:`run` would not replay."""
        names = self._names
        if type(args) is not dict or len(args) != len(names) or \
                not all(type(k) is str and k in names for k in args):
            return None
        inner = self.fork.replayer({names[k]: v for k, v in args.items()})
        if inner is None:
            return None
        return _TwinReplay(inner, self.renaming)

    def run(self, args=()):
        seen = self._seen
        if seen is not None and seen[0] is args and seen[1] == args:
            first_args = seen[2]
        else:
            names = self._names
            if type(args) is not dict or len(args) != len(names) or \
                    not all(type(k) is str and k in names for k in args):
                if self._own is None:
                    self._own = compile_function(self.machine, self.fn)
                return self._own.run(args)
            first_args = {names[k]: v for k, v in args.items()}
            # kept only for plain ints (addresses, sizes): other values may not compare cheaply
            self._seen = (args, dict(args), first_args) \
                if all(type(v) is int for v in args.values()) else None
        try:
            stats = self.fork.run(first_args)
        except (EmulationFault, KtirError) as exc:
            raise self.renaming.error(exc) from None
        return RunStats(self.fn.name, stats.cores, stats.seconds, stats.lx_high_water)

    def __repr__(self) -> str:
        return f"TwinPlan(@{self.fn.name} <- @{self.fork.fn.name})"


def compile_functions(machine, functions, loader: TwinLoader | None = None) -> list:
    """A plan per function of ``functions`` (one per distinct Function, as ``machine.compile``
    caches): functions of one twin key share one compile (``loader`` loaded them; None, or a
    machine in checking mode, compiles each on its own with ``machine.compile``)."""
    if loader is None or getattr(machine, "checks", None) is not None:
        return [machine.compile(fn) for fn in functions]
    firsts: dict[int, object] = {}  # id(first function) -> its plan, compiled here, not yet run
    plans: dict[int, object] = {}  # id(function) -> its plan
    out = []
    for fn in functions:
        plan = plans.get(id(fn))
        if plan is None:
            twin = loader.twin(fn)
            first = fn if twin is None else twin.first
            if twin is None and not loader.has_twins(fn):
                plan = machine.compile(fn)
            else:
                source = firsts.get(id(first))
                if source is None:
                    source = firsts[id(first)] = compile_function(machine, first)
                    plans[id(first)] = source
                plan = source if twin is None else TwinPlan(source.fork(), fn, twin.renaming)
            plans[id(fn)] = plan
        out.append(plan)
    return out


class _TwinReplay:
    """A twin's replay: its fork's :class:`~.plan.Replay`, faults renamed to the twin's
    function (the same interface: call it, or :meth:`run_quiet` inside the caller's
    ``np.errstate(all="ignore")``)."""

    __slots__ = ("inner", "renaming")

    def __init__(self, inner, renaming):
        self.inner = inner
        self.renaming = renaming

    def __call__(self) -> None:
        with np.errstate(all="ignore"):
            self.run_quiet()

    def run_quiet(self) -> None:
        try:
            self.inner.run_quiet()
        except (EmulationFault, KtirError) as exc:
            raise self.renaming.error(exc) from None
