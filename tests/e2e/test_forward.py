"""`ktir-models forward` end to end, as a subprocess: nothing mocked.

Whole-model forwards (slow): the three corpus programs on seeded synthetic weights against a live
transformers golden. Bad input (fast): each a one-line error, exit code 2, no traceback, the
user's files untouched. Exit code 1 on a golden mismatch is shown on a tiny program.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "model"))
from test_runner_tiny import M, N, TINY, expected_logits, write_tiny_checkpoint, write_tiny_program  # noqa: E402

CORPUS = Path(os.environ.get("KTIR_CORPUS", REPO.parent / "shared" / "corpus"))
SCRATCHY = CORPUS / "scratchy"
needs_corpus = pytest.mark.skipif(
    not SCRATCHY.is_dir(), reason=f"KTIR corpus not found at {CORPUS} (set KTIR_CORPUS)"
)


def forward(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ktir_models", "forward", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def snapshot(directory: Path) -> dict[str, str]:
    """Content hashes of every file under ``directory`` (to prove nothing was written over)."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr)


# ----------------------------------------------------------------------------- whole models


@needs_corpus
@pytest.mark.slow
@pytest.mark.parametrize(
    "fixture, mode, m",
    [("smollm2-135m", "decode", 1), ("smollm2-135m-prefill", "prefill", 32), ("llama-3.2-1b", "decode", 1)],
)
def test_corpus_forward_passes_against_live_golden(fixture: str, mode: str, m: int, tmp_path: Path) -> None:
    model = "llama-3.2-1b" if fixture.startswith("llama") else "smollm2-135m"
    report = tmp_path / "report.json"
    proc = forward(
        model, "--program", str(SCRATCHY / fixture), "--weights", "synthetic", "--golden", "live",
        "--json", str(report), "--quiet",
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "result   PASS" in proc.stdout
    doc = json.loads(report.read_text())
    assert doc["pass"] is True and doc["mode"] == mode and doc["tokens"] == m
    assert doc["metrics"]["top1_agreement"] == 1.0
    assert doc["metrics"]["max_abs_rel"] <= doc["tolerance"]
    assert doc["metrics"]["cosine"] > 0.999
    for key in ("parse", "marshal", "execute"):
        assert doc["seconds"][key] > 0
    assert doc["weights"] == "synthetic:0"


@pytest.mark.slow
def test_forward_without_program_uses_our_emitter(tmp_path: Path) -> None:
    """The README's main job: no --program, our emitted decode program, synthetic weights."""
    report = tmp_path / "r.json"
    proc = forward("smollm2-135m", "--weights", "synthetic", "--golden", "live", "--json", str(report), "--quiet")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    doc = json.loads(report.read_text())
    assert doc["pass"] is True and doc["mode"] == "decode" and doc["tokens"] == 1
    assert doc["metrics"]["max_abs_rel"] <= doc["tolerance"]


@needs_corpus
@pytest.mark.slow
def test_planted_bug_fails_although_top1_agrees(tmp_path: Path) -> None:
    """A final RMSNorm dividing by 288 instead of 576 scales every logit by sqrt(2): the argmax of
    every row is unchanged, so only the max-abs bound can catch it (exit 1)."""
    program = tmp_path / "buggy"
    shutil.copytree(SCRATCHY / "smollm2-135m", program)
    for f in program.iterdir():
        f.chmod(0o644)
    node = program / "node450.mlir"
    text = node.read_text()
    assert text.count("arith.constant 576.0 : f32") == 1
    node.write_text(text.replace("arith.constant 576.0 : f32", "arith.constant 288.0 : f32"))
    report = tmp_path / "r.json"
    proc = forward("smollm2-135m", "--program", str(program), "--weights", "synthetic", "--golden", "live",
                   "--json", str(report), "--quiet")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    doc = json.loads(report.read_text())
    assert doc["pass"] is False
    assert doc["metrics"]["top1_agreement"] == 1.0
    assert doc["metrics"]["max_abs_rel"] > 0.2
    assert "exceeds the tolerance" in proc.stdout


# ----------------------------------------------------------------------------- tiny program


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-model"))


def _tiny_golden(model_dir: Path, path: Path, perturb: float = 0.0) -> np.ndarray:
    from ktir_models.model.checks.golden import write_f16_gz
    from ktir_models.model.weights.checkpoint import load_local

    ckpt = load_local(model_dir, TINY)
    emb = ckpt.read_f16("model.embed_tokens.weight")
    ids = [(1000 + 137 * i) % (TINY.vocab_size - 1) + 1 for i in range(M)]
    logits = expected_logits(emb[ids], ckpt.read_f16("model.norm.weight"), emb).astype(np.float32)
    if perturb:
        # Swap each row's top-1 with its lowest logit: a golden no correct program can match.
        for row in logits:
            hi, lo = int(np.argmax(row)), int(np.argmin(row))
            row[hi], row[lo] = row[lo], row[hi]
    write_f16_gz(path, logits.astype(np.float16))
    return logits


def test_tiny_forward_passes_with_golden_file(tiny_model: Path, tmp_path: Path) -> None:
    program = write_tiny_program(tmp_path / "prog")
    _tiny_golden(tiny_model, tmp_path / "golden.f16.gz")
    report = tmp_path / "r.json"
    proc = forward(str(tiny_model), "--program", str(program), "--golden", str(tmp_path / "golden.f16.gz"),
                   "--json", str(report), "--repeat", "2")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    doc = json.loads(report.read_text())
    assert doc["pass"] is True and doc["repeat"] == 2 and doc["metrics"]["max_abs"] == 0.0
    assert len(doc["node_seconds"]) == 2 and all(t >= 0 for t in doc["node_seconds"])


def test_tiny_forward_vendored_golden_and_inputs(tiny_model: Path, tmp_path: Path) -> None:
    program = write_tiny_program(tmp_path / "prog")
    _tiny_golden(tiny_model, program / "golden.f16.gz")
    proc = forward(str(tiny_model), "--program", str(program), "--golden", "vendored")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "golden   vendored" in proc.stdout


def test_tiny_forward_mismatch_exits_1(tiny_model: Path, tmp_path: Path) -> None:
    program = write_tiny_program(tmp_path / "prog")
    _tiny_golden(tiny_model, tmp_path / "bad.f16.gz", perturb=1.0)
    report = tmp_path / "r.json"
    proc = forward(str(tiny_model), "--program", str(program), "--golden", str(tmp_path / "bad.f16.gz"),
                   "--json", str(report))
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "FAIL" in proc.stdout
    doc = json.loads(report.read_text())
    assert doc["pass"] is False and doc["metrics"]["top1_agreement"] == 0.0


# ----------------------------------------------------------------------------- bad input


def test_malformed_node_file_is_located(tiny_model: Path, tmp_path: Path) -> None:
    program = write_tiny_program(tmp_path / "prog")
    node = program / "node0.mlir"
    node.write_text(node.read_text().replace("arith.mulf", "arith.mulx"))
    proc = forward(str(tiny_model), "--program", str(program), "--golden", "none")
    assert_user_error(proc, f"{node}:23:10: error: unknown operation 'arith.mulx'")


def test_golden_of_wrong_size(tiny_model: Path, tmp_path: Path) -> None:
    from ktir_models.model.checks.golden import write_f16_gz

    program = write_tiny_program(tmp_path / "prog")
    write_f16_gz(tmp_path / "g.f16.gz", np.zeros((M, N - 1), dtype=np.float16))
    before = snapshot(tmp_path)
    proc = forward(str(tiny_model), "--program", str(program), "--golden", str(tmp_path / "g.f16.gz"))
    assert_user_error(proc, "g.f16.gz")
    assert snapshot(tmp_path) == before


def test_missing_safetensors(tiny_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    shutil.copyfile(tiny_model / "config.json", model / "config.json")
    program = write_tiny_program(tmp_path / "prog")
    before = snapshot(tmp_path)
    proc = forward(str(model), "--program", str(program), "--golden", "none")
    assert_user_error(proc, str(model))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:1000],  # cut inside the header
        lambda b: b[:-100],  # header intact, data short
        lambda b: b"\xff" * 64 + b[64:],  # garbage header length
    ],
    ids=["header-cut", "data-cut", "garbage"],
)
def test_corrupt_safetensors(tiny_model: Path, tmp_path: Path, damage) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    for f in model.glob("*.safetensors"):
        f.write_bytes(damage(f.read_bytes()))
    program = write_tiny_program(tmp_path / "prog")
    before = snapshot(tmp_path)
    proc = forward(str(model), "--program", str(program), "--golden", "none")
    assert_user_error(proc, ".safetensors")
    assert snapshot(tmp_path) == before


