"""`ktir-models emit` (and `generate`): our own KTIR emitter, over :func:`ktir_models.api.emit`
and :func:`ktir_models.api.generate`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from .. import api
from ..api.generate import PROMPT_STEPS, TOKEN_STEPS
from ..errors import Mismatch
from .app import app
from .backend_options import backend_option, device_option


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
    report = api.emit(model, out=out, mode=mode, tokens=tokens, past=past, capacity=capacity, force=force)
    print(report.render())


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
        help=f"Greedy decode steps N after the prefill, stopping at EOS (default {PROMPT_STEPS} with --prompt, "
             f"else {TOKEN_STEPS}).",
    ),
    weights: str = typer.Option("hub", "--weights", help="hub, synthetic, or a local checkpoint dir."),
    golden: str = typer.Option(
        "live", "--golden", help="live (check every step against transformers' greedy generation) or none."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of --weights synthetic."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="With --prompt: also one line per pass."),
    ids: bool = typer.Option(False, "--ids", help="With --prompt: also list the generated token ids."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report as JSON here."),
    force: bool = typer.Option(False, "--force", help="Let --json replace an existing file that is not JSON."),
    backend: str = backend_option(),
    device: str = device_option(),
) -> None:
    """Prefill the prompt, then up to N greedy decode steps on the KV cache our programs wrote.

    With --golden live (the default) every pass's logits are judged against transformers fed the
    same tokens, and the tokens against transformers' own greedy generation; exit 1 names the first
    step that differs. With --prompt the text streams, then the check lines; the token ids only
    with --ids (or in the --json report). Exit codes: 0 pass, 1 mismatch, 2 bad input.
    """
    passes = (steps if steps is not None else TOKEN_STEPS) + 1
    bar = _ProgressBar(passes, enabled=prompt is None and not quiet and sys.stderr.isatty())
    try:
        report = api.generate(model, prompt=prompt, chat=chat, tokens=tokens, steps=steps, weights=weights,
                              golden=golden, seed=seed, quiet=quiet, verbose=verbose, ids=ids,
                              json=json_path, force=force, backend=backend, device=device,
                              stream=_write, on_step=bar.update)
    finally:
        bar.close()
    if not report.passed:
        raise Mismatch(report.mismatch)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


class _ProgressBar:
    """A pass-count bar on stderr (token ids only: with a prompt the text itself shows progress),
    opened at the first pass so that it never precedes the ``generate:`` line."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.bar = None

    def update(self, step: api.GenerationStep) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, unit="pass", file=sys.stderr, leave=False, desc="generate")
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
