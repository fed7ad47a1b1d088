"""Shared fixtures for the whole test suite.

The shared KTIR corpus (real emitted fixtures and hand-written example kernels) is data that lives
outside the repository. It is found through one setting: the environment variable ``KTIR_CORPUS``,
defaulting to ``<repo>/../shared/corpus``. Tests that need it skip with a reason naming the path
they looked at when it is absent; they never pass silently.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# The numpy reference implementations live in tests/ktir/references/ and are imported as the
# top-level package ``references``. pytest puts a test file's own folder on sys.path only while
# tests/ktir has no __init__.py; adding it here keeps the import working either way.
_KTIR_TESTS = str(Path(__file__).resolve().parent / "ktir")
if _KTIR_TESTS not in sys.path:
    sys.path.insert(0, _KTIR_TESTS)


def corpus_path() -> Path:
    """Where the shared corpus is expected (it may not exist)."""
    configured = os.environ.get("KTIR_CORPUS")
    if configured:
        return Path(configured).expanduser().resolve()
    return (REPO_ROOT.parent / "shared" / "corpus").resolve()


def corpus_missing_reason() -> str | None:
    """None when the corpus is present, else the skip reason to show."""
    root = corpus_path()
    if (root / "scratchy").is_dir() and (root / "ktir-examples").is_dir():
        return None
    return (
        f"KTIR corpus not found at {root} (set KTIR_CORPUS to the folder holding scratchy/ and "
        "ktir-examples/)"
    )


def scratchy_program(fixture: str) -> tuple[Path, list, dict]:
    """A scratchy fixture's folder, its manifest's nodes and its tensor shapes by id; skips the
    calling test when the corpus is absent."""
    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    directory = corpus_path() / "scratchy" / fixture
    manifest = json.loads((directory / "manifest.json").read_text())
    return directory, manifest["nodes"], {t["id"]: (t["rows"], t["cols"])
                                          for t in manifest["tensors"]}


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The corpus root; skips the requesting test when the corpus is absent."""
    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return corpus_path()


@pytest.fixture(params=["blas", "native"])
def native_matmul(request) -> bool:
    """Both matmul summation orders the numpy back end has: f32 BLAS (False) and the native f16
    kernel (True; skipped, with the reason, where it cannot be built)."""
    if request.param == "blas":
        return False
    from ktir_models.ktir.backends import seqmm

    if not seqmm.available():
        pytest.skip(f"native matmul kernel unavailable: {seqmm.unavailable_reason()}")
    return True
