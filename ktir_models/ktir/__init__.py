"""The KTIR emulator: parse, verify, compile and run KTIR programs. Knows nothing about models.

Public API (docs/architecture.md)::

    module = ktir.load_module(path)          # parse + verify
    fn = module.function("name")
    machine = ktir.Machine()
    plan = machine.compile(fn)
    stats = plan.run({"arg": address, ...})
"""

from .api import bulk_load, load_module, parse_text, verify
from .errors import Diagnostic, EmulationFault, KtirError, Location
from .ir import Function, Module

__all__ = ["bulk_load", "load_module", "parse_text", "verify", "Diagnostic", "EmulationFault", "KtirError",
           "Location", "Function", "Module"]

try:  # the machine arrives in a later step; keep the parser usable on its own
    from .machine import Buffer, Machine, RunStats  # noqa: F401

    __all__ += ["Buffer", "Machine", "RunStats"]
except ImportError:  # pragma: no cover
    pass
