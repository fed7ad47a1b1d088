"""Checkpoints: loading single/sharded safetensors in f16/bf16/f32, tied lm_head, errors.

The reference values come from independent writers and readers: transformers' save_pretrained,
safetensors' own numpy/torch functions, and torch's dtype conversions.
"""

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import load_file as load_torch

from ktir_models.errors import UserError
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.synthetic import ensure_synthetic, tiny_config, write_synthetic
from ktir_models.model.weights.checkpoint import Checkpoint, expected_shapes, get_checkpoint, load_local


def _write_config(directory, cfg):
    (directory / "config.json").write_text(json.dumps(cfg.to_hf_dict()))


def _numpy_checkpoint(directory, cfg, dtype=np.float32, seed=0, drop=(), reshape=None):
    """A checkpoint written by safetensors' own numpy writer (not ours)."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in expected_shapes(cfg).items():
        if name in drop or (name == "lm_head.weight" and cfg.tie_word_embeddings):
            continue
        if reshape and name in reshape:
            shape = reshape[name]
        tensors[name] = (rng.standard_normal(shape) * 0.1).astype(dtype)
    directory.mkdir(parents=True, exist_ok=True)
    save_numpy(tensors, str(directory / "model.safetensors"))
    _write_config(directory, cfg)
    return tensors


def test_transformers_save_pretrained_checkpoint_reads_verbatim(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = tiny_config(tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**cfg.to_hf_dict())).to(torch.bfloat16)
    model.save_pretrained(tmp_path)
    ckpt = load_local(tmp_path, cfg)
    state = model.state_dict()
    for name in expected_shapes(cfg):
        ours = ckpt.read_f16(name)
        ref = state[name].to(torch.float16).numpy()
        assert ours.dtype == np.float16 and ours.shape == ref.shape  # [out, in], verbatim
        np.testing.assert_array_equal(ours, ref)
    assert ckpt.resolve("lm_head") == "lm_head.weight"  # untied: its own tensor
    assert ckpt.origin.startswith("local:")


def test_f32_checkpoint_is_rounded_once_to_f16(tmp_path):
    cfg = tiny_config()
    tensors = _numpy_checkpoint(tmp_path, cfg)
    ckpt = load_local(tmp_path, cfg)
    q = "model.layers.1.self_attn.q_proj.weight"
    np.testing.assert_array_equal(ckpt.read_f16(q), tensors[q].astype(np.float16))
    assert ckpt.tensor_shape(q) == (64, 64)


def test_f16_tensors_land_in_numpy_owned_memory(tmp_path):
    """An f16 tensor is read into an array numpy allocated (numpy asks for huge pages from 4 MB
    on; the reader's own buffer has 4 KB pages, and a large model's weights stream every pass),
    writable, and bit for bit the stored values."""
    cfg = tiny_config()
    tensors = _numpy_checkpoint(tmp_path, cfg, dtype=np.float16)
    ckpt = load_local(tmp_path, cfg)
    for name in ("model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight"):
        got = ckpt.read_f16(name)
        assert got.flags.owndata and got.flags.writeable and got.flags.c_contiguous
        np.testing.assert_array_equal(got.view(np.uint16), tensors[name].view(np.uint16))


def test_tied_lm_head_falls_back_to_the_embedding(tmp_path):
    cfg = tiny_config()
    tensors = _numpy_checkpoint(tmp_path, cfg)
    ckpt = load_local(tmp_path, cfg)
    assert "lm_head.weight" not in ckpt.tensor_names()
    assert ckpt.resolve("lm_head") == "model.embed_tokens.weight"
    assert ckpt.resolve("model.layers.0.mlp.down_proj") == "model.layers.0.mlp.down_proj.weight"
    np.testing.assert_array_equal(
        ckpt.read_f16("lm_head.weight"), tensors["model.embed_tokens.weight"].astype(np.float16)
    )
    with pytest.raises(UserError, match="model.layers.7.mlp"):
        ckpt.resolve("model.layers.7.mlp")


def test_sharded_bf16_synthetic_matches_torch_reading(tmp_path):
    cfg = tiny_config()
    write_synthetic(tmp_path, cfg, seed=3, dtype="bfloat16", max_shard_bytes=40_000)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2
    ckpt = load_local(tmp_path, cfg)
    reference = {}
    for shard in shards:
        reference.update(load_torch(str(tmp_path / shard)))
    assert set(reference) == set(ckpt.tensor_names())
    for name, tensor in reference.items():
        assert tensor.dtype == torch.bfloat16
        np.testing.assert_array_equal(ckpt.read_f16(name), tensor.to(torch.float16).numpy())


def test_read_rows_matches_full_read(tmp_path):
    cfg = tiny_config()
    _numpy_checkpoint(tmp_path, cfg)
    ckpt = load_local(tmp_path, cfg)
    rows = np.array([5, 0, 511, 5])
    full = ckpt.read_f16("model.embed_tokens.weight")
    np.testing.assert_array_equal(ckpt.read_rows_f16("model.embed_tokens.weight", rows), full[rows])
    with pytest.raises(UserError, match="out of range"):
        ckpt.read_rows_f16("model.embed_tokens.weight", [512])


def test_missing_tensor_names_it_and_its_shape(tmp_path):
    cfg = tiny_config()
    _numpy_checkpoint(tmp_path, cfg, drop={"model.layers.1.mlp.up_proj.weight"})
    with pytest.raises(UserError, match=r"'model.layers.1.mlp.up_proj.weight' is missing \(expected shape \[128, 64\]\)"):
        load_local(tmp_path, cfg)


def test_wrong_shape_names_tensor_expected_and_actual(tmp_path):
    cfg = tiny_config()
    _numpy_checkpoint(tmp_path, cfg, reshape={"model.layers.0.self_attn.k_proj.weight": (64, 32)})
    with pytest.raises(UserError) as err:
        load_local(tmp_path, cfg)
    msg = str(err.value)
    assert "model.layers.0.self_attn.k_proj.weight" in msg and "[64, 32]" in msg and "expected [32, 64]" in msg


def test_corrupt_and_missing_files(tmp_path):
    cfg = tiny_config()
    _numpy_checkpoint(tmp_path / "a", cfg)
    (tmp_path / "a" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(UserError, match=r"model.safetensors: not a readable safetensors file"):
        load_local(tmp_path / "a", cfg)

    (tmp_path / "b").mkdir()
    _write_config(tmp_path / "b", cfg)
    with pytest.raises(UserError, match=r"no \*.safetensors files"):
        load_local(tmp_path / "b", cfg)

    write_synthetic(tmp_path / "c", cfg, max_shard_bytes=40_000)
    (tmp_path / "c" / "model-00002-of-00006.safetensors").unlink()
    with pytest.raises(UserError, match="shard 'model-00002-of-00006.safetensors' is missing"):
        load_local(tmp_path / "c", cfg)

    write_synthetic(tmp_path / "d", cfg, max_shard_bytes=40_000)
    index_path = tmp_path / "d" / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["model.norm.weight"] = "model-00001-of-00006.safetensors"  # wrong shard
    index_path.write_text(json.dumps(index))
    with pytest.raises(UserError, match="'model.norm.weight' is not in shard 'model-00001-of-00006"):
        load_local(tmp_path / "d", cfg)
    index_path.write_text('{"metadata": {}}')
    with pytest.raises(UserError, match="not a safetensors index"):
        load_local(tmp_path / "d", cfg)

    with pytest.raises(UserError, match="does not exist"):
        load_local(tmp_path / "nowhere", cfg)


def test_truncated_tensor_data_is_a_user_error(tmp_path):
    cfg = tiny_config()
    _numpy_checkpoint(tmp_path, cfg)
    path = tmp_path / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-1000])
    with pytest.raises(UserError, match="model.safetensors"):
        ckpt = load_local(tmp_path, cfg)
        for name in ckpt.tensor_names():
            ckpt.read_f16(name)


@pytest.mark.parametrize("dtype,bad", [(np.float32, 1e6), (np.float32, -1e6),
                                       (np.float32, np.nan), (np.float16, -np.inf)])
def test_values_beyond_f16_range_are_refused(tmp_path, dtype, bad):
    cfg = tiny_config()
    tensors = _numpy_checkpoint(tmp_path, cfg, dtype=dtype)
    tensors["model.norm.weight"][3] = bad
    save_numpy(tensors, str(tmp_path / "model.safetensors"))
    ckpt = load_local(tmp_path, cfg)
    with pytest.raises(UserError, match="model.norm.weight.*float16 range"):
        ckpt.read_f16("model.norm.weight")


def test_config_mismatch_names_the_field(tmp_path):
    cfg = tiny_config()
    _numpy_checkpoint(tmp_path, cfg)
    with pytest.raises(UserError, match="'num_hidden_layers' is 2, but the model expects 3"):
        load_local(tmp_path, tiny_config(num_hidden_layers=3))


def test_get_checkpoint_sources(tmp_path):
    cfg = tiny_config()
    _numpy_checkpoint(tmp_path / "local", cfg)
    spec = resolve_model(str(tmp_path / "local"))
    assert get_checkpoint(spec, "hub").origin.startswith("local:")  # a local MODEL is its own weights
    assert get_checkpoint(spec, str(tmp_path / "local")).config == cfg
    synth = get_checkpoint(spec, "synthetic", cache_dir=tmp_path / "cache", seed=4)
    assert synth.origin == "synthetic:4"
    assert synth.directory == ensure_synthetic(spec.name, cfg, seed=4, cache_root=tmp_path / "cache")
