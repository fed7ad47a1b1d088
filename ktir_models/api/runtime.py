"""What every API function that runs the emulator shares: the array back end named by
``backend``/``device`` and a quiet transformers.

The back end is built once per call, before any heavy work, with
:func:`ktir_models.ktir.backends.make_backend`, which turns every unavailable choice (no torch, no
CUDA, no MPS, numpy on a device) into one :class:`~ktir_models.errors.UserError`; the model layer
then hands the back-end object to every ``ktir.Machine`` it makes.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError


def build_backend(backend: str, device: str) -> Any:
    """The back-end object for ``backend``/``device`` (UserError when unavailable)."""
    from ..ktir.backends import make_backend

    return make_backend(backend, device)


def check_lx_model(lx_model: str) -> None:
    """``lx_model`` is one of the emulator's LX accounting models (docs/emulator.md)."""
    from ..ktir.verify.lx_liveness import MODELS

    if lx_model not in MODELS:
        raise UserError(f"--lx-model {lx_model!r}: expected one of {', '.join(MODELS)}")


def quiet_transformers() -> None:
    """No "Loading weights" bar from transformers (quiet runs, or no tty)."""
    from ..model.forward import quiet_transformers as quiet

    quiet()
