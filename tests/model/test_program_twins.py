"""Twin node files (ktir/exec/twins.py) in a loaded program: the scratchy smollm2-135m prefill program
(452 node files, 11 twin keys) runs bit-identically with and without twin sharing, a fault in a
twin names the twin's node, function and file, and ``KTIR_MODELS_TWINS=0`` switches sharing off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktir_models import ktir
from ktir_models.ktir.exec.twin_plans import TwinPlan
from ktir_models.model.manifest import load_manifest
from ktir_models.model.program import parse_program

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("KTIR_CORPUS", REPO.parent / "shared" / "corpus"))
PREFILL = CORPUS / "scratchy" / "smollm2-135m-prefill"
needs_corpus = pytest.mark.skipif(not PREFILL.is_dir(),
                                  reason=f"KTIR corpus not found at {CORPUS} (set KTIR_CORPUS)")


def _runner(twins: bool):
    from ktir_models.model.inputs.bindings import (bind_pass_inputs, input_tensor_ids, pass_spec,
                                            read_vendored_inputs)
    from ktir_models.model.registry import resolve_model
    from ktir_models.model.runner import Runner
    from ktir_models.model.weights.checkpoint import get_checkpoint

    spec = resolve_model("smollm2-135m")
    manifest = load_manifest(PREFILL)
    ckpt = get_checkpoint(spec, "synthetic", seed=0)
    pass_ = pass_spec(manifest, spec.config)
    vendored = read_vendored_inputs(manifest, input_tensor_ids(manifest))
    runner = Runner(manifest, show_progress=False)
    runner.load(parse_program(manifest, twins=twins))
    runner.marshal(ckpt)
    return runner, bind_pass_inputs(manifest, spec.config, ckpt, pass_, vendored)


@needs_corpus
def test_scratchy_prefill_is_bit_identical_with_and_without_twins():
    shared, inputs = _runner(True)
    parsed = shared.program.parsed
    assert parsed.twins is not None and parsed.twins.keys == 11 and parsed.twins.parsed == 11
    assert sum(isinstance(p, TwinPlan) for p in shared.program.plans) == 452 - 11
    alone, inputs_alone = _runner(False)
    assert alone.program.parsed.twins is None
    assert not any(isinstance(p, TwinPlan) for p in alone.program.plans)
    for _ in range(4):  # plain runs, the tier-up (second run), tapes recorded and replayed
        a, b = shared.run(inputs), alone.run(inputs_alone)
        assert a.result.tobytes() == b.result.tobytes()
    for i in range(len(shared.manifest.nodes)):  # every node's outputs, not only the logits
        for arg in shared.manifest.nodes[i].args:
            if arg.tensor is not None:
                assert shared.tensor(arg.tensor).tobytes() == alone.tensor(arg.tensor).tobytes()
    assert sum(p.replays for p in shared.program.plans) > 0


@needs_corpus
def test_a_fault_in_a_twin_names_the_twins_function_file_and_op():
    parsed = parse_program(load_manifest(PREFILL), twins=True)
    program = parsed.compile(ktir.Machine())
    zero = {a.tensor: 0 for n in parsed.manifest.nodes for a in n.args if a.tensor is not None}
    bound = program.bind(zero)  # address 0 for every tensor: no HBM region there
    twins = [k for k, p in enumerate(program.plans) if isinstance(p, TwinPlan)]
    for i in (twins[0], twins[-1]):
        node, fn = parsed.manifest.nodes[i], parsed.nodes[i].function
        with pytest.raises(ktir.EmulationFault) as got:
            program.plans[i].run(bound[i])
        fault = got.value
        assert fault.function == node.fn == fn.name
        assert fault.loc.file == str(PREFILL / node.mlir)
        assert any(o.loc == fault.loc and o.name == fault.op for o in fn.walk())
        with pytest.raises(ktir.EmulationFault) as alone:  # the twin compiled on its own
            ktir.Machine().compile(ktir.load_module(PREFILL / node.mlir).only_function).run(bound[i])
        assert str(fault) == str(alone.value)


def test_the_switch_turns_sharing_off(monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_TWINS", "0")
    from ktir_models.ktir.exec.twins import TwinLoader

    assert TwinLoader().share is False
    monkeypatch.delenv("KTIR_MODELS_TWINS")
    assert TwinLoader().share is True
