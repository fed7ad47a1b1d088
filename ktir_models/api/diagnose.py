"""``diagnose``: run a program and transformers side by side and name the first node whose error
leaves its f16 band (model/checks/diagnose.py), with the store and op that computed the worst element."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .json_target import check_program_json_target
from .option_checks import check_seed
from .reports import DiagnoseReport, write_report_json
from .runtime import build_backend, check_lx_model


def diagnose(model: str, *, program: Path | str, weights: str = "hub", seed: int = 0,
             table: bool = False, strict: bool = False, checks: bool = False,
             json: Path | str | None = None, force: bool = False, backend: str = "numpy",
             device: str = "auto", lx_model: str = "allocator") -> DiagnoseReport:
    """Diagnose ``program`` (a directory with manifest.json and node*.mlir) for ``model`` on
    ``weights``: every node the diagnosis can map is compared with the matching transformers
    tensor. ``checks``: run the emulator's checking mode and list its warnings; ``strict``: its
    numeric warnings fault. ``table``: ``render()`` lists every compared node. ``json``: also
    write ``report.to_dict()`` there."""
    json_path = Path(json) if json is not None else None
    check_program_json_target(json_path, Path(program), force)
    check_seed(seed)
    check_lx_model(lx_model)
    array_backend = build_backend(backend, device)
    checker = None
    if checks or strict:
        from ..ktir.exec.checks import NumericChecks

        checker = NumericChecks(strict=strict)
    report = DiagnoseReport(diagnose_program(model, Path(program), weights, seed, checker,
                                             backend=array_backend, lx_model=lx_model), table=table)
    if json_path is not None:
        write_report_json(json_path, report.to_dict())
    return report


def diagnose_program(model: str, program: Path, weights: str, seed: int = 0, checks: Any = None,
                     backend: Any = None, lx_model: str = "allocator", parsed: Any = None,
                     pass_: Any = None) -> Any:
    """Validate and diagnose one program (``model.diagnose.DiagnoseReport``) on the array
    ``backend`` (a back-end object; default numpy). ``parsed``: the program already loaded,
    validated and parsed (by a forward), not read again; ``pass_``: the pass to diagnose (a
    forward's over a text), default the program's golden-convention pass."""
    from ..model.checks.diagnose import diagnose as run_diagnose
    from ..model.manifest import load_manifest, validate
    from ..model.program_checks import parse_and_check
    from ..model.registry import resolve_model
    from ..model.weights.checkpoint import get_checkpoint

    spec = resolve_model(model)
    if parsed is None:
        manifest = load_manifest(program)
        validate(manifest, spec.config)
        parsed = parse_and_check(manifest)
    ckpt = get_checkpoint(spec, weights, seed=seed)
    return run_diagnose(parsed.manifest, spec.config, ckpt, checks=checks, backend=backend,
                        lx_model=lx_model, parsed=parsed, pass_=pass_)
