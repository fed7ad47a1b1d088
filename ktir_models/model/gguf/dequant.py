"""Dequantization of GGUF tensors to the float16 that programs take, through ``gguf.quants``.

Invariants:
- Supported element types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K,
  Q3_K, Q4_K, Q5_K, Q6_K. Any other type (IQ*, TQ*, MXFP4, integers ...) is a UserError naming the
  tensor and its type.
- Quantized rows decode to float32 (the package's output) and are rounded ONCE to float16. F16
  data is copied as is; F32 is rounded once.
- Work goes ``ROW_CHUNK_BYTES`` of float32 at a time, so the transient float32 is bounded whatever
  the tensor's size: the only full-size array is the float16 result.
- A value that is NaN or outside the float16 range is a UserError naming the tensor.
"""

from __future__ import annotations

import numpy as np

from ktir_models.errors import UserError
from ktir_models.ktir.exec.machine import f16_all_finite

# The transient float32 block while decoding (16 MiB).
ROW_CHUNK_BYTES = 16 << 20


def supported_types() -> frozenset:
    from gguf import GGMLQuantizationType as Q

    return frozenset({Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1,
                      Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K})


def check_supported(where: str, name: str, qtype) -> None:
    """A UserError unless ``qtype`` is one we dequantize."""
    if qtype not in supported_types():
        names = ", ".join(sorted(t.name for t in supported_types()))
        raise UserError(f"{where}: tensor {name!r} has element type {qtype.name}, which is not supported "
                        f"(supported: {names})")


def _decode(data: np.ndarray, qtype) -> np.ndarray:
    """Rows of stored data (typed for F16/F32, bytes otherwise) -> float32 or float16 values."""
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize

    if qtype in (Q.F16, Q.F32):
        return np.asarray(data)
    return dequantize(np.asarray(data), qtype)


def rows_to_f16(where: str, name: str, qtype, data: np.ndarray, shape: tuple[int, ...],
                rows: np.ndarray | None = None) -> np.ndarray:
    """Dequantize ``data`` (the file's view of one tensor of PyTorch ``shape``) to float16.

    ``rows``: the output's row ``i`` is stored row ``rows[i]`` (a gather: an embedding's selected
    rows, or a row permutation); default all rows in order. 1-D tensors take no ``rows``.
    """
    check_supported(where, name, qtype)
    if len(shape) == 1:
        out = _decode(data.reshape(1, -1), qtype).reshape(shape)
        return _finite(where, name, qtype, _to_f16(out))
    stored = data.reshape(shape[0], -1)
    index = np.arange(shape[0]) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
    cols = int(np.prod(shape[1:]))
    out = np.empty((index.size, cols), dtype=np.float16)
    step = max(1, ROW_CHUNK_BYTES // (4 * cols))
    for start in range(0, index.size, step):
        picked = index[start:start + step]
        if rows is None:  # contiguous rows: a slice of the map, no gather copy
            block = stored[picked[0]:picked[-1] + 1]
        else:
            block = stored[picked]
        out[start:start + picked.size] = _to_f16(_decode(block, qtype).reshape(picked.size, cols))
    out = out.reshape((index.size, *shape[1:]))
    return _finite(where, name, qtype, out)


def _to_f16(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):  # reported by _finite with the tensor's name
        return values.astype(np.float16)


def _finite(where: str, name: str, qtype, out: np.ndarray) -> np.ndarray:
    if not f16_all_finite(out):
        raise UserError(f"{where}: tensor {name!r} ({qtype.name}) has values that are NaN or outside "
                        f"the float16 range")
    return out
