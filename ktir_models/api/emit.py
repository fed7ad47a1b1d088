"""``emit``: our own KTIR emitter writes one pass of a model's forward as a program directory."""

from __future__ import annotations

import time
from pathlib import Path

from .option_checks import check_pass_options
from .reports import EmitReport


def emit(model: str, *, out: Path | str, mode: str = "decode", tokens: int | None = None,
         past: int = 0, capacity: int | None = None, force: bool = False) -> EmitReport:
    """Write ``model``'s forward program (``mode`` decode with m = 1, or prefill with ``tokens``
    tokens, default 32; ``past`` tokens already in a KV cache of ``capacity`` rows, default
    past + m) into ``out`` as manifest.json and node*.mlir. ``force`` replaces the program files of
    a non-empty ``out``. The options are checked against the model before anything is emitted."""
    from ..model.emit import emit_program
    from ..model.emitted import emitted_fields, emitted_nodes
    from ..model.manifest import load_manifest
    from ..model.registry import resolve_model

    spec = resolve_model(model)
    check_pass_options(spec.config, spec.name, mode, tokens, past, capacity)
    start = time.perf_counter()
    directory = emit_program(spec.config, mode, tokens, past, Path(out), spec.name,
                             capacity=capacity, force=force)
    seconds = time.perf_counter() - start
    manifest = load_manifest(directory, host_scalars=True)  # typed, as a session reads it
    fields, nodes = emitted_fields(manifest), emitted_nodes(manifest)
    return EmitReport(model=spec.name, mode=manifest.mode, m=fields.m, past=fields.past,
                      capacity=fields.capacity, nodes=len(nodes), directory=str(directory),
                      seconds=seconds, largest_grid=max(n.cores for n in nodes),
                      largest_lx=max(n.lx_estimate for n in nodes))
