"""Runs of the vendored tiny fixtures on a chosen machine, shared by the last-token and
fast-path bit-identity tests."""

from __future__ import annotations

import numpy as np

from conftest import REPO_ROOT
from ktir_models import ktir
from ktir_models.model.inputs.bindings import (bind_pass_inputs, input_tensor_ids, pass_spec,
                                        read_vendored_inputs)
from ktir_models.model.manifest import load_manifest
from ktir_models.model.registry import resolve_model
from ktir_models.model.runner import Runner
from ktir_models.model.weights.checkpoint import get_checkpoint

FIXTURES = REPO_ROOT / "fixtures"


def prepared(program, model: str, **machine):
    """(runner loaded and marshalled on ``ktir.Machine(**machine)``, the pass's inputs, ckpt)."""
    model_dir = FIXTURES / "models" / model
    spec = resolve_model(str(model_dir))
    manifest = load_manifest(program)
    ckpt = get_checkpoint(spec, str(model_dir), seed=0)
    inputs = bind_pass_inputs(manifest, spec.config, ckpt, pass_spec(manifest, spec.config),
                              read_vendored_inputs(manifest, input_tensor_ids(manifest)))
    runner = Runner(manifest, machine=ktir.Machine(**machine), show_progress=False)
    runner.load()
    runner.marshal(ckpt)
    return runner, inputs, ckpt


def bits(array) -> np.ndarray:
    return np.asarray(array, dtype=np.float16).view(np.uint16)
