"""`ktir-models sweep`: run a spec's cases (forwards / generates) and report their verdicts.

Exit codes: 0 every case's verdict equals its ``expect`` (default pass), 1 some case's does not,
2 bad input (the spec, a flag, Ray missing or unreachable).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import UserError
from .app import app


@app.command()
def sweep(
    spec_path: Path = typer.Argument(..., metavar="SPEC.toml", help="The sweep spec (docs/validating.md)."),
    out: Path = typer.Option(..., "--out", help="Results directory: one JSON per case, summary.json, report.md."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write JUnit XML here (one testcase per case)."),
    ray: Optional[str] = typer.Option(
        None, "--ray", help="Run on Ray: local (start a cluster here), auto (join the running one) or ADDRESS."
    ),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", "-j", min=1, help="Cores to use (local executor, --ray local); default: all."
    ),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", help="Seconds per case for cases whose spec sets no timeout (default: none)."
    ),
    only: Optional[str] = typer.Option(None, "--only", help="Run only cases whose id matches (glob or substring)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Rerun stored fail / error results too."),
    project_key: str = typer.Option(
        "sources", "--project-key",
        help="What of ktir-models a result key covers: sources (its code: any edit reruns all) or version.",
    ),
    force: bool = typer.Option(
        False, "--force",
        help="Let --junit replace an existing file that is not a sweep's JUnit report.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Run every case of SPEC.toml, each in its own process, reusing results stored in --out."""
    from ..errors import Mismatch
    from ..sweep import SweepOptions, load_spec, run_sweep
    from ..sweep.keys import PROJECT_KEYS
    from ..sweep.spec import check_timeout

    if project_key not in PROJECT_KEYS:
        raise UserError(f"--project-key {project_key}: expected {' or '.join(PROJECT_KEYS)}")
    if timeout is not None:
        check_timeout(timeout, "--timeout")
    spec = load_spec(spec_path)
    summary = run_sweep(spec, SweepOptions(out=out, ray=ray, jobs=jobs, timeout=timeout, only=only,
                                           retry_failed=retry_failed, progress=not quiet,
                                           project_key=project_key, junit=junit, force=force))
    print(summary.render())
    print(f"results in {out} (summary.json, report.md)" + (f", JUnit in {junit}" if junit else ""), file=sys.stderr)
    unexpected = summary.unexpected
    if unexpected:
        shown = ", ".join(f"{r.case_id} ({r.verdict}, expected {r.expect})" for r in unexpected[:5])
        raise Mismatch(f"sweep: {len(unexpected)} case(s) not as expected: {shown}")
