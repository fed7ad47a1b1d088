"""Function -> Plan: compile once, run many times for every core and pass.

A plan is a list of *steps* per block. A step is a closure ``step(env)`` over slot indices: ``env``
is a flat Python list holding every SSA value of one core's run (slot 0 holds the
:class:`CoreContext`). Values known at compile time (constants, index arithmetic on constants,
splats of constants, ...) are folded into the env template and cost nothing at run time. Each op
kind's builder lives in its dialect module (``dialects/``), registered once as the op's ``build``
part (registry.py). The :class:`~.plan.Plan` (plan.py) runs the steps.

LX accounting is static: tensor sizes are known from the types, so the LX high-water mark of the
function and the first op that overflows the capacity are computed here, once per function
(lx_liveness.py, under the machine's ``lx_model``); a fault step is planted in front of that op,
so the overflow is reported (with the executing core) only if the op runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import dialects  # noqa: F401  (registers each op kind's builder)
from ..backends.capabilities import caps_of
from ..ir.errors import FaultSignal, KtirError
from ..ir.nodes import Block, Function, Op, Value
from ..verify.lx_liveness import account
from .plan import Compiled, Plan
from ..ir.registry import part
from .reroll import is_candidate

if TYPE_CHECKING:
    from .machine import Machine

class Compiler:
    """State while compiling one function: value -> slot map and folded constants."""

    def __init__(self, machine: Machine, fn: Function):
        self.machine = machine
        self.fn = fn
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
        self.users: dict[int, list[Op]] = fn.users()  # id(value) -> ops using it

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
            builder = part("build", op.name)
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
    plan = Plan(machine, fn, Compiled(steps, template, arg_slots, c.slots), peak,
                c.uses_inter_tile)
    if not faults and not c.uses_inter_tile and getattr(machine, "checks", None) is None and \
            caps_of(c.xp).stacked and (fn.num_cores > 1 or is_candidate(c, fn)):
        plan._tier_from = c  # the batched form is built at the plan's second run
    return plan
