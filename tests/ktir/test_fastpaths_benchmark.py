"""benchmarks/forward.py runs end to end on the tiny vendored model and writes coherent figures.

No timing is asserted (timings belong in docs/performance.md); the test checks that the script
runs both sides, that the JSON carries every documented field, and that the figures agree with
each other (median of the per-pass times, ratio = emulated / native, peaks ordered).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

pytest.importorskip("transformers")


@pytest.mark.slow
def test_forward_benchmark_on_tiny_model(tmp_path):
    out = tmp_path / "bench.json"
    model = REPO_ROOT / "fixtures" / "models" / "tiny-mha"
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "forward.py"), str(model),
               "--program", str(REPO_ROOT / "fixtures" / "tiny-mha-decode"), "--weights", str(model),
               "--repeat", "5", "--bandwidth-mib", "64", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ratio" in done.stdout and "native f32" in done.stdout

    figures = json.loads(out.read_text())
    for key in ("emulated_ms", "native_ms", "ratio", "compile_s", "marshal_s", "peak_rss_bytes",
                "native_1thread_ms", "ratio_1thread"):
        assert isinstance(figures[key], float | int) and figures[key] > 0, key
    assert len(figures["emulated_all_ms"]) == len(figures["native_all_ms"]) == 5
    assert len(figures["emulated_warmup_ms"]) == 3  # caches, the plans' batched forms, tapes
    assert figures["emulated_ms"] == pytest.approx(statistics.median(figures["emulated_all_ms"]))
    assert figures["native_ms"] == pytest.approx(statistics.median(figures["native_all_ms"]))
    assert figures["ratio"] == pytest.approx(figures["emulated_ms"] / figures["native_ms"])
    assert figures["ratio_1thread"] == pytest.approx(figures["emulated_ms"] / figures["native_1thread_ms"])
    helped = figures["native_threads_helped"]
    if figures["threads"] > 1:
        assert helped is (figures["native_ms"] < 0.9 * figures["native_1thread_ms"])
        assert ("its other threads bought nothing" in done.stdout) is (not helped)
    else:
        assert helped is None
    assert figures["compile_s"] >= figures["parse_s"] > 0
    assert figures["peak_rss_bytes"] >= figures["emulator_peak_rss_bytes"] > 0
    assert figures["logits_finite"] is True
    # the emulated logits against the native f32 model's: the tiny model's pass agrees closely
    agree = figures["agreement"]
    assert agree["rows"] == 1 and agree["top1"] == 1
    assert agree["cosine"] > 0.9999 and 0 <= agree["max_rel"] < 2**-6
    assert "agreement      top-1 1/1" in done.stdout
    assert figures["native_loaded_rss_anon_gib"] >= 0 and figures["native_loaded_rss_file_gib"] >= 0
    assert (figures["mode"], figures["tokens"], figures["nodes"]) == ("decode", 1, 24)
    # the memory floor: the weights' f16 bytes (every weight source of the manifest) over the
    # bandwidth measured in the same run, and each side's fraction of it
    manifest_file = REPO_ROOT / "fixtures" / "tiny-mha-decode" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    shapes = {t["id"]: t["rows"] * t["cols"] for t in manifest["tensors"]}
    weights = sum(2 * shapes[s["id"]] for s in manifest["sources"] if s["role"] == "weight")
    assert figures["weight_bytes_read"] == weights
    assert figures["read_bandwidth_gbs"] > 0
    floor_ms = 1e3 * weights / (1e9 * figures["read_bandwidth_gbs"])
    assert figures["floor_ms"] == pytest.approx(floor_ms)
    assert figures["emulated_floor_fraction"] == pytest.approx(floor_ms / figures["emulated_ms"])
    assert figures["native_floor_fraction"] == pytest.approx(floor_ms / figures["native_ms"])
    assert figures["last_token"] is False
    assert f"floor          {figures['floor_ms']:9.2f} ms" in done.stdout
    assert f"emulated at {100 * figures['emulated_floor_fraction']:.1f} %" in done.stdout
    assert "GB/s read (sum over 64 MiB" in done.stdout
    from ktir_models.ktir.backends import seqmm

    # which f32 summation order the emulated side used (it decides the last bits and the speed)
    assert figures["matmul"].startswith("native" if seqmm.available() else "numpy (cpu) BLAS")
    assert f"matmul         {figures['matmul']}; kernel threads auto" in done.stdout
    assert figures["kernel_threads"] == "auto"


@pytest.mark.slow
def test_forward_benchmark_last_token_and_one_kernel_thread(tmp_path):
    """--last-token: the emulated logits are the prefill's last row, compared with the native
    pass's last row; --kernel-threads 1 is recorded."""
    out = tmp_path / "bench.json"
    model = REPO_ROOT / "fixtures" / "models" / "tiny-mha"
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "forward.py"), str(model),
               "--program", str(REPO_ROOT / "fixtures" / "tiny-mha-prefill7"),
               "--weights", str(model),
               "--repeat", "5", "--bandwidth-mib", "16", "--skip-one-thread", "--last-token",
               "--kernel-threads", "1", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    assert figures["last_token"] is True and figures["kernel_threads"] == "1"
    assert (figures["mode"], figures["tokens"]) == ("prefill", 7)
    agree = figures["agreement"]
    assert agree["rows"] == 1 and agree["top1"] == 1 and agree["max_rel"] < 2**-6
    assert "kernel threads 1" in done.stdout


