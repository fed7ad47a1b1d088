"""Plan: a compiled function, run many times for every core and pass.

A plan holds the steps of one compile (:class:`Compiled`) and the run state of its function:
the batched forms built at its second run (the tier-up: reroll.py's unrolled repeats side by side,
stacked.py's grid stacked by core), the contexts of their stacked envs, and its tape (tape.py).
How a run executes -- plain, core by core, in lock step, on threads (inter-tile exchanges),
stacked or rerolled -- is a strategy object (strategies.py) chosen once, at the first run, and
again only where the batched forms change; taping wraps whichever strategy runs.

Invariants: every strategy gives the bytes and the faults of running the cores one after the
other; a plan that has not run forks (:meth:`Plan.fork`) into plans sharing its compiled steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..backends.capabilities import caps_of
from ..ir.errors import EmulationFault, KtirError
from .execute import CoreContext, RunStats, run_steps
from ..ir.nodes import Function, RuntimeArgType, ScalarType
from .reroll import compile_rerolled
from .stacked import compile_stacked
from .stacked_values import Contexts
from .strategies import choose
from .tape import Recorder, fold_assignments, static_info
from .tape_fusion import fuse_tails


@dataclass
class Compiled:
    """What a compile hands its plan: the steps of the function body, the env template (folded
    constants in their slots), the argument slots and the value -> slot map; the batched forms
    are added at the plan's tier-up. Plans forked from one compile share the steps (read-only)."""

    steps: list
    template: list
    arg_slots: list[int]
    slots: dict  # id(value) -> slot (the compile's), for tapes' static analysis
    stacked: object = None  # stacked.StackedPlan: the whole grid in one run, values stacked
    rerolled: object = None  # reroll.Rerolled: a single core's unrolled repeats side by side


_Compiled = Compiled  # the name plans were built with before plan.py


