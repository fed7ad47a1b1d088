"""A streaming safetensors writer: the header first, then each tensor's bytes chunk by chunk.

The safetensors format is an 8-byte little-endian header length, a JSON header mapping each tensor
name to ``dtype``, ``shape`` and ``data_offsets`` (relative to the end of the header), padded with
spaces to a multiple of 8 bytes, then the raw little-endian row-major data. Because every shape is
known before any data is produced, we can write the header up front and stream the data: at most
one chunk of one tensor is ever in memory, whatever the model size.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

# safetensors dtype names for the element types we write.
DTYPES: dict[str, tuple[str, np.dtype]] = {
    "float16": ("F16", np.dtype(np.float16)),
    "bfloat16": ("BF16", np.dtype(ml_dtypes.bfloat16)),
    "float32": ("F32", np.dtype(np.float32)),
}


@dataclass(frozen=True)
class TensorPlan:
    """One tensor to write: its name, shape and element type (a key of DTYPES)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * DTYPES[self.dtype][1].itemsize


def write_safetensors(
    path: Path,
    plans: list[TensorPlan],
    chunks: Callable[[TensorPlan], Iterable[np.ndarray]],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write ``plans`` to ``path``; ``chunks(plan)`` yields the tensor's data in row-major order
    (any float dtype; converted here). The yielded element counts must add up to the shape."""
    header: dict[str, object] = {"__metadata__": {"format": "pt", **(metadata or {})}}
    offset = 0
    for plan in plans:
        header[plan.name] = {
            "dtype": DTYPES[plan.dtype][0],
            "shape": list(plan.shape),
            "data_offsets": [offset, offset + plan.nbytes],
        }
        offset += plan.nbytes
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)

    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for plan in plans:
            target = DTYPES[plan.dtype][1]
            written = 0
            for chunk in chunks(plan):
                data = np.ascontiguousarray(chunk, dtype=target)
                f.write(data.tobytes())
                written += data.nbytes
            if written != plan.nbytes:  # a bug in the chunk generator, not user input
                raise AssertionError(f"{plan.name}: wrote {written} bytes, expected {plan.nbytes}")
