"""``sweep``: run a spec's cases (forwards and generates, each in its own process) and report
their verdicts (docs/validating.md)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .reports import SweepReport


def sweep(spec: Path | str, *, out: Path | str, junit: Path | str | None = None,
          ray: str | None = None, jobs: int | None = None, timeout: float | None = None,
          only: str | None = None, retry_failed: bool = False, project_key: str = "sources",
          quiet: bool = True) -> SweepReport:
    """Run every case of the sweep spec ``spec`` (a TOML file), reusing the results stored in
    ``out``; ``junit``: also write JUnit XML there. ``ray``: local, auto or an address (default:
    this machine's processes, ``jobs`` of them). ``report.passed`` is True when every case's
    verdict is the one its spec expects."""
    from ..sweep import SweepOptions, load_spec, run_sweep
    from ..sweep.keys import PROJECT_KEYS

    out, junit = Path(out), None if junit is None else Path(junit)
    if project_key not in PROJECT_KEYS:
        raise UserError(f"--project-key {project_key}: expected {' or '.join(PROJECT_KEYS)}")
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs {jobs}: expected a positive integer")
    if timeout is not None and timeout <= 0:
        raise UserError(f"--timeout {timeout}: expected a positive number of seconds")
    if junit is not None and not junit.parent.is_dir() and junit.parent.resolve() != out.resolve():
        raise UserError(f"--junit {junit}: directory {junit.parent} does not exist")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    summary = run_sweep(load_spec(Path(spec)), SweepOptions(
        out=out, ray=ray, jobs=jobs, timeout=timeout, only=only, retry_failed=retry_failed,
        progress=not quiet, project_key=project_key))
    if junit is not None:
        from ..sweep.junit import write_junit

        write_junit(summary, junit)
    return SweepReport(summary, str(out), None if junit is None else str(junit))
