"""Faults of single cases: each is recorded with its cause, and the other cases finish.

A sweep of four cases runs on the local executor: one whose case process the test SIGKILLs
mid-case (found by its KTIR_SWEEP_CASE environment), one over its timeout, one over its
memory_limit, and one plain forward that must pass regardless. The first three are wait cases,
which never finish on their own: each verdict is certain whatever the machine's speed or load
(the victim's timeout is only a safety net; any interpreter is resident in more than 1 MiB).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import psutil

from conftest import REPO, stored_results, sweep_argv, sweep_env

FIXTURES = REPO / "fixtures"
SPEC = f"""
name = "faults"

[[matrix]]
kind = "wait"
timeout = 600
label = "victim"

[[matrix]]
kind = "wait"
timeout = 2
label = "slow"

[[matrix]]
kind = "wait"
memory_limit = "1MiB"
label = "small"

[[matrix]]
model = "{FIXTURES}/models/tiny-mha"
program = "{FIXTURES}/tiny-mha-prefill7"
golden = "vendored"
"""

# Keys on the project's version, not its sources: an edit of this checkout between the two runs
# must not turn the reused pass into a rerun.
VERSION_KEYED = ("--project-key", "version")

VICTIM = "wait.victim"
SLOW = "wait.slow"
SMALL = "wait.small"
PLAIN = "tiny-mha.tiny-mha-prefill7.w-hub.g-vendored"


def test_killed_timed_out_and_oversized_cases_are_errors_with_their_cause(tmp_path):
    spec = tmp_path / "faults.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    sweep = subprocess.Popen(sweep_argv(spec, out, "--jobs", "4", *VERSION_KEYED), cwd=REPO, env=sweep_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = _wait_for_case_process(VICTIM, sweep)
    victim.send_signal(signal.SIGKILL)
    stdout, stderr = sweep.communicate(timeout=180)
    # every verdict is an expected pass, so the three errors make the sweep's exit code 1
    assert sweep.returncode == 1, stdout + stderr
    assert "3 case(s) not as expected" in stderr and "Traceback" not in stderr

    results = stored_results(out)
    assert set(results) == {VICTIM, SLOW, SMALL, PLAIN}
    assert results[VICTIM]["verdict"] == "error"
    assert results[VICTIM]["cause"].startswith("killed by signal SIGKILL")
    assert results[SLOW]["verdict"] == "error"
    assert results[SLOW]["cause"] == "timed out after 2 s (process group killed)"
    assert results[SMALL]["verdict"] == "error"
    assert results[SMALL]["cause"].startswith("killed for memory: resident")
    assert "memory_limit of 1 MiB" in results[SMALL]["cause"]
    assert results[PLAIN]["verdict"] == "pass" and results[PLAIN]["report"]["pass"] is True

    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"] == {"pass": 1, "fail": 0, "error": 3}

    # --retry-failed redoes the error and reuses the pass (the glob picks those two: "wait.small",
    # "...vendored"; the two others stay out to keep the test short)
    retry = subprocess.run(sweep_argv(spec, out, "--jobs", "4", *VERSION_KEYED, "--retry-failed", "--only", "*[ld]"),
                           cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=120)
    summary = json.loads((out / "summary.json").read_text())
    assert retry.returncode == 1
    assert summary["ran"] == [SMALL] and summary["reused"] == [PLAIN]


def _wait_for_case_process(case_id: str, sweep: subprocess.Popen) -> psutil.Process:
    deadline = time.monotonic() + 600  # a safety net only: the case process always comes
    while time.monotonic() < deadline:
        assert sweep.poll() is None, sweep.communicate()
        for proc in psutil.process_iter(["pid"]):
            try:
                if proc.environ().get("KTIR_SWEEP_CASE") == case_id:
                    return proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        time.sleep(0.1)
    raise AssertionError(f"no process of case {case_id} appeared")
