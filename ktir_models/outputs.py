"""Output files (``run --out``, ``forward --json``): checked before any work, written atomically.

Invariants:

* A target is refused up front, with one message naming the option and the path, when it is a
  directory, when its directory does not exist or is not writable, when it is one of the run's
  inputs, or when it exists and is not a file of its kind (an ``.npz`` archive for ``--out``, a
  JSON document for ``--json``) -- unless ``--force`` is given. An empty file counts as any kind.
* Data is written to a temporary file next to the target (``.<name>.<random>.partial``) and renamed
  over it only once complete; on every error path -- a failed write, a full disk, an interrupt --
  the temporary file is removed, so the target is either untouched or wholly new.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .errors import UserError


def _is_npz(path: Path) -> bool:
    return zipfile.is_zipfile(path)


def _is_json(path: Path) -> bool:
    from .readers import InputFileError, read_json

    try:
        read_json(path)
    except InputFileError:
        return False
    return True


@dataclass(frozen=True)
class OutputKind:
    """What an output option writes: ``name`` for messages, ``looks_like`` recognises an existing
    file of that kind (one the option may replace without ``--force``)."""

    name: str
    looks_like: Callable[[Path], bool]


NPZ = OutputKind(".npz archive", _is_npz)
JSON = OutputKind("JSON document", _is_json)


def check_output_target(path: Path | str, option: str, kind: OutputKind, *, force: bool = False,
                        inputs: Iterable[Path | str] = ()) -> Path:
    """Refuse ``path`` as the target of ``option`` (see the module docstring); returns it."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{option} {path}: is a directory (expected a file name)")
    parent = path.parent
    if not parent.is_dir():
        raise UserError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: directory {parent} is not writable")
    target = path.resolve()
    for item in inputs:
        if Path(item).resolve() == target:
            raise UserError(f"{option} {path}: refusing to overwrite an input of this run ({item})")
    if path.exists() or path.is_symlink():
        if not path.is_file():
            raise UserError(f"{option} {path}: exists and is not a regular file")
        if not force and path.stat().st_size > 0 and not kind.looks_like(path):
            raise UserError(f"{option} {path}: exists and is not a {kind.name}; refusing to overwrite it "
                            "(pass --force to replace it)")
    return path


@contextmanager
def atomic_output(path: Path | str, option: str, mode: str = "wb") -> Iterator[IO]:
    """A file object writing to a temporary sibling of ``path``, renamed over it on success and
    removed on any error (an OSError becomes a UserError naming ``option`` and the path)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create a file in {path.parent}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise UserError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
