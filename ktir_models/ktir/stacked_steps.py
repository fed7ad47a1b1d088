"""Stacked steps, one maker per op kind (see stacked.py for the representation).

A maker ``(builder, op, plain) -> step | None`` returns a step over the stacked env, or None when
the op (with these operand kinds) has no stacked form and must run core by core. A step may raise
anything when its conditions do not hold (it must not have written memory by then): the builder
then runs the op core by core, which also reports faults exactly as the plain plan does.
"""

from __future__ import annotations

import numpy as np

from .ir import Op, TensorType
from .stacked_values import Builder as _Builder, Fallback as _Fallback, lift, native
from .tape import LoopShape

_as_strided = np.lib.stride_tricks.as_strided


# -- access tiles, loads, stores ---------------------------------------------------------------

