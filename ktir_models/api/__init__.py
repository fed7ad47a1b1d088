"""The public Python API: one function per command, keyword arguments named as the command's
options, each returning a typed report (``.passed``, ``.to_dict()`` -- the JSON the command
writes --, ``.render()`` -- the text it prints). Bad input raises the project's
:class:`~ktir_models.errors.UserError` subclasses with the messages the CLI prints.

The CLI (``ktir_models/cli``) is a shell over these functions; docs/api.md shows them in use.
``sweep`` lives in :mod:`ktir_models.api.sweeps` and is not re-exported here: the sweep package
reads ``__version__`` from the package root, which imports this package, so the re-export would
close an import cycle.
"""

from .diagnose import diagnose
from .emit import emit
from .forward import forward
from .generate import generate
from .ktir_files import CheckReport, RunReport, check, run
from .latency import latency
from .reports import (DiagnoseReport, EmitReport, ForwardReport, GenerationReport, GenerationStep,
                      LatencyReport, SweepReport)

__all__ = [
    "CheckReport", "DiagnoseReport", "EmitReport", "ForwardReport", "GenerationReport",
    "GenerationStep", "LatencyReport", "RunReport", "SweepReport", "check", "diagnose", "emit",
    "forward", "generate", "latency", "run",
]
