"""A safetensors file's header, checked against the file before the library maps it.

Layout: 8 bytes little-endian header length N, N bytes of JSON (``name -> {dtype, shape,
data_offsets}`` plus an optional ``__metadata__``), then the data. The check: N fits in the file
and is at most :data:`MAX_HEADER_BYTES`, the JSON parses (bounded, :func:`read_json_text`), and
every tensor's ``data_offsets`` lie inside the data and match its shape times its element size.
"""

from __future__ import annotations

import struct
from pathlib import Path

from .errors import InputFileError
from .json_file import read_json_text


def _unreadable(path: Path, reason: str) -> InputFileError:
    return InputFileError(path, f"not a readable safetensors file ({reason})")

MAX_HEADER_BYTES = 100 << 20
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
               "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def check_safetensors_header(path: Path | str) -> dict:
    """The tensor entries of ``path``'s header (``__metadata__`` left out), checked."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise _unreadable(path, f"{size} bytes, shorter than its 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or 8 + n > size:
                raise _unreadable(path, f"header length {n} does not fit in {size} bytes")
            raw = f.read(n)
    except OSError as exc:
        raise _unreadable(path, f"cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _unreadable(path, "header is not UTF-8 JSON") from None
    try:
        header = read_json_text(text, "header")
    except InputFileError as exc:
        raise _unreadable(path, str(exc)) from None
    if not isinstance(header, dict):
        raise _unreadable(path, "header is not a JSON object")
    data_bytes = size - 8 - n
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _check_entry(path, name, entry, data_bytes)
    return tensors


def _check_entry(path: Path, name: str, entry, data_bytes: int) -> dict:
    where = f"tensor {name!r}"
    if not isinstance(entry, dict):
        raise _unreadable(path, f"{where}: header entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise _unreadable(path, f"{where}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                for d in shape):
        raise _unreadable(path, f"{where}: shape {shape!r} is not a list of non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        raise _unreadable(path, f"{where}: data_offsets {offsets!r} is not [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= data_bytes:
        raise _unreadable(path, f"{where}: data_offsets [{begin}, {end}] outside the file's {data_bytes} data bytes")
    count = 1
    for d in shape:
        count *= d
    if count * DTYPE_BYTES[dtype] != end - begin:
        raise _unreadable(path, f"{where}: shape {shape} of {dtype} needs {count * DTYPE_BYTES[dtype]} bytes, "
                                   f"data_offsets hold {end - begin}")
    return entry
