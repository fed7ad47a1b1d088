"""`ktir-models serve`: continuous batching over a paged KV cache, checked against transformers.

Exit codes: 0 pass (or ran, with ``--golden none``), 1 a step or a request differs from
transformers (the message names the step, the request and both tokens), 2 bad input (the requests
file's line, an option, a request the pool can never hold). The only file written is ``--json``
(atomically).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from .app import app
from .backend_options import backend_option, device_option


@app.command()
def serve(
    model: str = typer.Argument(..., help="Registry name, local checkpoint dir, or HF repo id."),
    requests: Path = typer.Option(
        ..., "--requests", help="JSON Lines: {id, prompt|ids, max_new_tokens, arrival?}."),
    max_seqs: int = typer.Option(4, "--max-seqs", help="Sequences served together (slots)."),
    block_size: int = typer.Option(16, "--block-size", help="Token slots per KV-cache block."),
    kv_blocks: Optional[int] = typer.Option(
        None, "--kv-blocks",
        help="KV blocks in the pool (default: enough for --max-seqs of the largest requests)."),
    chunk: int = typer.Option(32, "--chunk", help="Prefill tokens per step (one sequence's)."),
    weights: str = typer.Option("hub", "--weights", help="hub, synthetic, or a checkpoint dir."),
    golden: str = typer.Option(
        "live", "--golden", help="live (each sequence against transformers alone) or none."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the report here."),
    force: bool = typer.Option(
        False, "--force", help="Let --json replace an existing file that is not JSON."),
    seed: int = typer.Option(0, "--seed", help="Seed of --weights synthetic."),
    backend: str = backend_option(),
    device: str = device_option(),
) -> None:
    """Serve the requests with continuous batching (prefill chunks interleaved with decode steps)
    over a paged KV cache, greedy, each stopping at EOS or its max_new_tokens.

    With --golden live every step's logits of every sequence are judged against transformers running
    that sequence alone, and every sequence's tokens against transformers' greedy generation.
    Exit codes: 0 pass, 1 mismatch, 2 bad input.
    """
    from ..api import serve as run
    from ..errors import Mismatch

    report = run(model, requests, max_seqs=max_seqs, block_size=block_size, kv_blocks=kv_blocks,
                 chunk=chunk, weights=weights, golden=golden, backend=backend, device=device,
                 seed=seed, json=json_path, force=force, quiet=not sys.stderr.isatty())
    print(report.render(), flush=True)
    if not report.passed:
        raise Mismatch("serve: FAIL: " + report.failures[0])
