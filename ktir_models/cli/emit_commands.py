"""`ktir-models emit` (and `generate`): our own KTIR emitter."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from .app import app


@app.command()
def emit(
    model: str = typer.Argument(..., help="Registry name, local checkpoint dir (config.json), or HF repo id."),
    out: Path = typer.Option(..., "--out", help="Directory to write manifest.json and node*.mlir into."),
    mode: str = typer.Option("decode", "--mode", help="decode (m = 1) or prefill (m tokens, causal)."),
    tokens: Optional[int] = typer.Option(None, "--tokens", help="Tokens per pass m (decode: 1; prefill default 32)."),
    past: int = typer.Option(0, "--past", help="Tokens already in the KV cache (positions start here)."),
    capacity: Optional[int] = typer.Option(None, "--capacity", help="KV cache rows C (default past + tokens)."),
    force: bool = typer.Option(False, "--force", help="Replace the program files in a non-empty --out."),
) -> None:
    """Emit MODEL's KTIR forward program (one pass) as a fixture directory."""
    from ..model.emit import emit_program
    from ..model.registry import resolve_model

    spec = resolve_model(model)
    start = time.perf_counter()
    directory = emit_program(spec.config, mode, tokens, past, out, spec.name, capacity=capacity, force=force)
    seconds = time.perf_counter() - start
    import json

    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    nodes = manifest["nodes"]
    lx = max(n["lx_estimate"] for n in nodes)
    grid = max(n["grid"][0] for n in nodes)
    print(
        f"emit: {spec.name} {manifest['mode']} m={manifest['m']} past={manifest['past']} "
        f"capacity={manifest['capacity']}: {len(nodes)} nodes in {directory} ({seconds:.2f} s); "
        f"largest grid {grid} cores, largest LX estimate {lx / 1024:.0f} KiB per core"
    )
