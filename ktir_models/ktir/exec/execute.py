"""Running steps: the per-core context every step can reach, and the loops that run a block's
steps for one core or for a grid of cores in lock step.

A *step* is a closure ``step(env)`` over slot indices of ``env``, a flat list holding one core's
SSA values (slot 0: its :class:`CoreContext`). Builders (dialects/) make steps; plans (compile.py)
and batched forms run them through this module, and a plan's run reports a :class:`RunStats`. It
imports only the error types, so every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.errors import EmulationFault, FaultSignal, Location


class CoreContext:
    """Per-core run state reachable from every step through ``env[0]``."""

    __slots__ = ("core", "coords", "machine", "function", "exchange")

    def __init__(self, core: int, coords: tuple[int, int, int], machine, function: str,
                 exchange):
        self.core = core
        self.coords = coords
        self.machine = machine
        self.function = function
        self.exchange = exchange


def run_steps(steps, env) -> None:
    """Run a block's steps; turn any failure into an EmulationFault naming op, function, core."""
    step = None
    try:
        for step in steps:
            step(env)
    except EmulationFault:
        raise
    except (FaultSignal, ArithmeticError, ValueError, IndexError, TypeError, MemoryError,
            KeyError, AttributeError, NotImplementedError, RuntimeError) as exc:
        ctx = env[0]
        op = getattr(step, "op", None)
        msg = str(exc) if isinstance(exc, FaultSignal) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower():
            # torch device errors (CUDA/MPS allocation) surface as RuntimeError subclasses
            msg = (f"the {ctx.machine.backend.describe()} device ran out of memory: "
                   f"{str(exc).splitlines()[0]}")
        raise EmulationFault(msg, function=ctx.function, op=op.name if op else "?",
                             loc=op.loc if op else Location("<unknown>", 0, 0),
                             core=ctx.core) from None


def run_lockstep(steps, envs) -> None:
    """Run a grid of independent cores step by step: each top-level step for every core before
    the next step. A step with a ``batched(envs)`` method (the batched K-loop,
    patterns/gemm_kloop.py) runs all cores in one call. Cores of a function without inter-tile
    ops share nothing but HBM, and a program whose result depends on how their accesses
    interleave is racy on the hardware too, so this order is as valid as core after core. A
    fault is reported for the first core (in core order) that raises it."""
    for step in steps:
        batched = getattr(step, "batched", None)
        if batched is not None:
            try:
                batched(envs)
                continue
            except Exception as exc:  # noqa: BLE001 - rerun core by core to locate the fault
                for env in envs:
                    run_steps((step,), env)
                # every core ran on its own: the batched form itself is wrong, never hide that
                raise RuntimeError(f"internal error: the batched form of {step.op.name} failed "
                                   f"where the per-core steps succeed: {exc!r}") from exc
        for env in envs:
            run_steps((step,), env)


@dataclass
class RunStats:
    """What one :meth:`Plan.run` reports."""

    function: str
    cores: int
    seconds: float
    lx_high_water: list[int] = field(default_factory=list)  # bytes per core

    def __str__(self) -> str:
        hw = max(self.lx_high_water) if self.lx_high_water else 0
        return (f"@{self.function}: {self.cores} core(s), {self.seconds * 1e3:.2f} ms, "
                f"LX high-water {hw} bytes")
