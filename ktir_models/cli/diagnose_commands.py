"""`ktir-models diagnose` (which node is wrong, and why) and `ktir-models latency` (roofline).

Exit codes: diagnose 0 when every node is within its f16 band, 1 when a node jumps out of it or
the emulator faults, 2 on bad input. latency 0 (2 on bad input). Both write only the ``--json``
report (atomically).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import Mismatch, UserError
from ..model.report import json_safe
from .app import app
from .backend_options import backend_option, build_backend, device_option, lx_model_option


class _Doc:
    """A plain dict in the shape report.write_json expects (an object with ``to_json``)."""

    def __init__(self, data: dict):
        self.data = json_safe(data)

    def to_json(self) -> dict:
        return self.data


def with_sections(report, **sections) -> _Doc:
    """``report`` (anything with ``to_json()``, e.g. forward's report) plus extra top-level
    sections (``latency=...``, ``diagnose=...``), ready for report.write_json."""
    data = dict(report.to_json())
    data.update(sections)
    return _Doc(data)


def forward_extras(report, model: str, program: Path, weights: str, seed: int = 0, *,
                   latency: bool = False, diagnose: bool = False, backend=None, parsed=None,
                   text_pass=None) -> dict:
    """What `forward --latency` / `forward --diagnose` add after the forward's own report: print
    the latency table (every node) and, when the forward failed its golden, the diagnosis (run on
    the forward's array ``backend``). ``parsed``: the forward's parsed program
    (``model/program.py``), reused so that the program is read and parsed once per run;
    ``text_pass``: the pass of a forward over a text (``--prompt`` / ``--text``), whose token ids
    the diagnosis then runs too. Returns the JSON sections to add to the forward's report (see
    :func:`with_sections`)."""
    sections: dict = {}
    if latency:
        result = program_latency(program, parsed=parsed)
        print(result.render())
        sections["latency"] = result.as_dict()
    failed = getattr(report, "metrics", None) is not None and not getattr(report, "passed", True)
    if diagnose and failed:
        try:
            found = diagnose_program(model, program, weights, seed, backend=backend, parsed=parsed,
                                     pass_=text_pass)
        except UserError as exc:  # e.g. a program whose KV prefix the host cannot bind alone
            print(f"diagnose: not available for this program: {exc}")
            sections["diagnose"] = {"error": str(exc)}
        else:
            print(found.render())
            sections["diagnose"] = found.as_dict()
    return sections


def diagnose_program(model: str, program: Path, weights: str, seed: int = 0, checks=None,
                     backend=None, lx_model: str = "allocator", parsed=None, pass_=None):
    """Validate and diagnose one program (what `diagnose` and `forward --diagnose` run) on the
    array ``backend`` (a back-end object; default numpy). ``parsed``: the program already loaded,
    validated and parsed (by the forward), not read again; ``pass_``: the pass to diagnose (a
    forward's over a text), default the program's golden-convention pass."""
    from ..model.diagnose import diagnose as run_diagnose
    from ..model.manifest import check_signatures, load_manifest, validate
    from ..model.registry import resolve_model
    from ..model.weights import get_checkpoint

    spec = resolve_model(model)
    if parsed is not None:
        manifest = parsed.manifest
    else:
        manifest = load_manifest(program)
        validate(manifest, spec.config)
        check_signatures(manifest)
    ckpt = get_checkpoint(spec, weights, seed=seed)
    return run_diagnose(manifest, spec.config, ckpt, checks=checks, backend=backend,
                        lx_model=lx_model, parsed=parsed, pass_=pass_)


def _check_json(json_path: Path | None, program: Path, force: bool = False) -> None:
    """--json must be writable, must not name a file of the program (an input of the run), and
    replaces a file that is not JSON only with --force."""
    from ..model.report import check_json_target

    if json_path is None:
        return
    check_json_target(json_path, force=force)
    target = json_path.resolve()
    if Path(program).is_dir():
        for path in Path(program).iterdir():
            if path.resolve() == target:
                raise UserError(f"--json {json_path}: refusing to overwrite {path}, a file of the program")


def _hardware(cores: int, clock_ghz: float, hbm_tb_s: float, pipeline: str):
    from ..ktir.latency import HardwareParams

    try:
        return HardwareParams(num_cores=cores, clock_ghz=clock_ghz, hbm_tb_per_s=hbm_tb_s,
                              pipeline=pipeline)
    except ValueError as exc:
        raise UserError(f"latency parameters: {exc}") from None


def program_latency(program: Path, params=None, parsed=None):
    """The latency model of a fixture directory's nodes, in manifest order (used by `latency`
    and `forward --latency`; ``parsed``: the program already parsed, not read again)."""
    from ..ktir.latency import model_latency
    from ..model.manifest import load_manifest
    from ..model.program import parse_program

    if parsed is None:  # the roofline reads the functions only: their argument names are not checked
        parsed = parse_program(load_manifest(program), check_arguments=False)
    return model_latency(parsed.named_functions(), params)


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
    from ..model.report import write_json

    _check_json(json_path, program, force)
    result = program_latency(program, _hardware(cores, clock_ghz, hbm_tb_s, pipeline))
    print(result.render(limit=top))
    if json_path is not None:
        write_json(json_path, _Doc({"latency": result.as_dict()}))


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
    from ..model.report import write_json

    _check_json(json_path, program, force)
    array_backend = build_backend(backend, device)
    checker = None
    if checks or strict:
        from ..ktir.checks import NumericChecks

        checker = NumericChecks(strict=strict)
    report = diagnose_program(model, program, weights, seed, checker, backend=array_backend,
                              lx_model=lx_model)
    print(report.render(table=table))
    if json_path is not None:
        write_json(json_path, _Doc({"diagnose": report.as_dict()}))
    if not report.ok:
        raise Mismatch("diagnose: " + report.headline())
