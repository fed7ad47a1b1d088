"""qwen3 (dense Qwen3): llama plus a per-head RMSNorm of q and k over ``head_dim`` (weights
``self_attn.q_norm`` / ``self_attn.k_norm``, eps ``rms_norm_eps``), applied after the projections
and *before* RoPE (modeling_qwen3.py). ``head_dim`` is a config field of its own (Qwen3-0.6B: 16
heads x 128 = 2048 query columns for hidden 1024).

``attention_bias: true`` would put biases on all four attention projections (o_proj included):
refused. Sliding windows (``use_sliding_window``) mix layer kinds: refused.
"""

from __future__ import annotations

from .features import Features
from .fields import ConfigFields
from .family import Family
from .qwen2 import refuse_layer_windows


def read(f: ConfigFields) -> Features:
    f.refuse_true("attention_bias", "biases on q/k/v/o projections are not emitted for qwen3")
    refuse_layer_windows(f)
    return Features(qk_norm=True)


def write(features: Features) -> dict:
    return {"use_sliding_window": False, "sliding_window": None}


FAMILY = Family("qwen3", "Qwen3ForCausalLM", "dense Qwen3: per-head q/k RMSNorm before RoPE", read, write)
