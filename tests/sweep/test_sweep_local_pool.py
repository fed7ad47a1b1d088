"""The local executor's admission: cores and estimated memory bound what runs side by side.

The cases are real case processes that end quickly (a model that does not resolve: exit 2, an
error verdict); only when each ran matters here.
"""

from __future__ import annotations

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
    results = []
    run_local(_jobs(2, 10 * MiB), results.append, workers=2, memory_budget=1000 * MiB)
    assert len(results) == 2 and _overlaps(results) == 2
