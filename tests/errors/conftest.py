"""Fixtures of the bad-input tests: a private tiny model and its emitted program, and a private
environment for the package (cli_harness.private_environment), restored after it."""

from __future__ import annotations

import pytest

from .cli_harness import copy_tiny_model, emit_tiny_program, private_environment


@pytest.fixture(scope="package", autouse=True)
def private_cache(tmp_path_factory):
    with private_environment(tmp_path_factory.mktemp("errors-cache")):
        yield


@pytest.fixture(scope="package")
def tiny_model(tmp_path_factory):
    """The tiny fixture model M (tiny-mha: 2 layers, 4 heads, vocab 512, 256 positions)."""
    return copy_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="package")
def tiny_program(tiny_model, tmp_path_factory):
    """Our emitted decode program for M, emitted once."""
    return emit_tiny_program(tiny_model, tmp_path_factory.mktemp("program"))
