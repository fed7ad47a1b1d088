"""Fixtures of the fuzz suite: the tiny model, its emitted program and a one-function kernel, made
once in a private environment (errors/cli_harness.private_environment); every case mutates
private copies. At the end the case counts, exit codes and slowest cases are printed (-s)."""

from __future__ import annotations

import pytest

from errors.cli_harness import copy_tiny_model, emit_tiny_program, private_environment
from errors.test_input_files import SCALE

from .harness import CASES, OUTCOMES, SLOWEST


@pytest.fixture(scope="package", autouse=True)
def fuzz_env(tmp_path_factory):
    with private_environment(tmp_path_factory.mktemp("fuzz-cache")):
        yield
    print("\nfuzz cases by class: " + ", ".join(f"{k} {v}" for k, v in sorted(CASES.items()))
          + f"; {sum(CASES.values())} in all")
    print("slowest cases: " + "; ".join(f"{sec:.1f} s {argv}" for sec, argv in SLOWEST))
    print("exit codes by class: " + ", ".join(f"{k} exit {c}: {n}" for (k, c), n in sorted(OUTCOMES.items())))


@pytest.fixture(scope="package")
def model(tmp_path_factory):
    return copy_tiny_model(tmp_path_factory.mktemp("fuzz-model"))


@pytest.fixture(scope="package")
def program(model, tmp_path_factory):
    return emit_tiny_program(model, tmp_path_factory.mktemp("fuzz-program"))


@pytest.fixture(scope="package")
def kernel(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz-kernel") / "scale.mlir"
    path.write_text(SCALE)
    return path
