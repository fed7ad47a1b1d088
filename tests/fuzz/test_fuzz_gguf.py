"""Fuzzed GGUF checkpoints (the reader is ktir_models/model/gguf): the tiny model written as GGUF
by the GGUF tests' own writer (tests/model/gguf_files.py), then damaged byte by byte, in its
header, metadata or tensor data, and run as ``--weights FILE.gguf``."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .harness import fuzz_case
from .mutations import mutate_bytes
from .test_fuzz_files import fuzz

_MODEL_TESTS = str(Path(__file__).resolve().parents[1] / "model")


@pytest.fixture(scope="module")
def gguf_file(model, tmp_path_factory):
    pytest.importorskip("gguf", reason="the gguf extra is not installed")
    if _MODEL_TESTS not in sys.path:  # gguf_files imports its sibling gguf_blocks as a top-level module
        sys.path.insert(0, _MODEL_TESTS)
    from gguf_files import write_gguf

    return write_gguf(tmp_path_factory.mktemp("fuzz-gguf") / "M.gguf", model)


def test_the_undamaged_file_runs(model, program, gguf_file):
    r = fuzz_case("gguf", ["forward", model, "--program", program, "--weights", gguf_file, "--golden", "none", "-q"],
                  [gguf_file, program])
    assert r.code == 0, r.stderr


@fuzz(40)
@given(data=st.data())
def test_gguf_files(model, program, gguf_file, data):
    raw = gguf_file.read_bytes()
    with tempfile.TemporaryDirectory() as work:
        damaged = Path(work) / "M.gguf"
        head = min(len(raw), 4096)  # magic, counts and the metadata live at the front
        damaged.write_bytes(mutate_bytes(data, raw, [(0, 24), (24, head), (head, len(raw))]))
        fuzz_case("gguf", ["forward", model, "--program", program, "--weights", damaged, "--golden", "none", "-q"],
                  [damaged, program, model])