def test_threads_helped_flags_a_native_pass_its_threads_did_not_speed_up():
    """The rule behind ``native_threads_helped``: two threads under 0.9x of one thread's time
    helped; at or over it (a stalled thread, a pass too small to split) they did not; nothing to
    compare with one thread or without a one-thread timing."""
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        from forward import threads_helped
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
    assert threads_helped(33.1, 51.5, 2) is True        # a quiet machine: 0.64x
    assert threads_helped(52.8, 52.5, 2) is False       # the second thread stalled
    assert threads_helped(46.0, 50.0, 2) is False       # 0.92x: bought nothing
    assert threads_helped(44.9, 50.0, 4) is True
    assert threads_helped(33.1, None, 2) is None and threads_helped(33.1, 51.5, 1) is None


def test_forward_benchmark_rejects_fewer_than_five_passes():
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "forward.py"), "smollm2-135m",
               "--repeat", "3"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "at least 5" in done.stderr


def test_node_kinds_profile_on_tiny_model():
    """benchmarks/node_kinds.py sums a pass by node kind (the manifest's own counts) and lists
    the native kernel's calls; the per-kind times add up to no more than the passes."""
    from ktir_models.ktir.backends import seqmm

    model = REPO_ROOT / "fixtures" / "models" / "tiny-mha"
    program = REPO_ROOT / "fixtures" / "tiny-mha-decode"
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "node_kinds.py"), str(model),
               "--program", str(program), "--weights", str(model), "--passes", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    nodes = json.loads((program / "manifest.json").read_text())["nodes"]
    lines = done.stdout.splitlines()
    kinds = {line.split()[1]: line for line in lines if line.startswith("kind")}
    for kind in {n["kind"] for n in nodes}:
        count = sum(n["kind"] == kind for n in nodes)
        assert kind in kinds and f"({count} nodes)" in kinds[kind]
    passes_line = next(line for line in lines if line.startswith("passes"))
    passes = [float(word.rstrip(",")) for word in passes_line.split()[1:3]]  # "passes   2.3, 2.2 ms"
    per_kind = sum(float(line.split()[2]) for line in kinds.values())
    # each printed figure is rounded to 0.05 ms at most: the sum may gain that much per line
    assert 0 < per_kind <= max(passes) * 1.01 + 0.05 * (len(kinds) + 1)
    kernel = [line for line in lines if line.startswith("kernel")]
    assert kernel and (("calls a pass" in kernel[0]) == seqmm.available())


def test_node_kinds_bad_model_is_one_line():
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "node_kinds.py"), "no-such-model-xyz"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.strip().count("\n") == 0


def test_kernel_calls_replay_on_tiny_model():
    """benchmarks/kernel_calls.py records a pass's kernel calls and replays them: one line per
    call signature whose weight bytes add up to the total, and two builds of the kernel (its
    default and one without the staging of power-of-two rows) that write the same bits."""
    from ktir_models.ktir.backends import seqmm

    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    model = REPO_ROOT / "fixtures" / "models" / "tiny-mha"
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "kernel_calls.py"), str(model),
               "--program", str(REPO_ROOT / "fixtures" / "tiny-mha-decode"), "--weights", str(model),
               "--reps", "1", "--variant", "base=", "--variant", "nostage=-DSTAGE_ALIAS=0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    rows = [line for line in lines if " x " in line and line.split()[0].isdigit()]
    assert rows, done.stdout
    replayed = next(line for line in lines if line.startswith("replayed:"))
    total_mb = float(replayed.split(" for ")[1].split(" MB")[0])
    assert abs(sum(float(r.split()[-4]) for r in rows) - total_mb) <= 0.05 * len(rows) + 1
    assert "nostage: same bits as base" in lines


def test_kernel_calls_replay_grouped_calls():
    """The same on a program whose blocked weights make grouped calls (smollm2-135m's emitted
    prefill, synthetic weights: its lm_head's 64-column blocks written in place, ``groups`` 24):
    such calls are recorded with their groups and acc pointer, and replayed with them."""
    from ktir_models.ktir.backends import seqmm

    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "kernel_calls.py"), "smollm2-135m",
               "--mode", "prefill", "--tokens", "8", "--reps", "1",
               "--variant", "base=", "--variant", "nostage=-DSTAGE_ALIAS=0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    rows = [line for line in lines if " x " in line and line.split()[0].isdigit()]
    grouped = [line for line in rows if " g" in line.split(")")[-1]]
    assert grouped, done.stdout
    assert "nostage: same bits as base" in lines


def test_kernel_calls_bad_model_is_one_line():
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "kernel_calls.py"), "no-such-model-xyz"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.strip().count("\n") == 0