class Plan:
    """A compiled function. ``run(args)`` executes the whole grid and returns :class:`RunStats`."""

    def __init__(self, machine, fn: Function, compiled: Compiled, lx_peak: int,
                 inter_tile: bool):
        self.machine = machine
        self.fn = fn
        self._c = compiled
        self._users = None  # fn.users(), made for the first replayer (tape_fusion.py)
        self.lx_peak = lx_peak
        self.inter_tile = inter_tile
        # lock step only pays when some top-level step has a batched form
        self._batchable = any(hasattr(step, "batched") for step in compiled.steps)
        self._all_int_args = all(isinstance(a.type, ScalarType) and not a.type.is_float and
                                 a.type.name != "i1" for a in fn.args)
        self._arg_names = fn.arg_names
        # the Compiler, kept until the plan's second run builds its batched form (stacked.py for
        # grids, reroll.py for unrolled repeats): the analysis costs about what one run saves,
        # so a function run once never pays it
        self._tier_from = None
        self._stack_from = None  # the same, for a rerolled grid's stacked form (built on need)
        self._runs = 0
        # "stacked"/"rerolled" -> slot 0 of its env (a stacked_values.Contexts)
        self._contexts: dict = {}
        # tapes (tape.py): runs repeating the previous run's arguments replay the recorded data
        # steps; only where every argument is an int (a hashable key) and nothing observes the
        # steps one by one (checking mode, inter-tile exchanges, LX overflow faults)
        self._tapeable = machine.tapes and self._all_int_args and not inter_tile and \
            getattr(machine, "checks", None) is None and caps_of(machine.backend).tapes
        self._tape = None
        self._last_key = None
        self.replays = 0  # runs that replayed a tape
        self._static: dict = {}  # kind -> tape.StaticInfo, built at the first recording
        # how the runs go (strategies.py), chosen at the first run: None until then and again
        # whenever the batched forms change; ``_chosen_for``: the grid_batching it was chosen for
        self._strategy = None
        self._chosen_for = None

    def fork(self) -> "Plan":
        """A plan of the same function sharing this plan's compiled steps (closures over slots
        and constants; runs only read them, their caches are keyed by all they depend on), with
        its own run state: tapes, tier-up, stacked and rerolled forms, contexts, env template.
        Only a plan that has not run forks: the fork tiers up from a copy of the compiler as
        compile_function left it, each of its dicts, lists and sets copied (tier-up adds slots
        and constants to them; no held list changes after the compile: only compiling a
        func.call grows users' lists). twins.py gives each function of identical text, up to
        names, its fork of one compile."""
        import copy

        if self._runs or self._last_key is not None or self._tape is not None:
            raise RuntimeError("Plan.fork: this plan has run; fork it before its first run")
        c, compiler = self._c, self._tier_from
        if compiler is not None:
            compiler = copy.copy(compiler)
            state = vars(compiler)
            for name, value in state.items():
                if type(value) in (dict, list, set):
                    state[name] = value.copy()
        slots = compiler.slots if compiler is not None else dict(c.slots)
        plan = Plan(self.machine, self.fn, Compiled(list(c.steps), list(c.template),
                                                    list(c.arg_slots), slots),
                    self.lx_peak, self.inter_tile)
        plan._tier_from = compiler
        return plan

    def _bind(self, args) -> list:
        fn = self.fn
        names = self._arg_names
        if isinstance(args, dict) and len(args) == len(names):
            try:  # fast path: exact names, plain ints for index arguments
                values = [args[n] for n in names]
                if all(type(v) is int for v in values) and self._all_int_args:
                    return values
            except KeyError:
                pass
        if isinstance(args, dict):
            unknown = [k for k in args if k.lstrip("%") not in names]
            if unknown:
                raise KtirError.at(fn.loc, f"@{fn.name} has no argument(s) "
                                           f"{', '.join(unknown)} (arguments: {', '.join(names)})")
            by_name = {k.lstrip("%"): v for k, v in args.items()}
            missing = [n for n in names if n not in by_name]
            if missing:
                raise KtirError.at(fn.loc, f"@{fn.name}: missing argument(s) {', '.join(missing)}")
            values = [by_name[n] for n in names]
        else:
            values = list(args)
            if len(values) != len(names):
                raise KtirError.at(fn.loc, f"@{fn.name} takes {len(names)} argument(s) "
                                           f"({', '.join(names)}), got {len(values)}")
        out = []
        for a, v in zip(fn.args, values):
            t = a.type
            if isinstance(t, ScalarType) and not t.is_float:
                if isinstance(v, float) and not float(v).is_integer():
                    raise KtirError.at(a.loc, f"argument {a.name} is {t} but got {v!r}")
                out.append(bool(v) if t.name == "i1" else int(v))
            elif isinstance(t, ScalarType):
                out.append(t.dtype.type(v))
            elif isinstance(t, RuntimeArgType):  # bound like its underlying scalar
                out.append(t.underlying.dtype.type(v) if t.underlying.is_float else int(v))
            else:  # memref / access tile / tensor arguments: only a call can pass those
                raise KtirError.at(a.loc, f"argument {a.name} is {t}: a plan binds addresses "
                                          "and scalars, so this function is a callee "
                                          "(func.call), not a kernel to run")
        return out

    def _tier_up(self) -> None:
        """Build the batched form: the function's unrolled repeats side by side (on every core of
        its grid at once), else the grid stacked by core; None where the function has neither."""
        compiler, self._tier_from = self._tier_from, None
        self._strategy = None  # re-chosen with the batched forms
        c, fn = self._c, self.fn
        c.rerolled = compile_rerolled(compiler, fn)
        if fn.num_cores > 1:
            if c.rerolled is None:
                self._stack(compiler)
            else:  # for runs whose addresses bring the groups together, built at the first
                self._stack_from = compiler

    def _stack(self, compiler) -> None:
        """Build the grid's stacked form (stacked.py) on ``compiler``'s slots."""
        c = self._c
        self._strategy = None  # re-chosen with the stacked form
        c.stacked = compile_stacked(compiler, self.fn)
        if len(c.template) < compiler.n_slots:  # slots made by the batched form start empty
            c.template.extend([None] * (compiler.n_slots - len(c.template)))

    def run(self, args=()) -> RunStats:
        values = self._bind(args)
        fn = self.fn
        machine = self.machine
        n = fn.num_cores
        if n > machine.num_cores:
            raise EmulationFault(f"grid {list(fn.grid)} needs {n} cores but the machine has "
                                 f"{machine.num_cores}", function=fn.name, op="func.func",
                                 loc=fn.loc)
        if getattr(machine, "checks", None) is not None:
            machine.checks.begin_run(fn.name)
        t0 = time.perf_counter()
        batching = machine.grid_batching
        if self._tier_from is not None and batching:
            self._runs += 1
            if self._runs >= 2:
                self._tier_up()
        strategy = self._strategy
        if strategy is None or self._chosen_for is not batching:
            strategy = self._choose()
        strategy.run(self, values)
        return RunStats(fn.name, n, time.perf_counter() - t0, [self.lx_peak] * n)

    def _choose(self):
        """The strategy of the runs from now on (strategies.py): chosen at the first run, again
        when the batched forms are built (tier-up) or the machine's ``grid_batching`` changes."""
        batching = bool(self.machine.grid_batching)
        self._strategy = choose(self, batching)
        self._chosen_for = batching
        return self._strategy

    def _run_stacked(self, kind: str, splan, template: list, arg_slots: list, values: list):
        """One stacked (or rerolled) run: the steps, or their tape (tape.py)."""
        senv = self._stacked_env(kind, template, arg_slots, values)
        with np.errstate(all="ignore"):
            self._run_taped(kind, splan.steps, senv, values, _run_all, _call)

    def _stacked_env(self, kind: str, template: list, arg_slots: list, values: list) -> list:
        """The env a stacked (or rerolled) run on ``values`` starts from."""
        contexts = self._contexts.get(kind)
        if contexts is None:  # without inter-tile ops a core's context never changes
            fn = self.fn
            X, Y, _ = fn.grid
            cores = self._c.rerolled.cores if kind == "rerolled" else range(fn.num_cores)
            own = {}
            for core in map(int, cores):
                if core not in own:
                    own[core] = CoreContext(core, (core % X, (core // X) % Y, core // (X * Y)),
                                            self.machine, fn.name, None)
            contexts = self._contexts[kind] = Contexts([own[int(k)] for k in cores])
        senv = list(template)
        senv[0] = contexts
        for s, v in zip(arg_slots, values):
            senv[s] = v
        return senv

    def replayer(self, args) -> Replay | None:
        """A :class:`Replay` that runs this plan on ``args`` as :meth:`run` would now, without
        its per-run work: the tape a run on ``args`` replays, on a copy of the env such a run
        starts from, its once-assigned static slots filled in (tape.fold_assignments; the same
        steps on the same values: the same bytes, the same faults, a rerolled run's fault rerun
        by :meth:`run` as its strategy does). None where a run on ``args`` would not replay a
        tape yet (no tape for them, a batched form still to be built, checking mode). Valid
        while :func:`replay_state` of the machine is what it was when the replayer was made;
        the caller checks that before each use."""
        machine = self.machine
        if self._tier_from is not None or getattr(machine, "checks", None) is not None:
            return None
        values = self._bind(args)
        strategy = self._strategy
        tape = self._tape
        if strategy is None or self._chosen_for is not machine.grid_batching or tape is None:
            return None
        start = strategy.tape_env(self, values)
        if start is None:
            return None
        kind, base = start
        if tape.key != (kind, tuple(values), machine.hbm.generation):
            return None
        entries, base = fold_assignments(tape.entries, base)
        if kind in ("plain", "stacked"):  # slots of this plan's compile (tape_fusion.py)
            if self._users is None:
                self._users = self.fn.users()
            entries = fuse_tails(entries, base, self._users, self._c.template)
        return Replay(self, args, entries, base, run_steps if kind == "plain" else _run_all,
                      kind == "rerolled")

    def _run_taped(self, kind: str, steps: list, env: list, values: list, run_all, run_one):
        """Run ``steps`` on ``env`` with ``run_all(steps, env)``, or replay this plan's tape for
        these arguments, or record one when the arguments repeat the previous run's."""
        if not self._tapeable:
            run_all(steps, env)
            return
        key = (kind, tuple(values), self.machine.hbm.generation)
        tape = self._tape
        if tape is not None:
            if tape.key == key:
                self.replays += 1
                run_all(tape.entries, env)
                return
            self._tape = None  # other arguments or regions: let go of the old views
        if self._last_key != key:
            self._last_key = key
            run_all(steps, env)
            return
        self._tape = None
        recorder = Recorder(self._static_info(kind), run_one)
        recorder.run(steps, env)
        self._tape = recorder.tape(key)

    def _static_info(self, kind: str):
        info = self._static.get(kind)
        if info is None:
            if kind == "rerolled":
                rr = self._c.rerolled
                info = static_info(self.fn, rr.slots, rr.ops)
            else:
                info = static_info(self.fn, self._c.slots)
            self._static[kind] = info
        return info


@dataclass(slots=True, eq=False)
class Replay:
    """One plan's run on fixed arguments as its recorded tape (:meth:`Plan.replayer`): the tape's
    ``entries`` run on a copy of ``base`` by ``run_all`` (run_steps, which locates a fault, for a
    plain run; a plain loop for the batched ones, whose faults are located by rerunning the
    plan). Calling it runs it under ``np.errstate(all="ignore")``, as a plan run does;
    :meth:`run_quiet` leaves that to a caller running many replays in a row."""

    plan: Plan
    args: object
    entries: list
    base: list
    run_all: object
    rerolled: bool

    def __call__(self) -> None:
        with np.errstate(all="ignore"):
            self.run_quiet()

    def run_quiet(self) -> None:
        """The replay, inside the caller's ``np.errstate(all="ignore")``."""
        try:
            self.run_all(self.entries, self.base.copy())
        except EmulationFault:
            if not self.rerolled:
                raise
            self.plan.run(self.args)  # as Rerolled.run: the same bytes again, the fault located
            return
        self.plan.replays += 1


def replay_state(machine) -> tuple:
    """What a plan's replayers (:meth:`Plan.replayer`) depend on besides its arguments: the
    machine's HBM regions (their generation), its grid batching and whether it tapes."""
    return machine.hbm.generation, machine.grid_batching, machine.tapes


def _run_all(steps, env) -> None:
    for step in steps:
        step(env)


def _call(step, env) -> None:
    step(env)
