"""The manifest's checks against its programs (model/program_checks.py) read the parsed IR: they
hold on MLIR's generic form, and they follow an address argument through address arithmetic
(``arith.addi`` of the argument and an offset), which a scan of the text could not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ktir_models.ktir import load_module
from ktir_models.ktir.parse.printer import print_generic
from ktir_models.model.manifest import ManifestError, load_manifest
from ktir_models.model.program import parse_program
from ktir_models.model.program_checks import arg_views, parse_and_check

REPO = Path(__file__).resolve().parents[2]
DECODE = REPO / "fixtures" / "tiny-mha-decode"
NODE = 8  # layer 0's post-attention norm: reads %x (an intermediate) and %w, stores into %out
OUT_VIEW = "%view3 = ktdp.construct_memory_view %out, sizes: [1, 64], strides: [64, 1] {"


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "prog"
    shutil.copytree(DECODE, target)
    return target


def _edit_manifest(program: Path, change) -> None:
    path = program / "manifest.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _views_by_node(program: Path) -> list:
    parsed = parse_program(load_manifest(program))
    return [arg_views(n.function) for n in parsed.nodes]


def test_generic_form_copy_passes_and_is_seen_the_same(tmp_path):
    program = _copy(tmp_path)
    for node in program.glob("node*.mlir"):
        node.write_text(print_generic(load_module(node)))
    assert "func.func @" not in (program / f"node{NODE}.mlir").read_text()  # the generic form
    parse_and_check(load_manifest(program))
    assert _views_by_node(program) == _views_by_node(DECODE)
    # and the checks run on it: node 8's input flagged as an output is caught
    _flag_input_as_output(program)
    with pytest.raises(ManifestError, match=READ_ONLY_FLAGGED):
        parse_and_check(load_manifest(program))


#: node 8's %x (the activation it reads) flagged as an output: refused only when every store of
#: the function was traced to its argument
READ_ONLY_FLAGGED = r"nodes\[8\]\.args\[0\]\.is_output: true, but @.* never stores into %x"


def _flag_input_as_output(program: Path) -> None:
    _edit_manifest(program, lambda d: d["nodes"][NODE]["args"][0].update(is_output=True))


def _through_addi(program: Path, offset: str) -> None:
    """Node 8's output view takes its address from ``arith.addi %out, <offset>``."""
    path = program / f"node{NODE}.mlir"
    text = path.read_text()
    assert text.count(OUT_VIEW) == 1
    addi = "%out_at = arith.addi %out, %off : index"
    path.write_text(text.replace(OUT_VIEW, f"{offset}\n    {addi}\n    "
                                 + OUT_VIEW.replace("%out,", "%out_at,")))


def test_stores_through_address_arithmetic_are_traced(tmp_path):
    program = _copy(tmp_path)
    _through_addi(program, "%off = ktdp.get_compute_tile_id : index")  # known only at run time
    views = _views_by_node(program)[NODE]
    assert "out" in views.written and views.complete
    assert "out" not in views.extents  # its offset is not static: never compared
    parse_and_check(load_manifest(program))  # a text scan saw a store into "%out_at" and refused
    _flag_input_as_output(program)
    with pytest.raises(ManifestError, match=READ_ONLY_FLAGGED):
        parse_and_check(load_manifest(program))


def test_a_constant_offset_counts_in_the_view_s_extent(tmp_path):
    program = _copy(tmp_path)
    _through_addi(program, "%off = arith.constant 0 : index")
    assert _views_by_node(program)[NODE].extents["out"] == 64
    parse_and_check(load_manifest(program))  # offset 0: the declared 1x64 output fits exactly

    program = _copy(tmp_path / "shifted")
    _through_addi(program, "%off = arith.constant 8 : index")
    assert _views_by_node(program)[NODE].extents["out"] == 72
    with pytest.raises(ManifestError, match=r"nodes\[8\]\.args\[2\]: @.* views %out as 72 "):
        parse_and_check(load_manifest(program))
