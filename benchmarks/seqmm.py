"""Time the native fixed-order K-block matmul (ktir_models.ktir.backends.seqmm) against the
emulator's BLAS path: f32 copies of the f16 weights, one batched f32 matmul for the trips'
partials, then the f16 chain of the partials.

Weights are cycled over more than 64 MB, so every call streams its weight from memory as a
decode step does (the weights of a real model do not fit in cache).

    python benchmarks/seqmm.py [--reps 5] [--mb 80]
    KTIR_MODELS_NATIVE=avx2 python benchmarks/seqmm.py   # the AVX2 path on an AVX-512 machine
    python benchmarks/seqmm.py --decode [--mb 400]       # GB/s of smollm2-135m's decode GEMVs
    python benchmarks/seqmm.py --lm-head [--reps 5]      # the scratchy prefill lm_head K-loop

Prints microseconds per call (best of --reps rounds) and the ratio BLAS / kernel (> 1: the
kernel is faster). ``--decode`` instead streams the decode calls of a smollm2-135m pass as the
programs issue them (one [N, K] weight viewed as [C, N/C, K], f32 accumulator given) over --mb
MB of weights (more than the L3 of the dev VM, 300 MB) and prints the weight bytes read per
second, median of --reps rounds, next to a plain read of a large array with the same thread
counts, measured in the same run: a VM's memory bandwidth moves by +-30% from minute to minute
(and a second vCPU sometimes adds none), so only same-run ratios mean anything.

``--lm-head`` times the scratchy smollm2-135m prefill lm_head (node451.mlir) as the stacked tape
calls the kernel: the 32 cores' A rows as one [1, 32, 576] row block (row stride 576, shared over
c), each of the three [1, 16384, 576] slices of the [49152, 576] f16 weight (transpose_b), a
zero f16 accumulator given, trips=144 x kb=4, f16 partials and accumulator; next to the same
problem as one trip (kb=576), as 9 x 64 (node10's blocking), and torch / numpy f32 matmuls of the
same shapes. Prints ms per call and GMAC/s (best of --reps passes over the three slices).
"""

from __future__ import annotations

import argparse
import ctypes
import time
from dataclasses import dataclass

import numpy as np

from ktir_models.ktir.backends import seqmm
from ktir_models.ktir.backends.f16_chain import chain_add_f16


@dataclass(frozen=True)
class Case:
    name: str
    M: int          # rows of a (decode 1, prefill 32)
    N: int
    trips: int
    kb: int
    transpose_b: bool

    @property
    def K(self) -> int:
        return self.trips * self.kb


CASES = [
    Case("decode GEMV nn 1x576 @ 576x1536, 9x64", 1, 1536, 9, 64, False),
    Case("decode GEMV nt 1x576 @ (1536x576)^T, 9x64", 1, 1536, 9, 64, True),
    Case("decode GEMV nn 1x2048 @ 2048x2048, 1x2048", 1, 2048, 1, 2048, False),
    Case("decode GEMV nt 1x2048 @ (2048x2048)^T, 1x2048", 1, 2048, 1, 2048, True),
    Case("lm_head nt 1x576 @ (49152x576)^T, 288x2", 1, 49152, 288, 2, True),
    Case("prefill nt 32x576 @ (1536x576)^T, 9x64", 32, 1536, 9, 64, True),
]


def _blas(a32: np.ndarray, w32: np.ndarray, case: Case) -> np.ndarray:
    """The emulator's current path: f32 partials by one batched BLAS matmul, then the f16 chain."""
    T, kb, M = case.trips, case.kb, case.M
    A3 = a32.reshape(M, T, kb).transpose(1, 0, 2)                      # [T, M, kb]
    B3 = (w32.T if case.transpose_b else w32).reshape(T, kb, case.N)  # [T, kb, N]
    parts = np.matmul(A3, B3)                                          # [T, M, N] f32
    return chain_add_f16(np.zeros((M, case.N), np.float16), parts)


