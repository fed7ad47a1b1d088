"""`sweep` writes only under --out and to --junit, and never over a file that is not its own.

Every refusal is exit 2 with one line, checked before any case runs (no --out is created, no
case process starts), and leaves every file byte-identical. The runs that do happen have one
case whose model does not resolve: an error result at once, with no case process.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import REPO, stored_results
from errors.cli_harness import assert_user_error, run_cli, tree_digest
from ktir_models.sweep.spec import MAX_ID_CHARS, load_spec

FIXTURES = REPO / "fixtures"
QUICK_SPEC = '[[matrix]]\nmodel = "no-such-model"\nid = "w"\nexpect = "error"\n'


def _spec(tmp_path: Path, text: str = QUICK_SPEC) -> Path:
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    return spec


def _sweep(spec: Path, out: Path, *extra):
    return run_cli("sweep", spec, "--out", out, "--quiet", *extra)


def _sweep_folder(tmp_path: Path) -> Path:
    """A sweep folder made by one real (short) sweep."""
    out = tmp_path / "out"
    r = _sweep(_spec(tmp_path), out)
    assert r.code == 0, r.stderr
    assert (out / ".ktir-sweep").is_file() and (out / "cases" / "w.json").is_file()
    return out


def test_symlinked_cases_folder_is_refused_and_not_followed(tmp_path):
    out = _sweep_folder(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f".tmp-{(out / '.lock').read_text().strip()}-0-x.json").write_text("keep")
    (elsewhere / "w.json").write_text("not a result")
    before = tree_digest(elsewhere)
    shutil.rmtree(out / "cases")
    (out / "cases").symlink_to(elsewhere)
    r = _sweep(tmp_path / "spec.toml", out)
    assert_user_error(r, f"--out {out}", "cases: is a symlink")
    assert tree_digest(elsewhere) == before
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted(Path(p).name for p in before)


def test_symlinked_lock_is_refused_and_not_followed(tmp_path):
    out = _sweep_folder(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / ".lock").unlink()
    (out / ".lock").symlink_to(victim)
    r = _sweep(tmp_path / "spec.toml", out)
    assert_user_error(r, ".lock: is a symlink")
    assert victim.read_text() == "precious"


def test_out_holding_other_files_is_refused(tmp_path):
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "report.md").write_text("my report")
    (out / "summary.json").write_text("{}")
    before = tree_digest(out)
    r = _sweep(_spec(tmp_path), out)
    assert_user_error(r, f"--out {out}", "holds files not written by a sweep", "'report.md'")
    assert tree_digest(out) == before
    assert sorted(p.name for p in out.iterdir()) == ["report.md", "summary.json"]


def test_a_sweep_folder_keeps_a_users_files_and_temporaries(tmp_path):
    out = _sweep_folder(tmp_path)
    (out / "notes.txt").write_text("mine")
    (out / "cases" / ".tmp-mine").write_text("mine too")
    r = _sweep(tmp_path / "spec.toml", out)  # the sweep's own reports are replaced
    assert r.code == 0, r.stderr
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "cases" / ".tmp-mine").read_text() == "mine too"
    # a report.md that is not the sweep's is never overwritten
    (out / "report.md").write_text("my own notes\n")
    r = _sweep(tmp_path / "spec.toml", out)
    assert_user_error(r, "report.md: is not a report this sweep wrote")
    assert (out / "report.md").read_text() == "my own notes\n"


def test_missing_parent_of_out_is_refused(tmp_path):
    r = _sweep(_spec(tmp_path), tmp_path / "no" / "such" / "out")
    assert_user_error(r, "directory", "does not exist")
    assert not (tmp_path / "no").exists()


def _forward_spec(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A spec of one forward over private copies of the tiny fixture model and program."""
    model = tmp_path / "model"
    program = tmp_path / "program"
    shutil.copytree(FIXTURES / "models" / "tiny-mha", model)
    shutil.copytree(FIXTURES / "tiny-mha-decode", program)
    spec = _spec(tmp_path, f'[[matrix]]\nmodel = "{model}"\nprogram = "{program}"\n'
                           'golden = "vendored"\n')
    return spec, model, program


