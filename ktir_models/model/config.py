"""Model architecture configs: the subset of a HuggingFace ``config.json`` the runner needs.

The generic decoder fields (sizes, heads, RoPE, eps, tying) are read here for every family; what a
family changes relative to llama is read by its own file in :mod:`ktir_models.model.families` into
``ModelConfig.features``. Anything we cannot run faithfully — an unknown ``model_type``, an unknown
``rope_type``, extra biases, an activation other than SiLU, mixed layer kinds — is a
:class:`~ktir_models.errors.UserError` that names where the config came from and the field, never a
silent approximation.

Invariants of a :class:`ModelConfig` (checked on construction from a dict):
``hidden_size``, ``num_attention_heads`` ... are positive; ``num_attention_heads`` is a multiple of
``num_key_value_heads``; ``head_dim`` is even (RoPE rotates halves).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktir_models.errors import UserError
from ktir_models.model.families import FAMILIES, ConfigFields, Family, Features, family_of

SUPPORTED_MODEL_TYPES = tuple(FAMILIES)
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
    """A decoder architecture: the llama fields plus the family's :class:`Features`."""

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
    features: Features = Features()

    @property
    def family(self) -> Family:
        return FAMILIES[self.model_type]

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_hf_dict(cls, d: dict, where: str) -> "ModelConfig":
        """Read a HuggingFace config dict; ``where`` (a file or manifest name) prefixes errors.

        Accepts both the classic layout (``rope_theta`` + ``rope_scaling``) and transformers 5's
        ``rope_parameters`` (which carries ``rope_theta`` and ``rope_type``).
        """
        if not isinstance(d, dict):
            raise UserError(f"{where}: expected a JSON object with the model config, got {type(d).__name__}")

        family = family_of(d.get("model_type"), where)
        model_type = family.model_type
        fields = ConfigFields(d, where)
        integer, number = fields.positive_int, fields.positive_number

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
        features = family.read(fields)

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

        config = cls(
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
            features=features,
        )
        check_size_bounds(config, where)  # size bounds: the delimited section at the end
        return config

    @classmethod
    def from_json(cls, path: Path) -> "ModelConfig":
        """Read ``config.json``; a missing or malformed file is a UserError naming it."""
        from ktir_models.readers import read_json

        path = Path(path)
        data = read_json(path, "model config")  # bounded: depth, number size, file size
        return cls.from_hf_dict(data, str(path))

    # ------------------------------------------------------------------ export

    def to_hf_dict(self) -> dict:
        """A ``config.json`` dict that transformers' config class of this family loads to this
        architecture (the family's own fields come from ``family.write``)."""
        d: dict[str, Any] = {
            "architectures": [self.family.architecture],
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
        d.update(self.family.write(self.features))
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
        if self.features.qkv_bias:
            per_layer += q + 2 * kv
        if self.features.qk_norm:
            per_layer += 2 * hd
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


# ============================================================================================
# Size bounds (input safety). Kept apart from the family logic above: these checks refuse
# configs whose sizes no real checkpoint has (a vocab of 10^12, 10^9 heads), which would
# otherwise hang or allocate terabytes before any other check ran. Each message names the field.

#: Largest accepted value of each config.json size field (a few times the largest real models').
SIZE_BOUNDS: dict[str, int] = {
    "vocab_size": 1 << 22,
    "hidden_size": 1 << 16,
    "intermediate_size": 1 << 18,
    "num_hidden_layers": 1 << 10,
    "num_attention_heads": 1 << 10,
    "num_key_value_heads": 1 << 10,
    "head_dim": 1 << 11,
    "max_position_embeddings": 1 << 24,
}
#: Largest estimated emulated-HBM footprint of one pass (weights + KV cache + activations).
MAX_PASS_BYTES = 1 << 40


@dataclass(frozen=True)
class PassCost:
    """An estimate of one pass's emulated HBM bytes (all f16) and multiply-accumulates."""

    weight_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    macs: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_bytes


def estimate_pass_cost(cfg: "ModelConfig", tokens: int = 1, capacity: int = 1) -> PassCost:
    """The cost of a pass of ``tokens`` new tokens over a KV cache of ``capacity`` rows."""
    q = cfg.num_attention_heads * cfg.head_dim
    kv = cfg.num_key_value_heads * cfg.head_dim
    kv_bytes = 2 * 2 * cfg.num_hidden_layers * capacity * kv
    per_token = 4 * cfg.hidden_size + q + 2 * kv + 3 * cfg.intermediate_size + cfg.vocab_size
    per_token += cfg.num_attention_heads * capacity  # attention scores
    activation_bytes = 2 * tokens * per_token * cfg.num_hidden_layers
    macs = tokens * (cfg.num_parameters + cfg.num_hidden_layers * 2 * q * capacity)
    return PassCost(cfg.f16_weight_bytes, kv_bytes, activation_bytes, macs)


def check_size_bounds(cfg: "ModelConfig", where: str, *, tokens: int = 1, capacity: int = 1) -> None:
    """Every size field within :data:`SIZE_BOUNDS` and the pass's estimated footprint within
    :data:`MAX_PASS_BYTES`; a :class:`UserError` naming ``where`` and the field otherwise."""
    for name, bound in SIZE_BOUNDS.items():
        value = getattr(cfg, name)
        if value > bound:
            raise UserError(f"{where}: field '{name}' = {value} exceeds the supported bound {bound}")
    cost = estimate_pass_cost(cfg, tokens, capacity)
    if cost.total_bytes > MAX_PASS_BYTES:
        parts = {
            "weights (fields 'vocab_size', 'hidden_size', 'intermediate_size', 'num_hidden_layers')":
                cost.weight_bytes,
            "KV cache (past + tokens times 'num_key_value_heads', 'head_dim', 'num_hidden_layers')":
                cost.kv_cache_bytes,
            "activations (tokens times 'vocab_size', 'intermediate_size', 'num_hidden_layers')":
                cost.activation_bytes,
        }
        biggest = max(parts, key=parts.__getitem__)
        raise UserError(
            f"{where}: one pass needs an estimated {cost.total_bytes / 2**30:.0f} GiB of emulated HBM, "
            f"more than the bound {MAX_PASS_BYTES / 2**30:.0f} GiB; most of it is the {biggest}: "
            f"{parts[biggest] / 2**30:.0f} GiB"
        )
