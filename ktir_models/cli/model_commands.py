"""`ktir-models forward`: run a whole-model KTIR program and compare it with a golden.

Exit codes: 0 pass (or ran with ``--golden none``), 1 mismatch, 2 bad input. The command parses
its options, calls :func:`ktir_models.api.forward` and prints its report; the only file written is
the ``--json`` report (atomically, by the API).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import api
from ..errors import Mismatch
from .app import app
from .backend_options import backend_option, device_option, lx_model_option


@app.command()
def forward(
    model: str = typer.Argument(..., help="Registry name, local checkpoint dir, or HF repo id."),
    program: Optional[Path] = typer.Option(
        None, "--program", help="Fixture dir (manifest.json + node*.mlir); default: emit our own program."
    ),
    mode: Optional[str] = typer.Option(None, "--mode", help="decode or prefill (must agree with --program)."),
    tokens: Optional[int] = typer.Option(None, "--tokens", help="Tokens per pass m (must agree with --program)."),
    past: int = typer.Option(
        0, "--past", min=0, help="Emitted programs only: tokens already in the KV cache (our prefill writes it first)."
    ),
    weights: str = typer.Option("hub", "--weights", help="hub, synthetic, or a local checkpoint dir."),
    golden: str = typer.Option(
        "auto",
        "--golden",
        help="vendored (golden.f16.gz in the program dir), live (transformers), PATH, none; "
        "auto = vendored if present, else live.",
    ),
    repeat: int = typer.Option(1, "--repeat", min=1, help="Passes to run (timings are medians)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report as JSON here."),
    force: bool = typer.Option(False, "--force", help="Let --json replace an existing file that is not JSON."),
    seed: int = typer.Option(0, "--seed", help="Seed of --weights synthetic."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    latency: bool = typer.Option(False, "--latency", help="Also print the latency model per node (docs/latency.md)."),
    diagnose: bool = typer.Option(False, "--diagnose", help="On a mismatch, name the first node out of its f16 band."),
    backend: str = backend_option(),
    device: str = device_option(),
    lx_model: str = lx_model_option(),
    prompt: Optional[str] = typer.Option(
        None, "--prompt", help="Real text as the pass's tokens (the checkpoint's tokenizer); adds text metrics."
    ),
    text: Optional[Path] = typer.Option(None, "--text", help="Like --prompt, the text read from this UTF-8 file."),
    last_token: bool = typer.Option(
        False, "--last-token",
        help="Prefill: the lm_head and the check for the last row only (bit for bit the all-rows run's).",
    ),
) -> None:
    """Run MODEL's KTIR forward on the emulator and compare the logits with a golden.

    Pass: top-1 agrees on every row (or the row is a near-tie within 2^-6 max|golden|, reported) and
    max|logits - golden| <= 2^-6 max|golden| (docs/forward.md).
    Exit codes: 0 pass (or ran, with --golden none), 1 mismatch, 2 bad input.
    """
    report = api.forward(model, program=program, mode=mode, tokens=tokens, past=past, weights=weights,
                         golden=golden, repeat=repeat, json=json_path, force=force, seed=seed,
                         quiet=quiet, latency=latency, diagnose=diagnose, backend=backend,
                         device=device, lx_model=lx_model, prompt=prompt, text=text,
                         last_token=last_token)
    print(report.render())
    if not report.passed:
        raise Mismatch(report.mismatch)
