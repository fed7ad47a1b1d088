"""Fixtures of the public API's tests: the tiny vendored model and programs, a private program
cache, and planted-bug copies of a program."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY_MODEL = REPO / "fixtures" / "models" / "tiny-mha"
DECODE = REPO / "fixtures" / "tiny-mha-decode"
PREFILL = REPO / "fixtures" / "tiny-mha-prefill7"
#: tiny-mha's softmax scale 1/sqrt(head_dim 16) as the attention nodes spell it
SCALE = "dense<2.500000000e-01>"
#: the planted bug: scores scaled by -4/sqrt(16) instead of 1/sqrt(16) (every attention node)
BROKEN_SCALE = "dense<-1.000000000e+00>"


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    """Our emitter's programs go to a private cache; no native kernel build. The kernel's
    library is forgotten before (so the setting applies even where an earlier test loaded it)
    and after (so later tests load it again under their own settings)."""
    from ktir_models.ktir.backends import seqmm

    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path_factory.getbasetemp() / "api-cache"))
    monkeypatch.setenv("KTIR_MODELS_NATIVE", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seqmm._reset()
    yield
    seqmm._reset()


def plant_scale_bug(directory: Path) -> int:
    """Replace the softmax scale of every attention node of the program in ``directory``; return
    how many nodes were edited."""
    edited = 0
    for node in sorted(directory.glob("node*.mlir")):
        text = node.read_text()
        if SCALE in text:
            node.write_text(text.replace(SCALE, BROKEN_SCALE))
            edited += 1
    return edited


@pytest.fixture
def broken_prefill(tmp_path) -> Path:
    """A copy of the tiny prefill fixture (m = 7, golden included) with the planted scale bug
    (a prefill: one token's attention is softmax over one score, which no scale changes)."""
    target = tmp_path / "broken-prefill"
    shutil.copytree(PREFILL, target)
    assert plant_scale_bug(target) == 2  # one attention node per layer
    return target
