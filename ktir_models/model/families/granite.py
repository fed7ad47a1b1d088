"""granite (IBM Granite 3.x dense): llama plus four scalar multipliers (modeling_granite.py).

* ``embedding_multiplier``: ``inputs_embeds * embedding_multiplier``;
* ``residual_multiplier``: ``x = residual + branch * residual_multiplier`` after attention and MLP;
* ``attention_multiplier``: the softmax scale itself (replaces ``head_dim ** -0.5``);
* ``logits_scaling``: ``logits / logits_scaling``.

transformers' GraniteConfig defaults every multiplier to 1.0 (attention_multiplier too, which is
*not* ``head_dim ** -0.5``), so an absent field means 1.0 here as well.
"""

from __future__ import annotations

from .features import Features
from .fields import ConfigFields
from .family import Family

MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")


def read(f: ConfigFields) -> Features:
    f.refuse_true("attention_bias", "Granite attention with biases is not emitted")
    f.refuse_true("mlp_bias", "Granite MLPs with biases are not emitted")
    f.uniform_layer_types("full_attention", "every Granite layer attends to the whole cache")
    values = {name: f.positive_number(name, 1.0) for name in MULTIPLIERS}
    return Features(**values)


def write(features: Features) -> dict:
    return {name: getattr(features, name) for name in MULTIPLIERS}


FAMILY = Family("granite", "GraniteForCausalLM", "IBM Granite 3.x dense: embedding/residual/attention/logits multipliers",
                read, write)
