"""qwen2 (Qwen2 / Qwen2.5): llama plus biases on the q, k and v projections (modeling_qwen2.py:
``nn.Linear(..., bias=True)`` for q/k/v, ``bias=False`` for o_proj and the MLP — fixed by the
architecture, not by a config field).

Qwen2's sliding window (``use_sliding_window``) applies only to layers from ``max_window_layers``
on, a mix of attention kinds we do not emit: it is refused.
"""

from __future__ import annotations

from .features import Features
from .fields import ConfigFields
from .family import Family


def refuse_layer_windows(f: ConfigFields) -> None:
    """Qwen's per-layer sliding windows (shared by qwen2 and qwen3): refused."""
    f.refuse_true("use_sliding_window", "Qwen windows only the layers from 'max_window_layers' on; "
                  "mixed full/sliding layers are not emitted")
    f.uniform_layer_types("full_attention", "mixed full/sliding layers are not emitted")


def read(f: ConfigFields) -> Features:
    refuse_layer_windows(f)
    return Features(qkv_bias=True)


def write(features: Features) -> dict:
    return {"use_sliding_window": False, "sliding_window": None}


FAMILY = Family("qwen2", "Qwen2ForCausalLM", "Qwen2 / Qwen2.5: q/k/v projection biases", read, write)
