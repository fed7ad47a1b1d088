"""The KTIR emulator: parse, verify, compile and run KTIR programs. Knows nothing about models.

Public API (docs/architecture.md)::

    module = ktir.load_module(path)          # parse + verify
    fn = module.function("name")
    machine = ktir.Machine()
    plan = machine.compile(fn)
    stats = plan.run({"arg": address, ...})
    cost = ktir.estimate_latency(fn, {"K": 2048}, trace=True)   # the latency model, per call
"""

from .api import bulk_load, check_legality, estimate_latency, load_module, parse_text, verify
from .ir.errors import Diagnostic, EmulationFault, KtirError, Location
from .exec.execute import RunStats
from .ir.nodes import Function, Module
from .exec.machine import Buffer, Machine

__all__ = ["bulk_load", "check_legality", "estimate_latency", "load_module", "parse_text", "verify",
           "Diagnostic", "EmulationFault", "KtirError", "Location", "Function", "Module", "Buffer",
           "Machine", "RunStats"]
