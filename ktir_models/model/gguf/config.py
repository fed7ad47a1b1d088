"""The HF-style :class:`~ktir_models.model.config.ModelConfig` from a GGUF file's metadata.

Invariants:
- Only ``general.architecture = "llama"`` is accepted (SmolLM2 and Llama 3 are llama files).
- Every number comes from a named ``llama.*`` key; a missing required key, a wrong type, or a
  value we cannot run faithfully (partial rotary, a rope scaling type, a per-layer head count)
  is a UserError naming the file and the key. A ``rope_freqs`` tensor (Llama 3.x) becomes the
  llama3 ``rope_scaling`` it encodes (:mod:`.rope`).
- Keys that contradict each other or the tensors are refused here, naming both sides:
  ``llama.vocab_size`` / ``tokenizer.ggml.tokens`` against ``token_embd.weight``'s rows, and
  ``llama.block_count`` against the ``blk.N`` tensors present. Per-tensor shapes are checked by
  the checkpoint (:mod:`.checkpoint`), which names the keys the expected shape comes from.
- ``tie_word_embeddings`` is true exactly when the file holds no ``output.weight``, as
  transformers' GGUF loader decides it (``load_gguf_checkpoint``: from the file alone, whatever
  config.json the source model had); llama.cpp's loader likewise reads ``output.weight`` when
  present and falls back to ``token_embd.weight`` otherwise. A file of a tied model that still
  carries ``output.weight`` (often quantized apart from the embedding) therefore runs that matrix
  as its lm_head, here and in the golden; :func:`file_tying` applies the same rule to a MODEL
  whose weights are such a file.
"""

from __future__ import annotations

import numpy as np

from ktir_models.errors import UserError
from ktir_models.model.config import ModelConfig

from .names import OUTPUT, ROPE_FREQS, TOKEN_EMBD, layer_index
from .reader import GgufFile

ARCH_KEY = "general.architecture"
P = "llama."


def config_from_gguf(f: GgufFile) -> ModelConfig:
    """Build the config (see the module docstring for what is checked)."""
    where = str(f.path)
    arch = f.value(ARCH_KEY)
    if arch != "llama":
        raise UserError(f"{where}: metadata key {ARCH_KEY!r} = {arch!r} is not supported (only 'llama')")
    for key in (P + "attention.head_count", P + "attention.head_count_kv", P + "feed_forward_length"):
        if isinstance(f.value(key), list):
            raise UserError(f"{where}: metadata key {key!r} is a per-layer list; only one value for "
                            f"all layers is supported")
    hidden = f.integer(P + "embedding_length")
    heads = f.integer(P + "attention.head_count")
    kv_heads = f.integer(P + "attention.head_count_kv", heads)
    if heads % kv_heads:
        raise UserError(f"{where}: metadata key {P}attention.head_count_kv = {kv_heads} does not divide "
                        f"{P}attention.head_count = {heads}")
    head_dim = _head_dim(f, hidden, heads)
    scaling = f.value(P + "rope.scaling.type")
    if scaling not in (None, "none"):
        raise UserError(f"{where}: metadata key {P}rope.scaling.type = {scaling!r} is not supported "
                        f"(only unscaled RoPE)")
    layers = f.integer(P + "block_count")
    _check_layers(f, layers)
    vocab = _vocab_size(f)
    d = {
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": f.integer(P + "feed_forward_length"),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "rms_norm_eps": _decimal(f.number(P + "attention.layer_norm_rms_epsilon")),
        "rope_theta": _decimal(f.number(P + "rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "tie_word_embeddings": OUTPUT not in f.tensors,
        "max_position_embeddings": f.integer(P + "context_length"),
    }
    config = ModelConfig.from_hf_dict(d, f"{where} [config from llama.* metadata]")
    if ROPE_FREQS in f.tensors:  # Llama 3.x: llama3 RoPE scaling as per-frequency factors
        from dataclasses import replace

        from .rope import llama3_scaling

        config = replace(config, rope_scaling=llama3_scaling(f, config))
    return config


def file_tying(expected: ModelConfig, found: ModelConfig) -> ModelConfig:
    """``expected`` (a MODEL's architecture, e.g. its config.json) with the GGUF file's own
    ``tie_word_embeddings`` (``found``, from :func:`config_from_gguf`): whether the lm_head is the
    embedding is a fact of the weights file, which transformers' GGUF loader reads from the file
    alone; every other field must still agree with the metadata."""
    from dataclasses import replace

    return replace(expected, tie_word_embeddings=found.tie_word_embeddings)


def _decimal(value: float) -> float:
    """A float32 metadata value as the shortest decimal that rounds to it (1e-05, not
    9.99999974738e-06): the value the converter was given, so the config compares equal to the
    checkpoint's config.json."""
    return float(str(np.float32(value)))


def _head_dim(f: GgufFile, hidden: int, heads: int) -> int:
    where = str(f.path)
    default = hidden // heads if hidden % heads == 0 else None
    key_length = f.value(P + "attention.key_length")
    head_dim = f.integer(P + "attention.key_length") if key_length is not None else default
    if head_dim is None:
        raise UserError(f"{where}: metadata key {P}attention.key_length is missing and "
                        f"{P}embedding_length = {hidden} is not a multiple of {P}attention.head_count = {heads}")
    value_length = f.value(P + "attention.value_length")
    if value_length is not None and value_length != head_dim:
        raise UserError(f"{where}: metadata key {P}attention.value_length = {value_length!r} differs from the "
                        f"key length {head_dim}; only equal key and value head sizes are supported")
    rope_dims = f.value(P + "rope.dimension_count")
    if rope_dims is not None and rope_dims != head_dim:
        raise UserError(f"{where}: metadata key {P}rope.dimension_count = {rope_dims!r} differs from the "
                        f"head size {head_dim}; partial rotary embeddings are not supported")
    return head_dim


def _check_layers(f: GgufFile, layers: int) -> None:
    extra = sorted({n for n in (layer_index(t) for t in f.tensors) if n is not None and n >= layers})
    if extra:
        raise UserError(f"{f.path}: metadata key {P}block_count = {layers} contradicts the tensors: the "
                        f"file holds blk.{extra[0]}.* tensors")


def _vocab_size(f: GgufFile) -> int:
    """The vocabulary size, consistent across ``llama.vocab_size``, the token list and the
    embedding's rows (whichever of them the file has)."""
    where = str(f.path)
    embd = f.tensors.get(TOKEN_EMBD)
    rows = embd.shape[0] if embd is not None and len(embd.shape) == 2 else None
    tokens = f.value("tokenizer.ggml.tokens")
    n_tokens = len(tokens) if isinstance(tokens, list) else None
    declared = f.integer(P + "vocab_size") if f.has(P + "vocab_size") else None
    if declared is not None and rows is not None and declared != rows:
        raise UserError(f"{where}: metadata key {P}vocab_size = {declared} contradicts tensor "
                        f"{TOKEN_EMBD!r}, which has {rows} rows")
    vocab = declared if declared is not None else rows if rows is not None else n_tokens
    if n_tokens is not None and vocab is not None and n_tokens != vocab:
        raise UserError(f"{where}: metadata key 'tokenizer.ggml.tokens' holds {n_tokens} tokens but the "
                        f"vocabulary has {vocab} rows ({TOKEN_EMBD!r})")
    if vocab is None:
        raise UserError(f"{where}: no vocabulary size: metadata key {P}vocab_size, tensor {TOKEN_EMBD!r} "
                        f"and 'tokenizer.ggml.tokens' are all missing")
    return vocab