def _best(fn, weights, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for w in weights:
            fn(w)
        best = min(best, (time.perf_counter() - t0) / len(weights))
    return best * 1e6


def run_case(case: Case, reps: int, mb: float, rng) -> str:
    shape = (case.N, case.K) if case.transpose_b else (case.K, case.N)
    copies = max(2, int(mb * 2**20 // (2 * case.N * case.K)) + 1)
    ws = [(rng.standard_normal(shape) * 0.05).astype(np.float16) for _ in range(copies)]
    w32s = [w.astype(np.float32) for w in ws]
    a = rng.standard_normal((1, case.M, case.K)).astype(np.float16)
    a32 = a[0].astype(np.float32)
    kw = dict(trips=case.trips, kb=case.kb, transpose_b=case.transpose_b,
              part_dtype=np.float16, acc_dtype=np.float16)

    # the same bits as the definition (checked once per case, on the first weight)
    ref = seqmm.kloop(a, ws[0][None], None, **kw, threads=1)
    assert np.array_equal(ref.view(np.uint16), seqmm.kloop(a, ws[0][None], None, **kw).view(np.uint16))

    t1 = _best(lambda w: seqmm.kloop(a, w[None], None, **kw, threads=1), ws, reps)
    t2 = _best(lambda w: seqmm.kloop(a, w[None], None, **kw, threads=2), ws, reps)
    tb = _best(lambda w: np.matmul(a32.reshape(case.M, case.trips, case.kb).transpose(1, 0, 2),
                                   (w.T if case.transpose_b else w).reshape(case.trips, case.kb, case.N)),
               w32s, reps)
    tc = _best(lambda w: _blas(a32, w, case), w32s, reps)
    return (f"{case.name:44s} {copies:4d} {t1:9.0f} {t2:9.0f} {tb:10.0f} {tc:10.0f} "
            f"{tc / t2:8.2f}")


@dataclass(frozen=True)
class DecodeCall:
    """One GEMV of a decode pass: a [C * rows, K] weight read as [C, rows, K] (transpose_b)."""
    C: int
    rows: int
    K: int


# smollm2-135m decode: q/o projections, k/v, down, lm_head (K split in two trips), the small
# one (as listed by a pass's per-call kernel profile)
DECODE_CALLS = [DecodeCall(24, 64, 576), DecodeCall(9, 64, 576), DecodeCall(9, 64, 1536),
                DecodeCall(32, 1536, 288), DecodeCall(3, 64, 576)]


def _read_bandwidth(threads: int, nbytes: float = 300e6) -> float:
    """GB/s of a plain sum over a large f32 array with `threads` threads (torch when installed,
    else numpy on one thread): the memory system's rate in the same minutes."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None and threads > 1:
        return float("nan")
    x = np.ones(int(nbytes // 4), np.float32)
    if torch is not None:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        xt = torch.from_numpy(x)
        fn = lambda: xt.sum()  # noqa: E731
    else:
        fn = lambda: x.sum()  # noqa: E731
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    if torch is not None:
        torch.set_num_threads(before)
    return x.nbytes / best / 1e9


def run_decode(reps: int, mb: float) -> None:
    """GB/s of each decode call streamed from memory, 1 and 2 threads, rounds interleaved."""
    print(f"{'call (C x rows x K)':24s} {'1 thread':>10s} {'2 threads':>10s}   (weight GB/s, "
          f"median of {reps})")
    for call in DECODE_CALLS:
        nbytes = call.C * call.rows * call.K * 2
        copies = max(2, int(mb * 1e6 // nbytes))
        weights = [np.full((call.C * call.rows, call.K), 0.01, np.float16)
                   .reshape(call.C, call.rows, call.K) for _ in range(copies)]
        a = np.ones((1, 1, call.K), np.float16)
        acc = np.zeros((call.C, 1, call.rows), np.float32)
        rates: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(reps):
            for threads in (1, 2):
                t0 = time.perf_counter()
                for w in weights:
                    seqmm.kloop(a, w, acc, trips=1, kb=call.K, transpose_b=True,
                                part_dtype=np.float32, acc_dtype=np.float32, threads=threads)
                rates[threads].append(nbytes * copies / (time.perf_counter() - t0) / 1e9)
        med = {t: sorted(r)[len(r) // 2] for t, r in rates.items()}
        print(f"{call.C:4d} x {call.rows:4d} x {call.K:5d}       {med[1]:10.1f} {med[2]:10.1f}",
              flush=True)
        del weights
    print(f"{'plain read (same run)':24s} {_read_bandwidth(1):10.1f} {_read_bandwidth(2):10.1f}")


def _lm_head_rows(reps: int, threads: int) -> list[tuple[str, float]]:
    """(label, best seconds per call) for the lm_head cases (see the module docstring)."""
    M, N, K, parts = 32, 16384, 576, 3
    rng = np.random.default_rng(1)
    weight = (rng.standard_normal((parts * N, K)) * 0.05).astype(np.float16)
    slices = [weight[i * N:(i + 1) * N][None] for i in range(parts)]          # [1, N, K] views
    a_mem = rng.standard_normal((M, K)).astype(np.float16)
    a = np.lib.stride_tricks.as_strided(a_mem, shape=(1, M, K),
                                        strides=(0,) + a_mem.strides)          # the tape's rows
    acc = np.zeros((1, M, N), np.float16)
    rows = []
    for trips, kb in [(144, 4), (9, 64), (1, 576)]:
        kw = dict(trips=trips, kb=kb, transpose_b=True, part_dtype=np.float16,
                  acc_dtype=np.float16, threads=threads)
        rows.append((f"kloop {trips}x{kb} f16/f16, {threads}T",
                     _best(lambda b: seqmm.kloop(a, b, acc, **kw), slices, reps) * 1e-6))
    a32 = a_mem.astype(np.float32)
    w32 = [b[0].astype(np.float32) for b in slices]
    rows.append(("numpy f32 matmul A @ B^T", _best(lambda b: a32 @ b.T, w32, reps) * 1e-6))
    try:
        import torch
    except ImportError:
        return rows
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    at = torch.from_numpy(a32)
    wt = [torch.from_numpy(b) for b in w32]
    rows.append((f"torch f32 matmul A @ B^T, {threads}T", _best(lambda b: at @ b.T, wt, reps) * 1e-6))
    torch.set_num_threads(before)
    return rows


def run_lm_head(reps: int) -> None:
    macs = 32 * 16384 * 576
    print(f"lm_head [32 x 576] @ [16384 x 576]^T per call ({macs / 1e6:.0f} M MACs), best of {reps}")
    for threads in (1, 2):
        for label, sec in _lm_head_rows(reps, threads):
            print(f"  {label:36s} {sec * 1e3:8.2f} ms {macs / sec / 1e9:8.1f} GMAC/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="timed rounds per case (best is kept)")
    ap.add_argument("--mb", type=float, default=None,
                    help="f16 weight bytes cycled per case (MB; default 80, --decode 400)")
    ap.add_argument("--decode", action="store_true",
                    help="GB/s of smollm2-135m's decode GEMVs streamed from memory instead")
    ap.add_argument("--lm-head", action="store_true",
                    help="the scratchy prefill lm_head K-loop (trips=144, kb=4) instead")
    args = ap.parse_args()
    if not seqmm.available():
        raise SystemExit(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    if args.lm_head:
        run_lm_head(args.reps)
        return
    if args.decode:
        run_decode(args.reps, 400.0 if args.mb is None else args.mb)
        return
    args.mb = 80.0 if args.mb is None else args.mb
    loaded = seqmm._library()
    lib = loaded.lib
    lib.seqmm_simd_level.argtypes = [ctypes.c_int]
    lib.seqmm_simd_level.restype = ctypes.c_int
    path = ("portable C", "AVX2+FMA+F16C", "AVX-512", "AVX-512 with FP16")[lib.seqmm_simd_level(loaded.force)]
    print(f"seqmm kernel path: {path}; times in us per call (best of {args.reps})")
    print(f"{'case':44s} {'wts':>4s} {'kern 1T':>9s} {'kern 2T':>9s} {'BLAS part':>10s} "
          f"{'BLAS+chain':>10s} {'ratio':>8s}")
    rng = np.random.default_rng(0)
    for case in CASES:
        print(run_case(case, args.reps, args.mb, rng), flush=True)


if __name__ == "__main__":
    main()
