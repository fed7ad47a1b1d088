"""ktir-models: run transformer checkpoints through KTIR programs on an emulated Spyre.

Layers (arrows point down, never up): ``cli`` -> ``api`` -> ``model`` -> ``ktir``.
``ktir`` is the emulator and knows nothing about models; ``api`` is the public Python API
(docs/api.md), whose functions are exported here: ``ktir_models.forward(...)``.
``sweep`` is in ``ktir_models.api.sweeps`` (see ``ktir_models/api/__init__.py`` for why it is
not exported here).
"""

from .api import (DiagnoseReport, EmitReport, ForwardReport, GenerationReport, GenerationStep,
                  LatencyReport, diagnose, emit, forward, generate, latency)
from .errors import Mismatch, UserError
from .version import __version__

__all__ = [
    "DiagnoseReport", "EmitReport", "ForwardReport", "GenerationReport", "GenerationStep",
    "LatencyReport", "Mismatch", "UserError", "__version__", "diagnose", "emit", "forward",
    "generate", "latency",
]
