"""Fuzzed sweep specs and sweep output targets, each run through ``ktir-models sweep`` under the
error contract of harness.py, plus the sweep's own: nothing is written outside ``--out`` and
``--junit``; a refusal (exit 2) leaves no output at all; a finished sweep leaves a complete
folder (summary, report, one result per case, no temporaries) and a JUnit report of every case.

The specs' cases are cheap by construction: their models do not resolve (an error result at
once, no case process) and every case gets ``--timeout`` from the command line (the base specs
set none, and a mutation only edits or removes what is there), so a case that does start a
process ends within seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from .harness import CASES, fuzz_case
from .mutations import mutate_bytes, mutate_json
from .test_fuzz_files import fuzz

BASE_SPEC = {
    "name": "fuzz",
    "defaults": {"golden": "none", "expect": "error"},
    "matrix": [
        {"model": "no-such-model", "mode": "prefill", "tokens": [4, 8], "label": "a"},
        {"kind": "generate", "model": "./no-model", "steps": 2, "cpus": 1},
        {"model": "org/not-cached", "weights": "synthetic", "seed": 3, "memory": "1GiB", "id": "c"},
    ],
}
CASE_TIMEOUT = ("--timeout", "5")


def toml_text(doc) -> str:
    """``doc`` (a table of tables, arrays of tables and values) as TOML; None values dropped."""
    lines = []
    for key, value in doc.items():
        if _is_table_array(value):
            continue
        if isinstance(value, dict):
            lines.append(f"[{_key(key)}]")
            lines += [f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None]
        elif value is not None:
            lines.insert(0, f"{_key(key)} = {_value(value)}")
    for key, value in doc.items():
        if _is_table_array(value):
            for table in value:
                lines.append(f"[[{_key(key)}]]")
                lines += [f"{_key(k)} = {_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"


def _is_table_array(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _key(key) -> str:
    return json.dumps(str(key))


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return ("nan" if math.isnan(value) else "inf" if value > 0 else "-inf") \
            if not math.isfinite(value) else repr(value)
    if isinstance(value, (int, str)):
        return str(value) if isinstance(value, int) else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        items = (f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(items) + "}"
    return json.dumps(str(value))


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` without following symlinks: a file's sha256, a link's target."""
    entries = {}
    for directory, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(directory) / name
            if path.is_symlink():
                entries[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                entries[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_dir():
                entries[str(path)] = "dir"
            else:
                entries[str(path)] = "special"
    return entries


def check_sweep_outputs(result, out: Path, junit: Path | None, created_out: bool) -> None:
    """A refusal leaves nothing; a finished sweep a complete folder and report."""
    if result.code == 2:
        if created_out:
            assert not os.path.lexists(out), "a refused sweep left --out behind"
        return
    assert result.code in (0, 1)
    summary = json.loads((out / "summary.json").read_text())
    ids = [c["id"] for c in summary["cases"]]
    results = sorted(p.name for p in (out / "cases").iterdir() if p.name.endswith(".json"))
    assert set(results) >= {f"{i}.json" for i in ids}
    leftovers = [p.name for p in list(out.iterdir()) + list((out / "cases").iterdir())
                 if p.name.startswith(".tmp-")]
    assert leftovers == [], leftovers
    if junit is not None:
        names = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")]
        assert names == ids


@fuzz(60)
@given(data=st.data())
def test_sweep_specs(data):
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        spec = work / "spec.toml"
        text = toml_text(BASE_SPEC)
        if data.draw(st.integers(0, 3), label="raw?") == 0:
            spec.write_bytes(mutate_bytes(data, text.encode()))
        else:
            spec.write_text(toml_text(mutate_json(data, BASE_SPEC)))
        out, junit = work / "out", work / "junit.xml"
        before = snapshot(work)
        argv = ["sweep", spec, "--out", out, "--junit", junit, "--quiet", "--jobs", "2",
                *CASE_TIMEOUT]
        result = fuzz_case("sweep spec", argv, [spec])
        after = snapshot(work)
        assert {p for p in after if not p.startswith(str(out))} - set(before) <= {str(junit)}
        check_sweep_outputs(result, out, junit if result.code != 2 else None, created_out=True)
        if result.code == 2:
            assert not junit.exists()
    assert CASES["sweep spec"] > 0


QUICK_SPEC = '[[matrix]]\nmodel = "no-such-model"\nid = "w"\nexpect = "error"\n'

#: What --out / --junit point at: names of things set up in each case's private folder.
TARGETS = ["new", "new/deeper/x", "empty-dir", "sweep-dir", "user-dir", "spec.toml", "input-dir",
           "input-dir/config.json", "notes.txt", "fifo", "link-to-dir", "link-to-file", "dangling",
           "sweep-dir/junit.xml", "sweep-dir/summary.json", "sweep-dir/cases",
           "sweep-dir/cases/w.json",
           "linked-cases", "linked-lock", "/dev/null"]


def _set_up(work: Path) -> None:
    # the case's model is input-dir: a directory the sweep reads (it does not resolve as a model)
    (work / "spec.toml").write_text(QUICK_SPEC.replace("no-such-model", str(work / "input-dir")))
    (work / "empty-dir").mkdir()
    (work / "user-dir").mkdir()
    (work / "user-dir" / "thesis.tex").write_text("mine")
    (work / "input-dir").mkdir()
    (work / "input-dir" / "config.json").write_text("{}")
    (work / "notes.txt").write_text("notes")
    os.mkfifo(work / "fifo")
    (work / "elsewhere").mkdir()
    (work / "elsewhere" / "keep.txt").write_text("keep")
    (work / "link-to-dir").symlink_to(work / "elsewhere")
    (work / "link-to-file").symlink_to(work / "notes.txt")
    (work / "dangling").symlink_to(work / "nowhere")
    sweep = work / "sweep-dir"
    sweep.mkdir()
    (sweep / ".ktir-sweep").write_text('{"written_by": "ktir-models sweep", "format": 1}\n')
    for name in ("linked-cases", "linked-lock"):
        folder = work / name
        folder.mkdir()
        (folder / ".ktir-sweep").write_text('{"written_by": "ktir-models sweep", "format": 1}\n')
    (work / "linked-cases" / "cases").symlink_to(work / "elsewhere")
    (work / "linked-lock" / ".lock").symlink_to(work / "notes.txt")


def _path(work: Path, name: str) -> Path:
    return Path(name) if name.startswith("/") else work / name


#: Targets a sweep may use: drawn as often as all the others together.
USABLE_OUT = ["new", "empty-dir", "sweep-dir"]
USABLE_JUNIT = [None, "new-junit.xml", "sweep-dir/junit.xml", "notes.txt"]


@fuzz(60)
@given(out_name=st.sampled_from(USABLE_OUT) | st.sampled_from(TARGETS),
       junit_name=st.sampled_from(USABLE_JUNIT) | st.sampled_from(TARGETS + [None]),
       force=st.booleans())
def test_sweep_output_targets(out_name, junit_name, force):
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        _set_up(work)
        out = _path(work, out_name)
        junit = None if junit_name is None else _path(work, junit_name)
        argv = ["sweep", work / "spec.toml", "--out", out, "--quiet"]
        argv += ["--junit", junit] if junit is not None else []
        argv += ["--force"] if force else []
        before = snapshot(work)
        existed = os.path.lexists(out)
        # what --out may be: new (under an existing directory), an empty directory or a sweep folder
        usable = (not existed and out.parent.is_dir()) or (out.is_dir() and (
            not any(out.iterdir()) or (out / ".ktir-sweep").is_file())) and not out.is_symlink()
        junit_existed = junit is not None and os.path.lexists(junit)
        inputs = [work / "spec.toml", work / "input-dir", work / "elsewhere"]
        result = fuzz_case("sweep outputs", argv, inputs)
        after = snapshot(work)
        root = os.path.realpath(out)
        written = {p for p in set(after) | set(before) if after.get(p) != before.get(p)}
        for path in written:
            # only inside the --out that was used, or the --junit file itself
            assert result.code != 2, (path, "changed by a refused sweep")
            real = os.path.realpath(path)
            assert real == root or real.startswith(root + os.sep) or path == str(junit), path
        if result.code != 2:
            assert usable, out_name
            check_sweep_outputs(result, Path(root), junit, created_out=not existed)
        if junit_existed and result.code != 2:
            # over an existing file: never an input or a special file; an unrelated one only
            # with --force
            assert junit_name in ("notes.txt", "link-to-file"), junit_name
            assert force
