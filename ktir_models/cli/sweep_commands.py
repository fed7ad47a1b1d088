"""`ktir-models sweep`: run a spec's cases (forwards / generates) and report their verdicts.

Exit codes: 0 every case's verdict equals its ``expect`` (default pass), 1 some case's does not,
2 bad input (the spec, a flag, Ray missing or unreachable).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import Mismatch
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
    from ..api import sweep as run

    report = run(spec_path, out=out, junit=junit, ray=ray, jobs=jobs, timeout=timeout, only=only,
                 retry_failed=retry_failed, project_key=project_key, force=force, quiet=quiet)
    print(report.render())
    print(f"results in {out} (summary.json, report.md)" + (f", JUnit in {junit}" if junit else ""),
          file=sys.stderr)
    if not report.passed:
        raise Mismatch(report.mismatch)
