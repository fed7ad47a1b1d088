"""The record one family file fills in: how to read its config fields and how to write them back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .features import Features
from .fields import ConfigFields


@dataclass(frozen=True)
class Family:
    """One ``model_type``.

    ``read`` turns the family's own config.json fields into :class:`Features` and raises a
    :class:`~ktir_models.errors.UserError` naming the field for anything we cannot run faithfully;
    ``write`` gives back the fields that make transformers' config class of ``architecture``
    build the same model (``read(write(f)) == f``). The generic llama fields (sizes, RoPE, eps,
    tying) are read and written by :mod:`ktir_models.model.config` for every family.
    """

    model_type: str
    architecture: str  # the transformers causal-LM class, e.g. "GraniteForCausalLM"
    summary: str
    read: Callable[[ConfigFields], Features]
    write: Callable[[Features], dict[str, Any]]
