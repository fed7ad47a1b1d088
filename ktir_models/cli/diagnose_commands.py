"""`ktir-models diagnose` (which node is wrong, and why) and `ktir-models latency` (roofline),
over :func:`ktir_models.api.diagnose` and :func:`ktir_models.api.latency`.

Exit codes: diagnose 0 when every node is within its f16 band, 1 when a node jumps out of it or
the emulator faults, 2 on bad input. latency 0 (2 on bad input). Both write only the ``--json``
report (atomically).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from ..api.latency import program_latency  # noqa: F401  (the roofline of a program directory)
from ..errors import Mismatch
from .app import app
from .backend_options import backend_option, device_option, lx_model_option


@app.command()
def latency(
    program: Path = typer.Argument(..., help="Fixture dir (manifest.json + node*.mlir)."),
    top: Optional[int] = typer.Option(None, "--top", help="Show only the N most expensive nodes."),
    cores: int = typer.Option(32, "--cores", help="Cores on the chip."),
    clock_ghz: float = typer.Option(1.0, "--clock-ghz", help="Core clock in GHz."),
    hbm_tb_s: float = typer.Option(0.128, "--hbm-tb-s", help="Chip-wide HBM bandwidth in TB/s."),
    pipeline: str = typer.Option("serial", "--pipeline", help="serial or overlapped."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report as JSON here."),
    force: bool = typer.Option(False, "--force", help="Let --json replace an existing file that is not JSON."),
) -> None:
    """Cycle-approximate roofline of a program: per node, per category, bottlenecks."""
    report = api.latency(program, top=top, cores=cores, clock_ghz=clock_ghz, hbm_tb_s=hbm_tb_s,
                         pipeline=pipeline, json=json_path, force=force)
    print(report.render())


@app.command()
def diagnose(
    model: str = typer.Argument(..., help="Registry name, local checkpoint dir, or HF repo id."),
    program: Path = typer.Option(..., "--program", help="Fixture dir (manifest.json + node*.mlir)."),
    weights: str = typer.Option("hub", "--weights", help="hub, synthetic, or a local checkpoint dir."),
    seed: int = typer.Option(0, "--seed", help="Seed of --weights synthetic."),
    table: bool = typer.Option(False, "--table", help="Print every compared node's error."),
    strict: bool = typer.Option(False, "--strict", help="Emulator numeric warnings (NaN/Inf from "
                                "finite inputs, f16 overflow/underflow, write conflicts) fail."),
    checks: bool = typer.Option(False, "--checks", help="Run the emulator's checking mode and list its warnings "
                                "(numeric faults, write conflicts, masked accesses)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report as JSON here."),
    force: bool = typer.Option(False, "--force", help="Let --json replace an existing file that is not JSON."),
    backend: str = backend_option(),
    device: str = device_option(),
    lx_model: str = lx_model_option(),
) -> None:
    """Run the program and transformers side by side; name the first node out of its f16 band."""
    report = api.diagnose(model, program=program, weights=weights, seed=seed, table=table, strict=strict,
                          checks=checks, json=json_path, force=force, backend=backend, device=device,
                          lx_model=lx_model)
    print(report.render())
    if not report.passed:
        raise Mismatch(report.mismatch)
