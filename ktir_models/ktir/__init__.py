"""The KTIR emulator: parse, verify, compile and run KTIR programs. Knows nothing about models.

Public API (docs/architecture.md)::

    module = ktir.load_module(path)          # parse + verify
    fn = module.function("name")
    machine = ktir.Machine()
    plan = machine.compile(fn)
    stats = plan.run({"arg": address, ...})
    again = plan.replayer({"arg": address, ...})   # the same run as a tape replay, or None;
    ktir.replay_state(machine)                     # valid while this is unchanged
    cost = ktir.estimate_latency(fn, {"K": 2048}, trace=True)   # the latency model, per call
"""

from .api import bulk_load, check_legality, estimate_latency, load_module, parse_text, verify
from .ir.errors import Diagnostic, EmulationFault, KtirError, Location
from .exec.execute import RunStats
from .ir.nodes import Function, Module
from .exec.machine import Buffer, Machine
from .exec.plan import replay_state

__all__ = ["bulk_load", "check_legality", "estimate_latency", "load_module", "parse_text", "verify",
           "Diagnostic", "EmulationFault", "KtirError", "Location", "Function", "Module", "Buffer",
           "Machine", "RunStats", "replay_state"]
