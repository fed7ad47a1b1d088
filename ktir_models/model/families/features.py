"""What a family changes relative to llama, as one typed record the whole model layer reads.

A :class:`Features` value with every field at its default *is* llama. Each field names the
transformers semantics it stands for; the emitter, the host inputs, the synthetic weights and the
weight names all read these fields and nothing else about the family.

Invariants: multipliers are positive and finite; ``sliding_window`` is None or >= 1.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Features:
    """The architecture differences we run faithfully.

    * ``embedding_multiplier``: ``inputs_embeds * m`` before the first layer (granite).
    * ``residual_multiplier``: each branch (attention, MLP) scaled before its residual add (granite).
    * ``attention_multiplier``: the softmax scale; None means ``head_dim ** -0.5`` (granite sets it).
    * ``logits_scaling``: logits divided by it (granite).
    * ``qkv_bias``: q/k/v projections carry a bias (qwen2); o_proj and the MLP never do.
    * ``qk_norm``: per-head RMSNorm of q and k over ``head_dim`` before RoPE (qwen3).
    * ``sliding_window``: a query at position p sees keys at positions ``> p - window`` (mistral).
    """

    embedding_multiplier: float = 1.0
    residual_multiplier: float = 1.0
    attention_multiplier: float | None = None
    logits_scaling: float = 1.0
    qkv_bias: bool = False
    qk_norm: bool = False
    sliding_window: int | None = None

    def attention_scale(self, head_dim: int) -> float:
        """The factor the scores ``q @ k^T`` are multiplied by before the softmax."""
        return self.attention_multiplier if self.attention_multiplier is not None else head_dim**-0.5
