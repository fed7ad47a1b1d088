"""The model families we run, each one file saying what it changes relative to llama.

:data:`FAMILIES` maps ``model_type`` to its :class:`~.family.Family`; :func:`family_of` is the one
lookup everything uses. Related architectures we cannot run faithfully are listed in
:data:`REFUSED` with the config field that makes them different, so their error says why.
Adding a family: docs/families.md.
"""

from __future__ import annotations

from ...errors import UserError
from . import granite, llama, mistral, qwen2, qwen3
from .features import Features
from .family import Family
from .fields import ConfigFields

FAMILIES: dict[str, Family] = {f.model_type: f for f in (
    llama.FAMILY, granite.FAMILY, qwen2.FAMILY, qwen3.FAMILY, mistral.FAMILY)}

#: model_type -> what we would have to approximate (naming the config field that says so).
REFUSED: dict[str, str] = {
    "mixtral": "a mixture of experts (field 'num_local_experts')",
    "qwen2_moe": "a mixture of experts (field 'num_experts')",
    "qwen3_moe": "a mixture of experts (field 'num_experts')",
    "granitemoe": "a mixture of experts (field 'num_local_experts')",
    "granitemoeshared": "a mixture of experts (field 'num_local_experts')",
    "granitemoehybrid": "Mamba layers mixed with attention (field 'layer_types') and experts",
}

__all__ = ["FAMILIES", "REFUSED", "ConfigFields", "Family", "Features", "family_of"]


def family_of(model_type: object, where: str) -> Family:
    """The family of ``model_type``; anything else is one UserError naming the field."""
    if isinstance(model_type, str) and model_type in FAMILIES:
        return FAMILIES[model_type]
    supported = ", ".join(FAMILIES)
    if isinstance(model_type, str) and model_type in REFUSED:
        raise UserError(f"{where}: field 'model_type' = {model_type!r} is not supported: it has "
                        f"{REFUSED[model_type]}, which we do not run (supported: {supported})")
    raise UserError(f"{where}: field 'model_type' = {model_type!r} is not supported (supported: {supported})")
