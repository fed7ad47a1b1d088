"""Fixtures of the bad-input tests: a private tiny model, and a private cache for the package.

The cache (``KTIR_MODELS_CACHE``) and ``KTIR_MODELS_NATIVE=0`` (no kernel build: these tests are
about refusals, not numerics) are set for this package only and restored after it.
"""

from __future__ import annotations

import os

import pytest

from .cli_harness import copy_tiny_model


@pytest.fixture(scope="package", autouse=True)
def private_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KTIR_MODELS_CACHE", str(tmp_path_factory.mktemp("errors-cache")))
        mp.setenv("KTIR_MODELS_NATIVE", "0")
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield os.environ["KTIR_MODELS_CACHE"]


@pytest.fixture(scope="package")
def tiny_model(tmp_path_factory):
    """The tiny fixture model M (tiny-mha: 2 layers, 4 heads, vocab 512, 256 positions)."""
    return copy_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="package")
def tiny_program(tiny_model, tmp_path_factory):
    """Our emitted decode program for M (manifest.json + node*.mlir), emitted once."""
    from .cli_harness import run_cli

    out = tmp_path_factory.mktemp("program") / "decode"
    r = run_cli("emit", tiny_model, "--out", out)
    assert r.code == 0, r.stderr
    return out
