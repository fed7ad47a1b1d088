#!/usr/bin/env python
"""Emulated batched decode (a serving step over the paged KV cache) vs. native transformers
batched decode, side by side in one process.

    python benchmarks/serve.py MODEL [--batch B ...] [--context P] [--block-size S]
                               [--weights synthetic|hub|DIR] [--repeat N] [--warmup W] [--json OUT]
                               [--backend numpy|torch] [--device auto|cpu|...]

For each batch size B (default 1, 4, 8 and 16) both sides decode one token for each of B
sequences that already hold P = ``--context`` tokens (default 32):

* emulated: one step of the ``decode`` serving program (B decode rows; docs/serving.md) on a
  ``ServingEngine``: the host tables are written, every node runs, the logits are read. Each
  sequence holds ``ceil((P + 1) / S)`` blocks of the pool. The pool is zeros: the emulated work
  does not depend on the cached values (every block of a block table is gathered and masked);
* native: the family's transformers class in float32 (eager attention), ``[B, 1]`` token ids at
  position P on a ``DynamicCache`` of B x P tokens prepared once; a fresh copy of the cache (made
  outside the timer) is handed to every timed pass.

Reported per B: the median seconds per step of ``--repeat`` passes after ``--warmup`` untimed ones
and the decode tokens/s (B / median) of both sides, and their ratio. torch runs with as many
threads as numpy's BLAS.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forward import blas_threads, native_model, time_passes  # noqa: E402  (shared with forward.py)


def emulated_step(ckpt, name: str, batch: int, context: int, block_size: int, backend: str,
                  device: str):
    """A function running one decode step of ``batch`` sequences at position ``context``."""
    from ktir_models.ktir.backends import make_backend
    from ktir_models.model.emit.serving import ServingShape
    from ktir_models.model.inputs.runtime_inputs import golden_token_ids
    from ktir_models.model.serving.engine import ServingEngine
    from ktir_models.model.serving.pool import BlockPool, blocks_for
    from ktir_models.model.serving.tables import RowRun, StepPlan, step_tables

    per_seq = blocks_for(context + 1, block_size)
    shape = ServingShape(0, batch, block_size, batch * per_seq + 1, per_seq)
    engine = ServingEngine(ckpt, name, backend=make_backend(backend, device))
    step = engine.load(shape)
    pool = BlockPool(batch * per_seq, block_size)
    token = int(golden_token_ids(1, ckpt.config.vocab_size, start=context)[0])
    runs = tuple(RowRun(f"s{b}", (token,), (context,), tuple(pool.allocate(f"s{b}", per_seq)),
                        False, b) for b in range(batch))
    tables = step_tables(StepPlan(0, None, runs), shape, ckpt.config.features.sliding_window)
    return lambda: engine.run(step, tables), engine


def native_step(ckpt, batch: int, context: int):
    """``timed(repeat, warmup)``: the seconds of native decode steps of ``batch`` sequences, each
    on a fresh copy of the prepared cache (copied outside the timer)."""
    import numpy as np
    import torch

    from ktir_models.model.checks.golden import cache_kwarg, output_cache
    from ktir_models.model.inputs.runtime_inputs import golden_token_ids

    model = native_model(ckpt, "f32")
    prefix = torch.as_tensor(np.tile(golden_token_ids(context, ckpt.config.vocab_size), (batch, 1)))
    with torch.no_grad():
        cache = output_cache(model(prefix, use_cache=True))
    next_id = golden_token_ids(1, ckpt.config.vocab_size, start=context)
    token = torch.as_tensor(np.tile(next_id, (batch, 1)))
    positions = torch.full((batch, 1), context, dtype=torch.int64)

    def timed(repeat: int, warmup: int) -> list[float]:
        seconds = []
        for k in range(warmup + repeat):
            fresh = copy.deepcopy(cache)  # outside the timer
            start = time.perf_counter()
            with torch.no_grad():
                model(token, position_ids=positions, use_cache=True, **{cache_kwarg(model): fresh})
            if k >= warmup:
                seconds.append(time.perf_counter() - start)
        return seconds

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="registry name, e.g. smollm2-135m or stories260k")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4, 8, 16], help="batch sizes B")
    parser.add_argument("--context", type=int, default=32,
                        help="tokens each sequence already holds")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--weights", default="synthetic",
                        help="synthetic (default), hub, or a checkpoint dir")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    import torch

    from ktir_models.model.registry import resolve_model
    from ktir_models.model.weights.checkpoint import get_checkpoint

    torch.set_num_threads(blas_threads())
    spec = resolve_model(args.model)
    ckpt = get_checkpoint(spec, args.weights)
    rows = []
    print(f"{'B':>3}  {'emulated s/step':>15}  {'emulated tok/s':>14}  {'native s/step':>13}  "
          f"{'native tok/s':>12}  {'emulated/native time':>20}")
    for batch in args.batch:
        emulated, engine = emulated_step(ckpt, spec.name, batch, args.context, args.block_size,
                                         args.backend, args.device)
        em = statistics.median(time_passes(emulated, args.repeat, args.warmup))
        nat = statistics.median(native_step(ckpt, batch, args.context)(args.repeat, 1))
        row = {"batch": batch, "emulated_s": em, "emulated_tok_s": batch / em, "native_s": nat,
               "native_tok_s": batch / nat, "ratio": em / nat, "compile_s": engine.compile_seconds}
        rows.append(row)
        print(f"{batch:>3}  {em:>15.4f}  {batch / em:>14.1f}  {nat:>13.5f}  {batch / nat:>12.1f}  "
              f"{em / nat:>19.1f}x", flush=True)
    if args.json:
        doc = {"model": spec.name, "context": args.context, "block_size": args.block_size,
               "backend": args.backend, "rows": rows}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
