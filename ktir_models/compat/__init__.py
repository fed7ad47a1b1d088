"""The reference interpreter's Python API (torch-spyre/ktir-cpu, package ``ktir_cpu``) on our
emulator: harnesses written for it run unchanged (docs/compat.md).

    from ktir_models.compat import KTIRInterpreter, HardwareConfig   # one import line, or
    from ktir_models.compat import install_as_ktir_cpu
    install_as_ktir_cpu()                                             # then `import ktir_cpu`

Modules by job: ``interpreter`` (KTIRInterpreter), ``module_view`` (the picklable parsed
module), ``parser`` (the parser classes), ``memory`` (``interp.memory``), ``latency`` (the
report records, filled from ktir/latency/), ``dtypes``, ``ir_types``, ``install`` and
``pytest_plugin``.
"""

from .install import ShadowingError, install_as_ktir_cpu
from .interpreter import KTIRInterpreter
from .latency import (CoreLatencyCounters, ExecutionModel, HardwareConfig, LatencyCategory,
                      LatencyReport)
from .module_view import FunctionView, ModuleView
from .parser import KTIRParser, KTIRParserBase, MLIRFrontendParser

__all__ = ["CoreLatencyCounters", "ExecutionModel", "FunctionView", "HardwareConfig",
           "KTIRInterpreter", "KTIRParser", "KTIRParserBase", "LatencyCategory", "LatencyReport",
           "MLIRFrontendParser", "ModuleView", "ShadowingError", "install_as_ktir_cpu"]
