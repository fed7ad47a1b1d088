"""Whole forwards across passes with tapes (ktir/exec/tape.py) give exactly the logits of the plain
plan: our emitted programs for the tiny checkpoints, five passes each with other tokens (so every
replay reads fresh embeddings, masks and caches), against core-after-core runs without tapes."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import REPO_ROOT
from ktir_models import ktir
from ktir_models.model.inputs.bindings import PassSpec, bind_pass_inputs, input_tensor_ids, pass_spec, \
    read_vendored_inputs
from ktir_models.model.manifest import load_manifest
from ktir_models.model.registry import resolve_model
from ktir_models.model.runner import Runner
from ktir_models.model.weights.checkpoint import get_checkpoint

FIXTURES = REPO_ROOT / "fixtures"


@pytest.mark.parametrize("model,program", [
    ("tiny-mha", "tiny-mha-decode"),
    ("tiny-mha", "tiny-mha-prefill7"),
    ("tiny-gqa4-llama3", "tiny-gqa4-llama3-decode-p31"),
    ("tiny-gqa4-llama3", "tiny-gqa4-llama3-prefill32"),
])
def test_taped_passes_give_the_plain_logits(model, program, native_matmul):
    manifest = load_manifest(FIXTURES / program)
    spec = resolve_model(str(FIXTURES / "models" / model))
    ckpt = get_checkpoint(spec, str(FIXTURES / "models" / model))
    runners = []
    for machine in (ktir.Machine(native_matmul=native_matmul),
                    ktir.Machine(grid_batching=False, tapes=False, native_matmul=native_matmul)):
        runner = Runner(manifest, machine=machine, show_progress=False)
        runner.load()
        runner.marshal(ckpt)
        runners.append(runner)
    # the vendored KV-cache prefix stays; embeddings, RoPE tables and masks follow the tokens
    vendored = {tid: v for tid, v in read_vendored_inputs(manifest, input_tensor_ids(manifest)).items()
                if any(s.id == tid and s.role in ("prefix_k", "prefix_v") for s in manifest.sources)}
    first = pass_spec(manifest, spec.config)
    seen = []
    for k in range(5):
        tokens = (first.token_ids + 37 * k) % spec.config.vocab_size
        inputs = bind_pass_inputs(manifest, spec.config, ckpt,
                                  PassSpec(tokens, first.positions, first.past, first.prefix_ids),
                                  vendored)
        taped, plain = (r.run(inputs).result for r in runners)
        assert np.isfinite(plain).all()
        np.testing.assert_array_equal(taped.view(np.uint16), plain.view(np.uint16),
                                      err_msg=f"pass {k}")
        seen.append(plain)
    assert not np.array_equal(seen[0], seen[-1])  # the passes did compute different things
    assert sum(p.replays for p in runners[0]._plans) >= len(manifest.nodes)
    assert sum(p.replays for p in runners[1]._plans) == 0
