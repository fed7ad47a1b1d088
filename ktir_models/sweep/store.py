"""The results directory (a sweep folder): one JSON file per case, written atomically, read back.

Layout of ``--out DIR``: ``DIR/.ktir-sweep`` (the marker that makes DIR a sweep folder),
``DIR/.lock``, ``DIR/cases/<case id>.json`` (one :class:`CaseResult` each), ``DIR/summary.json``
and ``DIR/report.md`` (reports.py).

Invariants:

* ``--out`` is resolved once and opened as a directory; every later read and write goes through
  that open directory (and the one of ``cases``), by name, never following a symlink: a ``cases``
  folder, a lock, a marker, a report or a result that is a symlink is refused, never followed;
* a sweep writes only into a new directory (its parent must exist), an empty one, or a sweep
  folder (one holding the marker); a directory holding anything else is refused before any case
  runs, and so is a sweep folder whose ``summary.json`` / ``report.md`` are not the sweep's own;
* a file is complete or absent: it is written to a temporary name (``.tmp-<run id>-...``) in the
  same directory, flushed to disk and renamed over the final name (atomic on POSIX), so a sweep
  killed at any instant (SIGKILL included) leaves at most a stray temporary, which no reader
  trusts; the next sweep removes the temporaries named with the run id the killed sweep left in
  the lock, and no other file;
* a result is reused only when it parses, names the same case, and carries the case's current
  key; anything else (unreadable, another key, a stray temporary) means "run the case";
* one sweep at a time writes a directory: the store holds an exclusive lock on ``DIR/.lock``
  while open (the kernel drops it when the process dies, SIGKILL included).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path

from ..errors import UserError
from ..model.checks.report import json_safe
from .worker import CaseResult

CASES = "cases"
MARKER = ".ktir-sweep"
LOCK = ".lock"
SUMMARY = "summary.json"
REPORT = "report.md"
#: The names a sweep writes in its folder (besides ``cases/``).
OWN_NAMES = (MARKER, LOCK, SUMMARY, REPORT)
MAX_RESULT_BYTES = 64 << 20
_TMP_PREFIX = ".tmp-"
_MARKER_TEXT = '{"written_by": "ktir-models sweep", "format": 1}\n'
_REPORT_HEAD = b"# Sweep `"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class ResultStore:
    """An open sweep folder, locked for this sweep (``run_id`` names its temporaries)."""

    def __init__(self, root: Path, run_id: str | None = None) -> None:
        self.run_id = run_id or secrets.token_hex(6)
        self.root = resolve_out(root)
        self.cases_dir = self.root / CASES
        self._fds: list[int] = []
        try:
            self._dir = self._open_root()
            # every refusal comes before the first write into an existing folder
            self._check_entry(CASES, stat.S_ISDIR, "a directory")
            self._check_entry(LOCK, stat.S_ISREG, "a regular file")
            for name in (SUMMARY, REPORT):
                self._check_own_report(name)
            if _lstat(MARKER, self._dir) is None:
                self._write(self._dir, self.root / MARKER, _MARKER_TEXT)
            previous = self._take_lock()
            self._cases = self._open_cases()
            for dir_fd in (self._dir, self._cases):
                _remove_temporaries(dir_fd, previous)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the directory's lock (the end of the process releases it too)."""
        for fd in reversed(self._fds):
            os.close(fd)
        self._fds.clear()

    # -- reading and writing -------------------------------------------------------------------

    def path(self, case_id: str) -> Path:
        return self.cases_dir / f"{case_id}.json"

    def load(self, case_id: str, key: str) -> CaseResult | None:
        """The stored result of ``case_id`` if it is complete and has this ``key``; else None."""
        raw = _read_regular(f"{case_id}.json", self._cases, MAX_RESULT_BYTES)
        if raw is None:
            return None
        try:
            result = CaseResult.from_json(json.loads(raw.decode("utf-8")))
        except (ValueError, TypeError, AttributeError):
            return None
        if result.case_id != case_id or result.key != key:
            return None
        return result

    def save(self, result: CaseResult) -> Path:
        path = self.path(result.case_id)
        self._write(self._cases, path, _json_text(result.to_json()))
        return path

    def write_report(self, summary: dict, markdown: str) -> None:
        """``summary.json`` and ``report.md`` (both checked as the sweep's own when opened)."""
        self._write(self._dir, self.root / SUMMARY, _json_text(summary))
        self._write(self._dir, self.root / REPORT, markdown)

    def _write(self, dir_fd: int, where: Path, text: str) -> None:
        """``text`` to the file named ``where.name`` in ``dir_fd`` via a flushed temporary and a
        rename. The rename replaces a symlink at that name itself; nothing is written through
        one."""
        name = where.name
        # the random part last: a temporary never ends like the file it becomes (".json")
        tmp = f"{_TMP_PREFIX}{self.run_id}-{name}.{secrets.token_hex(4)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644,
                         dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                _unlink(tmp, dir_fd)
                raise
        except OSError as exc:
            raise UserError(f"--out {self.root}: cannot write {where}: "
                            f"{exc.strerror or exc}") from None

    # -- opening -------------------------------------------------------------------------------

    def _open_root(self) -> int:
        root = self.root
        if not os.path.lexists(root):
            if not root.parent.is_dir():
                raise UserError(f"--out {root}: directory {root.parent} does not exist")
            try:
                os.mkdir(root)
            except FileExistsError:
                pass  # made meanwhile: checked as any existing directory
            except OSError as exc:
                raise UserError(f"--out {root}: cannot create the results directory: "
                                f"{exc.strerror or exc}") from None
        fd = self._open_dir(str(root), None, f"--out {root}")
        marker = _lstat(MARKER, fd)
        if marker is not None:
            if not stat.S_ISREG(marker.st_mode):
                raise UserError(f"--out {root}: {MARKER} is not a regular file (a symlink?); "
                                "refusing to use this directory")
            return fd
        entries = sorted(os.listdir(fd))
        if entries:
            shown = ", ".join(repr(e) for e in entries[:3]) + (", ..." if len(entries) > 3 else "")
            raise UserError(f"--out {root}: holds files not written by a sweep ({shown}); a sweep "
                            "writes only into a new or empty directory or a sweep folder "
                            f"(one holding {MARKER})")
        return fd

    def _check_entry(self, name: str, is_kind, kind: str) -> None:
        """An existing ``name`` in the folder must be ``kind`` itself, never a symlink to one."""
        info = _lstat(name, self._dir)
        if info is None or is_kind(info.st_mode):
            return
        what = "a symlink" if stat.S_ISLNK(info.st_mode) else f"not {kind}"
        raise UserError(f"--out {self.root}: {name}: is {what}; refusing to follow or replace it")

    def _open_dir(self, name: str, dir_fd: int | None, what: str) -> int:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                kind = "a symlink" if _is_link(name, dir_fd) else "not a directory"
                raise UserError(f"{what}: is {kind}; refusing to follow or replace it") from None
            raise UserError(f"{what}: cannot open: {exc.strerror or exc}") from None
        self._fds.append(fd)
        return fd

    def _take_lock(self) -> str:
        """Take an exclusive lock on ``.lock`` (none where fcntl is missing) and write this run's
        id into it; returns the run id it held (the last sweep to lock the folder, now gone)."""
        try:
            import fcntl
        except ImportError:  # not POSIX: no cross-process lock
            return ""
        where = f"--out {self.root}: {LOCK}"
        try:
            fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, 0o644,
                         dir_fd=self._dir)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UserError(f"{where}: is a symlink; refusing to follow it") from None
            raise UserError(f"{where}: cannot open: {exc.strerror or exc}") from None
        self._fds.append(fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"{where}: is not a regular file; refusing to use it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserError(f"--out {self.root}: another sweep is writing to this directory "
                            f"(it holds {self.root / LOCK})") from None
        previous = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.run_id.encode() + b"\n", 0)
        return previous if previous.isalnum() else ""

    def _open_cases(self) -> int:
        try:
            os.mkdir(CASES, dir_fd=self._dir)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UserError(f"--out {self.root}: cannot create {self.cases_dir}: "
                            f"{exc.strerror or exc}") from None
        return self._open_dir(CASES, self._dir, f"--out {self.root}: {CASES}")

    def _check_own_report(self, name: str) -> None:
        """``summary.json`` / ``report.md`` are replaced only when they are the sweep's own."""
        info = _lstat(name, self._dir)
        if info is None:
            return
        where = f"--out {self.root}: {name}"
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{where}: is not a regular file (a symlink?); refusing to replace it")
        raw = _read_regular(name, self._dir, MAX_RESULT_BYTES) or b""
        if not (_is_summary(raw) if name == SUMMARY else raw.startswith(_REPORT_HEAD)):
            raise UserError(f"{where}: is not a report this sweep wrote; refusing to overwrite it "
                            "(move it away, or choose another --out)")


