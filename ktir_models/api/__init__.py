"""The public Python API: one function per command, keyword arguments named as the command's
options, each returning a typed report (``.passed``, ``.to_dict()`` -- the JSON the command
writes --, ``.render()`` -- the text it prints). Bad input raises the project's
:class:`~ktir_models.errors.UserError` subclasses with the messages the CLI prints.

The CLI (``ktir_models/cli``) is a shell over these functions; docs/api.md shows them in use.
"""

from .diagnose import diagnose
from .emit import emit
from .forward import forward
from .generate import generate
from .ktir_files import CheckReport, RunReport, check, run
from .latency import latency
from .serve import ServeReport, serve
from .sweeps import sweep
from .reports import (DiagnoseReport, EmitReport, ForwardReport, GenerationReport, GenerationStep,
                      LatencyReport, SweepReport)

__all__ = [
    "CheckReport", "DiagnoseReport", "EmitReport", "ForwardReport", "GenerationReport",
    "GenerationStep", "LatencyReport", "RunReport", "SweepReport", "check", "diagnose", "emit",
    "forward", "generate", "latency", "run", "ServeReport", "serve", "sweep",
]
