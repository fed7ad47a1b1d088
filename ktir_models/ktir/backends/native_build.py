"""Finding the system C compiler for the native code built on first use (the kernel library,
seqmm.py; the fastcall extension, fastcall.py), and naming it in their cache keys."""

from __future__ import annotations

import os
import shutil
import subprocess


def compilers() -> list[str]:
    """The C compilers to try, in order: ``$CC``, then ``cc``, ``gcc``, ``clang`` (each found on
    PATH, each path once)."""
    names = [os.environ["CC"]] if os.environ.get("CC") else []
    names += ["cc", "gcc", "clang"]
    found = []
    for name in names:
        path = shutil.which(name)
        if path and path not in found:
            found.append(path)
    return found


def compiler_identity(cc: str) -> str:
    """The first line of ``cc --version`` (the compiler itself when it prints nothing): part of a
    build's cache key, so that another compiler's output is never loaded."""
    try:
        res = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return res.stdout.strip().splitlines()[0] if res.stdout.strip() else cc
    except (OSError, subprocess.SubprocessError):
        return cc
