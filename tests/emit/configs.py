"""Llama-family configs the emitter tests cover: the two registry models plus tiny architectures
that differ in GQA ratio, head_dim, tying, RoPE scaling, eps and ragged sizes."""

from __future__ import annotations

from ktir_models.model.config import ModelConfig
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.synthetic import tiny_config

LLAMA3_SCALING = {
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}


def tiny_configs() -> dict[str, ModelConfig]:
    """name -> config; every one is small enough for a whole forward in a second or two."""
    return {
        # plain multi-head attention (GQA ratio 1), tied lm_head
        "tiny-mha": tiny_config(num_attention_heads=4, num_key_value_heads=4, head_dim=16),
        # GQA 4:1, head_dim 32 with q_dim (256) != hidden (96), untied, llama3 RoPE scaling,
        # vocab not a multiple of 64 (ragged lm_head chunk)
        "tiny-gqa4-untied-llama3": tiny_config(
            hidden_size=96, intermediate_size=160, num_attention_heads=8, num_key_value_heads=2,
            head_dim=32, vocab_size=300, tie_word_embeddings=False, rope_theta=500000.0,
            rope_scaling=LLAMA3_SCALING),
        # multi-query attention (one KV head), head_dim 80, eps 1e-6, three layers
        "tiny-mqa-hd80": tiny_config(
            hidden_size=160, intermediate_size=224, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=1, head_dim=80, vocab_size=250, rms_norm_eps=1e-6),
    }


def registry_configs() -> dict[str, ModelConfig]:
    return {name: resolve_model(name).config for name in ("smollm2-135m", "llama-3.2-1b")}


def llama_3b_config() -> ModelConfig:
    """Llama-3.2-3B's architecture (head_dim 128, GQA 3, 28 layers, hidden 3072): emitted and
    checked for machine fit only (no weights)."""
    return tiny_config(
        hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
        num_key_value_heads=8, head_dim=128, vocab_size=128256, rope_theta=500000.0,
        max_position_embeddings=131072,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
