"""Output safety of `run --out` and `forward --json`: refused targets touch nothing, existing files
of another kind survive without --force, and no partial file is ever left behind."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ktir_models.errors import UserError
from ktir_models.outputs import NPZ, atomic_output, check_output_target

from .cli_harness import assert_user_error, run_cli, tree_digest
from .test_input_files import SCALE, good_inputs


@pytest.fixture
def run_args(tmp_path):
    kernel = tmp_path / "scale.mlir"
    kernel.write_text(SCALE)
    return ["run", kernel, "--inputs", good_inputs(tmp_path / "in.npz"), "--scalar", "s=3"]


def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if "partial" in p.name or p.name.startswith("."))


def test_out_into_a_missing_directory(run_args, tmp_path):
    r = run_cli(*run_args, "--out", tmp_path / "absent" / "out.npz")
    assert_user_error(r, "--out", "directory", "does not exist")
    assert _leftovers(tmp_path) == []


def test_out_onto_a_directory(run_args, tmp_path):
    (tmp_path / "d").mkdir()
    r = run_cli(*run_args, "--out", tmp_path / "d")
    assert_user_error(r, "--out", "is a directory")
    assert list((tmp_path / "d").iterdir()) == [] and _leftovers(tmp_path) == []


def test_out_never_overwrites_a_non_npz_file_without_force(run_args, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    before = tree_digest(notes)
    assert_user_error(run_cli(*run_args, "--out", notes), "--out", "notes.txt", "not a .npz archive", "--force")
    assert tree_digest(notes) == before
    r = run_cli(*run_args, "--out", notes, "--force")
    assert r.code == 0, r.stderr
    with np.load(notes) as data:
        assert data["y"].tolist() == [[0, 3, 6, 9]]
    assert _leftovers(tmp_path) == []


def test_out_replaces_an_existing_npz(run_args, tmp_path):
    out = tmp_path / "old.npz"
    np.savez(out, y=np.ones(3))
    assert run_cli(*run_args, "--out", out).code == 0
    with np.load(out) as data:
        assert data["y"].shape == (1, 4)


def test_out_refuses_the_inputs(run_args, tmp_path):
    assert_user_error(run_cli(*run_args, "--out", run_args[1]), "refusing to overwrite an input")
    assert_user_error(run_cli(*run_args, "--out", run_args[3]), "refusing to overwrite an input")


def test_json_never_overwrites_a_non_json_file(tiny_model, tmp_path):
    keep = tmp_path / "report.json"
    keep.write_text("not json at all")
    r = run_cli("forward", tiny_model, "--weights", tiny_model, "--golden", "none", "-q", "--json", keep)
    assert_user_error(r, "--json", "not a JSON document", "--force")
    assert keep.read_text() == "not json at all"
    r = run_cli("forward", tiny_model, "--weights", tiny_model, "--golden", "none", "-q", "--json", keep, "--force")
    assert r.code == 0, r.stderr
    assert json.loads(keep.read_text())["pass"] is True
    assert _leftovers(tmp_path) == []


def test_json_onto_a_directory_or_into_a_missing_one(tiny_model, tmp_path):
    for target, fragment in ((tmp_path, "is a directory"), (tmp_path / "no" / "r.json", "does not exist")):
        r = run_cli("forward", tiny_model, "--weights", tiny_model, "--golden", "none", "-q", "--json", target)
        assert_user_error(r, "--json", fragment)


def test_partial_file_is_removed_on_every_error_path(tmp_path):
    target = tmp_path / "out.npz"
    target.write_bytes(b"")
    with pytest.raises(RuntimeError):
        with atomic_output(target, "--out") as f:
            f.write(b"half")
            raise RuntimeError("killed mid-write")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(target, "--out") as f:
            raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]
    assert target.read_bytes() == b""  # untouched


def test_directory_vanishing_after_the_check_is_one_message(tmp_path):
    """The check ran, then the directory went away before the write: still one UserError."""
    gone = tmp_path / "gone"
    gone.mkdir()
    check_output_target(gone / "o.npz", "--out", NPZ)
    gone.rmdir()
    with pytest.raises(UserError, match=r"--out .*o.npz: cannot create a file in"):
        with atomic_output(gone / "o.npz", "--out") as f:
            f.write(b"x")


def test_latency_json_never_overwrites_a_non_json_file(tiny_program, tmp_path):
    keep = tmp_path / "notes.txt"
    keep.write_text("keep me")
    assert_user_error(run_cli("latency", tiny_program, "--json", keep), "--json", "not a JSON document")
    assert keep.read_text() == "keep me"
    assert run_cli("latency", tiny_program, "--json", keep, "--force").code == 0
    assert "latency" in json.loads(keep.read_text())
