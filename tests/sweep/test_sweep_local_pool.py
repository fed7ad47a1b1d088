"""The local executor's admission: cores and estimated memory bound what runs side by side.

The cases are real case processes: ones that end quickly (a model that does not resolve: exit 2,
an error verdict), where only when each ran matters, and wait cases that never end on their own.
"""

from __future__ import annotations

import os
import threading
import time

import psutil

from ktir_models.sweep.local_executor import run_local
from ktir_models.sweep.spec import Case
from ktir_models.sweep.worker import Job

MiB = 1 << 20


def _jobs(n: int, memory: int) -> list[Job]:
    return [Job(Case(id=f"c{i}", model=f"no-such-model-{i}"), f"k{i}", 60.0, memory) for i in range(n)]


def _overlaps(results) -> int:
    """The most cases that were running at one instant."""
    events = sorted([(r.started, 1) for r in results] + [(r.started + r.seconds, -1) for r in results])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def test_cases_over_the_memory_budget_run_one_at_a_time_and_still_run():
    results = []
    # two cores free, but each case's estimate alone fills (and exceeds) the budget
    run_local(_jobs(2, 1500 * MiB), results.append, workers=2, memory_budget=1000 * MiB)
    assert sorted(r.case_id for r in results) == ["c0", "c1"]
    assert all(r.verdict == "error" and r.cause.startswith("bad input (exit code 2)") for r in results)
    assert _overlaps(results) == 1


def test_cases_that_fit_share_the_cores():
    """Two wait cases (they never end on their own) fit side by side: both processes are seen
    alive at once, then killed. Run one at a time, the second would not start until the first
    timed out, so the overlap is observed, not inferred from timestamps; the timeouts are a
    safety net that ends the test on such a bug."""
    jobs = [Job(Case(id=f"w{i}", model="", kind="wait", program=""), f"k{i}", 300.0, 10 * MiB)
            for i in range(2)]
    seen: list[int] = []
    killer = threading.Thread(target=_kill_when_all_alive, args=({"w0", "w1"}, seen))
    killer.start()
    results = []
    run_local(jobs, results.append, workers=2, memory_budget=1000 * MiB)
    killer.join()
    assert len(seen) == 2
    assert sorted(r.case_id for r in results) == ["w0", "w1"]
    assert all(r.cause.startswith("killed by signal SIGKILL") for r in results)


def _kill_when_all_alive(case_ids: set[str], seen: list[int]) -> None:
    """SIGKILL the case processes of ``case_ids`` once all of them are alive together."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = {}
        for proc in psutil.process_iter(["pid"]):
            try:
                env = proc.environ()
                case = env.get("KTIR_SWEEP_CASE")
                if env.get("KTIR_SWEEP_PARENT") == str(os.getpid()) and case in case_ids:
                    found[case] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if set(found) == case_ids:
            for proc in found.values():
                seen.append(proc.pid)
                proc.kill()
            return
        time.sleep(0.1)
