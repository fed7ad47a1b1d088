"""Function -> Plan: compile once, run many times for every core and pass.

A plan is a list of *steps* per block. A step is a closure ``step(env)`` over slot indices: ``env``
is a flat Python list holding every SSA value of one core's run (slot 0 holds the
:class:`CoreContext`). Values known at compile time (constants, index arithmetic on constants,
splats of constants, ...) are folded into the env template and cost nothing at run time. Each op
kind's builder lives in ``ops/<dialect>.py`` and is registered once in :data:`ops.BUILDERS`.

LX accounting is static: tensor sizes are known from the types, so the LX high-water mark of the
function and the first op that overflows the capacity are computed here, once per function
(lx_liveness.py, under the machine's ``lx_model``); a fault step is planted in front of that op,
so the overflow is reported (with the executing core) only if the op runs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from .backends.capabilities import caps_of
from .errors import EmulationFault, FaultSignal, KtirError
from .execute import CoreContext, run_lockstep, run_steps  # noqa: F401  (re-exported)
from .ir import Block, Function, Op, RuntimeArgType, ScalarType, Value
from .lx_liveness import account
from .machine import Machine, RunStats


class Compiler:
    """State while compiling one function: value -> slot map and folded constants."""

    def __init__(self, machine: Machine, fn: Function):
        from .ops import BUILDERS

        self.machine = machine
        self.fn = fn
        self.builders = BUILDERS
        self.xp = machine.backend  # run-time array functions (backends/); folding uses numpy
        self.slots: dict[int, int] = {}
        self.consts: dict[int, object] = {}  # slot -> value known at compile time
        self.n_slots = 1  # slot 0: CoreContext
        self.uses_inter_tile = False
        self.index_slots: list[list[int]] = []  # linalg.generic loop index slots (innermost last)
        self.lx_faults: dict = {}
        self.step_of: dict[int, object] = {}  # id(op) -> its step (None: folded); see stacked.py
        self.where: tuple | None = None  # (block, index) of the op being built
        self.view_loads: set[int] = set()  # id(op) of loads that may hand out HBM views (ktdp)
        self._positions: dict[int, dict[int, int]] = {}
        self.users: dict[int, list[Op]] = {}  # id(value) -> ops using it (nested ops included)
        for op in fn.walk():
            for v in op.operands:
                self.users.setdefault(id(v), []).append(op)

    def positions(self, block: Block) -> dict[int, int]:
        """id(op) -> its index in ``block`` (built once per block)."""
        pos = self._positions.get(id(block))
        if pos is None:
            pos = self._positions[id(block)] = {id(o): k for k, o in enumerate(block.ops)}
        return pos

    def new_slot(self) -> int:
        s = self.n_slots
        self.n_slots += 1
        return s

    def alias(self, v: Value, slot: int) -> None:
        """Make ``v`` live in an existing slot (no copy step needed)."""
        self.slots[id(v)] = slot

    # -- slots and constants --------------------------------------------------------------
    def slot(self, v: Value) -> int:
        s = self.slots.get(id(v))
        if s is None:
            s = self.n_slots
            self.n_slots += 1
            self.slots[id(v)] = s
        return s

    def is_const(self, v: Value) -> bool:
        return self.slot(v) in self.consts

    def const(self, v: Value):
        return self.consts[self.slot(v)]

    def set_const(self, v: Value, value) -> None:
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
        self.consts[self.slot(v)] = value

    def all_const(self, vals) -> bool:
        return all(self.slot(v) in self.consts for v in vals)

    # -- blocks ---------------------------------------------------------------------------
    def compile_block(self, block: Block) -> list:
        steps = []
        lx_faults = self.lx_faults
        for i, op in enumerate(block.ops):
            self.where = (block, i)
            if lx_faults and id(op) in lx_faults:
                steps.append(_fault_step(op, lx_faults[id(op)]))
            builder = self.builders.get(op.name)
            if builder is None:
                raise KtirError.at(op.loc, f"the emulator does not implement '{op.name}'")
            step = builder(self, op)
            if step is not None:
                checks = getattr(self.machine, "checks", None)  # optional checking mode (checks.py)
                if checks is not None:
                    step = checks.wrap(self, op, step)
                step.op = op
                steps.append(step)
            self.step_of[id(op)] = step
        return steps


def _fault_step(op: Op, message: str):
    def step(env):
        raise FaultSignal(message)

    step.op = op
    return step


# ---------------------------------------------------------------------------------------------
# plans

@dataclass
class _Compiled:
    steps: list
    template: list
    arg_slots: list[int]
    slots: dict  # id(value) -> slot (the compile's), for tapes' static analysis
    stacked: object = None  # stacked.StackedPlan: the whole grid in one run, values stacked
    rerolled: object = None  # reroll.Rerolled: a single core's unrolled repeats side by side


class Plan:
    """A compiled function. ``run(args)`` executes the whole grid and returns :class:`RunStats`."""

    def __init__(self, machine: Machine, fn: Function, compiled: _Compiled, lx_peak: int,
                 inter_tile: bool):
        self.machine = machine
        self.fn = fn
        self._c = compiled
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
        self._contexts: dict = {}  # "stacked"/"rerolled" -> slot 0 of its env (stacked.Contexts)
        # tapes (tape.py): runs repeating the previous run's arguments replay the recorded data
        # steps; only where every argument is an int (a hashable key) and nothing observes the
        # steps one by one (checking mode, inter-tile exchanges, LX overflow faults)
        self._tapeable = machine.tapes and self._all_int_args and not inter_tile and \
            getattr(machine, "checks", None) is None and caps_of(machine.backend).tapes
        self._tape = None
        self._last_key = None
        self.replays = 0  # runs that replayed a tape
        self._static: dict = {}  # kind -> tape.StaticInfo, built at the first recording

    def fork(self) -> "Plan":
        """A plan of the same function sharing this plan's compiled steps (closures over slots
        and constants; runs only read them, their caches are keyed by all they depend on), with
        its own run state: tapes, tier-up, stacked and rerolled forms, contexts, env template.
        Only a plan that has not run forks: the fork tiers up from a copy of the compiler as
        compile_function left it (its containers copied two levels deep, as tier-up adds slots
        and users). twins.py gives each function of identical text its fork of one compile."""
        import copy

        if self._runs or self._last_key is not None or self._tape is not None:
            raise RuntimeError("Plan.fork: this plan has run; fork it before its first run")
        c, compiler = self._c, self._tier_from
        if compiler is not None:
            compiler = copy.copy(compiler)
            for name, value in vars(compiler).items():
                if type(value) is dict:
                    value = {k: copy.copy(v) if type(v) in (dict, list, set) else v
                             for k, v in value.items()}
                elif type(value) in (list, set):
                    value = copy.copy(value)
                setattr(compiler, name, value)
        slots = compiler.slots if compiler is not None else dict(c.slots)
        plan = Plan(self.machine, self.fn, _Compiled(list(c.steps), list(c.template),
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
        from .reroll import compile_rerolled

        compiler, self._tier_from = self._tier_from, None
        c, fn = self._c, self.fn
        c.rerolled = compile_rerolled(compiler, fn)
        if fn.num_cores > 1:
            if c.rerolled is None:
                self._stack(compiler)
            else:  # for runs whose addresses bring the groups together, built at the first
                self._stack_from = compiler

    def _stack(self, compiler) -> None:
        """Build the grid's stacked form (stacked.py) on ``compiler``'s slots."""
        from .stacked import compile_stacked

        c = self._c
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
        X, Y, _ = fn.grid
        if getattr(machine, "checks", None) is not None:
            machine.checks.begin_run(fn.name)
        t0 = time.perf_counter()
        c = self._c
        if self._tier_from is not None and machine.grid_batching:
            self._runs += 1
            if self._runs >= 2:
                self._tier_up()
        rr = c.rerolled
        if rr is not None and machine.grid_batching and rr.disjoint(values):
            try:
                self._run_stacked("rerolled", rr.plan, rr.template, rr.arg_slots, values)
                return RunStats(fn.name, n, time.perf_counter() - t0, [self.lx_peak] * n)
            except EmulationFault:
                pass  # rerun (reroll.py: same bytes), which locates the fault exactly
        if self._stack_from is not None and machine.grid_batching:
            compiler, self._stack_from = self._stack_from, None
            self._stack(compiler)
        if n > 1 and c.stacked is not None and machine.grid_batching:
            self._run_stacked("stacked", c.stacked, c.template, c.arg_slots, values)
            return RunStats(fn.name, n, time.perf_counter() - t0, [self.lx_peak] * n)
        exchange = _Exchange(n) if self.inter_tile else None
        envs = []
        for core in range(n):
            coords = (core % X, (core // X) % Y, core // (X * Y))
            env = list(c.template)
            env[0] = CoreContext(core, coords, machine, fn.name, exchange)
            for s, v in zip(c.arg_slots, values):
                env[s] = v
            envs.append(env)
        with np.errstate(all="ignore"):
            if self.inter_tile and n > 1:
                _run_threads(c.steps, envs, exchange)
            elif n > 1 and machine.grid_batching and self._batchable:
                run_lockstep(c.steps, envs)
            elif n == 1:
                self._run_taped("plain", c.steps, envs[0], values, run_steps, _run_one)
            else:
                for env in envs:
                    run_steps(c.steps, env)
        return RunStats(fn.name, n, time.perf_counter() - t0, [self.lx_peak] * n)

    def _run_stacked(self, kind: str, splan, template: list, arg_slots: list, values: list):
        """One stacked (or rerolled) run: the steps, or their tape (tape.py)."""
        contexts = self._contexts.get(kind)
        if contexts is None:  # without inter-tile ops a core's context never changes
            from .stacked import Contexts

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
        with np.errstate(all="ignore"):
            self._run_taped(kind, splan.steps, senv, values, _run_all, _call)

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
        from .tape import Recorder

        self._tape = None
        recorder = Recorder(self._static_info(kind), run_one)
        recorder.run(steps, env)
        self._tape = recorder.tape(key)

    def _static_info(self, kind: str):
        info = self._static.get(kind)
        if info is None:
            from .tape import static_info

            if kind == "rerolled":
                rr = self._c.rerolled
                info = static_info(self.fn, rr.slots, rr.ops)
            else:
                info = static_info(self.fn, self._c.slots)
            self._static[kind] = info
        return info


def _run_one(step, env) -> None:
    run_steps((step,), env)


def _run_all(steps, env) -> None:
    for step in steps:
        step(env)


def _call(step, env) -> None:
    step(env)


class _Exchange:
    """Mailboxes for inter-tile produce/reduce between core threads."""

    def __init__(self, n: int):
        self.n = n
        self.cond = threading.Condition()
        self.boxes: dict = {}
        self.failed: BaseException | None = None
        self.blocked = 0
        self.finished = 0


def _run_threads(steps, envs, exchange: _Exchange) -> None:
    errors: list[BaseException] = []

    def worker(env):
        try:
            with np.errstate(all="ignore"):  # error state is per thread
                run_steps(steps, env)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            with exchange.cond:
                exchange.failed = exc
                exchange.cond.notify_all()
        finally:
            with exchange.cond:
                exchange.finished += 1
                exchange.cond.notify_all()

    threads = [threading.Thread(target=worker, args=(env,), daemon=True) for env in envs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        faults = [e for e in errors if isinstance(e, EmulationFault)]
        raise (faults[0] if faults else errors[0])


def compile_function(machine: Machine, fn: Function) -> Plan:
    c = Compiler(machine, fn)
    arg_slots = [c.slot(a) for a in fn.args]
    lx = account(fn, machine.lx_capacity, machine.lx_model)
    faults = c.lx_faults = lx.faults
    peak = lx.peak
    steps = c.compile_block(fn.body.block)
    template = [None] * c.n_slots
    for s, v in c.consts.items():
        template[s] = c.xp.from_const(v)
    plan = Plan(machine, fn, _Compiled(steps, template, arg_slots, c.slots), peak,
                c.uses_inter_tile)
    from .reroll import is_candidate

    if not faults and not c.uses_inter_tile and getattr(machine, "checks", None) is None and \
            caps_of(c.xp).stacked and (fn.num_cores > 1 or is_candidate(c, fn)):
        plan._tier_from = c  # the batched form is built at the plan's second run
    return plan
