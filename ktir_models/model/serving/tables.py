"""The host tables of one serving step: what the host binds besides weights and the block pools.

From a :class:`StepPlan` (which sequence runs which tokens at which positions, in which row group)
and the program's :class:`~ktir_models.model.emit.serving.ServingShape`:

* ``ids [rows]``: token ids (padding rows: 0), whose embedding rows the host writes;
* ``positions [rows]``: each row's position in its own sequence (cos/sin rows of RoPE);
* ``slots [rows]``: where each row's k and v are written, ``block * block_size + position %
  block_size`` with ``block = blocks[position // block_size]``; padding rows write the scratch
  block;
* ``block_table [groups, max_blocks]``: each group's sequence's blocks (unused entries: 0);
* ``mask [rows, max_blocks * block_size]``: row r sees the columns (positions of its own sequence)
  ``<= positions[r]`` (and, with a sliding window W, ``> positions[r] - W``); everything else,
  and every column of a padding row, is hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..emit.host import MASKED
from ..emit.serving import ServingShape


@dataclass(frozen=True)
class RowRun:
    """The tokens one sequence runs in a step: ``ids`` at ``positions`` (consecutive), held in
    ``blocks`` (its block table), in the prefill group or in decode slot ``slot``."""

    request: str
    ids: tuple[int, ...]
    positions: tuple[int, ...]
    blocks: tuple[int, ...]
    prefill: bool
    slot: int


@dataclass(frozen=True)
class StepPlan:
    """One scheduler step: at most one prefill chunk and the decode rows."""

    step: int
    prefill: RowRun | None
    decodes: tuple[RowRun, ...]

    @property
    def runs(self) -> tuple[RowRun, ...]:
        return ((self.prefill,) if self.prefill is not None else ()) + self.decodes


@dataclass(frozen=True)
class StepTables:
    """Host inputs of one step; ``rows_of[request] = (first row, rows)``."""

    ids: np.ndarray
    positions: np.ndarray
    slots: np.ndarray
    block_table: np.ndarray
    mask: np.ndarray
    rows_of: dict[str, tuple[int, int]]


def step_tables(plan: StepPlan, shape: ServingShape, window: int | None = None) -> StepTables:
    """The tables of ``plan`` for a program of ``shape`` (module docstring)."""
    rows, bs = shape.rows, shape.block_size
    groups = shape.groups
    ids = np.zeros(rows, np.int64)
    positions = np.zeros(rows, np.int64)
    scratch = (shape.num_blocks - 1) * bs
    slots = (scratch + np.arange(rows) % bs).astype(np.int32)
    table = np.zeros((groups.count, shape.max_blocks), np.int32)
    mask = np.full((rows, shape.context), MASKED, np.float16)
    rows_of: dict[str, tuple[int, int]] = {}
    for run in plan.runs:
        if run.prefill:
            group, first = 0, 0
        else:
            group, first = groups.first_decode_group + run.slot, groups.prefill_rows + run.slot
        rows_of[run.request] = (first, len(run.ids))
        table[group, :len(run.blocks)] = run.blocks
        for i, (token, pos) in enumerate(zip(run.ids, run.positions)):
            r = first + i
            ids[r], positions[r] = token, pos
            slots[r] = run.blocks[pos // bs] * bs + pos % bs
            low = 0 if window is None else max(0, pos - window + 1)
            mask[r, low:pos + 1] = 0.0
    return StepTables(ids, positions, slots, table, mask, rows_of)
