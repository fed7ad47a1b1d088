"""``install_as_ktir_cpu()``: make ``import ktir_cpu`` (and its submodules) load this package.

The names registered in ``sys.modules`` (what harnesses import):

==================================  ======================================================
``ktir_cpu``                        :mod:`ktir_models.compat` (KTIRInterpreter, HardwareConfig,
                                    LatencyReport, ExecutionModel, KTIRParserBase, ...)
``ktir_cpu.interpreter``            :mod:`.interpreter`
``ktir_cpu.latency``                :mod:`.latency` (also CoreLatencyCounters)
``ktir_cpu.parser``                 :mod:`.parser` (KTIRParserBase, KTIRParser)
``ktir_cpu.mlir_frontend``          :mod:`.mlir_frontend`
``ktir_cpu.mlir_frontend.parser``   :mod:`.parser` (MLIRFrontendParser)
``ktir_cpu.memory``                 :mod:`.memory` (HBMSimulator, STICK_BYTES)
``ktir_cpu.dtypes``                 :mod:`.dtypes`
``ktir_cpu.ir_types``               :mod:`.ir_types` (KTDP_MEMORY_SPACE_KINDS)
==================================  ======================================================

Invariant: a ``ktir_cpu`` that is already imported and is not this package is never replaced
(:class:`ShadowingError`); installing twice is harmless.
"""

from __future__ import annotations

import importlib
import sys

from ..errors import UserError

ROOT = "ktir_cpu"
SUBMODULES = {"interpreter": "interpreter", "latency": "latency", "parser": "parser",
              "mlir_frontend": "mlir_frontend", "mlir_frontend.parser": "parser",
              "memory": "memory", "dtypes": "dtypes", "ir_types": "ir_types"}


class ShadowingError(UserError, ImportError):
    """A real ``ktir_cpu`` is already imported: installing would mix two interpreters."""


def install_as_ktir_cpu():
    """Register :mod:`ktir_models.compat` as ``ktir_cpu`` (and the submodules above); returns
    the package. Raises :class:`ShadowingError` when another ``ktir_cpu`` is already imported."""
    package = importlib.import_module(__package__)
    existing = sys.modules.get(ROOT)
    if existing is not None and existing is not package:
        where = getattr(existing, "__file__", None) or repr(existing)
        raise ShadowingError(f"install_as_ktir_cpu: a real ktir_cpu is already imported (from "
                             f"{where}); install before anything imports ktir_cpu, or run "
                             "without the reference interpreter")
    sys.modules[ROOT] = package
    for sub, ours in SUBMODULES.items():
        module = importlib.import_module(f"{__package__}.{ours}")
        sys.modules[f"{ROOT}.{sub}"] = module
        parent_name, _, leaf = f"{ROOT}.{sub}".rpartition(".")
        setattr(sys.modules[parent_name], leaf, module)
    return package
