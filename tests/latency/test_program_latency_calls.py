"""``ktir-models latency`` / ``forward --latency`` cost each node as it is called: a
dynamic-position program (the decode programs ``generate`` runs) is read with its host scalar
``position`` bound to the pass it was emitted for, the value the runner binds, instead of being
refused."""

from __future__ import annotations

import json
from pathlib import Path

from ktir_models.api.latency import program_latency
from ktir_models.model.config import ModelConfig
from ktir_models.model.emit.api import emit_program
from ktir_models.model.emitted import host_scalars
from ktir_models.model.manifest import load_manifest
from ktir_models.model.program import parse_program

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "tiny-mha"


def _emit(tmp_path: Path, past: int, dynamic: bool) -> Path:
    cfg = ModelConfig.from_hf_dict(json.loads((TINY / "config.json").read_text()), "tiny")
    return emit_program(cfg, "decode", 1, past, tmp_path / f"p{past}-{dynamic}", "tiny",
                        capacity=64, dynamic_position=dynamic)


def test_a_dynamic_position_program_is_costed_with_its_position_bound(tmp_path):
    program = _emit(tmp_path, 5, dynamic=True)
    manifest = load_manifest(program, host_scalars=True)
    assert host_scalars(manifest) == {"position": 5}
    calls = parse_program(manifest, check_arguments=False).latency_calls(host_scalars(manifest))
    bound = [args for _, fn, args in calls if "pos" in fn.arg_names]
    assert bound and all(args == {"pos": 5} for args in bound)
    dynamic = program_latency(program).as_dict()
    static = program_latency(_emit(tmp_path, 5, dynamic=False)).as_dict()
    # the dynamic program attends over its whole capacity (masked), the static one over past + 1
    assert dynamic["cycles"] > static["cycles"] > 0
