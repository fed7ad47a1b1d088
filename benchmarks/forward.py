#!/usr/bin/env python
"""Emulated forward vs. native transformers forward, side by side in one process.

    python benchmarks/forward.py MODEL [--program DIR] [--mode decode|prefill] [--tokens M]
                                 [--past P] [--weights synthetic|hub|DIR] [--repeat N] [--warmup W]
                                 [--alternate] [--last-token] [--bandwidth-mib MIB] [--json OUT]
                                 [--kernel-threads auto|1|2]
                                 [--backend numpy|torch] [--device auto|cpu|cuda|cuda:N|mps]

Without ``--program`` our own emitted program for MODEL is used (``--mode``/``--tokens``/``--past``
choose it). Both sides run the same weights (synthetic by default) and the same golden-convention
tokens. After warm-up passes (the emulator: ``--warmup``, default 3, since plans build their batched
forms at their second run and record their tapes at their third; native: one), every pass is timed and the median of ``--repeat`` (>= 5)
passes is reported:

* emulated: ``Runner.run`` of the model layer (weights resident in HBM, plans compiled, inputs
  written into their resident buffers), i.e. exactly what ``ktir-models forward`` times, on the
  emulator's array back end ``--backend``/``--device`` (default numpy on the cpu; the figures name
  it in ``backend``, ``device`` and ``backend_version``);
* native: ``LlamaForCausalLM`` in float32 (eager attention) on the same tokens and positions and
  on the same device as the emulator's back end (the cpu for numpy); for a
  program with ``past > 0`` the prefix KV cache is computed once and a fresh copy of it (made
  outside the timer) is handed to every timed pass.

torch runs with as many intra-op threads as numpy's BLAS (read from ``OPENBLAS_NUM_THREADS`` /
``OMP_NUM_THREADS``, else the number of CPUs), so both sides get the same cores. Also printed:
parse + compile seconds, marshal seconds, the bytes of weights mapped from their files and of the
weight copies the native kernel reads (docs/emulator.md, "Row-major weight copies"), the
emulator's anonymous and file-mapped resident pages, and the peak RSS of the process (mapped file
pages count in it), both after the emulated passes (the emulator's own peak) and at the end
(including the transformers model). On
the cpu the native pass is also timed with one torch thread (``native_1thread_ms``,
``ratio_1thread``): on a machine shared with other jobs torch's two threads can stall each other,
see docs/performance.md; ``native_threads_helped`` is False (and a note printed) where the native
pass on several threads took at least 0.9x its one-thread time.
On a GPU (``--backend torch --device cuda``) the native pass runs on that GPU, the floor below
uses the GPU memory's read bandwidth, and the one-thread timing is skipped (threads are a cpu
matter).
``--alternate`` times the emulated and native passes in turns (after both sides' warm-up), so a
drift of the machine's speed during the run moves both sides alike (``alternate`` in the JSON).

The memory floor: the same run measures the machine's read bandwidth (:func:`read_bandwidth`: a
sum over a ``--bandwidth-mib`` array, default 512 MiB, split between the BLAS threads, best of
five) and prints each side's fraction of its floor, the f16 weight bytes the pass reads over that
bandwidth (``floor_ms``, ``emulated_floor_fraction``, ``native_floor_fraction``: 1.0 would be a
pass that only streams its weights once). A pass that reads more bytes (native f32 reads twice)
or does more than stream them stays below 1.

``--last-token`` runs the emulated prefill with the lm_head over the last row only
(``Runner.run(..., last_token=True)``, docs/performance.md); its logits are that one row.

``--kernel-threads`` fixes the native f16 kernel's threads for every call (``seqmm.set_threads``;
default ``auto``: two threads for a call of at least 256K multiply-adds, one below), the same bits
whatever the count: to measure what the second core buys (``kernel_threads`` in the JSON).

Large models (an 8B model's f32 transformers copy does not fit beside its f16 weights):
``--native-dtype bf16`` loads the native model in bfloat16 (the family's own transformers class),
and ``--native-after`` releases the emulator (its machine, HBM and plans) before the native model
is loaded, so the two are never resident together; the output says so (``native_after``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def blas_threads() -> int:
    """The thread count numpy's OpenBLAS uses: its env vars if set, else every CPU this process
    may run on."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def read_bandwidth(mib: int, threads: int, tries: int = 5, device: str = "cpu") -> float:
    """Bytes per second read by summing a ``mib`` MiB float32 array, split into ``threads``
    contiguous parts summed at once (numpy releases the GIL in reductions), best of ``tries``:
    the machine's streaming read rate, the denominator of a pass's memory floor. On a torch
    device other than the cpu, the device's own memory: one ``torch.sum`` there, synchronised."""
    if device != "cpu":
        return _device_read_bandwidth(mib, tries, device)
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    data = np.ones(mib * 2**20 // 4, dtype=np.float32)  # written once, so every page is resident
    parts = np.array_split(data, threads)
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(tries):
            start = time.perf_counter()
            list(pool.map(np.sum, parts))
            best = min(best, time.perf_counter() - start)
    return data.nbytes / best


def _device_read_bandwidth(mib: int, tries: int, device: str) -> float:
    import torch

    data = torch.ones(mib * 2**20 // 4, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if data.device.type == "cuda" else torch.mps.synchronize
    data.sum()
    sync()
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        data.sum()
        sync()
        best = min(best, time.perf_counter() - start)
    return data.numel() * 4 / best


def floor_figures(weight_bytes: int, bandwidth: float, emulated_ms: float,
                  native_ms: float) -> dict:
    """The pass's memory floor (its f16 weight bytes over the read bandwidth) and each side's
    fraction of it (floor / measured: 1.0 streams the weights once at full rate)."""
    floor_ms = 1e3 * weight_bytes / bandwidth
    return {"read_bandwidth_gbs": bandwidth / 1e9, "weight_bytes_read": weight_bytes,
            "floor_ms": floor_ms, "emulated_floor_fraction": floor_ms / emulated_ms,
            "native_floor_fraction": floor_ms / native_ms}


#: two native threads taking at least this fraction of one thread's time bought nothing
THREADS_HELPED_BELOW = 0.9


def threads_helped(native_ms: float, native_1t_ms: float | None, threads: int) -> bool | None:
    """Whether the native pass on ``threads`` threads ran clearly faster than on one (under
    THREADS_HELPED_BELOW of its time); None where there is nothing to compare (one thread, or
    no one-thread timing). False flags a ratio to read with care: torch's threads stalled on a
    busy machine, or a pass too small to split (docs/performance.md)."""
    if threads <= 1 or not native_1t_ms:
        return None
    return native_ms < THREADS_HELPED_BELOW * native_1t_ms


def resolve_program(spec, program: str | None, mode: str | None, tokens: int | None, past: int) -> Path:
    if program is not None:
        return Path(program)
    from ktir_models.model.emit import cached_program

    return cached_program(spec.config, mode or "decode", tokens, past, name=spec.name)


def add_program_arguments(parser) -> None:
    """MODEL and the arguments that choose its program and weights (shared by the benchmarks)."""
    parser.add_argument("model", help="registry name, e.g. smollm2-135m or llama-3.2-1b")
    parser.add_argument("--program", help="fixture dir (manifest.json + node*.mlir); default: our emitted program")
    parser.add_argument("--mode", choices=("decode", "prefill"), help="emitted program: decode or prefill")
    parser.add_argument("--tokens", type=int, help="emitted program: tokens per pass m")
    parser.add_argument("--past", type=int, default=0, help="emitted program: tokens already in the KV cache")
    parser.add_argument("--weights", default="synthetic", help="synthetic (default), hub, or a checkpoint dir")


@dataclass
class LoadedPass:
    """A program ready to time: its model, folder, manifest, checkpoint and pass, the runner
    (compiled, weights marshalled) and the pass's bound inputs."""

    spec: Any
    program: Path
    manifest: Any
    ckpt: Any
    pass_: Any
    runner: Any
    inputs: dict


def load_pass(args, backend, seed: int = 0) -> LoadedPass:
    """The program that ``args`` (:func:`add_program_arguments`) names, loaded on ``backend``:
    parsed and checked, weights marshalled, and the pass's inputs bound (for ``--past`` on our
    emitted programs, with the prefix's KV cache). Raises ``UserError`` for bad input."""
    from ktir_models.model.inputs.bindings import (bind_pass_inputs, input_tensor_ids, pass_spec,
                                                   read_vendored_inputs)
    from ktir_models.model.manifest import load_manifest, validate
    from ktir_models.model.program_checks import parse_and_check
    from ktir_models.model.registry import resolve_model
    from ktir_models.model.runner import Runner
    from ktir_models.model.weights.checkpoint import get_checkpoint

    spec = resolve_model(args.model)
    program = resolve_program(spec, args.program, args.mode, args.tokens, args.past)
    manifest = load_manifest(program)
    validate(manifest, spec.config)
    parsed = parse_and_check(manifest)
    ckpt = get_checkpoint(spec, args.weights, seed=seed)
    pass_ = pass_spec(manifest, spec.config)
    vendored = read_vendored_inputs(manifest, input_tensor_ids(manifest))
    if pass_.past and manifest.extras.get("format") == "ktir-models/1":  # the prefix's KV cache
        from ktir_models.model.emit.generation import prefill_cache_inputs

        vendored = {**prefill_cache_inputs(ckpt, program, backend=backend), **vendored}
    runner = Runner(manifest, show_progress=False, backend=backend)
    runner.load(parsed)
    runner.marshal(ckpt)
    inputs = bind_pass_inputs(manifest, spec.config, ckpt, pass_, vendored)
    return LoadedPass(spec, program, manifest, ckpt, pass_, runner, inputs)


def time_passes(fn, repeat: int, warmup: int = 1, warm: list | None = None) -> list[float]:
    """``repeat`` timed calls of ``fn`` after ``warmup`` untimed ones (their seconds go to
    ``warm``): the first pass fills caches (f32 weight copies, torch kernels), the second builds
    the plans' batched forms (stacked grids, rerolled repeats: docs/emulator.md), the third
    records their tapes."""
    for _ in range(warmup):
        start = time.perf_counter()
        fn()
        if warm is not None:
            warm.append(time.perf_counter() - start)
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return seconds


def native_model(ckpt, dtype: str):
    """The native transformers model: the golden's f32 one, or the family's class in bfloat16."""
    from ktir_models.model.checks.golden import load_transformers_model

    if dtype == "f32":
        return load_transformers_model(ckpt)
    import torch
    import transformers

    model_class = getattr(transformers, ckpt.config.family.architecture)
    model = model_class.from_pretrained(str(ckpt.directory), dtype=torch.bfloat16,
                                        attn_implementation="eager", local_files_only=True)
    return model.eval()


def native_pass_factory(ckpt, pass_, device: str = "cpu", dtype: str = "f32"):
    """A function timing one native forward (``dtype`` f32 or bf16) of the pass on ``device``
    (the emulator's torch device, so a GPU run compares with native on the same GPU; prefix cache
    prepared once)."""
    import numpy as np
    import torch

    from ktir_models.model.checks.golden import cache_kwarg, output_cache

    model = native_model(ckpt, dtype).to(device)
    ids = torch.as_tensor(np.asarray(pass_.token_ids, dtype=np.int64).reshape(1, -1), device=device)
    positions = torch.as_tensor(np.asarray(pass_.positions, dtype=np.int64).reshape(1, -1), device=device)
    kwarg = cache_kwarg(model)
    prefix_cache = None
    if pass_.past > 0:
        prefix = torch.as_tensor(np.asarray(pass_.prefix_ids, dtype=np.int64).reshape(1, -1), device=device)
        with torch.no_grad():
            prefix_cache = output_cache(model(prefix, use_cache=True))

    state = {"cache": copy.deepcopy(prefix_cache)}
    kind = torch.device(device).type

    def sync() -> None:  # device work is asynchronous: wait for it inside the timer
        if kind == "cuda":
            torch.cuda.synchronize()
        elif kind == "mps":
            torch.mps.synchronize()

    def timed() -> float:
        sync()
        start = time.perf_counter()
        with torch.no_grad():
            out = model(ids, position_ids=positions, use_cache=True, **{kwarg: state["cache"]})
        sync()
        elapsed = time.perf_counter() - start
        state["cache"] = copy.deepcopy(prefix_cache)  # a fresh cache for the next pass, untimed
        state["logits"] = out.logits  # the last pass's, compared with the emulator's (untimed)
        return elapsed

    timed.state = state
    return timed


def agreement(emulated, native) -> dict:
    """How the emulated logits [m, vocab] agree with the native pass's: top-1 per row, cosine
    and max|d| / max|native| over all of them. With a bfloat16 native model the reference has
    bf16 roundings of its own (~2^-8 relative per op), so this is an agreement, not the pass
    rule, which takes an f32 golden (ktir-models forward --golden live)."""
    import numpy as np

    ours = np.asarray(emulated, dtype=np.float64).reshape(-1, np.shape(emulated)[-1])
    ref = native.detach().to("cpu").float().numpy().astype(np.float64).reshape(ours.shape)
    cosine = float((ours * ref).sum() / (np.linalg.norm(ours) * np.linalg.norm(ref)))
    return {"top1": int((ours.argmax(-1) == ref.argmax(-1)).sum()), "rows": int(ours.shape[0]),
            "cosine": cosine, "max_rel": float(np.abs(ours - ref).max() / np.abs(ref).max())}


def resident_gib() -> tuple[float, float]:
    """(anonymous, file-mapped) resident GiB of this process now (Linux; zeros elsewhere): the
    mapped pages of a checkpoint being read count in RSS as long as they are mapped."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0.0, 0.0
    kib = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines()
           if line.startswith(("RssAnon:", "RssFile:"))}
    return kib.get("RssAnon", 0) / 2**20, kib.get("RssFile", 0) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_program_arguments(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5, help="timed passes per side (median; >= 5)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed emulated passes first (default 3: caches, batched forms, tapes)")
    parser.add_argument("--alternate", action="store_true",
                        help="time the emulated and native passes in turns (E, N, E, N, ...) "
                             "instead of all emulated then all native")
    parser.add_argument("--native-dtype", choices=("f32", "bf16"), default="f32",
                        help="native transformers in float32 (default) or bfloat16 (models whose f32 copy does not fit)")
    parser.add_argument("--native-after", action="store_true",
                        help="release the emulator (machine, HBM, plans) before loading the native model")
    parser.add_argument("--skip-one-thread", action="store_true",
                        help="do not also time the native pass with one torch thread (large models: minutes a pass)")
    parser.add_argument("--last-token", action="store_true",
                        help="emulated side: the lm_head over the last row only (prefill users who "
                             "sample from it)")
    parser.add_argument("--kernel-threads", choices=("auto", "1", "2"), default="auto",
                        help="the native f16 kernel's threads for every call (default auto: two "
                             "for calls of >= 256K multiply-adds)")
    parser.add_argument("--bandwidth-mib", type=int, default=512,
                        help="MiB of the array whose sum measures the read bandwidth (default 512)")
    parser.add_argument("--json", dest="json_path", help="write the figures as JSON here")
    parser.add_argument("--backend", default="numpy", help="emulator array back end: numpy (default) or torch")
    parser.add_argument("--device", default="auto",
                        help="torch device: auto (mps, else cuda, else cpu), cpu, cuda, cuda:N, mps")
    args = parser.parse_args()
    if args.repeat < 5:
        parser.error("--repeat: at least 5 timed passes")
    if args.bandwidth_mib < 1:
        parser.error("--bandwidth-mib: at least 1")
    if args.native_after and args.alternate:
        parser.error("--native-after: the emulated and native passes cannot alternate when never resident together")

    from ktir_models.errors import UserError
    from ktir_models.ktir.backends import make_backend

    try:
        backend = make_backend(args.backend, args.device)
    except UserError as exc:  # an unavailable back end or device: one line, exit 2
        print(f"forward.py: {exc}", file=sys.stderr)
        return 2

    import numpy as np
    import torch

    threads = blas_threads()
    torch.set_num_threads(threads)
    if args.kernel_threads != "auto":
        from ktir_models.ktir.backends import seqmm

        seqmm.set_threads(int(args.kernel_threads))

    loaded = load_pass(args, backend, seed=args.seed)
    spec, program, manifest, ckpt, pass_ = (loaded.spec, loaded.program, loaded.manifest,
                                            loaded.ckpt, loaded.pass_)
    runner, inputs = loaded.runner, loaded.inputs
    del loaded  # --native-after releases the runner: no other reference may keep it
    warm: list[float] = []
    emulate = lambda: runner.run(inputs, last_token=args.last_token)  # noqa: E731
    if args.alternate:
        time_passes(emulate, 0, max(1, args.warmup), warm)
    else:
        emulated = time_passes(emulate, args.repeat, max(1, args.warmup), warm)
    emulator_rss = peak_rss_bytes()  # before the native model exists: the emulator's own peak
    emulator_resident = resident_gib()  # its anonymous pages (copies among them) and file pages
    mapped_bytes, copy_bytes = runner.mapped_bytes, runner.machine.row_major_used
    logits = runner.passes[-1].result
    weight_bytes = runner.weight_bytes
    matmul = runner.machine.matmul_order()
    timings = runner.timings
    if args.native_after:
        import gc

        del runner, emulate  # the machine's HBM (the marshalled weights) and plans go with it
        gc.collect()

    native_tdevice = torch.device(backend.device)
    native_device = str(native_tdevice)
    on_cpu = native_tdevice.type == "cpu"  # torch threads matter there only
    timed_native = native_pass_factory(ckpt, pass_, native_device, args.native_dtype)
    native_resident = resident_gib()  # just after loading: what the native model holds
    timed_native()  # warm-up
    if args.alternate:
        # in turns, so that both sides see the machine in the same state (its speed drifts)
        emulated, native = [], []
        for _ in range(args.repeat):
            emulated += time_passes(emulate, 1, 0)
            native.append(timed_native())
        logits = runner.passes[-1].result
    else:
        native = [timed_native() for _ in range(args.repeat)]
    # Also one torch thread: on a machine shared with other jobs, torch's two OpenMP threads can
    # wait on each other for whole scheduler slices (measured here: a 576x1536 GEMV 16 ms with two
    # threads, 0.6 ms with one), which makes the primary figure meaningless there.
    native_1t: list[float] = []
    if not args.skip_one_thread and on_cpu:
        torch.set_num_threads(1)
        timed_native()
        native_1t = [timed_native() for _ in range(args.repeat)]
        torch.set_num_threads(threads)

    emulated_ms = 1e3 * statistics.median(emulated)
    native_ms = 1e3 * statistics.median(native)
    # after the passes, not beside them; a GPU run's floor is the GPU memory's
    bandwidth = read_bandwidth(args.bandwidth_mib, threads, device=native_device)
    floor = floor_figures(weight_bytes, bandwidth, emulated_ms, native_ms)
    native_1t_ms = 1e3 * statistics.median(native_1t) if native_1t else None
    compile_s = timings.parse + timings.compile
    figures = {
        "model": spec.name,
        "program": str(program),
        "mode": manifest.mode,
        "tokens": manifest.tokens,
        "past": pass_.past,
        "nodes": len(manifest.nodes),
        "weights": getattr(ckpt, "origin", args.weights),
        "threads": threads,
        "backend": backend.name,
        "device": backend.device,
        "backend_version": backend.describe(),
        "matmul": matmul,
        "repeat": args.repeat,
        "alternate": args.alternate,
        "last_token": args.last_token,
        "kernel_threads": args.kernel_threads,
        "native_dtype": args.native_dtype,
        "native_after": args.native_after,
        "emulated_ms": emulated_ms,
        "native_ms": native_ms,
        "ratio": emulated_ms / native_ms,
        "native_1thread_ms": native_1t_ms,
        "ratio_1thread": emulated_ms / native_1t_ms if native_1t_ms else None,
        "native_threads_helped": threads_helped(native_ms, native_1t_ms, threads),
        "compile_s": compile_s,
        "parse_s": timings.parse,
        "marshal_s": timings.marshal,
        "peak_rss_bytes": peak_rss_bytes(),
        "emulator_peak_rss_bytes": emulator_rss,
        "emulator_resident_gib": {"anonymous": emulator_resident[0], "file": emulator_resident[1]},
        "weights_mapped_bytes": mapped_bytes,
        "weight_copies_bytes": copy_bytes,
        "f16_weight_bytes": spec.config.f16_weight_bytes,
        **floor,
        "emulated_all_ms": [1e3 * s for s in emulated],
        "emulated_warmup_ms": [1e3 * s for s in warm],
        "native_all_ms": [1e3 * s for s in native],
        "native_1thread_all_ms": [1e3 * s for s in native_1t],
        "logits_finite": bool(np.isfinite(logits).all()),
        # --last-token: the emulated row against the native pass's last row
        "agreement": agreement(logits, timed_native.state["logits"][..., -logits.shape[0]:, :]),
        "native_loaded_rss_anon_gib": native_resident[0],
        "native_loaded_rss_file_gib": native_resident[1],
    }
    print(f"program        {program} ({manifest.mode}, m={manifest.tokens}, past={pass_.past}, "
          f"{len(manifest.nodes)} nodes), weights {figures['weights']}")
    print(f"backend        {backend.describe()} (emulator); native transformers on "
          f"{native_device}")
    print(f"matmul         {figures['matmul']}; kernel threads {args.kernel_threads}")
    print(f"threads        numpy BLAS {threads}, torch.set_num_threads({threads})")
    print(f"emulated       {emulated_ms:9.1f} ms per pass (median of {args.repeat}; warm-up "
          f"passes {', '.join(f'{1e3 * s:.0f}' for s in warm)} ms)"
          + ("; timed in turns with the native passes" if args.alternate else ""))
    print(f"native {args.native_dtype:<8}{native_ms:9.1f} ms per pass (median of {args.repeat}, transformers eager"
          + (", loaded after the emulator released its HBM)" if args.native_after else ")"))
    print(f"ratio          {figures['ratio']:9.2f}  (emulated / native)")
    if native_1t_ms is not None:
        print(f"native 1 thr.  {native_1t_ms:9.1f} ms per pass (torch.set_num_threads(1)); "
              f"ratio {figures['ratio_1thread']:.2f}")
    if figures["native_threads_helped"] is False:
        print(f"note           the native pass on {threads} threads took "
              f"{native_ms / native_1t_ms:.2f}x its one-thread time: its other threads bought "
              f"nothing in this run (stalled on a busy machine, or a pass too small to split); "
              f"read the ratio with care")
    print(f"bandwidth      {floor['read_bandwidth_gbs']:9.2f} GB/s read (sum over "
          f"{args.bandwidth_mib} MiB, " + (f"{threads} threads" if on_cpu else native_device)
          + ", best of 5)")
    print(f"floor          {floor['floor_ms']:9.2f} ms  ({weight_bytes / 1e6:.1f} MB of f16 "
          f"weights "
          f"read once); emulated at {100 * floor['emulated_floor_fraction']:.1f} % of it, native "
          f"{args.native_dtype} at {100 * floor['native_floor_fraction']:.1f} %")
    print(f"parse+compile  {compile_s:9.2f} s  (parse+verify {timings.parse:.2f} s)")
    print(f"marshal        {timings.marshal:9.2f} s  ({mapped_bytes / GIB:.2f} GiB of weights mapped from their "
          f"files; {copy_bytes / GIB:.2f} GiB of weight copies made in the warm-up)")
    print(f"resident       {emulator_resident[0]:9.2f} GiB anonymous, {emulator_resident[1]:.2f} GiB mapped file "
          f"pages after the emulated passes (peak RSS counts both)")
    print(f"peak RSS       {emulator_rss / GIB:9.2f} GiB emulator (f16 weights "
          f"{figures['f16_weight_bytes'] / GIB:.2f} GiB); {figures['peak_rss_bytes'] / GIB:.2f} GiB "
          f"with the {args.native_dtype} native model (just after loading it: {native_resident[0]:.2f} GiB "
          f"anonymous, {native_resident[1]:.2f} GiB mapped file pages)")
    agree = figures["agreement"]
    print(f"agreement      top-1 {agree['top1']}/{agree['rows']}, cosine {agree['cosine']:.6f}, "
          f"max|d|/max|native| {agree['max_rel']:.2e}  (emulated vs native {args.native_dtype} logits)")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
