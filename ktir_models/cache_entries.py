"""The ktir-models cache: where it lives, what may sit there, and entries that carry their digest.

Root: ``$KTIR_MODELS_CACHE``, else ``~/.cache/ktir-models``. Below it, one folder per kind
(``synthetic/``, ``programs/``, ``native/``), and in each folder one *entry* per key: a flat
directory of regular files plus :data:`DIGEST_FILE`, which lists every other file with its size
and sha256. Invariants:

* An entry is built in a temporary sibling (:mod:`ktir_models.cache_temp`), its digest written
  there last, and the whole directory renamed into place: the digest is atomic with the files.
* An entry is used only after :func:`verify_entry` streamed every file through sha256 and found
  the sizes, digests and the set of file names exactly as recorded. A damaged entry (bytes
  replaced, truncated, a file added or missing, no digest, a symlink or a plain file in its
  place) is named in one warning line on stderr, renamed to ``<entry>.damaged-<time>-<pid>``
  (kept for inspection, never deleted) and rebuilt.
* The cache never writes through a symlink and never follows one inside it: a root or kind
  folder that is a symlink (dangling or not), a plain file or a device, or a folder the cache
  cannot write to when it has to, is one :class:`CacheError` (exit 2) naming the path and
  telling the user to set ``KTIR_MODELS_CACHE``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .cache_temp import make_temp_dir, remove_stale_temps
from .errors import UserError

CACHE_ENV = "KTIR_MODELS_CACHE"
#: The file inside every entry that records the others' sizes and sha256 digests.
DIGEST_FILE = "cache-digest.json"
DIGEST_FORMAT = "ktir-models-cache-digest/1"
MAX_DIGEST_BYTES = 1 << 20  # a digest lists a few hundred files at most
HASH_CHUNK = 1 << 20  # bytes read per sha256 update (streamed: memory stays at one chunk)
HASH_THREADS = 8  # files of one entry hashed at once (a sharded checkpoint's shards)
DAMAGED_MARK = ".damaged-"


class CacheError(UserError):
    """The cache's location cannot be used as it is (a file, a symlink, read-only, ...)."""


@dataclass(frozen=True)
class FileDigest:
    """One file of an entry: its name in the entry, its size in bytes and its sha256 (hex)."""

    name: str
    size: int
    sha256: str


def cache_base(override: Path | None = None) -> Path:
    """The cache root: ``override``, else ``$KTIR_MODELS_CACHE``, else ``~/.cache/ktir-models``.
    Nothing is checked or created here (see :func:`cache_folder`)."""
    if override is not None:
        return Path(override)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path.home() / ".cache" / "ktir-models"


def _refuse(path: Path, problem: str) -> CacheError:
    return CacheError(
        f"cache {path}: {problem}; set {CACHE_ENV} to a writable directory of your own"
    )


def _checked_dir(path: Path, create: bool) -> bool:
    """Whether ``path`` is a real directory (creating it when ``create``); a CacheError when it is
    a symlink or anything but a directory, or cannot be created."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return False
        try:
            os.mkdir(path)
        except FileExistsError:
            return _checked_dir(path, create=False)
        except OSError as exc:
            raise _refuse(path, f"cannot create the directory ({exc.strerror or exc})") from None
        return True
    except OSError as exc:
        raise _refuse(path, f"cannot be inspected ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        dangling = "" if os.path.exists(path) else ", which does not exist"
        raise _refuse(
            path, f"is a symlink (to {target}{dangling}); the cache never writes through one"
        )
    if not stat.S_ISDIR(st.st_mode):
        kind = "a regular file" if stat.S_ISREG(st.st_mode) else "a device or special file"
        raise _refuse(path, f"is {kind}, not a directory")
    return True


def cache_folder(kind: str, override: Path | None = None, create: bool = True) -> Path:
    """``<root>/<kind>``, both checked (and created when ``create``); a CacheError names the first
    path that is not a plain directory. The root's parents are created as needed."""
    root = cache_base(override)
    if create and not os.path.lexists(root):
        try:
            root.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _refuse(root, f"cannot create its parent ({exc.strerror or exc})") from None
    _checked_dir(root, create)
    _checked_dir(root / kind, create)
    return root / kind


def _writable(folder: Path, why: str) -> None:
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _refuse(folder, f"is read-only, and {why}")


