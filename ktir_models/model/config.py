"""Model architecture configs: the subset of a HuggingFace ``config.json`` the runner needs.

Only the llama family is supported (SmolLM2 is a llama). Anything we cannot run faithfully — a
different ``model_type``, an unknown ``rope_type``, biases, an activation other than SiLU — is a
:class:`~ktir_models.errors.UserError` that names where the config came from and the field, never a
silent approximation.

Invariants of a :class:`ModelConfig` (checked on construction from a dict):
``hidden_size``, ``num_attention_heads`` ... are positive; ``num_attention_heads`` is a multiple of
``num_key_value_heads``; ``head_dim`` is even (RoPE rotates halves).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktir_models.errors import UserError

SUPPORTED_MODEL_TYPES = ("llama",)
SUPPORTED_ROPE_TYPES = ("llama3",)
# Rope types that mean "no scaling" in HF configs (transformers 5 writes rope_parameters with
# rope_type "default" even for unscaled models).
UNSCALED_ROPE_TYPES = ("default", None)


@dataclass(frozen=True)
class RopeScaling:
    """llama3-style RoPE frequency scaling (``rope_scaling`` in config.json)."""

    rope_type: str
    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclass(frozen=True)
class ModelConfig:
    """A llama-family decoder architecture."""

    model_type: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: RopeScaling | None
    tie_word_embeddings: bool
    max_position_embeddings: int

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_hf_dict(cls, d: dict, where: str) -> "ModelConfig":
        """Read a HuggingFace config dict; ``where`` (a file or manifest name) prefixes errors.

        Accepts both the classic layout (``rope_theta`` + ``rope_scaling``) and transformers 5's
        ``rope_parameters`` (which carries ``rope_theta`` and ``rope_type``).
        """
        if not isinstance(d, dict):
            raise UserError(f"{where}: expected a JSON object with the model config, got {type(d).__name__}")

        model_type = d.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise UserError(
                f"{where}: field 'model_type' = {model_type!r} is not supported "
                f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
            )

        def integer(name: str, default: Any = None) -> int:
            value = d.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UserError(f"{where}: field '{name}' must be a positive integer, got {value!r}")
            return value

        def number(name: str, default: Any = None, source: dict | None = None) -> float:
            value = (source if source is not None else d).get(name, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise UserError(f"{where}: field '{name}' must be a positive number, got {value!r}")
            return float(value)

        hidden = integer("hidden_size")
        heads = integer("num_attention_heads")
        kv_heads = integer("num_key_value_heads", heads)
        if heads % kv_heads != 0:
            raise UserError(
                f"{where}: field 'num_key_value_heads' = {kv_heads} must divide "
                f"num_attention_heads = {heads}"
            )
        head_dim_default = hidden // heads if hidden % heads == 0 else None
        if d.get("head_dim") is None:  # older configs omit it: hidden_size / num_attention_heads
            if head_dim_default is None:
                raise UserError(
                    f"{where}: field 'head_dim' is missing and hidden_size {hidden} is not a "
                    f"multiple of num_attention_heads {heads}"
                )
            head_dim = head_dim_default
        else:
            head_dim = integer("head_dim")
        if head_dim % 2 != 0:
            raise UserError(f"{where}: field 'head_dim' = {head_dim} must be even (RoPE rotates halves)")

        act = d.get("hidden_act", "silu")
        if act != "silu":
            raise UserError(f"{where}: field 'hidden_act' = {act!r} is not supported (only 'silu')")
        for flag in ("attention_bias", "mlp_bias"):
            if d.get(flag, False):
                raise UserError(f"{where}: field '{flag}' = true is not supported (llama has no biases)")

        rope_params = d.get("rope_parameters")
        if rope_params is not None and not isinstance(rope_params, dict):
            raise UserError(f"{where}: field 'rope_parameters' must be an object, got {rope_params!r}")
        if "rope_theta" in d:
            rope_theta = number("rope_theta")
        elif rope_params is not None and "rope_theta" in rope_params:
            rope_theta = number("rope_theta", source=rope_params)
        else:
            rope_theta = 10000.0  # transformers' LlamaConfig default

        scaling_dict = d.get("rope_scaling")
        scaling_field = "rope_scaling"
        if scaling_dict is None and rope_params is not None:
            scaling_dict, scaling_field = rope_params, "rope_parameters"
        rope_scaling = _rope_scaling(scaling_dict, f"{where}: field '{scaling_field}'")

        tie = d.get("tie_word_embeddings", True)
        if not isinstance(tie, bool):
            raise UserError(f"{where}: field 'tie_word_embeddings' must be true or false, got {tie!r}")

        return cls(
            model_type=model_type,
            hidden_size=hidden,
            intermediate_size=integer("intermediate_size"),
            num_hidden_layers=integer("num_hidden_layers"),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=integer("vocab_size"),
            rms_norm_eps=number("rms_norm_eps", 1e-6),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=tie,
            max_position_embeddings=integer("max_position_embeddings", 2048),
        )

    @classmethod
    def from_json(cls, path: Path) -> "ModelConfig":
        """Read ``config.json``; a missing or malformed file is a UserError naming it."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{path}: cannot read model config: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
        return cls.from_hf_dict(data, str(path))

    # ------------------------------------------------------------------ export

    def to_hf_dict(self) -> dict:
        """A ``config.json`` dict that transformers' ``LlamaConfig`` loads to this architecture."""
        d: dict[str, Any] = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": self.model_type,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "hidden_act": "silu",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "mlp_bias": False,
            "torch_dtype": "bfloat16",
            "use_cache": True,
        }
        if self.rope_scaling is not None:
            s = self.rope_scaling
            d["rope_scaling"] = {
                "rope_type": s.rope_type,
                "factor": s.factor,
                "low_freq_factor": s.low_freq_factor,
                "high_freq_factor": s.high_freq_factor,
                "original_max_position_embeddings": s.original_max_position_embeddings,
            }
        return d

    # ------------------------------------------------------------------ sizes

    @property
    def num_key_value_groups(self) -> int:
        """Query heads per KV head (GQA)."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def num_parameters(self) -> int:
        """Stored parameters (a tied lm_head is stored once, as the embedding)."""
        h, i, hd = self.hidden_size, self.intermediate_size, self.head_dim
        q = self.num_attention_heads * hd
        kv = self.num_key_value_heads * hd
        per_layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h
        total = self.vocab_size * h + self.num_hidden_layers * per_layer + h
        if not self.tie_word_embeddings:
            total += self.vocab_size * h
        return total

    @property
    def f16_weight_bytes(self) -> int:
        """Bytes of all stored weights as float16 (2 bytes per parameter)."""
        return 2 * self.num_parameters


def _rope_scaling(d: Any, where: str) -> RopeScaling | None:
    """Parse ``rope_scaling`` (or transformers 5 ``rope_parameters``); None means unscaled."""
    if d is None:
        return None
    if not isinstance(d, dict):
        raise UserError(f"{where} must be an object or null, got {d!r}")
    rope_type = d.get("rope_type", d.get("type"))
    if rope_type in UNSCALED_ROPE_TYPES:
        return None
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UserError(
            f"{where}: rope_type {rope_type!r} is not supported (supported: "
            f"{', '.join(SUPPORTED_ROPE_TYPES)}, or no scaling)"
        )

    def num(name: str) -> float:
        value = d.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise UserError(f"{where}: '{name}' must be a positive number, got {value!r}")
        return float(value)

    original = d.get("original_max_position_embeddings")
    if isinstance(original, bool) or not isinstance(original, int) or original <= 0:
        raise UserError(
            f"{where}: 'original_max_position_embeddings' must be a positive integer, got {original!r}"
        )
    low, high = num("low_freq_factor"), num("high_freq_factor")
    if high <= low:
        raise UserError(f"{where}: 'high_freq_factor' ({high}) must exceed 'low_freq_factor' ({low})")
    return RopeScaling(
        rope_type=rope_type,
        factor=num("factor"),
        low_freq_factor=low,
        high_freq_factor=high,
        original_max_position_embeddings=original,
    )
