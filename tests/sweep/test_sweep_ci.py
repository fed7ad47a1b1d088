"""sweeps/ci.toml end to end, as subprocesses of the real CLI: nothing mocked.

One uninterrupted local run (2 workers) is shared by the module; the Ray run and the killed-then-
resumed run are compared with it case by case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

import psutil
import pytest

from conftest import CI_SPEC, REPO, run_sweep_cli, stored_results, sweep_argv, sweep_env, verdicts
from ktir_models.sweep import load_spec

BROKEN = "tiny-mha.tiny-mha-prefill7-rope-sign.w-hub.g-vendored"
OVER_TIMEOUT = "wait.over-timeout"


def test_ci_spec_covers_every_verdict_kind():
    spec = load_spec(CI_SPEC)
    assert len(spec.cases) >= 12
    expects = {c.id: c.expect for c in spec.cases}
    assert expects[BROKEN] == "fail" and expects[OVER_TIMEOUT] == "error"
    assert any(c.model == "stories260k" for c in spec.cases)


def test_local_run_gives_every_case_its_expected_verdict(ci_local):
    summary = ci_local["summary"]
    spec = load_spec(CI_SPEC)
    assert [c["id"] for c in summary["cases"]] == [c.id for c in spec.cases]
    for case in summary["cases"]:
        assert case["verdict"] == case["expect"], case
    by_id = {c["id"]: c for c in summary["cases"]}
    assert "exceeds the tolerance" in by_id[BROKEN]["cause"]
    assert by_id[BROKEN]["metrics"]["max_abs_rel"] > 2.0**-6
    assert by_id[OVER_TIMEOUT]["cause"].startswith("timed out after 3 s")
    assert summary["counts"] == {"pass": len(spec.cases) - 2, "fail": 1, "error": 1}
    assert summary["unexpected"] == [] and summary["reused"] == []
    # the passing forwards really compared against a golden
    assert all(c["metrics"]["max_abs_rel"] <= 2.0**-6 for c in summary["cases"]
               if c["verdict"] == "pass" and c["metrics"] is not None)
    assert (ci_local["out"] / "report.md").read_text().count("| `") == len(spec.cases)


def test_junit_has_one_testcase_per_case_with_failure_and_error_apart(ci_local):
    root = ET.parse(ci_local["junit"]).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    summary = ci_local["summary"]
    assert [c.get("name") for c in cases] == [c["id"] for c in summary["cases"]]
    assert suite.get("tests") == str(len(cases)) and suite.get("failures") == "1" and suite.get("errors") == "1"
    by_name = {c.get("name"): c for c in cases}
    assert by_name[BROKEN].find("failure") is not None and by_name[BROKEN].find("error") is None
    assert "timed out" in by_name[OVER_TIMEOUT].find("error").get("message")
    passing = [c for c in cases if c.get("name") not in (BROKEN, OVER_TIMEOUT)]
    assert all(c.find("failure") is None and c.find("error") is None for c in passing)


@pytest.mark.slow
def test_ray_local_cluster_gives_the_same_verdicts(ci_local, tmp_path):
    out = tmp_path / "ray"
    proc = run_sweep_cli(CI_SPEC, out, "--ray", "local", "--jobs", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["executor"].startswith("ray local")
    assert verdicts(summary) == verdicts(ci_local["summary"])
    assert summary["ran"] == [c["id"] for c in summary["cases"]]  # all ran in Ray tasks, none reused


RESUME_SPEC = f"""
name = "resume"

[[matrix]]
kind = "wait"
label = "held"
expect = "error"

[[matrix]]
model = "{REPO}/fixtures/models/tiny-mha"
program = ["{REPO}/fixtures/tiny-mha-decode", "{REPO}/fixtures/tiny-mha-prefill7"]
golden = "vendored"
timeout = 120
"""
HELD = "wait.held"


@pytest.mark.slow
def test_sigkilled_sweep_resumes_with_only_the_missing_cases(tmp_path):
    """A wait case without a timeout holds the first sweep open, so the kill always lands while it
    runs (never "finished before it could be killed"); the resumed sweep gives it a timeout with
    --timeout (the other cases set their own, so their keys do not change)."""
    spec = tmp_path / "resume.toml"
    spec.write_text(RESUME_SPEC)
    out = tmp_path / "killed"
    # results keyed on the project's version, not its sources, so an edit of this checkout
    # meanwhile reruns nothing
    keyed = ("--project-key", "version")
    proc = subprocess.Popen(sweep_argv(spec, out, "--jobs", "2", *keyed), cwd=REPO, env=sweep_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600  # a safety net only: the forwards always finish
    while not (stored_results(out) if (out / "cases").is_dir() else {}):
        assert proc.poll() is None, "the sweep ended while its wait case still ran"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = stored_results(out)
    selected = [c.id for c in load_spec(spec).cases]
    assert len(selected) == 3
    missing = set(selected) - set(before)
    assert HELD in missing and before
    _assert_no_case_outlives(proc.pid)

    resumed = run_sweep_cli(spec, out, "--jobs", "2", "--timeout", "1", *keyed)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    summary = json.loads((out / "summary.json").read_text())
    after = stored_results(out)
    assert set(summary["ran"]) == missing
    assert set(summary["reused"]) == set(before)
    for case_id, doc in before.items():
        assert after[case_id] == doc  # kept, not redone
    new_run = {after[c]["run_id"] for c in missing}
    assert len(new_run) == 1 and new_run.isdisjoint({d["run_id"] for d in before.values()})
    assert verdicts(summary) == {c: "error" if c == HELD else "pass" for c in selected}
    assert after[HELD]["cause"] == "timed out after 1 s (process group killed)"


def _assert_no_case_outlives(sweep_pid: int) -> None:
    """The killed sweep's case processes die with it (they ask for SIGKILL on their parent's
    death). Its wait case never ends on its own, so one left running would stay: the deadline
    is a safety net, not a measure of speed."""
    deadline = time.monotonic() + 120
    while True:
        alive = []
        for p in psutil.process_iter(["pid"]):
            try:
                ours = p.environ().get("KTIR_SWEEP_PARENT") == str(sweep_pid)
                if ours and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if not alive:
            return
        assert time.monotonic() < deadline, f"case processes {alive} outlived the killed sweep"
        time.sleep(0.2)


def test_ray_missing_is_one_clear_error(tmp_path):
    # Hide the installed ray from this one process: the real import fails as on a machine without it.
    code = ("import sys; sys.modules['ray'] = None; from ktir_models.cli import main; "
            f"main(['sweep', {str(CI_SPEC)!r}, '--out', {str(tmp_path / 'o')!r}, '--ray', 'local'])")
    proc = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert "Ray is not installed" in proc.stderr and "pip install 'ktir-models[ray]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()  # refused before any work


def test_unreachable_ray_cluster_is_one_clear_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([os.sys.executable, "-m", "ktir_models", "sweep", str(CI_SPEC), "--out",
                           str(tmp_path / "o"), "--ray", "auto", "--quiet"],
                          capture_output=True, text=True, cwd=REPO, timeout=120, env=env)
    assert proc.returncode == 2
    assert "--ray auto: cannot reach a Ray cluster" in proc.stderr and "Traceback" not in proc.stderr