@pytest.mark.parametrize("target", ["spec", "manifest", "config", "inside-program"])
def test_junit_at_the_spec_or_a_case_input_is_refused(tmp_path, target):
    spec, model, program = _forward_spec(tmp_path)
    path = {"spec": spec, "manifest": program / "manifest.json", "config": model / "config.json",
            "inside-program": program / "junit.xml"}[target]
    before = tree_digest(spec, model, program)
    out = tmp_path / "out"
    for extra in ((), ("--force",)):  # --force never makes an input writable
        r = _sweep(spec, out, "--junit", path, *extra)
        line = assert_user_error(r, f"--junit {path}")
        assert "input of this sweep" in line
        assert tree_digest(spec, model, program) == before
        assert not out.exists() and not (program / "junit.xml").exists()  # before any case ran


def test_junit_at_an_unrelated_file_or_a_directory_is_refused(tmp_path):
    spec = _spec(tmp_path)
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("\\documentclass{article}\n")
    junit_like = tmp_path / "other.xml"
    junit_like.write_text('<?xml version="1.0"?>\n<testsuites><testsuite name="x">'
                          '<testcase classname="mine" name="t"/></testsuite></testsuites>\n')
    before = tree_digest(thesis, junit_like)
    out = tmp_path / "out"
    for path in (thesis, junit_like):
        assert_user_error(_sweep(spec, out, "--junit", path), f"--junit {path}",
                          "not a JUnit report of a sweep", "--force")
    r = _sweep(spec, out, "--junit", tmp_path)
    assert_user_error(r, f"--junit {tmp_path}", "is a directory")
    assert_user_error(_sweep(spec, out, "--junit", out / "summary.json"), "a file the sweep writes")
    assert tree_digest(thesis, junit_like) == before and not out.exists()
    # with --force an unrelated file is replaced (as `run --out` does); the report is complete
    r = _sweep(spec, out, "--junit", thesis, "--force")
    assert r.code == 0, r.stderr
    assert "<testsuites" in thesis.read_text()


def test_junit_replaces_its_own_report(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "out"
    junit = out / "junit.xml"  # inside the --out this sweep creates
    assert _sweep(spec, out, "--junit", junit).code == 0
    first = junit.read_text()
    assert 'classname="ktir_models.sweep.spec"' in first
    assert _sweep(spec, out, "--junit", junit).code == 0  # a sweep's report: replaced, no --force
    assert junit.read_text().count("<testcase") == 1


def test_a_300_character_case_id_is_a_bounded_safe_file_name(tmp_path):
    long_id = "x" * 150 + "/../" + "y" * 146
    entry = '[[matrix]]\nmodel = "no-such-model"\nexpect = "error"\n'
    spec = _spec(tmp_path, f'{entry}id = "{long_id}"\n{entry}label = "{"z" * 300}"\n')
    ids = [c.id for c in load_spec(spec).cases]
    assert all(len(i) == MAX_ID_CHARS and "/" not in i for i in ids)
    assert ids[0].startswith("x" * 100)
    assert ids[1].startswith("no-such-model.emit-decode.w-hub.g-auto.zzz")
    out = tmp_path / "out"
    r = _sweep(spec, out)
    assert r.code == 0, r.stderr
    assert sorted(stored_results(out)) == sorted(ids)
    assert sorted(p.name for p in (out / "cases").iterdir()) == sorted(f"{i}.json" for i in ids)


def test_ids_never_start_with_a_dot_and_distinct_long_ids_stay_distinct(tmp_path):
    from ktir_models.sweep.spec import safe_id

    assert safe_id(".lock") == "_.lock" and safe_id("-x") == "_-x" and safe_id("..") == "_.."
    a, b = safe_id("a" * 200 + "1"), safe_id("a" * 200 + "2")
    assert a != b and len(a) == len(b) == MAX_ID_CHARS


def test_nothing_is_written_outside_out(tmp_path):
    spec = _spec(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        assert _sweep(spec, Path("out")).code == 0
    finally:
        os.chdir(cwd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml", "work"]
    assert [p.name for p in work.iterdir()] == ["out"]
    assert sorted(p.name for p in (work / "out").iterdir()) == [
        ".ktir-sweep", ".lock", "cases", "report.md", "summary.json"]
