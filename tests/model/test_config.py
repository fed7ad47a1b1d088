"""ModelConfig: reading HF config dicts (classic and transformers-5 layouts), errors, export."""

import json

import pytest

from ktir_models.errors import UserError
from ktir_models.model.config import ModelConfig, RopeScaling

LLAMA_32_1B = {  # the fields of unsloth/Llama-3.2-1B-Instruct's config.json that matter here
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 128256,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": True,
    "max_position_embeddings": 131072,
    "hidden_act": "silu",
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
}


def test_llama_config_fields_and_parameter_count():
    cfg = ModelConfig.from_hf_dict(LLAMA_32_1B, "config.json")
    assert cfg.rope_scaling == RopeScaling("llama3", 32.0, 1.0, 4.0, 8192)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (32, 8, 64)
    # Llama-3.2-1B has 1,235,814,400 parameters (tied embeddings stored once).
    assert cfg.num_parameters == 1_235_814_400
    assert cfg.f16_weight_bytes == 2 * 1_235_814_400


def test_head_dim_defaults_to_hidden_over_heads():
    d = dict(LLAMA_32_1B, head_dim=None, rope_scaling=None)
    assert ModelConfig.from_hf_dict(d, "x").head_dim == 2048 // 32


def test_untied_config_counts_lm_head():
    tied = ModelConfig.from_hf_dict(LLAMA_32_1B, "x")
    untied = ModelConfig.from_hf_dict(dict(LLAMA_32_1B, tie_word_embeddings=False), "x")
    assert untied.num_parameters - tied.num_parameters == 128256 * 2048


@pytest.mark.parametrize(
    "change, field",
    [
        ({"model_type": "mixtral"}, "model_type"),
        ({"model_type": "gpt2"}, "model_type"),
        ({"rope_scaling": {**LLAMA_32_1B["rope_scaling"], "rope_type": "yarn"}}, "rope_scaling"),
        ({"hidden_size": -3}, "hidden_size"),
        ({"num_key_value_heads": 5}, "num_key_value_heads"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"attention_bias": True}, "attention_bias"),
        ({"rope_scaling": {**LLAMA_32_1B["rope_scaling"], "factor": "big"}}, "factor"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    ],
)
def test_unsupported_configs_name_the_field(change, field):
    with pytest.raises(UserError) as err:
        ModelConfig.from_hf_dict({**LLAMA_32_1B, **change}, "some/config.json")
    assert "some/config.json" in str(err.value) and field in str(err.value)


def test_from_json_errors_name_the_file(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama",\n "hidden_size": }')
    with pytest.raises(UserError, match=r"config.json:2:\d+: invalid JSON"):
        ModelConfig.from_json(bad)
    with pytest.raises(UserError, match="cannot read"):
        ModelConfig.from_json(tmp_path / "absent.json")


def test_round_trip_through_transformers_llama_config(tmp_path):
    from transformers import LlamaConfig

    cfg = ModelConfig.from_hf_dict(LLAMA_32_1B, "x")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.to_hf_dict()))
    assert ModelConfig.from_json(path) == cfg
    hf = LlamaConfig(**cfg.to_hf_dict())
    assert (hf.hidden_size, hf.num_key_value_heads, hf.head_dim, hf.vocab_size) == (2048, 8, 64, 128256)
    # transformers 5 moves rope settings into rope_parameters; we read that layout back too.
    assert ModelConfig.from_hf_dict(hf.to_dict(), "hf") == cfg


def test_transformers5_rope_parameters_default_means_unscaled():
    d = {k: v for k, v in LLAMA_32_1B.items() if k not in ("rope_theta", "rope_scaling")}
    d["rope_parameters"] = {"rope_type": "default", "rope_theta": 100000.0}
    cfg = ModelConfig.from_hf_dict(d, "x")
    assert cfg.rope_scaling is None and cfg.rope_theta == 100000.0
