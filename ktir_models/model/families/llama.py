"""llama: the reference architecture every other family is described against (no changes)."""

from __future__ import annotations

from .features import Features
from .fields import ConfigFields
from .family import Family


def read(f: ConfigFields) -> Features:
    f.refuse_true("attention_bias", "llama attention here has no biases")
    f.refuse_true("mlp_bias", "llama MLPs here have no biases")
    f.uniform_layer_types("full_attention", "every llama layer attends to the whole cache")
    return Features()


def write(features: Features) -> dict:
    return {}  # the generic fields are all llama has


FAMILY = Family("llama", "LlamaForCausalLM", "the reference decoder (SmolLM2, Llama 3.x)", read, write)
