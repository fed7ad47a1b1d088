"""`ktir-models check` and `ktir-models run`: the emulator on single KTIR files."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import UserError
from .app import app


@app.command("check")
def check(files: List[Path] = typer.Argument(..., help="KTIR files (.mlir / .ktir) to check")):
    """Parse and verify KTIR files; print one summary line per file.

    Exit 0 when every file is clean, 2 when any has errors (printed as file:line:col: error: ...).
    """
    from ..ktir import KtirError, load_module

    failed = 0
    for path in files:
        t0 = time.perf_counter()
        try:
            module = load_module(path)
        except KtirError as exc:
            failed += 1
            print(str(exc), file=sys.stderr)
            print(f"{path}: FAILED ({len(exc.diagnostics)} error(s))")
            continue
        ops = sum(1 for fn in module.functions.values() for _ in fn.walk())
        ms = (time.perf_counter() - t0) * 1e3
        names = ", ".join("@" + n for n in module.functions)
        print(f"{path}: ok ({len(module.functions)} function(s): {names}; {ops} ops; {ms:.1f} ms)")
    if failed:
        raise UserError(f"{failed} of {len(files)} file(s) have errors")
