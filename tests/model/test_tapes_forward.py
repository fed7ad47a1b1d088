"""Whole forwards across passes with tapes (ktir/exec/tape.py) give exactly the logits of the plain
plan: our emitted programs for the tiny checkpoints, eight passes each with other tokens (so every
replay reads fresh embeddings, masks and caches), against core-after-core runs without tapes.
From the fourth pass the runner calls each node's tape directly (``plan.replayer``); an HBM
region allocated between passes stops that until the plans have recorded their tapes again."""

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
    seen, direct = [], []
    for k in range(8):
        if k == 5:  # regions change: every replayer is dropped, the tapes are recorded again
            runners[0].machine.hbm.allocate((4, 4), "float16", name="extra")
        direct.append(runners[0].replayed_nodes)
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
    n = len(manifest.nodes)
    assert direct[:2] == [0, 0] and direct[3:5] == [n, n] and direct[5] == 0 and direct[-1] == n
    assert runners[1].replayed_nodes == 0
    assert sum(p.replays for p in runners[0]._plans) >= 3 * n
    assert sum(p.replays for p in runners[1]._plans) == 0
