"""``sweep``: run a spec's cases (forwards and generates, each in its own process) and report
their verdicts (docs/validating.md)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .reports import SweepReport


def sweep(spec: Path | str, *, out: Path | str, junit: Path | str | None = None,
          ray: str | None = None, jobs: int | None = None, timeout: float | None = None,
          only: str | None = None, retry_failed: bool = False, project_key: str = "sources",
          force: bool = False, quiet: bool = True) -> SweepReport:
    """Run every case of the sweep spec ``spec`` (a TOML file), reusing the results stored in
    ``out``; ``junit``: also write JUnit XML there (``force``: even over a file that is not a
    sweep's JUnit report). ``ray``: local, auto or an address (default: this machine's
    processes, ``jobs`` of them). Every output rule is checked before the first case runs.
    ``report.passed`` is True when every case's verdict is the one its spec expects."""
    from ..sweep import SweepOptions, load_spec, run_sweep
    from ..sweep.keys import PROJECT_KEYS
    from ..sweep.spec import check_timeout

    if project_key not in PROJECT_KEYS:
        raise UserError(f"--project-key {project_key}: expected {' or '.join(PROJECT_KEYS)}")
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs {jobs}: expected a positive integer")
    if timeout is not None:
        check_timeout(timeout, "--timeout")
    out, junit = Path(out), None if junit is None else Path(junit)
    summary = run_sweep(load_spec(Path(spec)), SweepOptions(
        out=out, ray=ray, jobs=jobs, timeout=timeout, only=only, retry_failed=retry_failed,
        progress=not quiet, project_key=project_key, junit=junit, force=force))
    return SweepReport(summary, str(out), None if junit is None else str(junit))
