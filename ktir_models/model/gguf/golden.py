"""The live golden's model for a GGUF checkpoint: transformers' own GGUF loader.

``from_pretrained(folder, gguf_file=name)`` dequantizes with the ``gguf`` package and undoes
llama.cpp's Q/K permutation with transformers' own code, so the golden does not share our reader's
permutation or name mapping. Its parameters are then rounded to float16, exactly as our reader
hands them to the program: the golden runs on the same dequantized weights (the tests check the
two agree bit for bit), in float32 with eager attention.

Files with llama3 RoPE scaling (``rope_freqs.weight``, which transformers' GGUF loader ignores)
get the loaded weights in a model built from our config, which carries the recovered scaling.

Invariant: the model's config agrees with the one our reader built from the metadata on every
field the forward depends on; a disagreement is a UserError naming the field.
"""

from __future__ import annotations

from ktir_models.errors import UserError

# (our ModelConfig field, transformers config attribute)
_CHECKED = (
    ("hidden_size", "hidden_size"), ("intermediate_size", "intermediate_size"),
    ("num_hidden_layers", "num_hidden_layers"), ("num_attention_heads", "num_attention_heads"),
    ("num_key_value_heads", "num_key_value_heads"), ("head_dim", "head_dim"),
    ("vocab_size", "vocab_size"), ("tie_word_embeddings", "tie_word_embeddings"),
)


def transformers_model(ckpt):
    """``LlamaForCausalLM`` (float32, eager) from ``ckpt.path`` with f16-rounded parameters."""
    import torch

    try:
        from transformers import LlamaForCausalLM

        model = LlamaForCausalLM.from_pretrained(
            str(ckpt.directory), gguf_file=ckpt.path.name, dtype=torch.float32,
            attn_implementation="eager", local_files_only=True,
        )
    except ImportError as exc:  # accelerate / gguf missing
        raise UserError(f"{ckpt.path}: the live golden loads GGUF files through transformers, which "
                        f"needs: {exc} (pip install 'ktir-models[gguf]')") from None
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        raise UserError(f"{ckpt.path}: transformers cannot load this GGUF file for the live golden "
                        f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    _same_numbers(ckpt, model.config)
    if ckpt.config.rope_scaling is not None:
        model = _with_rope_scaling(model, ckpt)
    with torch.no_grad():
        for param in model.parameters():  # a tied lm_head is the embedding's parameter: once
            param.copy_(param.to(torch.float16).to(torch.float32))
    model.eval()
    return model


def _same_numbers(ckpt, theirs) -> None:
    """transformers' config from the file against ours: integers exactly, float32 metadata values
    (epsilon, RoPE base) to float32 precision."""
    def disagree(name: str, a, b) -> UserError:
        return UserError(f"{ckpt.path}: transformers' GGUF loader reads {name} = {b!r}, our reader "
                         f"{a!r}: the live golden would not run the same model")

    for ours, name in _CHECKED:
        a, b = getattr(ckpt.config, ours), getattr(theirs, name, None)
        if a != b:
            raise disagree(name, a, b)
    rope = getattr(theirs, "rope_parameters", None) or {}
    for name, a, b in (("rms_norm_eps", ckpt.config.rms_norm_eps, getattr(theirs, "rms_norm_eps", None)),
                       ("rope_theta", ckpt.config.rope_theta, getattr(theirs, "rope_theta", rope.get("rope_theta")))):
        if not isinstance(b, (int, float)) or abs(a - b) > 1e-6 * abs(a):
            raise disagree(name, a, b)


def _with_rope_scaling(loaded, ckpt):
    """transformers' GGUF loader ignores ``rope_freqs.weight`` (llama3 scaling): the same weights
    (its own dequantization and permutation) in a model built from our config, which has the
    scaling the factors encode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**ckpt.config.to_hf_dict(), attn_implementation="eager")
    model = LlamaForCausalLM(config).to(torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise UserError(f"{ckpt.path}: rebuilding the golden with llama3 RoPE scaling lost weights "
                        f"{(missing + unexpected)[:3]}")
    return model
