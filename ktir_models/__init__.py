"""ktir-models: run transformer checkpoints through KTIR programs on an emulated Spyre.

Layers (arrows point down, never up): ``cli`` -> ``api`` -> ``model`` -> ``ktir``.
``ktir`` is the emulator and knows nothing about models; ``api`` is the public Python API
(docs/api.md), whose functions are exported here: ``ktir_models.forward(...)``.
"""

from .api import (CheckReport, DiagnoseReport, EmitReport, ForwardReport, GenerationReport,
                  GenerationStep, LatencyReport, RunReport, ServeReport, check, diagnose, emit,
                  forward, generate, latency, run, serve, sweep)
from .errors import Mismatch, UserError
from .version import __version__

__all__ = [
    "CheckReport", "DiagnoseReport", "EmitReport", "ForwardReport", "GenerationReport",
    "GenerationStep", "LatencyReport", "Mismatch", "RunReport", "UserError", "__version__", "check",
    "diagnose", "emit", "forward", "generate", "latency", "run", "ServeReport", "serve", "sweep",
]
