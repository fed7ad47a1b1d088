"""GGUF checkpoints read by ktir_models.model.gguf: files written with the ``gguf`` package from a
seeded llama checkpoint (tests/model/gguf_files.py).

The references are independent of our reader: the safetensors the file was written from (an F16
file must read back bit for bit, so the Q/K permutation is undone exactly), and transformers' own
GGUF loader (its own dequantization call and its own permutation code), which must give the same
float16 weights for every type.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import gguf_files
from gguf_files import FORWARD_FILES, GgufSpec, converter_permute, seeded_checkpoint, write_gguf
from ktir_models.model.config import ModelConfig
from ktir_models.model.gguf import load_gguf
from ktir_models.model.gguf.permute import hf_row_order
from ktir_models.model.weights.checkpoint import load_local


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.fixture(scope="module")
def tied(root) -> Path:
    return seeded_checkpoint(root, tied=True)


@pytest.fixture(scope="module")
def untied(root) -> Path:
    return seeded_checkpoint(root, tied=False)


@pytest.mark.parametrize("rows, heads", [(8, 1), (64, 4), (128, 2), (256, 4)])
def test_row_order_inverts_the_converter_permutation(rows, heads) -> None:
    w = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    np.testing.assert_array_equal(converter_permute(w, heads)[hf_row_order(rows, heads)], w)


def test_row_order_on_one_small_head() -> None:
    # One head of 4 rows: HF (t, j) -> stored 2j + t, so stored [r0, r2, r1, r3].
    assert hf_row_order(4, 1).tolist() == [0, 2, 1, 3]


def test_f16_file_reads_back_the_checkpoint_bit_for_bit(root, tied) -> None:
    path = write_gguf(root / "f16.gguf", tied, GgufSpec(qtype=Q.F16))
    ckpt = load_gguf(path)
    ref = load_local(tied)
    cfg = json.loads((tied / "config.json").read_text())
    assert ckpt.config == ModelConfig.from_hf_dict(cfg, "config.json")
    assert ckpt.config.tie_word_embeddings and "lm_head.weight" not in ckpt.tensor_names()
    assert ckpt.resolve("lm_head") == "model.embed_tokens.weight"
    assert ckpt.tensor_names() == [n for n in ref.tensor_names() if n != "lm_head.weight"]
    for name in ref.tensor_names():
        np.testing.assert_array_equal(ckpt.read_f16(name), ref.read_f16(name), err_msg=name)
    rows = np.array([5, 0, 511, 5])
    np.testing.assert_array_equal(ckpt.read_rows_f16("model.embed_tokens.weight", rows),
                                  ref.read_f16("model.embed_tokens.weight")[rows])
    np.testing.assert_array_equal(ckpt.read_rows_f16("model.layers.1.self_attn.k_proj.weight", rows[:3] % 128),
                                  ref.read_f16("model.layers.1.self_attn.k_proj.weight")[rows[:3] % 128])
    assert ckpt.origin == f"gguf:{path.resolve()}"


def test_untied_file_reads_its_output_tensor(root, untied) -> None:
    path = write_gguf(root / "untied.gguf", untied, GgufSpec(qtype=Q.F16))
    ckpt = load_gguf(path)
    assert not ckpt.config.tie_word_embeddings
    assert ckpt.resolve("lm_head") == "lm_head.weight"
    np.testing.assert_array_equal(ckpt.read_f16("lm_head.weight"), load_local(untied).read_f16("lm_head.weight"))
    assert not np.array_equal(ckpt.read_f16("lm_head.weight"), ckpt.read_f16("model.embed_tokens.weight"))


def transformers_state(path: Path) -> dict[str, np.ndarray]:
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                             local_files_only=True)
    return {k: v.numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("kind", sorted(FORWARD_FILES) + ["Q8_0-untied"])
def test_every_type_reads_as_transformers_loads_it(kind, root, tied, untied) -> None:
    base = FORWARD_FILES[kind.removesuffix("-untied")]
    source = untied if kind.endswith("-untied") else tied
    path = write_gguf(root / f"{kind}.gguf", source, base)
    ckpt = load_gguf(path)
    theirs = transformers_state(path)
    ref = load_local(source)
    for name in ref.tensor_names():
        ours = ckpt.read_f16(name)
        np.testing.assert_array_equal(ours, theirs[name].astype(np.float16), err_msg=f"{kind} {name}")
        # ... and the values are the seeded weights, up to the type's quantization error.
        w = ref.read_f16(name).astype(np.float32)
        assert np.abs(ours.astype(np.float32) - w).max() <= 0.15 * np.abs(w).max(), (kind, name)


def test_row_blocks_do_not_change_the_result(root, tied, monkeypatch) -> None:
    from ktir_models.model.gguf import dequant

    path = write_gguf(root / "q4k-blocks.gguf", tied, FORWARD_FILES["Q4_K_M"])
    whole = load_gguf(path).read_f16("model.layers.0.self_attn.q_proj.weight")
    monkeypatch.setattr(dequant, "ROW_CHUNK_BYTES", 5 * 256 * 4)  # 5-row blocks across head edges
    np.testing.assert_array_equal(load_gguf(path).read_f16("model.layers.0.self_attn.q_proj.weight"), whole)


def test_live_golden_model_holds_exactly_the_weights_the_program_takes(root, tied) -> None:
    path = write_gguf(root / "golden-q4_1.gguf", tied, FORWARD_FILES["Q4_1"])
    ckpt = load_gguf(path)
    model = ckpt.transformers_model()
    state = model.state_dict()
    assert model.config.tie_word_embeddings and model.config._attn_implementation == "eager"
    for name in ckpt.tensor_names() + ["lm_head.weight"]:
        theirs = state[name].numpy()
        assert theirs.dtype == np.float32
        np.testing.assert_array_equal(theirs, ckpt.read_f16(name).astype(np.float32), err_msg=name)


# ------------------------------------------------------------------------------ llama3 RoPE scaling


def test_llama3_scaling_recovered_from_rope_freqs(root) -> None:
    from gguf_files import LLAMA3_FIXTURE, llama3_spec

    path = write_gguf(root / "llama3.gguf", LLAMA3_FIXTURE, llama3_spec())
    expected = ModelConfig.from_json(LLAMA3_FIXTURE / "config.json")
    assert load_gguf(path).config == expected  # factor 8, low 1, high 4, original 16; untied
    # With the original context length in the metadata the same factors give the same scaling.
    path = write_gguf(root / "llama3-orig.gguf", LLAMA3_FIXTURE,
                      llama3_spec(**{"llama.rope.scaling.original_context_length": 16}))
    assert load_gguf(path).config == expected


def test_llama_3_2_scaling_parameters(root, tied) -> None:
    """Llama 3.2's parameters (theta 5e5, factor 32, low 1, high 4, original 8192) on head size 64."""
    from gguf_files import converter_rope_factors

    scaling = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    cfg = dict(json.loads((tied / "config.json").read_text()), rope_theta=500000.0, rope_scaling=scaling)
    spec = GgufSpec(metadata={"llama.rope.freq_base": 500000.0},
                    extra={"rope_freqs.weight": (None, converter_rope_factors(cfg))})
    got = load_gguf(write_gguf(root / "llama32.gguf", tied, spec)).config
    assert got == ModelConfig.from_hf_dict(cfg, "cfg")


def test_rope_freqs_that_are_no_llama3_scaling_are_refused(root, tied) -> None:
    from ktir_models.errors import UserError

    factors = np.random.default_rng(0).uniform(1, 4, 32).astype(np.float32)
    path = write_gguf(root / "oddrope.gguf", tied, GgufSpec(extra={"rope_freqs.weight": (None, factors)}))
    with pytest.raises(UserError, match=r"oddrope\.gguf: tensor 'rope_freqs\.weight': the factors are not a "
                                        r"llama3 RoPE scaling"):
        load_gguf(path)
