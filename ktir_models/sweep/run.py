"""One sweep invocation: select cases, key them, reuse what is stored, run the rest, report.

Invariants:

* a case's stored result is reused when its key is unchanged (keys.py), except that
  ``retry_failed`` reruns every stored fail / error; a case with no trustworthy result always runs;
* each result is saved (atomically) the moment its case finishes, so a sweep killed at any point
  keeps every finished case and a rerun runs only the rest;
* a case that cannot even be keyed (its model does not resolve) is an error result, not the end
  of the sweep.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from ..errors import UserError
from .inputs import input_holding
from .junit import check_junit_target, write_junit
from .keys import case_key, forget
from .memory import MiB, estimate_bytes
from .reports import SweepSummary
from .spec import EMIT, WAIT, Case, SweepSpec
from .store import ResultStore, resolve_out
from .worker import CaseResult, Job

#: The scheduler's estimate for a wait case (an idle interpreter).
WAIT_MEMORY = 64 * MiB


@dataclass(frozen=True)
class SweepOptions:
    out: Path
    ray: str | None = None  # None: local executor; "local", "auto" or an address
    jobs: int | None = None
    timeout: float | None = None  # for cases whose spec gives none
    only: str | None = None
    retry_failed: bool = False
    progress: bool = True
    project_key: str = "sources"  # keys.PROJECT_KEYS: what of ktir-models itself a key covers
    junit: Path | None = None  # also write JUnit XML here
    force: bool = False  # --junit may replace a file that is not a sweep's JUnit report


def run_sweep(spec: SweepSpec, options: SweepOptions) -> SweepSummary:
    """Run the selected cases; every output is checked (junit.py, store.py) before any case runs."""
    cases = spec.select(options.only)
    if not cases:
        raise UserError(f"--only {options.only}: matches none of the {len(spec.cases)} cases of {spec.path}")
    if options.ray is not None:
        from .ray_executor import check_ray_available

        check_ray_available()
    out = resolve_out(options.out)  # once: every check and write below uses this path
    held = input_holding(out, spec)
    if held is not None:
        raise UserError(f"--out {options.out}: is, or lies inside, an input of this sweep ({held})")
    if options.junit is not None:
        check_junit_target(options.junit, out=out, spec=spec, force=options.force)
    store = ResultStore(out)
    try:
        summary = _run(spec, cases, options, store)
    finally:
        store.close()
    if options.junit is not None:
        write_junit(summary, options.junit)
    return summary


def _run(spec: SweepSpec, cases: tuple[Case, ...], options: SweepOptions, store: ResultStore) -> SweepSummary:
    forget()
    run_id = store.run_id
    start = time.time()

    final: dict[str, CaseResult] = {}
    reused: list[str] = []
    to_run: list[Job] = []
    for case in cases:
        case = replace(case, timeout=case.timeout if case.timeout is not None else options.timeout)
        try:
            key = case_key(case, options.project_key)
        except UserError as exc:
            result = CaseResult(case.id, "unkeyed", "error", f"bad input: {exc}", None, 0.0, case.expect, run_id)
            store.save(result)
            final[case.id] = result
            continue
        stored = store.load(case.id, key)
        if stored is not None and not (options.retry_failed and stored.verdict != "pass"):
            final[case.id] = replace(stored, expect=case.expect)
            reused.append(case.id)
            continue
        to_run.append(Job(case, key, case.timeout, _memory(case)))

    bar = _progress(len(to_run), options.progress)

    def finished(result: CaseResult) -> None:
        store.save(result)
        final[result.case_id] = result
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"last {result.case_id}: {result.verdict}", refresh=True)

    try:
        if options.ray is None:
            from .local_executor import default_jobs, run_local

            executor = f"local ({options.jobs or default_jobs()} workers)"
            if to_run:
                run_local(to_run, finished, workers=options.jobs, run_id=run_id)
        else:
            from .ray_executor import run_ray

            executor = f"ray {options.ray}" + (f" ({options.jobs} CPUs)" if options.ray == "local" and options.jobs else "")
            if to_run:  # nothing to run: no cluster to start or join
                run_ray(to_run, finished, address=options.ray, workers=options.jobs, run_id=run_id)
    finally:
        if bar is not None:
            bar.close()

    summary = SweepSummary(name=spec.name, spec=str(spec.path), run_id=run_id, executor=executor,
                           seconds=time.time() - start, results=[final[c.id] for c in cases], reused=reused)
    store.write_report(summary.to_json(), summary.markdown())
    return summary


def _memory(case: Case) -> int:
    if case.memory is not None:
        return case.memory
    if case.kind == WAIT:
        return WAIT_MEMORY
    uses_torch = case.backend == "torch" or case.kind == "generate" or case.golden == "live" or (
        case.golden == "auto" and (case.program == EMIT or not (Path(case.program) / "golden.f16.gz").is_file()))
    return estimate_bytes(_parameters(case.model), torch=uses_torch, mode=case.mode, tokens=case.tokens)


@lru_cache(maxsize=None)
def _parameters(model: str) -> int | None:
    from ..model.registry import resolve_model

    try:
        return resolve_model(model).config.num_parameters
    except UserError:
        return None  # the case reports its own bad input when it runs


def _progress(total: int, enabled: bool):
    if not enabled or total == 0:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="case", desc="sweep", file=sys.stderr, dynamic_ncols=True)
