"""The model registry (manifests/*.toml) and MODEL argument resolution."""

import json

import pytest

from ktir_models.errors import UserError
from ktir_models.model.registry import registry_names, resolve_model
from ktir_models.model.weights.synthetic import tiny_config


def test_registry_holds_the_two_models_with_their_real_architectures():
    assert {"smollm2-135m", "llama-3.2-1b"} <= set(registry_names())
    smol = resolve_model("smollm2-135m")
    assert smol.repo_id == "HuggingFaceTB/SmolLM2-135M"
    c = smol.config
    assert (c.hidden_size, c.intermediate_size, c.num_hidden_layers) == (576, 1536, 30)
    assert (c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.vocab_size) == (9, 3, 64, 49152)
    assert (c.rope_theta, c.rms_norm_eps, c.tie_word_embeddings, c.max_position_embeddings) == (
        100000.0, 1e-5, True, 8192)
    assert c.rope_scaling is None
    assert c.num_parameters == 134_515_008  # SmolLM2-135M's published parameter count

    llama = resolve_model("llama-3.2-1b")
    assert llama.repo_id == "unsloth/Llama-3.2-1B-Instruct" and llama.revision
    c = llama.config
    assert (c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size) == (2048, 8192, 16, 128256)
    assert (c.num_attention_heads, c.num_key_value_heads, c.rope_theta) == (32, 8, 500000.0)
    assert c.rope_scaling is not None and c.rope_scaling.factor == 32.0
    assert c.max_position_embeddings == 131072


def test_repo_id_of_a_registry_entry_resolves_offline_with_revision():
    spec = resolve_model("HuggingFaceTB/SmolLM2-135M@0123abc")
    assert spec.name == "smollm2-135m" and spec.revision == "0123abc"
    assert spec.config == resolve_model("smollm2-135m").config


def test_local_directory_with_config(tmp_path):
    cfg = tiny_config()
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_hf_dict()))
    spec = resolve_model(str(tmp_path))
    assert spec.local_dir == tmp_path.resolve() and spec.config == cfg and spec.repo_id is None


def test_directory_without_config_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="config.json"):
        resolve_model(str(tmp_path))


def test_unknown_model_lists_the_choices():
    with pytest.raises(UserError, match="smollm2-135m"):
        resolve_model("no such model")


def test_malformed_registry_entry_names_file_and_field(tmp_path):
    (tmp_path / "broken.toml").write_text('name = "broken"\nrepo_id = "a/b"\n[config]\nmodel_type = "gpt2"\n')
    with pytest.raises(UserError, match=r"broken.toml \[config\].*model_type"):
        resolve_model("broken", manifests_dir=tmp_path)
    (tmp_path / "nocfg.toml").write_text('repo_id = "a/b"\n')
    with pytest.raises(UserError, match="nocfg.toml: field 'config' is missing"):
        resolve_model("nocfg", manifests_dir=tmp_path)
