"""The checkpoint tensors of one decoder layer, by family features (PyTorch shapes, HF names).

The one place that knows which extra tensors a family's layers carry: q/k/v biases (qwen2),
q/k norm weights over ``head_dim`` (qwen3). Checkpoint checks, synthetic weights and the emitter's
weight sources all follow it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import ModelConfig


def layer_prefix(layer: int) -> str:
    return f"model.layers.{layer}."


def layer_tensor_shapes(cfg: "ModelConfig", layer: int) -> dict[str, tuple[int, ...]]:
    """``{name: shape}`` of layer ``layer``: the llama set, then the family's extras."""
    h, i, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    p = layer_prefix(layer)
    shapes: dict[str, tuple[int, ...]] = {
        p + "input_layernorm.weight": (h,),
        p + "self_attn.q_proj.weight": (q, h),
        p + "self_attn.k_proj.weight": (kv, h),
        p + "self_attn.v_proj.weight": (kv, h),
        p + "self_attn.o_proj.weight": (h, q),
        p + "post_attention_layernorm.weight": (h,),
        p + "mlp.gate_proj.weight": (i, h),
        p + "mlp.up_proj.weight": (i, h),
        p + "mlp.down_proj.weight": (h, i),
    }
    f = cfg.features
    if f.qkv_bias:
        shapes[p + "self_attn.q_proj.bias"] = (q,)
        shapes[p + "self_attn.k_proj.bias"] = (kv,)
        shapes[p + "self_attn.v_proj.bias"] = (kv,)
    if f.qk_norm:
        shapes[p + "self_attn.q_norm.weight"] = (hd,)
        shapes[p + "self_attn.k_norm.weight"] = (hd,)
    return shapes
