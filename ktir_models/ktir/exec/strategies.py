"""How a plan's run executes: one small class per way, chosen once per plan (plan.py).

* :class:`Single` -- a one-core grid: its steps, through the plan's tapes (tape.py);
* :class:`PerCore` -- the cores one after the other;
* :class:`Lockstep` -- the cores step by step (execute.run_lockstep), where a top-level step has a
  batched form;
* :class:`Threads` -- one thread per core, for functions with inter-tile exchanges (the cores
  wait on each other's mailboxes, :class:`Exchange`);
* :class:`Stacked` -- the grid in one run, values stacked by core (stacked.py);
* :class:`Rerolled` -- a function's unrolled repeats side by side (reroll.py), where the run's
  addresses keep the groups apart, else the strategy it wraps.

:func:`choose` picks one from what the plan has (its batched forms, inter-tile ops, a batched
step) and the machine's ``grid_batching``; everything a run does not vary by (the cores'
coordinates) is computed then. Invariant: every strategy gives the bytes and the faults of
running the cores one after the other (:class:`PerCore`), so the choice never changes a result.
Strategies reach the plan only through its attributes; they import no driver. ``tape_env(plan,
values)`` names the tape kind and builds the env a run on ``values`` starts from, for
:meth:`Plan.replayer` (None where the strategy's runs are not taped).
"""

from __future__ import annotations

import threading

import numpy as np

from ..ir.errors import EmulationFault
from .execute import CoreContext, run_lockstep, run_steps


class _Plain:
    """The plain plan's runs: one env per core, filled from the template and the arguments."""

    def __init__(self, plan):
        fn = plan.fn
        X, Y, _ = fn.grid
        self.coords = [(core % X, (core // X) % Y, core // (X * Y))
                       for core in range(fn.num_cores)]

    def envs(self, plan, values: list, exchange=None) -> list:
        c = plan._c
        machine, name = plan.machine, plan.fn.name
        envs = []
        for core, coords in enumerate(self.coords):
            env = list(c.template)
            env[0] = CoreContext(core, coords, machine, name, exchange)
            for s, v in zip(c.arg_slots, values):
                env[s] = v
            envs.append(env)
        return envs


class Single(_Plain):
    """A one-core grid: its steps, or their tape."""

    def run(self, plan, values: list) -> None:
        exchange = Exchange(1) if plan.inter_tile else None
        env = self.envs(plan, values, exchange)[0]
        with np.errstate(all="ignore"):
            plan._run_taped("plain", plan._c.steps, env, values, run_steps, run_one)

    def tape_env(self, plan, values: list):
        """("plain", the env a run on ``values`` starts from); None with inter-tile ops (their
        runs are not taped)."""
        if plan.inter_tile:
            return None
        return "plain", self.envs(plan, values)[0]


class PerCore(_Plain):
    """The cores one after the other (the reference order; never taped)."""

    def tape_env(self, plan, values: list):
        return None

    def run(self, plan, values: list) -> None:
        envs = self.envs(plan, values)
        steps = plan._c.steps
        with np.errstate(all="ignore"):
            for env in envs:
                run_steps(steps, env)


class Lockstep(_Plain):
    """The cores step by step, a batched step for all of them in one call (never taped)."""

    def tape_env(self, plan, values: list):
        return None

    def run(self, plan, values: list) -> None:
        envs = self.envs(plan, values)
        with np.errstate(all="ignore"):
            run_lockstep(plan._c.steps, envs)


class Threads(_Plain):
    """One thread per core, sharing the run's mailboxes (inter-tile produce/reduce; never
    taped)."""

    def tape_env(self, plan, values: list):
        return None

    def run(self, plan, values: list) -> None:
        exchange = Exchange(len(self.coords))
        envs = self.envs(plan, values, exchange)
        with np.errstate(all="ignore"):
            run_threads(plan._c.steps, envs, exchange)


class Stacked:
    """The grid in one run over a stacked env (or its tape)."""

    def run(self, plan, values: list) -> None:
        c = plan._c
        plan._run_stacked("stacked", c.stacked, c.template, c.arg_slots, values)

    def tape_env(self, plan, values: list):
        """("stacked", the stacked env a run on ``values`` starts from)."""
        c = plan._c
        return "stacked", plan._stacked_env("stacked", c.template, c.arg_slots, values)


class Rerolled:
    """The rerolled form where the run's addresses keep the groups apart and it runs through,
    else ``then``: a fault is rerun by ``then``, which gives the same bytes and locates it. The
    first run that needs ``then`` builds the grid's stacked form when the tier-up left it for
    later, and ``then`` is chosen again."""

    def __init__(self, plan, then):
        self.then = then

    def run(self, plan, values: list) -> None:
        rr = plan._c.rerolled
        if rr.disjoint(values):
            try:
                plan._run_stacked("rerolled", rr.plan, rr.template, rr.arg_slots, values)
                return
            except EmulationFault:
                pass  # rerun (reroll.py: same bytes), which locates the fault exactly
        if plan._stack_from is not None:
            compiler, plan._stack_from = plan._stack_from, None
            plan._stack(compiler)
            self.then = grid_strategy(plan, True)
            plan._strategy, plan._chosen_for = self, True
        self.then.run(plan, values)

    def tape_env(self, plan, values: list):
        """("rerolled", its env) where a run on ``values`` takes the rerolled form; else what
        ``then`` starts from, or None while the grid's stacked form is still to be built."""
        rr = plan._c.rerolled
        if rr.disjoint(values):
            return "rerolled", plan._stacked_env("rerolled", rr.template, rr.arg_slots, values)
        if plan._stack_from is not None:
            return None
        return self.then.tape_env(plan, values)


def grid_strategy(plan, batching: bool):
    """The strategy of the grid's runs, the rerolled form aside."""
    c, n = plan._c, plan.fn.num_cores
    if n > 1 and c.stacked is not None and batching:
        return Stacked()
    if plan.inter_tile and n > 1:
        return Threads(plan)
    if n > 1 and batching and plan._batchable:
        return Lockstep(plan)
    if n == 1:
        return Single(plan)
    return PerCore(plan)


def choose(plan, batching: bool):
    """The strategy of ``plan``'s runs on a machine whose ``grid_batching`` is ``batching``."""
    then = grid_strategy(plan, batching)
    if batching and plan._c.rerolled is not None:
        return Rerolled(plan, then)
    return then


def run_one(step, env) -> None:
    """One step on ``env``, its failure located (a tape's recording runs steps one by one)."""
    run_steps((step,), env)


class Exchange:
    """Mailboxes for inter-tile produce/reduce between core threads.

    Invariant (under ``cond``): ``waits`` maps each core blocked in a delivery op to the box key
    and producers it waits for; ``finished`` counts cores whose steps ended. When every core is
    waiting or finished and no waiter's producers have all posted, no core can ever post again:
    that state is a deadlock, decided from the state alone, never from elapsed time.
    """

    def __init__(self, n: int):
        self.n = n
        self.cond = threading.Condition()
        self.boxes: dict = {}
        self.failed: BaseException | None = None
        self.waits: dict[int, tuple] = {}
        self.finished = 0

    def satisfied(self, box_key, need) -> bool:
        box = self.boxes.get(box_key, {})
        return all(t in box for t in need)

    def deadlocked(self) -> bool:
        """Every core waiting or finished, and no waiter able to go on (call under ``cond``)."""
        if len(self.waits) + self.finished < self.n:
            return False
        return not any(self.satisfied(k, need) for k, need in self.waits.values())


def run_threads(steps, envs, exchange: Exchange) -> None:
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
