"""The default executor: cases as processes on this machine, as many at once as fit.

A case starts when its ``cpus`` fit in the free cores (``--jobs``, default all cores) and its
estimated peak memory fits in the memory free when the sweep started (80% of it, so the machine
keeps room for everything else). A case larger than the whole budget still runs, alone. Each case
runs in its own process (worker.run_case); the threads here only wait on those processes, so one
case crashing, hanging or being killed never touches another.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from .memory import available_bytes
from .worker import CaseResult, Job, kill_running, run_case

MEMORY_SHARE = 0.8


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def run_local(jobs: Iterable[Job], on_result: Callable[[CaseResult], None], *, workers: int | None = None,
              run_id: str = "", memory_budget: int | None = None) -> None:
    """Run every job, calling ``on_result`` (in this thread) as each one finishes."""
    cores = workers or default_jobs()
    budget = memory_budget if memory_budget is not None else int(available_bytes() * MEMORY_SHARE)
    pending = deque(jobs)
    running: dict[Future, Job] = {}
    used_cpus = used_memory = 0
    pool = ThreadPoolExecutor(max_workers=cores, thread_name_prefix="sweep-case")
    try:
        while pending or running:
            for job in list(pending):
                cpus = min(job.case.cpus, cores)
                fits = used_cpus + cpus <= cores and used_memory + job.memory <= budget
                if fits or not running:
                    pending.remove(job)
                    used_cpus += cpus
                    used_memory += job.memory
                    running[pool.submit(run_case, job.case, job.key, job.timeout, run_id)] = job
                if used_cpus >= cores:
                    break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                job = running.pop(future)
                used_cpus -= min(job.case.cpus, cores)
                used_memory -= job.memory
                on_result(future.result())
    except BaseException:
        pending.clear()
        kill_running()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
