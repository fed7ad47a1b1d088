"""Caches that cannot lie (ktir_models/cache_entries.py): a damaged entry is named, moved aside and
rebuilt, and the run's answer is the clean cache's; cache paths that are files, devices, symlinks
or read-only are one exit-2 line, and nothing is written through a symlink."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ktir_models import cache_entries
from ktir_models.cache_entries import DAMAGED_MARK, DIGEST_FILE, verify_entry
from ktir_models.model.emit.generation import generate
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.checkpoint import get_checkpoint

from .cli_harness import REPO_ROOT, assert_user_error, run_cli


def _generation(tiny_model: Path) -> list[np.ndarray]:
    """The logits of every pass of a short greedy generation with synthetic weights, from the
    cache named by KTIR_MODELS_CACHE (programs and weights both come from it)."""
    spec = resolve_model(str(tiny_model))
    result = generate(get_checkpoint(spec, "synthetic", seed=0), spec.name, tokens=3, steps=2)
    return [step.logits.copy() for step in result.steps]


@pytest.fixture(scope="module")
def clean_logits(tiny_model, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KTIR_MODELS_CACHE", str(tmp_path_factory.mktemp("clean-cache")))
        return _generation(tiny_model)


def _only(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _assert_same(logits: list[np.ndarray], clean: list[np.ndarray]) -> None:
    assert len(logits) == len(clean)
    for ours, want in zip(logits, clean):
        assert ours.tobytes() == want.tobytes()


def test_damaged_synthetic_checkpoint_is_moved_aside_and_rebuilt(
    tiny_model, clean_logits, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path))
    _assert_same(_generation(tiny_model), clean_logits)
    [entry] = _only(tmp_path / "synthetic")
    weights = entry / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    header = 8 + int.from_bytes(raw[:8], "little")
    raw[header + 1 :: 2] = bytes(b ^ 0x80 for b in raw[header + 1 :: 2])  # every f16 value negated
    weights.write_bytes(bytes(raw))  # same size, values replaced
    damaged = weights.read_bytes()
    capsys.readouterr()

    _assert_same(_generation(tiny_model), clean_logits)
    err = capsys.readouterr().err
    assert f"cache entry {entry} is damaged (model.safetensors: sha256 differs" in err
    assert len(err.strip().splitlines()) == 1
    [aside] = [p for p in (tmp_path / "synthetic").iterdir() if DAMAGED_MARK in p.name]
    assert (aside / "model.safetensors").read_bytes() == damaged  # kept, not deleted
    assert verify_entry(entry) is None


def test_damaged_cached_program_is_moved_aside_and_rebuilt(
    tiny_model, clean_logits, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path))
    _assert_same(_generation(tiny_model), clean_logits)
    edited = []
    for entry in _only(tmp_path / "programs"):
        node = next(p for p in sorted(entry.glob("node*.mlir")) if "arith.subf" in p.read_text())
        node.write_text(node.read_text().replace("arith.subf", "arith.addf", 1))
        edited.append(entry)
    capsys.readouterr()

    _assert_same(_generation(tiny_model), clean_logits)
    err = capsys.readouterr().err
    for entry in edited:
        assert f"cache entry {entry} is damaged (node" in err and "sha256 differs" in err
        assert verify_entry(entry) is None
    asides = [p for p in (tmp_path / "programs").iterdir() if DAMAGED_MARK in p.name]
    assert len(asides) == len(edited) and all(
        "arith.addf" in "".join(q.read_text() for q in a.glob("*.mlir")) for a in asides
    )


def test_entry_replaced_by_a_file_or_without_digest_is_rebuilt(
    tiny_model, clean_logits, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path))
    _generation(tiny_model)
    [program, *rest] = _only(tmp_path / "programs")
    [weights] = _only(tmp_path / "synthetic")
    (weights / DIGEST_FILE).unlink()  # an entry written before digests existed
    for p in program.iterdir():
        p.unlink()
    program.rmdir()
    program.write_text("not a program")
    capsys.readouterr()
    _assert_same(_generation(tiny_model), clean_logits)
    err = capsys.readouterr().err
    assert f"cache entry {program} is damaged (is not a directory)" in err
    assert f"cache entry {weights} is damaged (has no {DIGEST_FILE})" in err
    assert verify_entry(program) is None and verify_entry(weights) is None


NATIVE_RUN = textwrap.dedent("""
    import numpy as np
    from ktir_models.ktir.backends import seqmm
    assert seqmm.available(), seqmm.unavailable_reason()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 3, 64)).astype(np.float16)
    b = rng.standard_normal((1, 64, 5)).astype(np.float16)
    kw = dict(trips=2, kb=32, transpose_b=False, part_dtype=np.float32, acc_dtype=np.float32)
    want = seqmm.kloop_reference(a, b, None, **kw)
    assert seqmm.kloop(a, b, None, **kw).tobytes() == want.tobytes()
    print("kernel ok")
    from ktir_models.ktir.backends import f16_convert
    x = rng.standard_normal(10).astype(np.float16)
    assert f16_convert.convert(x, np.float32).tobytes() == x.astype(np.float32).tobytes()
    print("extension", seqmm._library().ext is not None)
