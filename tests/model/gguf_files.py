"""GGUF files for the tests, written with the ``gguf`` package from an HF-layout checkpoint.

``write_gguf`` does what llama.cpp's converter does for a llama checkpoint: llama.* metadata,
tensors renamed (``blk.N.attn_q.weight`` ...), ``q_proj`` / ``k_proj`` rows reordered with the
converter's permutation (written here from its definition, independently of the reader's
inverse), norms as F32, the 2-D tensors in the requested type (quantized by ``gguf.quants``,
or by :mod:`gguf_blocks` for the K-quants). Knobs plant the malformations the tests need.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open

import gguf
from gguf import GGMLQuantizationType as Q

import gguf_blocks

REPO = Path(__file__).resolve().parents[2]
STORIES = REPO / "fixtures" / "models" / "stories260k"
STORIES_TOKENIZER = STORIES / "tokenizer.json"

_LAYER = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def converter_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf's ``permute``: within each head, rows [2, d/2] -> [d/2, 2]."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensor_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf.split(".", 3)
    return f"blk.{layer}.{_LAYER[rest.removesuffix('.weight')]}.weight"


def stories_vocab() -> dict[str, list]:
    """tokenizer.ggml.* metadata for the stories260K sentencepiece vocabulary (512 tokens):
    tokens in id order, scores that rank merges by id, the special and byte-fallback types."""
    doc = json.loads(STORIES_TOKENIZER.read_text(encoding="utf-8"))
    vocab = doc["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    types, scores = [], []
    for i, tok in enumerate(tokens):
        if tok == "<unk>":
            types.append(int(gguf.TokenType.UNKNOWN))
        elif tok in ("<s>", "</s>"):
            types.append(int(gguf.TokenType.CONTROL))
        elif tok.startswith("<0x") and tok.endswith(">") and len(tok) == 6:
            types.append(int(gguf.TokenType.BYTE))
        else:
            types.append(int(gguf.TokenType.NORMAL))
        scores.append(0.0 if types[-1] != gguf.TokenType.NORMAL else -float(i))
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": vocab["<s>"],
        "tokenizer.ggml.eos_token_id": vocab["</s>"],
        "tokenizer.ggml.unknown_token_id": vocab["<unk>"],
    }


@dataclass
class GgufSpec:
    """What to write. ``qtype``: the type of every 2-D tensor, unless ``types`` names another for
    a GGUF tensor name. ``metadata``: overrides (None removes a key). ``drop``: GGUF tensor names
    left out. ``reshape``: GGUF name -> a different PyTorch shape (values cut or zero padded).
    ``vocab``: write the stories260K vocabulary into the metadata. ``extra``: GGUF name ->
    (raw type or None, data) of tensors added as given. ``arch``: general.architecture."""

    qtype: Any = Q.F16
    types: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    reshape: dict[str, tuple[int, ...]] = field(default_factory=dict)
    vocab: bool = False
    extra: dict[str, tuple[Any, np.ndarray]] = field(default_factory=dict)
    arch: str = "llama"


def _encode(w: np.ndarray, qtype) -> tuple[np.ndarray, Any]:
    """(data to hand GGUFWriter.add_tensor, raw_dtype) for a float32 2-D tensor."""
    if qtype == Q.F32:
        return w.astype(np.float32), None
    if qtype == Q.F16:
        return w.astype(np.float16), None
    if qtype == Q.Q4_K:
        return gguf_blocks.encode_q4_k(w), qtype
    if qtype == Q.Q6_K:
        return gguf_blocks.encode_q6_k(w), qtype
    return gguf.quants.quantize(w, qtype), qtype


def write_gguf(path: Path, checkpoint: Path, spec: GgufSpec = GgufSpec()) -> Path:
    """Write ``checkpoint`` (config.json + model.safetensors, HF layout) as a GGUF file."""
    cfg = json.loads((Path(checkpoint) / "config.json").read_text())
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    meta: dict[str, Any] = {
        "llama.context_length": cfg["max_position_embeddings"],
        "llama.embedding_length": cfg["hidden_size"],
        "llama.block_count": cfg["num_hidden_layers"],
        "llama.feed_forward_length": cfg["intermediate_size"],
        "llama.attention.head_count": heads,
        "llama.attention.head_count_kv": kv,
        "llama.attention.key_length": head_dim,
        "llama.attention.value_length": head_dim,
        "llama.rope.dimension_count": head_dim,
        "llama.rope.freq_base": float(cfg.get("rope_theta", 10000.0)),
        "llama.attention.layer_norm_rms_epsilon": float(cfg["rms_norm_eps"]),
        "llama.vocab_size": cfg["vocab_size"],
    }
    if spec.vocab:
        meta.update(stories_vocab())
    meta.update(spec.metadata)
    writer = gguf.GGUFWriter(str(path), spec.arch)
    for key, value in meta.items():
        if value is None:
            continue
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, value)
    with safe_open(str(Path(checkpoint) / "model.safetensors"), "np") as f:
        for hf in sorted(f.keys()):
            name = gguf_tensor_name(hf)
            if name in spec.drop:
                continue
            w = f.get_tensor(hf).astype(np.float32)
            if name.endswith("attn_q.weight"):
                w = converter_permute(w, heads)
            elif name.endswith("attn_k.weight"):
                w = converter_permute(w, kv)
            if name in spec.reshape:
                w = _resized(w, spec.reshape[name])
            if w.ndim == 1:
                writer.add_tensor(name, w.astype(np.float32))
                continue
            data, raw = _encode(w, spec.types.get(name, spec.qtype))
            writer.add_tensor(name, data, raw_dtype=raw)
    for name, (raw, data) in spec.extra.items():
        writer.add_tensor(name, data, raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)


def _resized(w: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, np.float32)
    box = tuple(slice(0, min(a, b)) for a, b in zip(w.shape, shape))
    out[box] = w[box]
    return out


def patch_type_code(path: Path, tensor: str, code: int) -> None:
    """Overwrite the GGML type code in ``tensor``'s tensor-info record (the u32 after its name,
    dimension count and dimensions) with ``code``."""
    data = bytearray(Path(path).read_bytes())
    name = tensor.encode()
    at = data.index(len(name).to_bytes(8, "little") + name) + 8 + len(name)
    n_dims = int.from_bytes(data[at:at + 4], "little")
    at += 4 + 8 * n_dims
    data[at:at + 4] = int(code).to_bytes(4, "little")
    Path(path).write_bytes(bytes(data))


# ------------------------------------------------------------------------------ seeded checkpoints

# A llama with GQA (4 query heads on 2 KV heads: the K permutation uses the KV head count) whose
# rows are whole K-quant super-blocks (256 values), so every type can hold every 2-D tensor.
TEST_CONFIG = dict(
    model_type="llama", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=64, vocab_size=512, rms_norm_eps=1e-5, rope_theta=10000.0,
    tie_word_embeddings=True, max_position_embeddings=256,
)


def seeded_checkpoint(root: Path, tied: bool = True, seed: int = 7) -> Path:
    """The seeded synthetic checkpoint (HF layout, f16) of TEST_CONFIG under ``root``."""
    from ktir_models.model.config import ModelConfig
    from ktir_models.model.weights.synthetic import ensure_synthetic

    cfg = ModelConfig.from_hf_dict(dict(TEST_CONFIG, tie_word_embeddings=tied), "TEST_CONFIG")
    return ensure_synthetic("gguf-tied" if tied else "gguf-untied", cfg, seed=seed, cache_root=Path(root))


# File name -> spec for the forward tests: every type the package quantizes, and K-quant files
# (Q4_K projections with a Q6_K embedding, as llama.cpp's Q4_K_M mixes them; all Q6_K).
FORWARD_FILES = {
    "F16": GgufSpec(qtype=Q.F16),
    "BF16": GgufSpec(qtype=Q.BF16),
    "Q8_0": GgufSpec(qtype=Q.Q8_0),
    "Q4_0": GgufSpec(qtype=Q.Q4_0),
    "Q4_1": GgufSpec(qtype=Q.Q4_1),
    "Q5_0": GgufSpec(qtype=Q.Q5_0),
    "Q5_1": GgufSpec(qtype=Q.Q5_1),
    "Q4_K_M": GgufSpec(qtype=Q.Q4_K, types={"token_embd.weight": Q.Q6_K, "output.weight": Q.Q6_K}),
    "Q6_K": GgufSpec(qtype=Q.Q6_K),
}


def converter_rope_factors(config: dict) -> np.ndarray:
    """llama.cpp's converter's ``rope_freqs`` for a llama3 ``rope_scaling`` (float32 [head_dim/2]),
    written from its definition: per frequency 1 (short wavelengths), ``factor`` (long), or the
    reciprocal of the smooth blend between."""
    import math

    s = config["rope_scaling"]
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    base = config.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


LLAMA3_FIXTURE = REPO / "fixtures" / "models" / "tiny-gqa4-llama3"


def llama3_spec(checkpoint: Path = LLAMA3_FIXTURE, qtype=Q.F16, **metadata) -> GgufSpec:
    """A spec that adds the converter's ``rope_freqs.weight`` for the checkpoint's llama3 scaling."""
    cfg = json.loads((Path(checkpoint) / "config.json").read_text())
    return GgufSpec(qtype=qtype, metadata=metadata, extra={"rope_freqs.weight": (None, converter_rope_factors(cfg))})


def byte_level_vocab(vocab_size: int = 512) -> tuple[dict[str, Any], Any]:
    """tokenizer.ggml.* metadata of a small byte-level BPE (gpt2-style, as SmolLM2's), trained here
    with ``tokenizers`` on a few sentences and padded with unused tokens to ``vocab_size``; and the
    trained ``tokenizers.Tokenizer`` as the reference."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    text = ["Once upon a time there was a little girl named Lily. She liked to play outside in the "
            "park with her friends, and every day she found 42 shiny stones."] * 10
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    model = json.loads(tok.to_str())["model"]
    tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    tokens += [f"[PAD{i}]" for i in range(len(tokens), vocab_size)]
    types = [int(gguf.TokenType.CONTROL)] + [int(gguf.TokenType.NORMAL)] * (len(tokens) - 1)
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": 0,
        "tokenizer.ggml.eos_token_id": 0,
    }, tok
