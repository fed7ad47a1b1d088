"""Open a GGUF file with the ``gguf`` package's reader and give typed access to its metadata.

Invariants:
- Every way a file can fail to open (missing, empty, bad magic, unsupported version, truncated
  header, a tensor whose type code the package does not know, tensor data running past the end of
  the file) is one :class:`~ktir_models.errors.UserError` that names the file and, where there is
  one, the tensor; nothing from the package escapes as a traceback.
- The reader memory-maps the file: opening it reads the header only, tensor data is touched when
  a tensor is dequantized.
- Tensor shapes are given in PyTorch order (``[rows, cols]``: GGUF stores ``ne0`` = columns first).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ktir_models.errors import UserError

GGUF_MAGIC = b"GGUF"


class _TensorInfoError(Exception):
    """A tensor-info record the package would choke on, with the tensor's name (internal)."""


def _reader_class():
    """The package's ``GGUFReader`` with a pre-check of each tensor-info record.

    The package raises an anonymous ``ValueError`` for an unknown type code and a reshape error for
    data past the end of the file; checking the records it has already parsed first lets us name
    the tensor. When the package's internal record layout is not the one we know, the check steps
    aside and the package's own errors (still reported with the file name) apply.
    """
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader

    class CheckedReader(GGUFReader):
        def _build_tensors(self, start_offs, fields):  # noqa: ANN001  (package signature)
            for field in fields:
                if len(field.parts) != 6:
                    break
                _, name_data, _, dims, raw_dtype, offset = field.parts
                name = bytes(name_data).decode("utf-8", "replace")
                code = int(raw_dtype[0])
                try:
                    qtype = GGMLQuantizationType(code)
                except ValueError:
                    raise _TensorInfoError(f"tensor {name!r} has unknown GGML type code {code}") from None
                block, type_size = GGML_QUANT_SIZES[qtype]
                n = int(np.prod([int(d) for d in dims], dtype=np.int64))
                if n % block:
                    raise _TensorInfoError(
                        f"tensor {name!r} ({qtype.name}) has {n} elements, not a multiple of its block of {block}"
                    )
                end = int(start_offs) + int(offset[0]) + n // block * type_size
                if end > len(self.data):
                    raise _TensorInfoError(
                        f"tensor {name!r} data runs past the end of the file (needs {end} bytes, the "
                        f"file has {len(self.data)}): truncated"
                    )
            super()._build_tensors(start_offs, fields)

    return CheckedReader


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of the file: ``shape`` in PyTorch order, ``qtype`` the package's enum member,
    ``data`` the package's memory-mapped view (typed for F16/F32, raw bytes per row otherwise)."""

    name: str
    qtype: Any
    shape: tuple[int, ...]
    data: np.ndarray
    offset: int  # of the data in the file, bytes
    nbytes: int


@dataclass
class GgufFile:
    """An opened GGUF file: metadata by key, tensors by name."""

    path: Path
    reader: Any
    tensors: dict[str, TensorEntry]

    def release(self, entry: TensorEntry) -> None:
        """Drop the mapped pages of ``entry``'s data from this process's memory once it has been
        read: clean file pages, read again from the file if touched again. Without this every
        tensor read would stay resident through the map, adding the file's size to the peak."""
        mapped = getattr(self.reader.data, "_mmap", None)
        if mapped is None or not hasattr(mapped, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return
        start = entry.offset // mmap.PAGESIZE * mmap.PAGESIZE
        length = entry.offset + entry.nbytes - start
        try:
            mapped.madvise(mmap.MADV_DONTNEED, start, length)
        except (OSError, ValueError):  # advice only: a platform that refuses it keeps the pages
            pass

    def has(self, key: str) -> bool:
        return key in self.reader.fields

    def value(self, key: str, default: Any = None) -> Any:
        """A metadata value as a Python value (str, int, float, bool, or a list of them)."""
        field = self.reader.fields.get(key)
        if field is None:
            return default
        try:
            return field.contents()
        except (UnicodeDecodeError, IndexError, ValueError) as exc:
            raise UserError(f"{self.path}: metadata key {key!r} cannot be decoded ({exc})") from None

    def integer(self, key: str, default: Any = None) -> int:
        """A positive integer metadata value; missing without a default, or the wrong type, is a
        UserError naming the key."""
        value = self.value(key, default)
        if value is None:
            raise UserError(f"{self.path}: metadata key {key!r} is missing")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UserError(f"{self.path}: metadata key {key!r} must be a positive integer, got {value!r}")
        return value

    def number(self, key: str, default: Any = None) -> float:
        """A positive number metadata value (see :meth:`integer`)."""
        value = self.value(key, default)
        if value is None:
            raise UserError(f"{self.path}: metadata key {key!r} is missing")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise UserError(f"{self.path}: metadata key {key!r} must be a positive number, got {value!r}")
        return float(value)


def open_gguf(path: Path) -> GgufFile:
    """Open and index ``path``; see the module docstring for what is checked here."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: GGUF file does not exist")
    with open(path, "rb") as f:
        head = f.read(4)
    if head != GGUF_MAGIC:
        raise UserError(f"{path}: not a GGUF file (bad magic {head!r}, expected {GGUF_MAGIC!r})")
    try:
        reader_class = _reader_class()
    except ImportError:
        raise UserError(f"{path}: reading GGUF files needs the 'gguf' package: "
                        f"pip install 'ktir-models[gguf]'") from None
    try:
        reader = reader_class(str(path), "r")
    except _TensorInfoError as exc:
        raise UserError(f"{path}: {exc}") from None
    except (ValueError, IndexError, OverflowError, KeyError, UnicodeDecodeError, OSError) as exc:
        # The package reads past a short header as a short array and fails somewhere later.
        raise UserError(f"{path}: not a readable GGUF file: truncated or corrupt header "
                        f"({type(exc).__name__}: {exc})") from None
    tensors = {
        t.name: TensorEntry(
            name=t.name,
            qtype=t.tensor_type,
            shape=tuple(int(d) for d in reversed(t.shape.tolist())),
            data=t.data,
            offset=int(t.data_offset),
            nbytes=int(t.n_bytes),
        )
        for t in reader.tensors
    }
    return GgufFile(path=path, reader=reader, tensors=tensors)