def resolve_out(out: Path) -> Path:
    """``--out`` as an absolute path without symlinks (a symlink to nothing is refused)."""
    if os.path.islink(out) and not os.path.exists(out):
        raise UserError(f"--out {out}: is a symlink to nothing; refusing to follow it")
    return Path(out).resolve()


def _remove_temporaries(dir_fd: int, run_id: str) -> None:
    """Remove the regular files named as temporaries of run ``run_id`` (what a killed writer
    left half-written: never trusted, only tidied); nothing else."""
    if not run_id:
        return
    prefix = f"{_TMP_PREFIX}{run_id}-"
    for name in os.listdir(dir_fd):
        info = _lstat(name, dir_fd) if name.startswith(prefix) else None
        if info is not None and stat.S_ISREG(info.st_mode):
            _unlink(name, dir_fd)


def _is_summary(raw: bytes) -> bool:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError:
        return False
    return isinstance(doc, dict) and {"run_id", "cases", "counts"} <= set(doc)


def _json_text(doc) -> str:
    """``doc`` as strict JSON (NaN/Inf as null)."""
    return json.dumps(json_safe(doc), indent=1, allow_nan=False, default=str) + "\n"


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read_regular(name: str, dir_fd: int, limit: int) -> bytes | None:
    """The bytes of regular file ``name`` (no symlink, FIFO or device; at most ``limit``)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        raw = fh.read(limit + 1)
    return raw if len(raw) <= limit else None


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
