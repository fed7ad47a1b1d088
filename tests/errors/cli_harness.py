"""Run the ktir-models CLI in-process and check the error contract on what it printed.

The contract (docs/errors.md): exit code 0, 1 or 2; bad input is exit 2 with exactly one
non-empty line on stderr that names its location; never a Python traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

from ktir_models.cli import main

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_MODEL = REPO_ROOT / "fixtures" / "models" / "tiny-mha"


@dataclass(frozen=True)
class CliResult:
    """What one in-process CLI call did."""

    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_cli(*argv: str) -> CliResult:
    """``ktir-models ARGV...`` in this process: its exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())


def assert_user_error(result: CliResult, *fragments: str) -> str:
    """Exit 2 with one stderr line holding every fragment (the location and the reason)."""
    assert result.code == 2, (result.code, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.error_lines
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def copy_tiny_model(directory: Path) -> Path:
    """A private copy of the tiny fixture model (config.json + model.safetensors)."""
    target = Path(directory) / "M"
    shutil.copytree(TINY_MODEL, target)
    return target


def tree_digest(*paths: Path) -> dict[str, str]:
    """sha256 of every file under ``paths``: inputs must come out byte-identical."""
    digests = {}
    for root in paths:
        root = Path(root)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            digests[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return digests


@contextlib.contextmanager
def private_environment(cache_dir: Path):
    """A private ``KTIR_MODELS_CACHE``, no native kernel build (``KTIR_MODELS_NATIVE=0``: these
    suites are about refusals, not numerics) and an offline hub, restored on exit. The kernel's
    load decision is per process, so it is forgotten on entry and on exit: the suites after
    these load the kernel under their own environment."""
    import pytest

    from ktir_models.ktir.backends import seqmm

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KTIR_MODELS_CACHE", str(cache_dir))
        mp.setenv("KTIR_MODELS_NATIVE", "0")
        mp.setenv("HF_HUB_OFFLINE", "1")
        seqmm._reset()
        try:
            yield
        finally:
            seqmm._reset()


def emit_tiny_program(model: Path, parent: Path) -> Path:
    """Our emitted decode program for ``model`` (manifest.json + node*.mlir) in ``parent/decode``."""
    out = Path(parent) / "decode"
    r = run_cli("emit", model, "--out", out)
    assert r.code == 0, r.stderr
    return out
