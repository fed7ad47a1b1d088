"""HF tensor names -> GGUF tensor names for the llama family.

The manifest and the runner speak HF names (``model.layers.3.self_attn.q_proj.weight``); a GGUF
file holds llama.cpp's names (``blk.3.attn_q.weight``). The map is one-to-one; the checkpoint
looks each HF name the architecture needs up in the file.
"""

from __future__ import annotations

import re

TOKEN_EMBD = "token_embd.weight"
OUTPUT = "output.weight"
OUTPUT_NORM = "output_norm.weight"
ROPE_FREQS = "rope_freqs.weight"

_GLOBAL = {
    "model.embed_tokens.weight": TOKEN_EMBD,
    "model.norm.weight": OUTPUT_NORM,
    "lm_head.weight": OUTPUT,
}
_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_HF_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
_GGUF_LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")


def gguf_name(hf_name: str) -> str | None:
    """The GGUF name of an HF tensor name, or None when it has none."""
    if hf_name in _GLOBAL:
        return _GLOBAL[hf_name]
    match = _HF_LAYER.match(hf_name)
    if match and match.group(2) in _LAYER:
        return f"blk.{match.group(1)}.{_LAYER[match.group(2)]}"
    return None


def layer_index(name: str) -> int | None:
    """N of a ``blk.N.*`` GGUF name, else None."""
    match = _GGUF_LAYER.match(name)
    return int(match.group(1)) if match else None


def permuted_heads(name: str) -> str | None:
    """Which head count reorders this GGUF tensor's rows: ``"q"`` (query heads), ``"k"`` (KV
    heads) or None (not reordered)."""
    if name.endswith(".attn_q.weight"):
        return "q"
    if name.endswith(".attn_k.weight"):
        return "k"
    return None
