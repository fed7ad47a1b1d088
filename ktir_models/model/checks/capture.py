"""Intermediate tensors of a transformers forward, captured with module hooks.

The reference for :mod:`ktir_models.model.checks.diagnose`: one float32 eager forward of
``LlamaForCausalLM`` on the same checkpoint, token ids and positions as a program's pass, with
forward hooks recording what each decoder block computes. Every tensor is returned as float32
``[m, features]`` (batch dropped, heads flattened the way the programs lay them out), keyed by
``(kind, layer)``; ``layer`` is None for the model-level tensors.

Kinds (one per step of a llama decoder layer, in execution order)::

    layer_input  input_norm  q  k  v  rope_q  rope_k  attention  o_proj  attn_residual
    post_norm  gate  up  act_mul  down  layer_output        (per layer)
    final_norm  logits                                       (layer None)

``rope_q``/``rope_k`` are transformers' own ``apply_rotary_pos_emb`` applied to the captured
q/k projections with the cos/sin the model's rotary embedding produced for these positions. A
family with per-head q/k norms (qwen3) also yields ``q_norm``/``k_norm``, and RoPE is applied to
those, as the model does.
torch and transformers are imported lazily (only this module and golden.py touch them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .golden import cache_kwarg, output_cache, load_transformers_model
from ..inputs.runtime_inputs import golden_token_ids

KINDS = ("layer_input", "input_norm", "q", "k", "v", "q_norm", "k_norm", "rope_q", "rope_k", "attention",
         "o_proj", "attn_residual", "post_norm", "gate", "up", "act_mul", "down", "layer_output")
MODEL_KINDS = ("final_norm", "logits")

Key = tuple[str, "int | None"]


def _rows(t) -> np.ndarray:
    """A hooked tensor ``[1, m, f]`` (or a tuple whose first item is one) as float32 ``[m, f]``."""
    if isinstance(t, (tuple, list)):
        t = t[0]
    a = t.detach().float().cpu().numpy()
    return a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a


def capture_reference(ckpt: Any, token_ids, positions=None, past: int = 0,
                      prefix_ids=None) -> dict[Key, np.ndarray]:
    """Run ``token_ids`` at ``positions`` (default ``past .. past+m-1``) after ``past`` prefix
    tokens held in the KV cache, and return every intermediate tensor of that last call."""
    import torch
    from transformers.models.llama import modeling_llama

    model = load_transformers_model(ckpt)
    cfg = ckpt.config
    ids = torch.as_tensor(np.asarray(token_ids, dtype=np.int64).reshape(1, -1))
    m = ids.shape[1]
    if positions is None:
        positions = np.arange(past, past + m)
    pos = torch.as_tensor(np.asarray(positions, dtype=np.int64).reshape(1, -1))

    captured: dict[Key, np.ndarray] = {}
    rotary: dict[str, Any] = {}
    handles = []

    def out_hook(key):
        def hook(_module, _inputs, output):
            captured[key] = _rows(output)
        return hook

    def in_hook(key):
        def hook(_module, inputs):
            captured[key] = _rows(inputs[0])
        return hook

    def heads_hook(key, rows):
        def hook(_module, _inputs, output):
            captured[key] = output.detach().float().cpu().numpy().reshape(rows, -1)
        return hook

    def rotary_hook(_module, _inputs, output):
        rotary["cos"], rotary["sin"] = output

    cache = None
    with torch.no_grad():
        if past > 0:
            if prefix_ids is None:
                prefix_ids = golden_token_ids(past, cfg.vocab_size)
            prefix = torch.as_tensor(np.asarray(prefix_ids, dtype=np.int64).reshape(1, -1))
            cache = output_cache(model(prefix, use_cache=True))
        inner = model.model
        try:
            handles.append(inner.rotary_emb.register_forward_hook(rotary_hook))
            for i, layer in enumerate(inner.layers):
                attn, mlp = layer.self_attn, layer.mlp
                handles += [
                    layer.input_layernorm.register_forward_pre_hook(in_hook(("layer_input", i))),
                    layer.input_layernorm.register_forward_hook(out_hook(("input_norm", i))),
                    attn.q_proj.register_forward_hook(out_hook(("q", i))),
                    attn.k_proj.register_forward_hook(out_hook(("k", i))),
                    attn.v_proj.register_forward_hook(out_hook(("v", i))),
                    attn.o_proj.register_forward_pre_hook(in_hook(("attention", i))),
                    attn.o_proj.register_forward_hook(out_hook(("o_proj", i))),
                    layer.post_attention_layernorm.register_forward_pre_hook(in_hook(("attn_residual", i))),
                    layer.post_attention_layernorm.register_forward_hook(out_hook(("post_norm", i))),
                    mlp.gate_proj.register_forward_hook(out_hook(("gate", i))),
                    mlp.up_proj.register_forward_hook(out_hook(("up", i))),
                    mlp.down_proj.register_forward_pre_hook(in_hook(("act_mul", i))),
                    mlp.down_proj.register_forward_hook(out_hook(("down", i))),
                    layer.register_forward_hook(out_hook(("layer_output", i))),
                ]
                for norm in ("q_norm", "k_norm"):  # qwen3: per-head, [1, m, heads, head_dim]
                    if getattr(attn, norm, None) is not None:
                        handles.append(getattr(attn, norm).register_forward_hook(heads_hook((norm, i), m)))
            handles.append(inner.norm.register_forward_hook(out_hook(("final_norm", None))))
            out = model(ids, position_ids=pos, use_cache=True, **{cache_kwarg(model): cache})
        finally:
            for h in handles:
                h.remove()
        captured[("logits", None)] = _rows(out.logits)

        # rotated q/k with transformers' own function, from the captured projections
        hd = cfg.head_dim
        cos, sin = rotary["cos"], rotary["sin"]
        for i in range(cfg.num_hidden_layers):
            q_in = captured.get(("q_norm", i), captured[("q", i)])
            k_in = captured.get(("k_norm", i), captured[("k", i)])
            q = torch.as_tensor(q_in).reshape(1, m, -1, hd).transpose(1, 2)
            k = torch.as_tensor(k_in).reshape(1, m, -1, hd).transpose(1, 2)
            q_rot, k_rot = modeling_llama.apply_rotary_pos_emb(q, k, cos.float(), sin.float())
            captured[("rope_q", i)] = q_rot.transpose(1, 2).reshape(m, -1).numpy()
            captured[("rope_k", i)] = k_rot.transpose(1, 2).reshape(m, -1).numpy()
    return captured
