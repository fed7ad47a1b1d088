"""``latency``: the cycle-approximate roofline of a program, per node, per category, with its
bottlenecks (docs/latency.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UserError
from .json_target import check_program_json_target
from .reports import LatencyReport, write_report_json


def latency(program: Path | str, *, top: int | None = None, cores: int = 32, clock_ghz: float = 1.0,
            hbm_tb_s: float = 0.128, pipeline: str = "serial", json: Path | str | None = None,
            force: bool = False) -> LatencyReport:
    """The roofline of ``program`` (a directory with manifest.json and node*.mlir) on a chip of
    ``cores`` cores at ``clock_ghz`` with ``hbm_tb_s`` of HBM bandwidth (``pipeline``: serial or
    overlapped); ``top``: ``render()`` lists only the N most expensive nodes. ``json``: also
    write ``report.to_dict()`` there."""
    json_path = Path(json) if json is not None else None
    check_program_json_target(json_path, Path(program), force)
    params = _hardware(cores, clock_ghz, hbm_tb_s, pipeline)
    report = LatencyReport(program_latency(Path(program), params), top=top)
    if json_path is not None:
        write_report_json(json_path, report.to_dict())
    return report


def program_latency(program: Path, params: Any = None, parsed: Any = None) -> Any:
    """The latency model (``ktir.latency.ModelLatency``) of a program directory's nodes, in
    manifest order, each node costed with the host scalars of the pass the program was emitted
    for (so a loop bounded by ``position`` counts its real trips); ``parsed``: the program already
    parsed (a forward's), not read again."""
    from ..ktir.latency import model_latency
    from ..model.emitted import host_scalars
    from ..model.manifest import load_manifest
    from ..model.program import parse_program

    if parsed is None:  # the roofline reads the functions only: argument names are not checked
        parsed = parse_program(load_manifest(program, host_scalars=True), check_arguments=False)
    return model_latency(parsed.latency_calls(host_scalars(parsed.manifest)), params)


def _hardware(cores: int, clock_ghz: float, hbm_tb_s: float, pipeline: str) -> Any:
    from ..ktir.latency import HardwareParams

    try:
        return HardwareParams(num_cores=cores, clock_ghz=clock_ghz, hbm_tb_per_s=hbm_tb_s,
                              pipeline=pipeline)
    except ValueError as exc:
        raise UserError(f"latency parameters: {exc}") from None
