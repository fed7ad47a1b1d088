"""Shared helpers of the sweep tests: the sweep CLI as a subprocess, its stored results read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CI_SPEC = REPO / "sweeps" / "ci.toml"


def sweep_argv(spec: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "ktir_models", "sweep", str(spec), "--out", str(out), "--quiet", *extra]


def sweep_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def run_sweep_cli(spec: Path, out: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(sweep_argv(spec, out, *extra), capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=sweep_env())


def stored_results(out: Path) -> dict[str, dict]:
    """Every complete result file under ``out/cases``, by case id."""
    results = {}
    for path in sorted((out / "cases").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        results[doc["case_id"]] = doc
    return results


def verdicts(summary: dict) -> dict[str, str]:
    return {c["id"]: c["verdict"] for c in summary["cases"]}


@pytest.fixture(scope="module")
def ci_local(tmp_path_factory) -> dict:
    """One uninterrupted run of sweeps/ci.toml on the local executor, 2 workers (shared)."""
    out = tmp_path_factory.mktemp("ci-local")
    junit = out / "junit.xml"
    proc = run_sweep_cli(CI_SPEC, out, "--jobs", "2", "--junit", str(junit))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"out": out, "junit": junit, "summary": summary, "stdout": proc.stdout}
