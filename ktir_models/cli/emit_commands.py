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
    from ..model.emitted import emitted_fields, emitted_nodes
    from ..model.manifest import load_manifest

    manifest = load_manifest(directory, host_scalars=True)  # the typed manifest, as a session reads it
    fields, nodes = emitted_fields(manifest), emitted_nodes(manifest)
    lx = max(n.lx_estimate for n in nodes)
    grid = max(n.cores for n in nodes)
    print(
        f"emit: {spec.name} {manifest.mode} m={fields.m} past={fields.past} "
        f"capacity={fields.capacity}: {len(nodes)} nodes in {directory} ({seconds:.2f} s); "
        f"largest grid {grid} cores, largest LX estimate {lx / 1024:.0f} KiB per core"
    )


@app.command()
def generate(
    model: str = typer.Argument(..., help="Registry name, local checkpoint dir, or HF repo id."),
    prompt: Optional[str] = typer.Option(
        None, "--prompt", help="Text to continue (the checkpoint's tokenizer); the answer streams as text."
    ),
    chat: bool = typer.Option(False, "--chat", help="Wrap --prompt in the checkpoint's chat template (instruct models)."),
    tokens: Optional[int] = typer.Option(
        None, "--tokens", min=1, help="Without --prompt: M golden-convention prompt ids (default 8)."
    ),
    steps: Optional[int] = typer.Option(
        None, "--steps", min=0,
        help=f"Greedy decode steps N after the prefill, stopping at EOS (default {PROMPT_STEPS} with --prompt, else 4).",
    ),
    weights: str = typer.Option("hub", "--weights", help="hub, synthetic, or a local checkpoint dir."),
    golden: str = typer.Option(
        "live", "--golden", help="live (check every step against transformers' greedy generation) or none."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of --weights synthetic."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="With --prompt: also one line per pass."),
    backend: str = backend_option(),
    device: str = device_option(),
) -> None:
    """Prefill the prompt, then up to N greedy decode steps on the KV cache our programs wrote.

    With --golden live (the default) every pass's logits are judged against transformers fed the
    same tokens, and the tokens against transformers' own greedy generation; exit 1 names the first
    step that differs. Exit codes: 0 pass, 1 mismatch, 2 bad input.
    """
    from ..errors import Mismatch, UserError
    from ..model.registry import resolve_model
    from ..model.weights import get_checkpoint

    if golden not in ("live", "none"):
        raise UserError(f"--golden {golden}: expected live or none")
    if prompt is not None and tokens is not None:
        raise UserError("--prompt and --tokens: give one of them (--tokens means synthetic prompt ids)")
    if chat and prompt is None:
        raise UserError("--chat: needs --prompt")
    if steps is None:
        steps = PROMPT_STEPS if prompt is not None else 4
    check_seed(seed)
    array_backend = build_backend(backend, device)
    spec = resolve_model(model)
    if prompt is None:  # a --prompt's length is checked once it is tokenised (generate_output.py)
        from .generate_output import DEFAULT_TOKENS

        check_positions(spec.config, spec.name, past=0, tokens=(tokens or DEFAULT_TOKENS) + steps,
                        what="--tokens + --steps")
    ckpt = get_checkpoint(spec, weights, seed=seed)
    from .generate_output import run_and_print

    failures = run_and_print(ckpt, spec, weights, prompt, chat, tokens, steps, golden == "live", quiet, verbose,
                             array_backend)
    if failures:
        raise Mismatch("generate: FAIL: " + " | ".join(failures))
