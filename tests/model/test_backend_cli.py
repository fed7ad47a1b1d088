"""``--backend`` / ``--device`` through the command line (``python -m ktir_models``), the model
layer and the benchmark: the torch back end on the cpu runs the vendored tiny fixtures to their
goldens and agrees with the numpy back end; unavailable devices are one clear line, exit 2.

The numpy back end is the reference: torch results are compared with it (in f16 ulps at the
logits' scale), never with a hard-coded number.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_runner_tiny import TINY, write_tiny_checkpoint, write_tiny_program  # noqa: E402

from conftest import REPO_ROOT  # noqa: E402
from ktir_models.errors import UserError  # noqa: E402
from ktir_models.ktir.backends import make_backend  # noqa: E402
from ktir_models.model.inputs.bindings import (  # noqa: E402
    PassSpec,
    bind_pass_inputs,
    input_tensor_ids,
    pass_spec,
    read_vendored_inputs,
)
from ktir_models.model.manifest import load_manifest  # noqa: E402
from ktir_models.model.runner import Runner  # noqa: E402

FIXTURES = REPO_ROOT / "fixtures"
TINY_MHA = FIXTURES / "models" / "tiny-mha"
PREFILL7 = FIXTURES / "tiny-mha-prefill7"
HAS_MPS = bool(getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available())


def cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ktir_models", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO_ROOT)


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------- forward

@pytest.fixture(scope="module")
def torch_forward_json(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("torch-forward") / "report.json"
    r = cli("forward", str(TINY_MHA), "--program", str(PREFILL7), "--golden", "vendored", "--quiet",
            "--backend", "torch", "--device", "cpu", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"backend  torch {torch.__version__} (cpu)" in r.stdout
    assert "result   PASS" in r.stdout
    return json.loads(out.read_text())


def test_forward_torch_cpu_passes_its_golden_and_names_the_backend(torch_forward_json):
    doc = torch_forward_json
    assert doc["pass"] is True and doc["metrics"]["top1_agreement"] == 1.0
    assert (doc["backend"], doc["device"]) == ("torch", "cpu")
    assert doc["backend_version"] == f"torch {torch.__version__} (cpu)"
    assert doc["nonfinite"] is None


def _fixture_logits(directory: Path, backend: str) -> np.ndarray:
    """One pass of a vendored fixture through the model layer's Runner on ``backend`` (cpu)."""
    from ktir_models.model.registry import resolve_model
    from ktir_models.model.weights.checkpoint import get_checkpoint

    manifest = load_manifest(directory)
    spec = resolve_model(str(TINY_MHA))
    ckpt = get_checkpoint(spec, str(TINY_MHA))
    runner = Runner(manifest, show_progress=False, backend=make_backend(backend, "cpu"))
    runner.load()
    runner.marshal(ckpt)
    vendored = read_vendored_inputs(manifest, input_tensor_ids(manifest))
    inputs = bind_pass_inputs(manifest, spec.config, ckpt, pass_spec(manifest, spec.config), vendored)
    result = runner.run(inputs)
    assert result.nonfinite is None
    return result.result


@pytest.mark.parametrize("directory", ["tiny-mha-prefill7", "tiny-mha-decode"])
def test_torch_cpu_logits_within_two_f16_ulps_of_numpy(directory):
    """The bound is 2 f16 ulps at the scale of the logits (the largest |logit|), not per element:
    the back ends' f32 GEMMs may sum in different orders, an intermediate f16 rounding can then flip
    by one ulp, and the difference travels through later GEMMs, where logits near zero are the
    result of cancellation (there a per-element ulp is meaningless)."""
    ref = _fixture_logits(FIXTURES / directory, "numpy")
    got = _fixture_logits(FIXTURES / directory, "torch")
    assert got.dtype == ref.dtype == np.float16 and got.shape == ref.shape
    assert np.isfinite(ref).all()
    scale = float(np.abs(ref.astype(np.float32)).max())
    ulp = 2.0 ** (np.floor(np.log2(scale)) - 10)
    assert float(np.abs(got.astype(np.float32) - ref.astype(np.float32)).max()) <= 2 * ulp
    assert (got.astype(np.float32).argmax(axis=-1) == ref.astype(np.float32).argmax(axis=-1)).all()


