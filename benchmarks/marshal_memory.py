#!/usr/bin/env python
"""Peak memory of marshalling a checkpoint into resident float16 arrays.

    python benchmarks/marshal_memory.py [MODEL] [--weights synthetic|hub|DIR] [--seed N]

Reads every tensor the way the runner does (``Checkpoint.read_f16``, one tensor streamed at a time
through safetensors' ``safe_open``) and keeps all of them, as the runner keeps weights resident in
HBM. Prints the peak RSS of the marshalling process next to the model's f16 weight bytes; the
target is peak < 2x f16 bytes. The synthetic checkpoint (default; llama-3.2-1b) is generated first
if it is not cached, and its generation time is printed; the measurement then runs in a fresh
process so that generation does not count.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

GIB = 1024**3


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def measure(model: str, weights: str, seed: int) -> None:
    from ktir_models.model.registry import resolve_model
    from ktir_models.model.weights.checkpoint import get_checkpoint

    spec = resolve_model(model)
    ckpt = get_checkpoint(spec, weights, seed=seed)
    baseline = current_rss_bytes()
    start = time.perf_counter()
    resident = {name: ckpt.read_f16(name) for name in ckpt.tensor_names()}
    seconds = time.perf_counter() - start
    held = sum(a.nbytes for a in resident.values())
    f16 = spec.config.f16_weight_bytes
    peak = peak_rss_bytes()
    print(f"model            {model} ({ckpt.origin}), {len(resident)} tensors")
    print(f"f16 weight bytes {f16 / GIB:.3f} GiB (held: {held / GIB:.3f} GiB)")
    print(f"baseline RSS     {baseline / GIB:.3f} GiB (interpreter + numpy + safetensors)")
    print(f"peak RSS         {peak / GIB:.3f} GiB = {peak / f16:.2f}x f16 bytes "
          f"({(peak - baseline) / f16:.2f}x above baseline)")
    print(f"marshal time     {seconds:.1f} s ({held / GIB / seconds:.2f} GiB/s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="llama-3.2-1b")
    parser.add_argument("--weights", default="synthetic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_only:
        measure(args.model, args.weights, args.seed)
        return 0
    if args.weights == "synthetic":
        from ktir_models.model.registry import resolve_model
        from ktir_models.model.weights.synthetic import ensure_synthetic, synthetic_dir

        spec = resolve_model(args.model)
        if not (synthetic_dir(spec.name, spec.config, args.seed) / "config.json").is_file():
            start = time.perf_counter()
            directory = ensure_synthetic(spec.name, spec.config, seed=args.seed)
            print(f"generated        {directory} in {time.perf_counter() - start:.1f} s")
    command = [sys.executable, __file__, args.model, "--weights", args.weights, "--seed", str(args.seed),
               "--measure-only"]
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
