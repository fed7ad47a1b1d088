"""The ``--backend`` / ``--device`` options shared by ``run``, ``forward``, ``generate`` and
``diagnose``.

The options are strings handed to the API, which builds the array back end once, before any
heavy work (``api/runtime.py``).
"""

from __future__ import annotations

import typer

BACKEND_HELP = "Array back end of the emulator: numpy (host BLAS) or torch (see docs/backends.md)."
DEVICE_HELP = ("torch device: auto (mps, else cuda, else cpu), cpu, cuda, cuda:N or mps; "
               "numpy runs on the cpu only.")


def backend_option():
    return typer.Option("numpy", "--backend", help=BACKEND_HELP)


def device_option():
    return typer.Option("auto", "--device", help=DEVICE_HELP)


LX_MODEL_HELP = ("How LX bytes are counted: allocator (values live from definition to last use, "
                 "elementwise results in place of dying operands) or strict (the earlier, "
                 "conservative count); docs/emulator.md, \"LX accounting\".")


def _check_lx_model(value: str) -> str:
    from ..ktir.verify.lx_liveness import MODELS

    if value not in MODELS:
        raise typer.BadParameter(f"{value!r}: expected one of {', '.join(MODELS)}")
    return value


def lx_model_option():
    return typer.Option("allocator", "--lx-model", help=LX_MODEL_HELP, callback=_check_lx_model)
