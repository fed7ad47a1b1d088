"""The native f16 kernel's share of a forward pass: its calls recorded in one pass, then replayed.

    python benchmarks/kernel_calls.py MODEL [--program DIR] [--mode decode|prefill] [--tokens M]
                                      [--past P] [--weights synthetic|hub|DIR] [--reps 7]
                                      [--variant NAME=-DX=1,-DY=2 ...]

One process: the program runs three warm-up passes on the numpy back end (the weights and
inputs as ``forward.py`` binds them, seed 0), then one pass in which every call of the kernel
(``seqmm``) is timed where it runs and its signature recorded (operand strides, C, M, N, trips,
kb, layout, dtypes, threads, the output's groups: ``gG`` after a shape). The calls are then
replayed back to back on fresh operands of the same shapes and strides, each call's weight its
own array, so that every weight streams from memory as in a pass. Printed: per call signature,
the calls, weight MB, the replayed ms and GB/s (and GMAC/s), then the pass's kernel ms in place
against the replay's: what the surrounding pass (Python between calls, the weights' real
layout, the worker threads' wake-ups) adds.

``--variant`` builds the kernel's C source again with extra compiler defines (its tunables, e.g.
``-DNT_ITEM_MAX=0``; ``base=`` builds it unchanged) into a temporary folder, replays the same
calls with each build in turns (the order reversed every other round, median of ``--reps``),
checks that every build writes the same output bits as the first, and prints each build's time
and speed relative to the first. The machine's speed drifts; only same-run ratios mean anything.
"""

from __future__ import annotations

import argparse
import array
import collections
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from forward import add_program_arguments, load_pass  # noqa: E402


def record_calls(args):
    """The kernel calls of one warm pass: ({signature: count}, seconds in the kernel)."""
    from ktir_models.errors import UserError
    from ktir_models.ktir.backends import make_backend, seqmm

    if not seqmm.available():
        raise UserError(f"the native kernel is unavailable: {seqmm.unavailable_reason()}")
    loaded = load_pass(args, make_backend("numpy", "auto"))
    runner, inputs = loaded.runner, loaded.inputs
    for _ in range(3):
        runner.run(inputs)
    calls: collections.Counter = collections.Counter()
    spent = [0.0]
    run = seqmm._run

    def timed(loaded, call, a, b, out, *acc_ptr):
        t = time.perf_counter()
        res = run(loaded, call, a, b, out, *acc_ptr)
        spent[0] += time.perf_counter() - t
        calls[(call.sa, call.sb, call.rest, call.groups)] += 1
        return res

    seqmm._run = timed
    try:
        runner.run(inputs)
    finally:
        seqmm._run = run
    return calls, spent[0]


def operands(signature, count: int, rng) -> list:
    """``count`` fresh (a, b, out, packed arguments) for one call signature."""
    sa, sb, rest, groups = signature
    C, M, N, trips, kb, nt, _, acc16 = rest[:8]
    K = trips * kb
    a_len = (C - 1) * sa[0] + (M - 1) * sa[1] + (K - 1) * sa[2] + 1
    b_len = (C - 1) * sb[0] + ((N - 1) * sb[1] + K if nt else (K - 1) * sb[1] + N)
    made = []
    for _ in range(count):
        a = rng.standard_normal(a_len).astype(np.float16)
        b = (rng.standard_normal(b_len) * 0.05).astype(np.float16)
        out = np.zeros(C * M * N, np.float16 if acc16 else np.float32)
        packed = array.array("q", (a.ctypes.data, *sa, b.ctypes.data, *sb, out.ctypes.data, *rest,
                                          0, 0, 0, 0, 0, 0, groups, 0, 0))  # no warming; a given
        # acc is read from out (zeros), laid out in the call's groups
        made.append((a, b, out, packed))
    return made


