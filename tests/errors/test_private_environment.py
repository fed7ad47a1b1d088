"""The suites' private environment leaves no trace: the native kernel's per-process load decision
made under ``KTIR_MODELS_NATIVE=0`` is forgotten on exit, so later suites load the kernel."""

from __future__ import annotations

import os

from ktir_models.ktir.backends import seqmm

from .cli_harness import private_environment


def test_kernel_decision_is_forgotten_on_exit(tmp_path):
    outer = os.environ.get("KTIR_MODELS_CACHE")
    with private_environment(tmp_path / "inner"):
        assert os.environ["KTIR_MODELS_CACHE"] == str(tmp_path / "inner")
        assert not seqmm.available()
        assert seqmm.unavailable_reason() == "disabled by KTIR_MODELS_NATIVE=0"
    assert os.environ.get("KTIR_MODELS_CACHE") == outer
    assert seqmm._loaded is None  # decided afresh by the next user