def test_forward_numpy_json_names_numpy_and_agrees_with_torch(torch_forward_json, tmp_path):
    out = tmp_path / "numpy.json"
    r = cli("forward", str(TINY_MHA), "--program", str(PREFILL7), "--golden", "vendored", "--quiet",
            "--backend", "numpy", "--device", "cpu", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "backend  numpy (cpu)" in r.stdout
    doc = json.loads(out.read_text())
    assert (doc["backend"], doc["device"], doc["backend_version"]) == ("numpy", "cpu", "numpy (cpu)")
    from ktir_models.ktir.backends import seqmm

    # the report names the summation order of the f16 matmuls (it decides the last bits)
    assert doc["matmul"].startswith("native" if seqmm.available() else "numpy (cpu) BLAS")
    assert f"matmul   {doc['matmul']}" in r.stdout
    assert torch_forward_json["matmul"].startswith("torch")
    ref, got = doc["metrics"], torch_forward_json["metrics"]
    assert got["top1_rows"] == ref["top1_rows"]
    # Both max_abs are taken against the same golden, so they differ by at most the largest
    # elementwise logit difference: 2 f16 ulps of the largest logit magnitude.
    largest = ref["max_abs"] / ref["max_abs_rel"] + ref["max_abs"]
    ulp = 2.0 ** (np.floor(np.log2(largest)) - 10)
    assert abs(got["max_abs"] - ref["max_abs"]) <= 2 * ulp


# ---------------------------------------------------------------------------- bad choices

DEVICES = [("cuda", torch.cuda.is_available(), "CUDA"), ("mps", HAS_MPS, "MPS")]


@pytest.mark.parametrize("device, present, word", DEVICES, ids=[d[0] for d in DEVICES])
def test_forward_on_an_absent_device_is_one_line(device, present, word):
    if present:
        pytest.skip(f"{word} is present: covered by test_forward_on_a_present_device_passes")
    r = cli("forward", str(TINY_MHA), "--program", str(PREFILL7), "--golden", "vendored", "-q",
            "--backend", "torch", "--device", device)
    one_line_error(r, f"--device {device}", word)


@pytest.mark.parametrize("device, present, word", DEVICES, ids=[d[0] for d in DEVICES])
def test_forward_on_a_present_device_passes(tmp_path, device, present, word):
    if not present:
        pytest.skip(f"needs a {word} device")
    out = tmp_path / "report.json"
    r = cli("forward", str(TINY_MHA), "--program", str(PREFILL7), "--golden", "vendored", "-q",
            "--backend", "torch", "--device", device, "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert doc["pass"] is True and (doc["backend"], doc["device"]) == ("torch", device)


@pytest.mark.parametrize("flags, words", [
    (["--backend", "numpy", "--device", "cuda"], ["--backend numpy", "cpu only", "--backend torch"]),
    (["--backend", "foo"], ["--backend", "numpy, torch", "'foo'"]),
    (["--backend", "torch", "--device", "tpu"], ["--device", "'tpu'"]),
])
def test_bad_backend_or_device_is_one_line_before_any_work(flags, words, tmp_path):
    out = tmp_path / "report.json"
    r = cli("forward", str(TINY_MHA), "--program", str(PREFILL7), "--golden", "vendored", "-q",
            "--json", str(out), *flags, timeout=120)
    one_line_error(r, *words)
    assert not out.exists()


# ---------------------------------------------------------------------------- device failures

def _in_process(argv, capsys) -> tuple[int, str, str]:
    from ktir_models.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_device_out_of_memory_inside_a_kernel_is_a_located_fault(monkeypatch, capsys):
    from ktir_models.ktir.backends.torch_backend import TorchBackend

    def oom(self, a, b):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(TorchBackend, "matmul", oom)
    code, _, err = _in_process(["forward", str(TINY_MHA), "--program", str(PREFILL7), "--golden",
                                "vendored", "-q", "--backend", "torch", "--device", "cpu"], capsys)
    assert code == 2 and "Traceback" not in err
    line = err.strip()
    assert "\n" not in line
    assert line.startswith("manifest.json: nodes[")
    assert "ran out of memory" in line and "CUDA out of memory" in line and "core" in line


def test_device_out_of_memory_outside_a_kernel_is_one_line(monkeypatch, capsys):
    def oom(self, inputs, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB\nmore detail")

    monkeypatch.setattr(Runner, "run", oom)
    code, _, err = _in_process(["forward", str(TINY_MHA), "--program", str(PREFILL7), "--golden",
                                "vendored", "-q", "--backend", "torch", "--device", "cpu"], capsys)
    assert code == 2
    assert err.strip() == "the torch device ran out of memory: CUDA out of memory. Tried to allocate 20.00 MiB"


# ---------------------------------------------------------------------------- runner on torch

@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from ktir_models.model.weights.checkpoint import load_local

    return load_local(write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-ckpt")), TINY)


def test_runner_on_torch_flags_nonfinite_and_reads_only_what_it_must(tmp_path, tiny_checkpoint, monkeypatch):
    from ktir_models.ktir.exec.machine import Buffer

    man = load_manifest(write_tiny_program(tmp_path / "tiny"))
    runner = Runner(man, show_progress=False, backend=make_backend("torch", "cpu"))
    runner.load()
    runner.marshal(tiny_checkpoint)
    reads: list[str] = []
    real_read = Buffer.read

    def counting_read(self):
        reads.append(self.name)
        return real_read(self)

    monkeypatch.setattr(Buffer, "read", counting_read)
    inputs = bind_pass_inputs(man, TINY, tiny_checkpoint, PassSpec(np.array([1, 2]), np.arange(2)))
    clean = runner.run(inputs)
    assert clean.nonfinite is None
    assert reads == ["t4"]  # the result only: the per-node NaN/Inf check reads nothing back

    reads.clear()
    inputs[0] = inputs[0].copy()
    inputs[0][1, 7] = np.float16(np.inf)
    out = runner.run(inputs)
    assert out.nonfinite is not None
    assert (out.nonfinite.node, out.nonfinite.tensor, out.nonfinite.first_index) == (0, 3, (1, 7))
    assert reads == ["t3", "t4"]  # the offending tensor (to locate it), then the result


def test_runner_refuses_machine_and_backend_together(tmp_path):
    from ktir_models import ktir

    man = load_manifest(write_tiny_program(tmp_path / "tiny"))
    with pytest.raises(ValueError):
        Runner(man, machine=ktir.Machine(), backend="torch")


def test_make_backend_errors_are_user_errors():
    with pytest.raises(UserError):
        make_backend("numpy", "mps")
    with pytest.raises(UserError):
        make_backend("jax", "cpu")


# ---------------------------------------------------------------------------- run (one kernel)

KERNEL = """module {
  func.func @blend(%x: index, %y: index, %s: f16) {
    %c0 = arith.constant 0 : index
    %vx = ktdp.construct_memory_view %x, sizes: [4, 8], strides: [8, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<4x8xf16>
    %vy = ktdp.construct_memory_view %y, sizes: [4, 8], strides: [8, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<4x8xf16>
    %tx = ktdp.construct_access_tile %vx[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<4x8xf16> -> !ktdp.access_tile<4x8xindex>
    %ty = ktdp.construct_access_tile %vy[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<4x8xf16> -> !ktdp.access_tile<4x8xindex>
    %d = ktdp.load %tx : !ktdp.access_tile<4x8xindex> -> tensor<4x8xf16>
    %st = tensor.splat %s : tensor<4x8xf16>
    %p = arith.mulf %d, %st : tensor<4x8xf16>
    %q = arith.addf %p, %d : tensor<4x8xf16>
    %r = arith.divf %q, %st : tensor<4x8xf16>
    %m = arith.maximumf %r, %d : tensor<4x8xf16>
    ktdp.store %m, %ty : tensor<4x8xf16>, !ktdp.access_tile<4x8xindex>
    return
  }
}
"""


def test_run_torch_cpu_writes_the_same_buffers_as_numpy(tmp_path):
    kernel = tmp_path / "blend.mlir"
    kernel.write_text(KERNEL)
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float16)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=x, y=np.zeros((4, 8), np.float16))
    outs = {}
    for backend in ("numpy", "torch"):
        out = tmp_path / f"{backend}.npz"
        r = cli("run", str(kernel), "--inputs", str(inputs), "--out", str(out), "--scalar", "s=1.37",
                "--backend", backend, "--device", "cpu", timeout=120)
        assert r.returncode == 0, r.stderr
        assert ("torch" if backend == "torch" else "numpy (cpu)") in r.stdout
        with np.load(out) as data:
            outs[backend] = {k: data[k] for k in data.files}
    assert sorted(outs["torch"]) == sorted(outs["numpy"]) == ["x", "y"]
    for name in ("x", "y"):
        assert outs["torch"][name].dtype == np.float16
        assert outs["torch"][name].tobytes() == outs["numpy"][name].tobytes(), name
    # and the numpy result is the op-by-op f16 semantics (one rounding per op)
    s = np.float16(1.37)
    p = (x.astype(np.float32) * np.float32(s)).astype(np.float16)
    q = (p.astype(np.float32) + x.astype(np.float32)).astype(np.float16)
    r_ = (q.astype(np.float32) / np.float32(s)).astype(np.float16)
    np.testing.assert_array_equal(outs["numpy"]["y"], np.maximum(r_, x))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present")
def test_run_device_cuda_without_cuda_is_one_line(tmp_path):
    kernel = tmp_path / "blend.mlir"
    kernel.write_text(KERNEL)
    r = cli("run", str(kernel), "--backend", "torch", "--device", "cuda:0", timeout=120)
    one_line_error(r, "--device cuda:0", "CUDA")


# ---------------------------------------------------------------------------- generate

def test_generate_torch_cpu_generates_the_numpy_tokens(tmp_path, monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    lines = {}
    for backend in ("numpy", "torch"):
        r = cli("generate", str(TINY_MHA), "--weights", str(TINY_MHA), "--tokens", "5", "--steps", "3",
                "-q", "--backend", backend, "--device", "cpu")
        assert r.returncode == 0, r.stdout + r.stderr
        lines[backend] = [ln for ln in r.stdout.splitlines() if "generated:" in ln]
        assert f"on {'numpy (cpu)' if backend == 'numpy' else 'torch'}" in r.stdout
    tokens = {b: ln[0].split("generated:")[1].split("(")[0].strip() for b, ln in lines.items()}
    assert tokens["torch"] == tokens["numpy"]


# ---------------------------------------------------------------------------- benchmark

def run_benchmark(out, *extra: str) -> subprocess.CompletedProcess:
    """benchmarks/forward.py on the tiny decode fixture, its JSON written to ``out``; asserts it
    succeeded."""
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "forward.py"), str(TINY_MHA),
               "--program", str(FIXTURES / "tiny-mha-decode"), "--weights", str(TINY_MHA),
               "--repeat", "5", "--json", str(out), *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.slow
def test_benchmark_torch_cpu_names_backend_and_device(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "bench.json"
    done = run_benchmark(out, "--backend", "torch", "--device", "cpu")
    assert f"torch {torch.__version__} (cpu)" in done.stdout
    assert "native transformers on cpu" in done.stdout
    figures = json.loads(out.read_text())
    assert (figures["backend"], figures["device"]) == ("torch", "cpu")
    assert figures["backend_version"] == f"torch {torch.__version__} (cpu)"
    assert figures["logits_finite"] is True and figures["emulated_ms"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("device, present, word", DEVICES, ids=[d[0] for d in DEVICES])
def test_benchmark_on_a_present_device_compares_on_that_device(tmp_path, device, present, word):
    """On a GPU the native pass runs on the GPU too, the floor is the GPU memory's, and there is
    no one-thread timing (threads are a cpu matter)."""
    if not present:
        pytest.skip(f"needs a {word} device")
    pytest.importorskip("transformers")
    out = tmp_path / "bench.json"
    done = run_benchmark(out, "--backend", "torch", "--device", device)
    assert f"native transformers on {device}" in done.stdout
    assert f"MiB, {device}, best of 5" in done.stdout
    figures = json.loads(out.read_text())
    assert (figures["backend"], figures["device"]) == ("torch", device)
    assert figures["native_1thread_ms"] is None and figures["logits_finite"] is True
    assert figures["read_bandwidth_gbs"] > 0 and figures["agreement"]["cosine"] > 0.99


@pytest.mark.slow
def test_benchmark_alternate_times_both_sides_in_turns(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "bench.json"
    done = run_benchmark(out, "--alternate")
    assert "timed in turns with the native passes" in done.stdout
    figures = json.loads(out.read_text())
    assert figures["alternate"] is True and figures["logits_finite"] is True
    assert len(figures["emulated_all_ms"]) == len(figures["native_all_ms"]) == 5
    assert figures["ratio"] == pytest.approx(figures["emulated_ms"] / figures["native_ms"])


def test_benchmark_unavailable_device_is_one_line(tmp_path):
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "forward.py"), str(TINY_MHA),
               "--backend", "numpy", "--device", "mps"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    one_line_error(done, "--backend numpy", "cpu only")


# ---------------------------------------------------------------------------- diagnose

def test_diagnose_on_torch_cpu_finds_every_node_in_band():
    pytest.importorskip("transformers")
    r = cli("diagnose", str(TINY_MHA), "--program", str(PREFILL7), "--weights", str(TINY_MHA),
            "--backend", "torch", "--device", "cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "24 compared with transformers" in r.stdout
    assert "every compared node is within its f16 band" in r.stdout


def test_diagnose_checks_on_torch_cpu_are_clean():
    pytest.importorskip("transformers")
    r = cli("diagnose", str(TINY_MHA), "--program", str(PREFILL7), "--weights", str(TINY_MHA),
            "--backend", "torch", "--device", "cpu", "--strict", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every compared node is within its f16 band" in r.stdout
