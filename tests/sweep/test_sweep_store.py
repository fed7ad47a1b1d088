"""Result keys and the results directory: what a rerun trusts and what it reruns (fast)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from conftest import REPO
from ktir_models.errors import UserError
from ktir_models.sweep import load_spec
from ktir_models.sweep.keys import case_key, forget
from ktir_models.sweep.store import ResultStore
from ktir_models.sweep.worker import CaseResult

FIXTURES = REPO / "fixtures"


def _case(tmp_path):
    program = tmp_path / "prog"
    shutil.copytree(FIXTURES / "tiny-mha-decode", program)
    spec = tmp_path / "s.toml"
    spec.write_text(f'[[matrix]]\nmodel = "{FIXTURES}/models/tiny-mha"\nprogram = "{program}"\ngolden = "vendored"\n')
    return load_spec(spec).cases[0], program


def test_key_follows_program_content_options_and_weights(tmp_path):
    case, program = _case(tmp_path)
    key = case_key(case)
    assert case_key(case) == key  # deterministic
    assert case_key(replace(case, label="renamed", expect="fail")) == key  # reporting fields only
    assert case_key(replace(case, repeat=2)) != key
    assert case_key(replace(case, timeout=5.0)) != key
    assert case_key(replace(case, weights="synthetic")) != key
    node = program / "node4.mlir"
    text = node.read_text()
    node.write_text(text.replace("arith.subf", "arith.addf", 1))
    forget()
    assert case_key(case) != key  # one op changed: a new key
    node.write_text(text)
    forget()
    assert case_key(case) == key
    assert case_key(case, "version") != key  # sources not covered
    assert case_key(case, "version") == case_key(replace(case, label="x"), "version")


def test_store_trusts_only_complete_results_with_the_same_key(tmp_path):
    store = ResultStore(tmp_path / "out")
    result = CaseResult("c1", "k1", "pass", None, 0, 1.5, run_id="r1")
    path = store.save(result)
    assert store.load("c1", "k1") == result
    assert store.load("c1", "k2") is None  # inputs changed
    # a half-written file (as a crash mid-write of a non-atomic writer would leave) is not trusted
    path.write_text(json.dumps(result.to_json())[:40])
    assert store.load("c1", "k1") is None
    # a stray temporary of a killed writer (named with its run id, which the lock file keeps) is
    # ignored and tidied away on the next open; a file the sweep did not name is left alone
    stray = store.cases_dir / f".tmp-{store.run_id}-c2.json.0a1b2c3d"
    stray.write_text("{")
    foreign = store.cases_dir / ".tmp-notes"
    foreign.write_text("mine")
    assert store.load("c2", "k1") is None
    store.close()
    ResultStore(tmp_path / "out")
    assert not stray.exists() and foreign.read_text() == "mine"
    assert sorted(p.name for p in store.cases_dir.iterdir()) == [".tmp-notes", "c1.json"]


def test_one_sweep_at_a_time_writes_a_directory(tmp_path):
    first = ResultStore(tmp_path / "out")
    with pytest.raises(UserError, match="another sweep is writing to this directory"):
        ResultStore(tmp_path / "out")
    first.close()  # what the end of the first sweep (or of its process) does
    ResultStore(tmp_path / "out")


def test_exit_codes_map_to_verdicts_and_a_traceback_is_an_error_not_a_fail(tmp_path):
    from ktir_models.sweep.worker import _verdict

    case, _ = _case(tmp_path)
    mismatch = {"pass": False, "reasons": ["top-1 differs on 1 of 1 rows (rows 0)"]}
    assert _verdict(0, None, {"pass": True}, "", case, None) == ("pass", None)
    assert _verdict(1, None, mismatch, "forward: FAIL: ...", case, None) == ("fail", mismatch["reasons"][0])
    crash = "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n"
    assert _verdict(1, None, None, crash, case, None, crashed=True) == ("error", "crashed (exit code 1): KeyError: 'x'")
    assert _verdict(1, None, None, "", case, None)[0] == "error"  # a forward's mismatch leaves a report
    assert _verdict(2, None, None, "x.toml: bad\n", case, None) == ("error", "bad input (exit code 2): x.toml: bad")
    assert _verdict(-9, None, None, "", case, None)[1].startswith("killed by signal SIGKILL")
    assert _verdict(-9, "timeout", None, "", case, 3.0) == ("error", "timed out after 3 s (process group killed)")


def test_key_does_not_depend_on_where_the_files_sit(tmp_path):
    case, program = _case(tmp_path)
    moved = tmp_path / "elsewhere"
    shutil.copytree(program, moved)
    forget()
    assert case_key(replace(case, program=str(moved))) == case_key(case)
    assert case_key(replace(case, program="emit")) != case_key(case)


def test_a_temporary_is_named_for_its_run_and_never_looks_like_a_result(tmp_path, monkeypatch):
    """A sweep killed between writing a temporary and renaming it leaves the temporary: readers
    that list ``cases/*.json`` (and the next sweep's tidy-up, by run id) must tell it apart."""
    import ktir_models.sweep.store as store_module

    store = ResultStore(tmp_path / "out")
    renamed = []

    def fail_rename(src, dst, **kw):
        renamed.append(src)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module.os, "replace", fail_rename)
    with pytest.raises(UserError, match="cannot write .*c1.json: No space left on device"):
        store.save(CaseResult("c1", "k1", "pass", None, 0, 1.5))
    (tmp,) = renamed
    assert tmp.startswith(f".tmp-{store.run_id}-c1.json.") and not tmp.endswith(".json")
    assert list(store.cases_dir.iterdir()) == []  # the failed write left nothing