def file_digest(path: Path) -> FileDigest:
    """Size and sha256 of the regular file ``path``, streamed; a symlink is not followed
    (OSError)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        digest = hashlib.sha256()
        size = 0
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return FileDigest(path.name, size, digest.hexdigest())


def write_digest(entry: Path) -> None:
    """Record every file of the (flat) entry directory in its :data:`DIGEST_FILE`."""
    files = sorted(p for p in entry.iterdir() if p.name != DIGEST_FILE)
    for p in files:
        if p.is_symlink() or not p.is_file():
            raise RuntimeError(f"cache entry {entry}: {p.name} is not a regular file")
    record = {"format": DIGEST_FORMAT, "files": [vars(file_digest(p)) for p in files]}
    (entry / DIGEST_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _recorded(entry: Path) -> list[FileDigest]:
    """The files the entry's digest lists; ValueError or OSError when it is missing or malformed."""
    fd = os.open(entry / DIGEST_FILE, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_DIGEST_BYTES + 1)
    if len(raw) > MAX_DIGEST_BYTES:
        raise ValueError(f"{DIGEST_FILE} is larger than {MAX_DIGEST_BYTES} bytes")
    doc = json.loads(raw.decode("utf-8"))
    if (
        not isinstance(doc, dict)
        or doc.get("format") != DIGEST_FORMAT
        or not isinstance(doc.get("files"), list)
    ):
        raise ValueError(f"{DIGEST_FILE} is not a digest of format {DIGEST_FORMAT}")
    out = []
    for item in doc["files"]:
        if not isinstance(item, dict) or set(item) != {"name", "size", "sha256"}:
            raise ValueError(f"{DIGEST_FILE}: malformed record {str(item)[:60]}")
        name, size, sha = item["name"], item["size"], item["sha256"]
        if not (
            isinstance(name, str)
            and name
            and "/" not in name
            and name not in (".", "..", DIGEST_FILE)
            and isinstance(size, int)
            and isinstance(sha, str)
            and len(sha) == 64
        ):
            raise ValueError(f"{DIGEST_FILE}: malformed record {str(item)[:60]}")
        out.append(FileDigest(name, size, sha))
    return out


def verify_entry(entry: Path) -> str | None:
    """None when ``entry`` is intact (module docstring), else what is wrong, in a few words."""
    try:
        st = os.lstat(entry)
    except OSError as exc:
        return f"cannot be inspected ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    try:
        recorded = _recorded(entry)
    except FileNotFoundError:
        return f"has no {DIGEST_FILE}"
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        return f"has an unreadable {DIGEST_FILE} ({str(exc)[:80]})"
    try:
        present = {p.name for p in entry.iterdir()} - {DIGEST_FILE}
    except OSError as exc:
        return f"cannot be listed ({exc.strerror or exc})"
    names = {r.name for r in recorded}
    if present != names:
        extra, missing = sorted(present - names), sorted(names - present)
        return "holds " + (f"unrecorded file {extra[0]}" if extra else f"no {missing[0]}")
    workers = max(1, min(len(recorded), os.cpu_count() or 1, HASH_THREADS))
    with ThreadPoolExecutor(max_workers=workers) as pool:  # shards hash in parallel (no GIL held)
        problems = list(pool.map(lambda want: _file_problem(entry, want), recorded))
    return next((p for p in problems if p is not None), None)


def _file_problem(entry: Path, want: FileDigest) -> str | None:
    try:
        got = file_digest(entry / want.name)
    except OSError as exc:
        return f"{want.name}: cannot be read ({exc.strerror or exc})"
    if got.size != want.size:
        return f"{want.name}: {got.size} bytes, recorded {want.size}"
    if got.sha256 != want.sha256:
        return f"{want.name}: sha256 differs from the recorded digest"
    return None


def move_aside(entry: Path, problem: str) -> Path | None:
    """Rename the damaged ``entry`` to ``<entry>.damaged-<time>-<pid>`` and say so on one stderr
    line; None when another process moved it first. A CacheError when it cannot be moved."""
    aside = entry.with_name(
        f"{entry.name}{DAMAGED_MARK}{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    )
    try:
        os.rename(entry, aside)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _refuse(
            entry, f"is damaged ({problem}) and cannot be moved aside " f"({exc.strerror or exc})"
        ) from None
    print(
        f"ktir-models: warning: cache entry {entry} is damaged ({problem}); moved aside to "
        f"{aside.name}; rebuilding it",
        file=sys.stderr,
        flush=True,
    )
    return aside


def ensure_entry(folder: Path, name: str, build: Callable[[Path], None]) -> Path:
    """The verified entry ``folder/name``, built by ``build(tmp_dir)`` when missing or damaged.

    ``folder`` comes from :func:`cache_folder`. ``build`` writes the entry's files (flat) into the
    empty directory it is given; the digest is added and the directory renamed into place. When
    another process renames its build first, that one is used (after verification)."""
    entry = folder / name
    if os.path.lexists(entry):
        problem = verify_entry(entry)
        if problem is None:
            return entry
        _writable(folder, f"its entry {name} is damaged ({problem})")
        move_aside(entry, problem)
    _writable(folder, f"entry {name} is missing and must be built")
    # a writer killed mid-build leaves its temporary directory: dead writers' ones go here, never
    # a live writer's (cache_temp.py has the rule)
    remove_stale_temps(folder)
    try:
        tmp = make_temp_dir(entry)
    except OSError as exc:
        raise _refuse(folder, f"cannot hold a new entry ({exc.strerror or exc})") from None
    try:
        build(tmp)
        write_digest(tmp)
        try:
            os.rename(tmp, entry)
        except OSError as exc:
            problem = verify_entry(entry)  # a concurrent writer's complete entry, or a real failure
            if problem is not None:
                raise _refuse(
                    entry,
                    f"the new entry cannot be put in place ({exc.strerror or exc}; "
                    f"what is there {problem})",
                ) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return entry
