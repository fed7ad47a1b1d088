"""The Ray executor: one Ray task per case, on a local cluster or one the sweep joins.

``--ray local`` starts a cluster on this machine (``ray.init(num_cpus=--jobs or all cores)``)
and shuts it down at the end; ``--ray auto`` joins the cluster ``ray start`` runs here (or
``RAY_ADDRESS``); any other value is a cluster address (``ray://host:10001``, ``host:6379``).

Each task asks for the case's ``cpus`` and its estimated peak memory (capped at what the cluster
has, so a big estimate never makes a case unschedulable) and runs worker.run_case: the case
process on the worker node, checkpoints and programs read there by path (the same paths must
exist on every node: a shared file system or the hub cache), the small result record sent back.
Nothing array-valued travels through Ray. Tasks are never retried by Ray (``max_retries=0``):
a worker that dies mid-case is that case's error, with Ray's message as its cause.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict

from ..errors import UserError
from .spec import Case
from .worker import CaseResult, Job, run_case

OBJECT_STORE_BYTES = 128 << 20


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError(
            "--ray: Ray is not installed in this environment; install the extra with "
            "pip install 'ktir-models[ray]' (or run without --ray: the local executor needs nothing more)"
        ) from None
    return ray


def check_ray_available() -> None:
    """Fail before any work when ``--ray`` is given but Ray cannot be imported."""
    _import_ray()


def _remote_case(case_doc: dict, key: str, timeout: float | None, run_id: str) -> dict:
    """Body of one Ray task (runs on a worker node)."""
    return run_case(Case(**case_doc), key, timeout, run_id).to_json()


def run_ray(jobs: Iterable[Job], on_result: Callable[[CaseResult], None], *, address: str,
            workers: int | None = None, run_id: str = "") -> None:
    ray = _import_ray()
    jobs = list(jobs)
    started_here = address == "local"
    init_kwargs = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    refs: dict = {}
    try:
        if started_here:
            from .local_executor import default_jobs

            # Results are small records, never arrays: a small object store is plenty.
            # address="local": a new cluster even where RAY_ADDRESS names another one
            ray.init(address="local", num_cpus=workers or default_jobs(), object_store_memory=OBJECT_STORE_BYTES,
                     **init_kwargs)
        else:
            ray.init(address=address, **init_kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"--ray {address}: cannot reach a Ray cluster: {first}") from None
    try:
        capacity = ray.cluster_resources().get("memory")
        remote = ray.remote(max_retries=0)(_remote_case)
        for job in jobs:
            memory = job.memory if capacity is None else min(job.memory, int(capacity))
            ref = remote.options(num_cpus=job.case.cpus, memory=memory, name=job.case.id).remote(
                asdict(job.case), job.key, job.timeout, run_id)
            refs[ref] = (job, time.time())
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                job, submitted = refs.pop(ref)
                on_result(_collect(ray, ref, job, submitted, run_id))
    finally:
        for ref in refs:  # only left when the driver itself was interrupted
            ray.cancel(ref, force=True)
        ray.shutdown()


def _collect(ray, ref, job: Job, submitted: float, run_id: str) -> CaseResult:
    try:
        return CaseResult.from_json(ray.get(ref))
    except Exception as exc:  # the task itself died (its worker killed, its node lost)
        text = str(exc).strip()
        first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
        return CaseResult(job.case.id, job.key, "error", f"the Ray task failed ({type(exc).__name__}): {first}",
                          None, time.time() - submitted, job.case.expect, run_id, os.uname().nodename, submitted)
