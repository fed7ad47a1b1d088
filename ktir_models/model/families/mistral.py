"""mistral (Mistral 7B): llama plus sliding-window attention when ``sliding_window`` is set
(modeling_mistral.py, masking_utils.sliding_window_overlay): a query at position p sees the keys
at positions ``p - sliding_window < j <= p`` — the window counts the query's own position, so at
most ``sliding_window`` keys. ``sliding_window: null`` (Mistral-7B-v0.3) is plain causal attention;
a config without the key gets transformers' ``MistralConfig`` default, a window of 4096.

The window applies in every pass: a prefill longer than the window, and decode steps once
``past + m`` exceeds it. Per-layer ``layer_types`` (Ministral's alternation) are refused.
"""

from __future__ import annotations

from .features import Features
from .fields import ConfigFields
from .family import Family


#: ``MistralConfig.sliding_window``'s default (configuration_mistral.py): what a config.json
#: without the key means to transformers, whereas an explicit null means no window.
DEFAULT_SLIDING_WINDOW = 4096


def read(f: ConfigFields) -> Features:
    window = f.optional_positive_int("sliding_window", absent=DEFAULT_SLIDING_WINDOW)
    f.uniform_layer_types("sliding_attention" if window is not None else "full_attention",
                          "per-layer attention kinds (Ministral) are not emitted")
    return Features(sliding_window=window)


def write(features: Features) -> dict:
    return {"sliding_window": features.sliding_window}


FAMILY = Family("mistral", "MistralForCausalLM", "Mistral: sliding-window attention", read, write)
