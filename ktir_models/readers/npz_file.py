"""``.npz`` archives of plain numeric arrays, checked member by member before any data is read.

Each member's ``.npy`` header (shape, dtype) is read first and checked: only booleans, integers and
floats (including float16) are arrays an emulated HBM can hold; complex, strings, objects, records,
datetimes, 0-d and empty arrays are refused, and so is a member larger than :data:`MAX_ARRAY_BYTES`
or one whose header promises more bytes than the archive stores. Pickles are never loaded.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from .errors import InputFileError

MAX_ARRAY_BYTES = 16 << 30
ACCEPTED_KINDS = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "float"}
REFUSED_KINDS = {"c": "complex", "U": "string", "S": "byte string", "O": "object", "V": "record/void",
                 "M": "datetime", "m": "timedelta"}


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> np.ndarray:
    name = info.filename.removesuffix(".npy")
    where = f"array {name!r}"
    with archive.open(info) as f:
        try:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy format version {version}")
        except (ValueError, OSError, EOFError, SyntaxError) as exc:
            raise InputFileError(path, f"{where}: not a .npy array ({exc})") from None
        kind = dtype.kind
        if dtype.hasobject or kind not in ACCEPTED_KINDS:
            what = REFUSED_KINDS.get(kind, f"dtype {dtype}")
            raise InputFileError(path, f"{where}: {what} arrays ({dtype}) are not supported "
                                       f"(expected bool, integer or float)")
        if len(shape) == 0:
            raise InputFileError(path, f"{where}: a 0-d (scalar) array; pass scalars with --scalar")
        if any(d == 0 for d in shape):
            raise InputFileError(path, f"{where}: empty array of shape {list(shape)}")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if nbytes > MAX_ARRAY_BYTES:
            raise InputFileError(path, f"{where}: shape {list(shape)} is {nbytes} bytes, more than "
                                       f"{MAX_ARRAY_BYTES} bytes")
        try:
            data = f.read(nbytes + 1)
        except (OSError, EOFError, zipfile.BadZipFile, ValueError) as exc:
            raise InputFileError(path, f"{where}: corrupt data ({exc})") from None
        if len(data) != nbytes:
            raise InputFileError(path, f"{where}: holds {len(data)} data bytes, its header "
                                       f"{list(shape)} {dtype} needs {nbytes}")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return array.copy()


def read_npz(path: Path | str, what: str = ".npz") -> dict[str, np.ndarray]:
    """Every array of the archive ``path`` by member name (``.npy`` stripped), as fresh arrays."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "no such file" if not path.exists() else "not a regular file")
    try:
        if not zipfile.is_zipfile(path):
            raise InputFileError(path, f"not a {what} archive (no zip structure)")
        with zipfile.ZipFile(path) as archive:
            arrays: dict[str, np.ndarray] = {}
            for info in archive.infolist():
                if info.is_dir():
                    continue
                if not info.filename.endswith(".npy"):
                    raise InputFileError(path, f"member {info.filename!r} is not a .npy array")
                arrays[info.filename.removesuffix(".npy")] = _read_member(archive, info, path)
            return arrays
    except InputFileError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError, ValueError) as exc:
        raise InputFileError(path, f"not a readable {what} archive ({exc})") from None
