"""The reference interpreter's dtype helpers (``ktir_cpu.dtypes``), on our element types.

KTIR spellings (``f16``, ``f32``, ``bf16``, ``i32``, ...) map to numpy dtypes through the
emulator's own table (``ktir.ir.ELEMENT_DTYPES``); a few long spellings are accepted as well.
"""

from __future__ import annotations

import numpy as np

from ..ktir.ir.nodes import ELEMENT_DTYPES
from ..ktir.exec.machine import STICK_BYTES

ALIASES = {"fp16": "f16", "float16": "f16", "float32": "f32", "fp32": "f32", "si32": "i32",
           "si64": "i64", "float64": "f64"}


def to_np_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a KTIR element type name (ValueError for unknown names)."""
    name = ALIASES.get(dtype, dtype)
    found = ELEMENT_DTYPES.get(name)
    if found is None:
        raise ValueError(f"Unsupported KTIR dtype: {dtype!r}")
    return found


def to_ktir_dtype(np_dtype) -> str:
    """The KTIR element type name of a numpy dtype (ValueError when it has none)."""
    want = np.dtype(np_dtype)
    for name, dt in ELEMENT_DTYPES.items():
        if name != "index" and dt == want:
            return name
    raise ValueError(f"No KTIR dtype for NumPy dtype: {want!r}")


def bytes_per_elem(dtype: str) -> int:
    return int(to_np_dtype(dtype).itemsize)


def stick_to_elem_idx(stick: int, dtype: str) -> int:
    """The element index (of ``dtype``) of the first byte of HBM stick ``stick``: what a kernel's
    pointer argument receives for data placed at that stick."""
    return int(stick) * STICK_BYTES // bytes_per_elem(dtype)
