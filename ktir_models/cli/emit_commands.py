"""`ktir-models emit` (and `generate`): our own KTIR emitter."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from .app import app
from .backend_options import backend_option, build_backend, device_option
from .option_checks import check_pass_options, check_positions, check_seed

#: Default decode steps of `generate --prompt`: a story of a few paragraphs (stops earlier at EOS).
PROMPT_STEPS = 200


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
    check_pass_options(spec.config, spec.name, mode, tokens, past, capacity)  # before anything is emitted
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


@app.command()
def generate(
    model: str = typer.Argument(..., help="Registry name, local checkpoint dir, or HF repo id."),
    tokens: int = typer.Option(8, "--tokens", min=1, help="Prompt tokens M (golden-convention ids), one prefill pass."),
    steps: int = typer.Option(4, "--steps", min=0, help="Greedy decode steps N after the prefill."),
    weights: str = typer.Option("hub", "--weights", help="hub, synthetic, or a local checkpoint dir."),
    golden: str = typer.Option("none", "--golden", help="live (check every pass against transformers) or none."),
    seed: int = typer.Option(0, "--seed", help="Seed of --weights synthetic."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    backend: str = backend_option(),
    device: str = device_option(),
) -> None:
    """Prefill M tokens, then N greedy decode steps on the KV cache our programs wrote."""
    import sys

    from ..errors import Mismatch, UserError
    from ..model.emit.generation import generate as run_generation
    from ..model.registry import resolve_model
    from ..model.report import judge
    from ..model.weights import get_checkpoint

    if golden not in ("live", "none"):
        raise UserError(f"--golden {golden}: expected live or none")
    array_backend = build_backend(backend, device)
    spec = resolve_model(model)
    ckpt = get_checkpoint(spec, weights, seed=seed)
    bar = None
    if not quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=steps + 1, unit="pass", file=sys.stderr, leave=False, desc="generate")
    start = time.perf_counter()
    try:
        result = run_generation(ckpt, spec.name, tokens, steps, golden=golden == "live",
                                progress=(lambda _s: bar.update(1)) if bar is not None else None,
                                backend=array_backend)
    finally:
        if bar is not None:
            bar.close()
    total = time.perf_counter() - start

    failures = []
    print(f"generate: {spec.name} ({getattr(ckpt, 'origin', weights)}), prefill {tokens} tokens, {steps} decode steps, "
          f"on {array_backend.describe()}")
    for s in result.steps:
        what = "prefill" if s.step == 0 else f"step {s.step}"
        line = (f"  {what:>8}: past {s.past:>4}, in {s.tokens if len(s.tokens) <= 4 else str(s.tokens[:4])[:-1] + ', ...]'}"
                f" -> next {s.next_token}  ({s.seconds:.2f} s, LX peak {s.max_node_lx / 1024:.0f} KiB)")
        if s.metrics is not None:
            verdict = judge(s.metrics)
            line += f"  [{'ok' if verdict.passed else 'FAIL'}] {s.metrics.summary()}"
            if not verdict.passed:
                failures.append(f"{what}: " + "; ".join(verdict.reasons))
        print(line)
    print(f"  generated: {result.generated}  ({total:.1f} s in all)")
    if failures:
        raise Mismatch("generate: FAIL: " + " | ".join(failures))
