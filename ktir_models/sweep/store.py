"""The results directory: one JSON file per case, written atomically, read back on a rerun.

Layout of ``--out DIR``: ``DIR/cases/<case id>.json`` (one :class:`CaseResult` each),
``DIR/summary.json`` and ``DIR/report.md`` (reports.py).

Invariants:

* a result file is complete or absent: it is written to a temporary name in the same directory,
  flushed to disk and renamed over the final name (atomic on POSIX), so a sweep killed at any
  instant (SIGKILL included) leaves at most a stray temporary, which no reader trusts;
* a result is reused only when it parses, names the same case, and carries the case's current
  key; anything else (unreadable, another key, a stray temporary) means "run the case";
* one sweep at a time writes a directory: the store holds an exclusive lock on ``DIR/.lock``
  while open (the kernel drops it when the process dies, SIGKILL included).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..errors import UserError
from ..model.report import json_safe
from .worker import CaseResult

CASES = "cases"
_TMP_PREFIX = ".tmp-"


class ResultStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.cases_dir = self.root / CASES
        try:
            self.cases_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--out {root}: cannot create the results directory: {exc.strerror or exc}") from None
        self._lock = _lock_directory(self.root)
        self._sweep_stray_temporaries()

    def close(self) -> None:
        """Release the directory's lock (the end of the process releases it too)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def path(self, case_id: str) -> Path:
        return self.cases_dir / f"{case_id}.json"

    def load(self, case_id: str, key: str) -> CaseResult | None:
        """The stored result of ``case_id`` if it is complete and has this ``key``; else None."""
        try:
            doc = json.loads(self.path(case_id).read_text(encoding="utf-8"))
            result = CaseResult.from_json(doc)
        except (OSError, ValueError, TypeError):
            return None
        if result.case_id != case_id or result.key != key:
            return None
        return result

    def save(self, result: CaseResult) -> Path:
        return write_json_atomic(self.path(result.case_id), result.to_json())

    def _sweep_stray_temporaries(self) -> None:
        """Remove what a killed sweep left half-written (never trusted, only tidied)."""
        for stray in self.cases_dir.glob(_TMP_PREFIX + "*"):
            try:
                stray.unlink()
            except OSError:
                pass


def _lock_directory(root: Path):
    """An open file holding an exclusive lock on ``root/.lock`` (no lock where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock
        return None
    handle = open(root / ".lock", "a")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise UserError(f"--out {root}: another sweep is writing to this directory (it holds {root / '.lock'})") from None
    return handle


def write_json_atomic(path: Path, doc) -> Path:
    """Write ``doc`` as strict JSON (NaN/Inf as null) to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(json_safe(doc), indent=1, allow_nan=False, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a flushed temporary in the same directory and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX + path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
