"""docs/api.md's "validate your emitter's dump from pytest" example works as written: its code
block is run from the repository root (its paths are the repository's), on the dump it names and
on a copy with a planted bug, which it must fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import PREFILL, plant_scale_bug

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "api.md"
SECTION = "## Validate your emitter's dump from pytest"


def example() -> str:
    """The first python block of the section."""
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index(SECTION):].split("```python\n", 1)[1].split("```", 1)[0]
    return block


def test_the_example_is_short_and_passes_on_its_dump(monkeypatch):
    code = example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    namespace["test_the_dump_computes_the_model"]()


def test_the_example_fails_on_a_broken_dump(tmp_path, monkeypatch):
    broken = tmp_path / "dump"
    shutil.copytree(PREFILL, broken)
    assert plant_scale_bug(broken) == 2
    monkeypatch.chdir(REPO)
    namespace: dict = {}
    exec(compile(example(), str(DOC), "exec"), namespace)
    namespace["DUMP"] = str(broken)
    with pytest.raises(AssertionError, match="forward: FAIL: "):
        namespace["test_the_dump_computes_the_model"]()