""")


def _native(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KTIR_MODELS_CACHE": str(cache), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("KTIR_MODELS_NATIVE", None)
    return subprocess.run(
        [sys.executable, "-c", NATIVE_RUN], env=env, capture_output=True, text=True, timeout=900
    )


@pytest.mark.parametrize("build", ["seqmm", "fastcall"])
def test_truncated_native_library_is_rebuilt_not_loaded(tmp_path, build):
    """The kernel library and the fastcall extension are loaded only after their digests match:
    a truncated one (mapping it would fault with SIGBUS) is moved aside and compiled again, in a
    process that then runs it."""
    first = _native(tmp_path)
    if first.returncode != 0 and "could not build" in first.stderr + first.stdout:
        pytest.skip(f"no C compiler builds the native kernel here: {first.stderr[-300:]}")
    assert first.returncode == 0, first.stderr[-2000:]
    if build == "fastcall" and "extension True" not in first.stdout:
        pytest.skip("the fastcall extension is not built here (no Python headers)")
    [entry] = [p for p in _only(tmp_path / "native") if p.name.startswith(build + "-")]
    [library] = [p for p in entry.iterdir() if p.name != DIGEST_FILE]
    size = library.stat().st_size
    with open(library, "r+b") as f:
        f.truncate(size // 3)

    second = _native(tmp_path)
    assert second.returncode == 0, (second.returncode, second.stderr[-2000:])  # -7 would be SIGBUS
    assert "kernel ok" in second.stdout and "extension" in second.stdout
    assert (
        f"cache entry {entry} is damaged ({library.name}: {size // 3} bytes, recorded {size})"
        in second.stderr
    )
    assert library.stat().st_size == size and verify_entry(entry) is None
    [aside] = [p for p in (tmp_path / "native").iterdir() if DAMAGED_MARK in p.name]
    assert (aside / library.name).stat().st_size == size // 3


def _forward(tiny_model):
    return run_cli("forward", tiny_model, "--weights", "synthetic", "--golden", "none", "-q")


def _bad_root(kind: str, tmp_path: Path) -> tuple[Path, Path | None]:
    """(the cache root to set, a folder the cache must leave untouched)."""
    root = tmp_path / "cache"
    if kind == "file":
        root.write_text("notes\n")
    elif kind == "dev-null":
        root = Path(os.devnull)
    elif kind == "dangling-symlink":
        root.symlink_to(tmp_path / "missing")
    elif kind == "symlink-elsewhere":
        elsewhere = tmp_path / "someone-elses"
        elsewhere.mkdir()
        (elsewhere / "thesis.tex").write_text("keep\n")
        root.symlink_to(elsewhere)
        return root, elsewhere
    elif kind == "subfolder-symlink":
        elsewhere = tmp_path / "someone-elses"
        elsewhere.mkdir()
        root.mkdir()
        (root / "synthetic").symlink_to(elsewhere)
        return root, elsewhere
    elif kind == "subfolder-file":
        root.mkdir()
        (root / "synthetic").write_text("x")
    return root, None


@pytest.mark.parametrize(
    "kind",
    [
        "file",
        "dev-null",
        "dangling-symlink",
        "symlink-elsewhere",
        "subfolder-symlink",
        "subfolder-file",
    ],
)
def test_cache_path_that_is_not_a_directory_is_one_line(kind, tiny_model, tmp_path, monkeypatch):
    root, elsewhere = _bad_root(kind, tmp_path)
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(root))
    before = sorted(p.name for p in elsewhere.iterdir()) if elsewhere else None
    line = assert_user_error(_forward(tiny_model), "KTIR_MODELS_CACHE")
    assert line.startswith("cache ") and ("symlink" in line or "not a directory" in line), line
    if elsewhere is not None:
        assert sorted(p.name for p in elsewhere.iterdir()) == before  # nothing written through it


def test_read_only_cache_is_one_line(tiny_model, tmp_path, monkeypatch):
    """A cache the user cannot write to. Permission bits do not bind root, so the refusal the
    kernel would give is what ``os.access`` reports here."""
    root = tmp_path / "cache"
    for kind in ("synthetic", "programs"):
        (root / kind).mkdir(parents=True)
    real_access = os.access
    monkeypatch.setattr(
        cache_entries.os,
        "access",
        lambda p, mode, **kw: False if Path(p).is_relative_to(root) else real_access(p, mode, **kw),
    )
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(root))
    assert_user_error(
        _forward(tiny_model), f"cache {root}/", ": is read-only, and entry", "KTIR_MODELS_CACHE"
    )
    assert [p for kind in ("synthetic", "programs") for p in (root / kind).iterdir()] == []


@pytest.mark.skipif(os.geteuid() == 0, reason="permission bits do not bind root")
def test_read_only_cache_by_permission_bits(tiny_model, tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o555)
    try:
        monkeypatch.setenv("KTIR_MODELS_CACHE", str(root))
        assert_user_error(_forward(tiny_model), f"cache {root}/", "KTIR_MODELS_CACHE")
    finally:
        root.chmod(0o755)
