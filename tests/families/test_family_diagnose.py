"""diagnose on family programs: every node of a qwen3 program maps to a step of the transformers
forward (the per-head q/k norms included, RoPE compared after them), a right program has no
culprit, and a program with q_norm applied after RoPE is pinned to layer 0's RoPE-on-q node."""

from __future__ import annotations

import pytest

from ktir_models.model.checks.diagnose import diagnose, map_nodes
from ktir_models.model.emit import emit_program
from ktir_models.model.manifest import load_manifest

from .configs import FAMILY_CONFIGS
from .test_planted_mistakes import QNormAfterRope

pytest.importorskip("transformers")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen3", "qwen2", "granite", "mistral"])
def test_family_program_maps_fully_and_diagnoses_clean(family_checkpoints, tmp_path, family):
    cfg, ckpt = FAMILY_CONFIGS[family], family_checkpoints[family]
    manifest = load_manifest(emit_program(cfg, "prefill", 7, 0, tmp_path / "p", family))
    roles = map_nodes(manifest)
    assert all(r is not None for r in roles), [i for i, r in enumerate(roles) if r is None]
    if family == "qwen3":
        assert {r.kind for r in roles if r.layer == 0} >= {"q_norm", "k_norm", "rope_q", "rope_k"}
    report = diagnose(manifest, cfg, ckpt)
    assert report.culprit is None and not report.unmapped and report.fault is None


@pytest.mark.slow
def test_q_norm_after_rope_is_pinned_to_its_node(family_checkpoints, tmp_path):
    cfg, ckpt = FAMILY_CONFIGS["qwen3"], family_checkpoints["qwen3"]
    manifest = load_manifest(emit_program(cfg, "prefill", 7, 0, tmp_path / "p", "qwen3",
                                          emitter_class=QNormAfterRope))
    report = diagnose(manifest, cfg, ckpt)
    assert report.culprit is not None
    assert report.culprit.role == "layer 0 RoPE on q", report.culprit.role
