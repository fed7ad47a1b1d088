"""Fixture manifest schema and validation, on the three real corpus manifests and broken copies."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from ktir_models.errors import UserError
from ktir_models.model.config import ModelConfig
from ktir_models.model.manifest import (
    ManifestError,
    expected_weight_shape,
    load_manifest,
    validate,
)
from ktir_models.model.program_checks import parse_and_check

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("KTIR_CORPUS", REPO.parent / "shared" / "corpus"))
SCRATCHY = CORPUS / "scratchy"

needs_corpus = pytest.mark.skipif(
    not SCRATCHY.is_dir(), reason=f"KTIR corpus not found at {CORPUS} (set KTIR_CORPUS)"
)

# Architectures written out from the models' published config.json files (independent of the
# registry under test elsewhere).
SMOLLM2 = ModelConfig.from_hf_dict(
    dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
         num_attention_heads=9, num_key_value_heads=3, head_dim=64, vocab_size=49152,
         rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
         max_position_embeddings=8192),
    "test smollm2",
)
LLAMA1B = ModelConfig.from_hf_dict(
    dict(model_type="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
         num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
         rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
         max_position_embeddings=131072,
         rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                           high_freq_factor=4.0, original_max_position_embeddings=8192)),
    "test llama",
)

FIXTURES = {
    "smollm2-135m": (SMOLLM2, 452, 1, "decode"),
    "smollm2-135m-prefill": (SMOLLM2, 452, 32, "prefill"),
    "llama-3.2-1b": (LLAMA1B, 242, 1, "decode"),
}


@needs_corpus
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_real_manifests_load_and_validate(name: str) -> None:
    cfg, nodes, m, mode = FIXTURES[name]
    man = load_manifest(SCRATCHY / name)
    assert len(man.nodes) == nodes
    assert man.tokens == m and man.mode == mode
    assert man.extras == {}
    assert man.num_sources == len(man.sources)
    roles = {s.role for s in man.sources}
    assert roles == {"embed", "weight", "cos", "sin", "prefix_k", "prefix_v"}
    # 15 nodes per layer + final norm + lm_head
    assert nodes == 15 * cfg.num_hidden_layers + 2
    assert man.tensor(man.result).shape == (m, cfg.vocab_size)
    validate(man, cfg)
    parse_and_check(man)
    # The other model's config must not fit.
    other = LLAMA1B if cfg is SMOLLM2 else SMOLLM2
    with pytest.raises(ManifestError):
        validate(man, other)


@needs_corpus
def test_source_fields_are_all_read() -> None:
    man = load_manifest(SCRATCHY / "smollm2-135m")
    q = man.source(2)
    assert q is not None
    assert (q.role, q.disk, q.name, q.base, q.layer, q.is_gemm) == (
        "weight", "model.layers.0.self_attn.q_proj", "self_attn_q_proj_0", "self_attn_q_proj", 0, True,
    )
    assert q.loc == {"bucket": 0, "op_idx": 3, "slot": 0}
    assert man.attn_mask == 787 and man.decode_position == 63 and man.result == 786
    assert man.nodes[6].args[2].name == "t787_ptr" and man.nodes[6].args[1].is_output


def test_expected_weight_shapes_follow_in_out_convention() -> None:
    assert expected_weight_shape("model.layers.3.self_attn.k_proj", SMOLLM2) == (576, 192)
    assert expected_weight_shape("model.layers.3.mlp.down_proj.weight", SMOLLM2) == (1536, 576)
    assert expected_weight_shape("lm_head", LLAMA1B) == (2048, 128256)
    assert expected_weight_shape("model.norm", LLAMA1B) == (1, 2048)
    assert expected_weight_shape("something.else", LLAMA1B) is None


# ----------------------------------------------------------------------------- broken copies


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Path:
    """A private copy of the smollm2 decode fixture: manifest.json copied, node files linked."""
    if not SCRATCHY.is_dir():
        pytest.skip(f"KTIR corpus not found at {CORPUS} (set KTIR_CORPUS)")
    src = SCRATCHY / "smollm2-135m"
    dst = tmp_path / "fixture"
    dst.mkdir()
    shutil.copyfile(src / "manifest.json", dst / "manifest.json")
    for f in src.glob("node*.mlir"):
        (dst / f.name).symlink_to(f)
    return dst


def _edit(d: Path, change) -> None:
    doc = json.loads((d / "manifest.json").read_text())
    change(doc)
    (d / "manifest.json").write_text(json.dumps(doc))


def _error(d: Path, cfg: ModelConfig | None = SMOLLM2) -> str:
    with pytest.raises(ManifestError) as info:
        man = load_manifest(d)
        if cfg is not None:
            validate(man, cfg)
        parse_and_check(man)
    assert isinstance(info.value, UserError)
    return str(info.value)


def test_missing_node_file(fixture_copy: Path) -> None:
    (fixture_copy / "node12.mlir").unlink()
    assert _error(fixture_copy) == f"manifest.json: nodes[12].mlir: node12.mlir not found in {fixture_copy}"


def test_unknown_tensor_id(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["nodes"][3]["args"][1].update(tensor=9999))
    assert _error(fixture_copy) == "manifest.json: nodes[3].args[1].tensor: unknown tensor id 9999 (not in tensors[])"


def test_input_read_before_produced(fixture_copy: Path) -> None:
    def swap(d):
        d["nodes"][0], d["nodes"][1] = d["nodes"][1], d["nodes"][0]

    _edit(fixture_copy, swap)
    msg = _error(fixture_copy)
    assert msg.startswith("manifest.json: nodes[0].args[0].tensor: tensor 335 is read before any node produces it")


def test_wrong_declared_weight_shape(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["tensors"][3].update(cols=190))
    msg = _error(fixture_copy)
    assert msg.startswith("manifest.json: sources[3]: tensor 3 (model.layers.0.self_attn.k_proj) is 576x190")


def test_function_missing_from_node_file(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["nodes"][5].update(fn="no_such_fn"))
    assert _error(fixture_copy) == (
        f"manifest.json: nodes[5].fn: function @no_such_fn not defined in {fixture_copy / 'node5.mlir'}"
    )


def test_argument_names_must_match(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["nodes"][1]["args"][1].update(name="t_wrong_ptr"))
    msg = _error(fixture_copy)
    assert re.fullmatch(
        r"manifest\.json: nodes\[1\]\.args: function argument %t2_ptr is not bound by any of the node's args "
        r"\(.*node1\.mlir:2:3\)",
        msg,
    ), msg


def test_argument_order_must_match(fixture_copy: Path) -> None:
    def swap(d):
        a = d["nodes"][1]["args"]
        a[0], a[1] = a[1], a[0]

    _edit(fixture_copy, swap)
    assert "argument order differs" in _error(fixture_copy)


def test_invalid_json_has_line_and_column(fixture_copy: Path) -> None:
    (fixture_copy / "manifest.json").write_text('{\n  "tensors": [,]\n}')
    assert _error(fixture_copy) == f"{fixture_copy / 'manifest.json'}:2:15: invalid JSON: Expecting value"


def test_wrong_field_type(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["tensors"][7].update(rows="64"))
    assert _error(fixture_copy) == "manifest.json: tensors[7].rows: expected an integer, got '64'"


def test_unknown_role_and_missing_disk(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["sources"][5].update(role="rotary"))
    assert "sources[5].role: unknown role 'rotary'" in _error(fixture_copy)


def test_weight_without_disk(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["sources"][2].pop("disk"))
    assert _error(fixture_copy) == "manifest.json: sources[2].disk: missing (a weight source names its checkpoint tensor)"


def test_num_sources_mismatch(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d.update(num_sources=3))
    assert _error(fixture_copy) == "manifest.json: num_sources: 3 but sources[] has 335 entries"


def test_node_writing_a_weight_is_rejected(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["nodes"][0]["args"][2].update(tensor=2))
    assert "nodes[0].args[2].tensor: node writes tensor 2" in _error(fixture_copy)


def test_result_never_produced(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d.update(result=787))
    assert _error(fixture_copy) == "manifest.json: result: tensor 787 is never produced by a node"


def test_node_file_outside_directory(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["nodes"][0].update(mlir="../node0.mlir"))
    assert "nodes[0].mlir: ../node0.mlir must be a file name inside the fixture directory" in _error(fixture_copy)


def test_unknown_fields_are_tolerated_and_kept(fixture_copy: Path) -> None:
    def add(d):
        d["model"] = "smollm2-135m"
        d["mode"] = "decode"
        d["tensors"][0]["dtype"] = "f16"
        d["nodes"][0]["comment"] = "rmsnorm"

    _edit(fixture_copy, add)
    man = load_manifest(fixture_copy)
    assert man.extras == {"model": "smollm2-135m", "mode": "decode"}
    validate(man, SMOLLM2)


def test_mask_width_must_match_prefix(fixture_copy: Path) -> None:
    _edit(fixture_copy, lambda d: d["tensors"][787].update(cols=32))
    assert "attn_mask: tensor 787 has 32 columns, the KV prefix has 64 rows" in _error(fixture_copy)