def test_weight_of_wrong_shape(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    model = write_tiny_checkpoint(tmp_path / "model")
    files = list(model.glob("*.safetensors"))
    assert len(files) == 1
    tensors = load_file(files[0])
    tensors["model.norm.weight"] = tensors["model.norm.weight"][:63].copy()
    save_file(tensors, files[0])
    program = write_tiny_program(tmp_path / "prog")
    before = snapshot(tmp_path)
    proc = forward(str(model), "--program", str(program), "--golden", "none")
    assert_user_error(proc, "model.norm.weight", "63", "64")
    assert snapshot(tmp_path) == before


@pytest.fixture
def smollm2_copy(tmp_path: Path) -> Path:
    if not SCRATCHY.is_dir():
        pytest.skip(f"KTIR corpus not found at {CORPUS} (set KTIR_CORPUS)")
    dst = tmp_path / "fixture"
    dst.mkdir()
    src = SCRATCHY / "smollm2-135m"
    shutil.copyfile(src / "manifest.json", dst / "manifest.json")
    for f in src.glob("node*.mlir"):
        shutil.copyfile(f, dst / f.name)
    return dst


def test_manifest_naming_missing_node_file(smollm2_copy: Path, tmp_path: Path) -> None:
    (smollm2_copy / "node12.mlir").unlink()
    before = snapshot(tmp_path)
    proc = forward("smollm2-135m", "--program", str(smollm2_copy), "--weights", "synthetic", "--golden", "live")
    assert_user_error(proc, f"manifest.json: nodes[12].mlir: node12.mlir not found in {smollm2_copy}")
    assert snapshot(tmp_path) == before


def test_manifest_with_unknown_tensor_id(smollm2_copy: Path, tmp_path: Path) -> None:
    doc = json.loads((smollm2_copy / "manifest.json").read_text())
    doc["nodes"][3]["args"][1]["tensor"] = 9999
    (smollm2_copy / "manifest.json").write_text(json.dumps(doc))
    before = snapshot(tmp_path)
    proc = forward("smollm2-135m", "--program", str(smollm2_copy), "--weights", "synthetic")
    assert_user_error(proc, "manifest.json: nodes[3].args[1].tensor: unknown tensor id 9999")
    assert snapshot(tmp_path) == before


@needs_corpus
def test_program_for_another_model(tmp_path: Path) -> None:
    proc = forward("smollm2-135m", "--program", str(SCRATCHY / "llama-3.2-1b"), "--weights", "synthetic")
    assert_user_error(proc, "manifest.json: sources[0]: tensor 0 (embed rows) is 1x2048, the model needs 1x576")


@needs_corpus
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--mode", "prefill"], "--mode prefill: the program in"),
        (["--tokens", "4"], "--tokens 4: the program in"),
        (["--mode", "sideways"], "--mode sideways: expected decode or prefill"),
    ],
)
def test_mode_and_tokens_must_agree(flags: list[str], message: str) -> None:
    proc = forward("smollm2-135m", "--program", str(SCRATCHY / "smollm2-135m"), "--weights", "synthetic", *flags)
    assert_user_error(proc, message)


