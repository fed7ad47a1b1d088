"""Op semantics, one module per dialect. Each module registers builders in :data:`BUILDERS`.

A builder ``build(c: Compiler, op: Op) -> step | None`` reads what it needs from ``op`` once,
folds the op when its inputs are compile-time constants (returning None), and otherwise returns a
closure ``step(env)`` that reads operand slots and writes result slots.

Value representation at run time: tensors are numpy arrays of the element dtype (treated as
immutable: no op writes into its inputs; results may be read-only views such as broadcasts);
``index`` and integer scalars are Python ints (i1: bool); float scalars are numpy scalars of the
element type (np.float16 / np.float32), so scalar arithmetic rounds exactly like tensors.
"""

from __future__ import annotations

from ..registry import Table

BUILDERS = Table("build")  # op name -> builder, a view of the registry (registry.py)


def register(*names: str):
    def deco(fn):
        for n in names:
            BUILDERS[n] = fn
        return fn

    return deco


# op kinds not yet moved to dialects/ register here; those moved register there
from . import linalg  # noqa: E402,F401  (registration)
from .. import dialects  # noqa: E402,F401  (registration)
