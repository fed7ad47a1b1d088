#!/usr/bin/env python
"""Where an emulated pass spends its time: seconds per node kind and the native kernel's calls.

    python benchmarks/node_kinds.py MODEL [--program DIR] [--mode decode|prefill] [--tokens M]
                                    [--past P] [--weights synthetic|hub|DIR] [--passes N] [--warmup W]

After ``--warmup`` untimed passes (default 3, as benchmarks/forward.py), ``--passes`` passes are
timed node by node (``Runner.run``'s own per-node seconds) and summed by the manifest's node
``kind`` (gemm, attention, rope, rmsnorm, ...; ``?`` where a manifest has none), averaged per pass.
The native matmul kernel's calls of those passes are counted by operand shapes, with their mean
time: a node whose grid runs core by core shows up as many small calls where a batched grid makes
one call over every core (``C`` > 1 in ``b``'s leading dimension). No native model is loaded.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forward import add_program_arguments, load_pass  # noqa: E402  (shared with forward.py)


def count_kernel_calls(seqmm) -> tuple[collections.Counter, collections.Counter, list[bool]]:
    """Wrap ``seqmm.kloop`` to count calls by shapes while the returned flag is on: (calls,
    seconds, [on]). The builders import it when they compile a plan, so this must run before
    ``Runner.load``."""
    calls: collections.Counter = collections.Counter()
    seconds: collections.Counter = collections.Counter()
    on = [False]
    inner = seqmm.kloop

    def kloop(a, b, acc, **kw):
        start = time.perf_counter()
        out = inner(a, b, acc, **kw)
        if on[0]:
            key = (tuple(a.shape), tuple(b.shape), kw["trips"], kw["kb"], acc is not None)
            calls[key] += 1
            seconds[key] += time.perf_counter() - start
        return out

    seqmm.kloop = kloop
    return calls, seconds, on


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_program_arguments(parser)
    parser.add_argument("--passes", type=int, default=3, help="timed passes (averaged)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed passes first")
    args = parser.parse_args()
    if args.passes < 1 or args.warmup < 0:
        parser.error("--passes must be >= 1 and --warmup >= 0")

    from ktir_models.errors import UserError
    from ktir_models.ktir.backends import make_backend, seqmm

    calls, call_seconds, counting = count_kernel_calls(seqmm)  # before the plans are compiled
    try:
        loaded = load_pass(args, make_backend("numpy", "cpu"))
    except UserError as exc:
        print(f"node_kinds.py: {exc}", file=sys.stderr)
        return 2
    program, manifest, runner, inputs = loaded.program, loaded.manifest, loaded.runner, loaded.inputs
    raw_nodes = json.loads((program / "manifest.json").read_text())["nodes"]
    kinds = {node["mlir"]: node.get("kind", "?") for node in raw_nodes}
    for _ in range(args.warmup):
        runner.run(inputs)
    per_kind: collections.Counter = collections.Counter()
    nodes_of: collections.Counter = collections.Counter(kinds[n.mlir] for n in manifest.nodes)
    totals = []
    counting[0] = True
    for _ in range(args.passes):
        result = runner.run(inputs)
        totals.append(result.seconds)
        for node, seconds in zip(manifest.nodes, result.node_seconds):
            per_kind[kinds[node.mlir]] += seconds / args.passes
    counting[0] = False

    print(f"program  {program} ({manifest.mode}, m={manifest.tokens}, {len(manifest.nodes)} nodes)")
    print(f"passes   {', '.join(f'{1e3 * s:.1f}' for s in totals)} ms (after {args.warmup} warm-up)")
    for kind, seconds in per_kind.most_common():
        print(f"kind     {kind:<24} {1e3 * seconds:9.1f} ms a pass  ({nodes_of[kind]} nodes)")
    for key, n in calls.most_common(12):
        a, b, trips, kb, given = key
        print(f"kernel   a {list(a)} b {list(b)} trips {trips} kb {kb}{' acc' if given else ''}: "
              f"{n / args.passes:.0f} calls a pass, {1e3 * call_seconds[key] / n:.3f} ms each")
    if not calls:
        print("kernel   no native kernel calls (BLAS order, or no f16 matmul)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