def test_json_target_must_be_writable(tiny_model: Path, tmp_path: Path) -> None:
    program = write_tiny_program(tmp_path / "prog")
    proc = forward(str(tiny_model), "--program", str(program), "--json", str(tmp_path))
    assert_user_error(proc, "is a directory")
    proc = forward(str(tiny_model), "--program", str(program), "--json", str(tmp_path / "no" / "r.json"))
    assert_user_error(proc, "does not exist")


def test_json_never_overwrites_an_input(tiny_model: Path, tmp_path: Path) -> None:
    program = write_tiny_program(tmp_path / "prog")
    _tiny_golden(tiny_model, tmp_path / "golden.f16.gz")
    before = snapshot(tmp_path)
    for target in (program / "manifest.json", program / "node1.mlir", tmp_path / "golden.f16.gz"):
        proc = forward(str(tiny_model), "--program", str(program), "--golden", str(tmp_path / "golden.f16.gz"),
                       "--json", str(target))
        assert_user_error(proc, "refusing to overwrite an input of this run")
    assert snapshot(tmp_path) == before


def test_vendored_golden_missing(tiny_model: Path, tmp_path: Path) -> None:
    program = write_tiny_program(tmp_path / "prog")
    proc = forward(str(tiny_model), "--program", str(program), "--golden", "vendored")
    assert_user_error(proc, "--golden vendored: golden.f16.gz not found in")


def test_missing_program_dir(tmp_path: Path) -> None:
    proc = forward("smollm2-135m", "--program", str(tmp_path / "nope"), "--weights", "synthetic")
    assert_user_error(proc, "program directory not found")
