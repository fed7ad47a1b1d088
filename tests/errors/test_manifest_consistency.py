"""Manifest consistency: declared sizes against the model and the programs' views, outputs flagged
as written, positions inside the model. Each refused before anything is allocated."""

from __future__ import annotations

import json
import shutil

import pytest

from .cli_harness import assert_user_error, run_cli


@pytest.fixture
def program(tiny_program, tmp_path):
    target = tmp_path / "prog"
    shutil.copytree(tiny_program, target)
    return target


def _edit(program, change):
    path = program / "manifest.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return doc


def _forward(tiny_model, program):
    return run_cli("forward", tiny_model, "--program", program, "--weights", tiny_model, "--golden", "none", "-q")


def test_unmodified_program_runs(tiny_model, program):
    r = _forward(tiny_model, program)
    assert r.code == 0, r.stderr


def _intermediate(doc):
    return next(t for t in doc["tensors"] if not t["is_source"] and t["id"] != doc["result"])


def test_intermediate_tensor_of_a_billion_elements(tiny_model, program):
    doc = _edit(program, lambda d: _intermediate(d).update(rows=1, cols=10**9))
    tid = _intermediate(doc)["id"]
    assert_user_error(_forward(tiny_model, program), "manifest.json: tensors[", f"tensor {tid}",
                      "1x1000000000", "more than any tensor of this model needs")


def test_tensor_declared_larger_than_any_view(tiny_model, program):
    """Within the model bound, but larger than every view the programs take of it."""
    doc = _edit(program, lambda d: _intermediate(d).update(rows=_intermediate(d)["rows"] * 2))
    tid = _intermediate(doc)["id"]
    assert_user_error(_forward(tiny_model, program), f"tensor {tid} is declared", "the programs view at most")


def test_tensor_declared_smaller_than_a_view(tiny_model, program):
    doc = _edit(program, lambda d: _intermediate(d).update(cols=_intermediate(d)["cols"] - 1))
    tid = _intermediate(doc)["id"]
    r = _forward(tiny_model, program)
    assert_user_error(r, "manifest.json: nodes[", "views %", f"tensor {tid} is declared")


def test_written_argument_flagged_as_not_an_output(tiny_model, program):
    """The node writing layer 0's V cache (a host-bound source, so no "read before produced"
    check can notice) with its output flag removed: used to be accepted."""
    found = {}

    def unflag(doc):
        cache = {s["id"] for s in doc["sources"] if s["role"] == "prefix_v"}
        for i, node in enumerate(doc["nodes"]):
            for j, arg in enumerate(node["args"]):
                if arg["is_output"] and arg["tensor"] in cache and not found:
                    arg["is_output"] = False
                    found.update(node=i, arg=j)

    _edit(program, unflag)
    assert found, "the decode program writes its V cache"
    assert_user_error(_forward(tiny_model, program), f"nodes[{found['node']}].args[{found['arg']}].is_output",
                      "false, but @", "stores into %")


def test_read_only_argument_flagged_as_an_output(tiny_model, program):
    def flag(doc):
        node = doc["nodes"][3]
        node["args"][0]["is_output"] = True  # the activation it reads (x)

    _edit(program, flag)
    r = _forward(tiny_model, program)
    assert r.code == 2 and "Traceback" not in r.stderr
    assert "nodes[3].args[0]" in r.stderr


@pytest.mark.parametrize("field, value, fragment", [
    ("decode_position", 10**9, "decode_position: 1000000000 is beyond the model's positions"),
    ("decode_position", 256, "decode_position: 256 is beyond"),
    ("positions", [300], "positions[0]: 300 is beyond"),
    ("past", 256, "past: 256 + m = 257 is beyond"),
], ids=["decode-position-1e9", "decode-position-256", "positions", "past"])
def test_positions_beyond_the_model(tiny_model, program, field, value, fragment):
    _edit(program, lambda d: d.update({field: value}))
    assert_user_error(_forward(tiny_model, program), fragment, "'max_position_embeddings' = 256")
