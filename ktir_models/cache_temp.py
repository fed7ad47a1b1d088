"""Temporary directories of cache writers, and the removal of those a killed writer left behind.

A writer builds an entry in a sibling directory named ``.<entry>.tmp-<host>-<pid>-<random>`` and
renames it into place; a writer killed with SIGKILL leaves that directory behind. The cleanup rule:
a temporary directory is stale -- and removed -- only when

* its writer ran on this host and that pid no longer exists, and nothing in it changed for
  :data:`STALE_AFTER_S` seconds (a guard against pid reuse and against pid namespaces in which a
  live writer's pid is not visible), or
* its writer ran elsewhere, or it has the older ``.<entry>.tmp-<random>`` name without a pid, and
  nothing in it changed for :data:`FOREIGN_STALE_AFTER_S` seconds.

A live writer on this host is never removed: its pid exists. A live writer elsewhere keeps writing
its file, which keeps the newest mtime inside its directory fresh.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path

STALE_AFTER_S = 60.0
FOREIGN_STALE_AFTER_S = 24 * 3600.0
_MARK = ".tmp-"
_NAMED = re.compile(r"^(?P<host>[A-Za-z0-9_.]+)-(?P<pid>\d+)-")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40] or "host"


def make_temp_dir(final: Path) -> Path:
    """A fresh temporary sibling of ``final`` whose name records this host and pid."""
    return Path(tempfile.mkdtemp(prefix=f".{final.name}{_MARK}{_host()}-{os.getpid()}-", dir=final.parent))


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal exists too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True  # unknown: treat as alive, never remove a possibly live writer's work
    return True


def newest_mtime(directory: Path) -> float:
    """The latest mtime of ``directory`` and everything below it (0.0 if it vanished)."""
    newest = 0.0
    for root, dirs, files in os.walk(directory):
        for name in [root, *(os.path.join(root, f) for f in files + dirs)]:
            try:
                newest = max(newest, os.lstat(name).st_mtime)
            except OSError:
                pass
    return newest


def is_stale(path: Path, now: float | None = None) -> bool:
    """Whether temporary directory ``path`` belongs to a dead writer (the module docstring's rule)."""
    now = time.time() if now is None else now
    _, _, tail = path.name.partition(_MARK)
    match = _NAMED.match(tail)
    age = now - newest_mtime(path)
    if match and match.group("host") == _host():
        return not pid_alive(int(match.group("pid"))) and age > STALE_AFTER_S
    return age > FOREIGN_STALE_AFTER_S


def remove_stale_temps(parent: Path, now: float | None = None) -> list[Path]:
    """Remove every stale ``.*.tmp-*`` directory directly in ``parent``; returns those removed."""
    removed = []
    try:
        candidates = [p for p in Path(parent).iterdir()
                      if p.name.startswith(".") and _MARK in p.name and p.is_dir() and not p.is_symlink()]
    except OSError:
        return removed
    for path in candidates:
        if is_stale(path, now):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed
