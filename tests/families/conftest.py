"""Synthetic checkpoints of the tiny family configs, made once per session; program cache per test."""

from __future__ import annotations

import pytest

from ktir_models.model.weights.synthetic import ensure_synthetic
from ktir_models.model.weights.checkpoint import Checkpoint

from .configs import FAMILY_CONFIGS


@pytest.fixture(autouse=True)
def _program_cache(tmp_path_factory, monkeypatch):
    # one program cache for the whole session: the same pass emitted for numpy and torch is reused
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path_factory.getbasetemp() / "family-cache"))


@pytest.fixture(scope="session")
def family_checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("family-synthetic")
    return {name: Checkpoint(ensure_synthetic(name, cfg, seed=0, cache_root=root), cfg, "synthetic:0")
            for name, cfg in FAMILY_CONFIGS.items()}