def build(defines: list[str], folder: Path, name: str) -> ctypes.CDLL:
    """The kernel library compiled with ``defines`` added to the package's own flags."""
    from ktir_models.ktir.backends import seqmm
    from ktir_models.ktir.backends.native_build import compilers

    target = folder / f"lib-{name}.so"
    cc = compilers()[0]
    subprocess.run([cc, *seqmm._CFLAGS, *defines, "-o", str(target),
                    *map(str, seqmm._SOURCES), *seqmm._LDFLAGS], check=True)
    lib = ctypes.CDLL(str(target))
    lib.seqmm_kloop_packed.argtypes = [ctypes.c_void_p]
    return lib


def replay(fn, made: list) -> float:
    start = time.perf_counter()
    for _, _, _, packed in made:
        fn(packed.buffer_info()[0])
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_program_arguments(parser)
    parser.add_argument("--reps", type=int, default=7, help="replay rounds (median)")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=-DX=1,-DY=2: a build with these defines (base= : none)")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be >= 1")
    from ktir_models.errors import UserError

    try:
        calls, in_pass = record_calls(args)
    except UserError as exc:
        print(f"kernel_calls.py: {exc}", file=sys.stderr)
        return 2
    if not calls:
        print("kernel_calls.py: the pass made no native kernel call (BLAS order, or no f16 matmul)")
        return 0
    rng = np.random.default_rng(0)
    groups = [(sig, operands(sig, n, rng)) for sig, n in calls.items()]
    every = [call for _, made in groups for call in made]

    from ktir_models.ktir.backends import seqmm

    default = seqmm._library().lib.seqmm_kloop_packed
    for _ in range(2):
        replay(default, every)
    print(f"{'C x M x N x K (trips x kb)':34s} {'calls':>5s} {'MB':>8s} {'ms':>8s} {'GB/s':>7s} "
          f"{'GMAC/s':>7s}")
    total_bytes = 0
    total = 0.0
    for (sa, sb, rest, out_groups), made in groups:
        C, M, N, trips, kb = rest[:5]
        nbytes = 2 * C * N * trips * kb * len(made)
        sec = statistics.median(replay(default, made) for _ in range(args.reps))
        total_bytes += nbytes
        total += sec
        shape = (f"{C} x {M} x {N} x {trips * kb} ({trips} x {kb}){' nt' if rest[5] else ''}"
                 f"{f' g{out_groups}' if out_groups > 1 else ''}")
        print(f"{shape:34s} {len(made):5d} {nbytes / 1e6:8.1f} {sec * 1e3:8.2f} "
              f"{nbytes / sec / 1e9:7.2f} {nbytes / 2 * M / sec / 1e9:7.1f}")
    print(f"replayed: {total * 1e3:.1f} ms for {total_bytes / 1e6:.0f} MB of weights "
          f"({total_bytes / total / 1e9:.1f} GB/s); in the pass: {in_pass * 1e3:.1f} ms "
          f"({in_pass / total:.2f}x the replay)")
    if not args.variant:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        builds = []
        for spec in args.variant:
            name, _, defines = spec.partition("=")
            builds.append((name, build([d for d in defines.split(",") if d], Path(tmp), name)))
        outputs = {}
        for name, lib in builds:
            for _, _, out, _ in every:
                out[:] = 0
            replay(lib.seqmm_kloop_packed, every)
            outputs[name] = [out.copy() for _, _, out, _ in every]
        first = builds[0][0]
        for name, _ in builds[1:]:
            same = all(np.array_equal(x.view(np.uint8), y.view(np.uint8))
                       for x, y in zip(outputs[first], outputs[name]))
            print(f"{name}: {'same bits as' if same else 'OTHER BITS THAN'} {first}")
        times: dict[str, list[float]] = {name: [] for name, _ in builds}
        for r in range(args.reps):
            for name, lib in (builds if r % 2 == 0 else builds[::-1]):
                times[name].append(replay(lib.seqmm_kloop_packed, every))
        base = statistics.median(times[first])
        for name, _ in builds:
            sec = statistics.median(times[name])
            print(f"{name:16s} {sec * 1e3:8.2f} ms {total_bytes / sec / 1e9:6.2f} GB/s "
                  f"x{base / sec:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
