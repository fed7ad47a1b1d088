"""Config sizes no real checkpoint has are refused at once, naming the field (a vocab of 10^12
used to hang with no output for minutes; 10^9 heads took 42 s to fail)."""

from __future__ import annotations

import json
import shutil

import pytest

from ktir_models.errors import UserError
from ktir_models.model.config import MAX_PASS_BYTES, ModelConfig, estimate_pass_cost
from ktir_models.model.weights.synthetic import tiny_config

from .cli_harness import assert_user_error, run_cli


def _model_with(tiny_model, tmp_path, **fields):
    target = tmp_path / "M"
    shutil.copytree(tiny_model, target)
    config = json.loads((target / "config.json").read_text())
    config.update(fields)
    (target / "config.json").write_text(json.dumps(config))
    return target


@pytest.mark.parametrize("field, value", [
    ("vocab_size", 10**12),
    ("num_attention_heads", 10**9),
    ("hidden_size", 2**20),
    ("num_hidden_layers", 10**6),
    ("max_position_embeddings", 10**12),
], ids=["vocab", "heads", "hidden", "layers", "positions"])
def test_oversized_field_is_refused_quickly(tiny_model, tmp_path, field, value):
    fields = {field: value}
    if field == "num_attention_heads":
        fields["num_key_value_heads"] = value
    model = _model_with(tiny_model, tmp_path, **fields)
    r = run_cli("forward", model, "--weights", model, "--golden", "none", "-q")
    assert_user_error(r, "config.json", f"field '{field}' = {value}", "exceeds the supported bound")


def test_cost_estimate_names_the_biggest_part():
    """Fields each within bounds, together 2^40+ bytes of weights: refused by the estimate."""
    d = tiny_config().to_hf_dict()
    d.update(hidden_size=32768, intermediate_size=131072, num_hidden_layers=512, head_dim=128,
             num_attention_heads=256, num_key_value_heads=256)
    with pytest.raises(UserError, match=r"x: one pass needs an estimated \d+ GiB .* weights \(fields"):
        ModelConfig.from_hf_dict(d, "x")


def test_cost_estimate_against_an_independent_count():
    """The weight bytes are 2 bytes per parameter as transformers counts them for the tiny MHA
    model (2 layers: q,k,v,o 64x64, gate/up/down 64x128, 2 norms each; tied embedding 512x64)."""
    cfg = tiny_config(num_key_value_heads=4)
    params = 512 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
    cost = estimate_pass_cost(cfg, tokens=3, capacity=7)
    assert cost.weight_bytes == 2 * params
    assert cost.kv_cache_bytes == 2 * 2 * 2 * 7 * 64  # K and V, 2 layers, 7 rows, f16
    assert cost.total_bytes < MAX_PASS_BYTES
