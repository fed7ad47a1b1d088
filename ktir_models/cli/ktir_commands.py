"""`ktir-models check` and `ktir-models run`: the emulator on single KTIR files, over
:func:`ktir_models.api.ktir_files.check` and :func:`~ktir_models.api.ktir_files.run`.

Both take KTIR files, never a program directory: there is no manifest, so the API calls the ktir
API directly (``load_module``; ``Machine.compile`` on the one function ``run`` runs). Everything
that runs a manifest's nodes (forward's runner, generate's session, diagnose, latency) goes through
the loaded-program object of ``model/program.py`` instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..api import ktir_files
from ..errors import UserError
from .app import app
from .backend_options import backend_option, device_option, lx_model_option


@app.command("check")
def check(files: List[Path] = typer.Argument(..., help="KTIR files (.mlir / .ktir) to check"),
          reshaping_reduce: bool = typer.Option(
              False, "--reshaping-reduce",
              help="Accept ktdp.inter_tile_reduce results that reshape the partial (ktir-cpu's "
                   "reading; the dialect rejects them)."),
          legality: bool = typer.Option(
              False, "--legality", help="Also check the hardware lowering's legality rules.")):
    """Parse and verify KTIR files; print one summary line per file.

    Exit 0 when every file is clean, 2 when any has errors (printed as file:line:col: error: ...).
    """
    report = ktir_files.check(files, reshaping_reduce=reshaping_reduce, legality=legality)
    for result in report.files:
        if result.errors is not None:
            print(result.errors, file=sys.stderr)
        print(result.line())
    if not report.passed:
        raise UserError(report.mismatch)


@app.command("run")
def run(
    file: Path = typer.Argument(..., help="KTIR file"),
    fn: Optional[str] = typer.Option(None, "--fn", help="function to run (default: the only one)"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help=".npz: argument name -> array"),
    out: Optional[Path] = typer.Option(None, "--out", help=".npz receiving every buffer argument"),
    force: bool = typer.Option(False, "--force", help="Let --out replace an existing file that is not an .npz."),
    scalar: List[str] = typer.Option([], "--scalar", help="scalar argument NAME=VALUE (repeat)"),
    lx_capacity: int = typer.Option(2 * 1024 * 1024, "--lx-capacity", help="LX bytes per core"),
    address_unit: str = typer.Option("element", "--address-unit",
                                     help="element | byte | stick"),
    backend: str = backend_option(),
    device: str = device_option(),
    lx_model: str = lx_model_option(),
    reshaping_reduce: bool = typer.Option(
        False, "--reshaping-reduce",
        help="Accept ktdp.inter_tile_reduce results that reshape the partial (ktir-cpu's "
             "reading; the dialect rejects them)."),
):
    """Run one function: arrays from --inputs are placed in HBM and their arguments receive the
    buffers' addresses; scalars come from --scalar; buffers are written to --out."""
    report = ktir_files.run(file, fn=fn, inputs=inputs, out=out, force=force, scalar=scalar,
                            lx_capacity=lx_capacity, address_unit=address_unit, backend=backend,
                            device=device, lx_model=lx_model, reshaping_reduce=reshaping_reduce)
    print(report.render())
