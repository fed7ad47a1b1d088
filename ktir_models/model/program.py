"""One program, loaded once: the typed manifest, its parsed and verified node functions, their
compiled plans and each node's argument bindings.

Two stages, each done once per program:

1. :func:`parse_program` parses and verifies every node file (a file shared by several nodes is
   read once; a file that is the same text as an earlier one up to its function's and
   arguments' names, a *twin*, is derived from that one's IR in its own names and locations:
   ``ktir/exec/twins.py``) and checks that each node's function exists and takes exactly the node's
   arguments. The result, a :class:`ParsedProgram`, needs no machine: the latency model and the
   diagnosis's source locations read it, and any number of machines compile it.
2. :meth:`ParsedProgram.compile` compiles every node's function on one machine into a
   :class:`LoadedProgram`; its plans are tied to that machine (its back end, LX model, checks).
   Twins share their first file's compile, each with its own run state
   (``ktir/exec/twin_plans.py``); ``KTIR_MODELS_TWINS=0`` or ``parse_program(..., twins=False)``
   parses, verifies and compiles every file on its own.

:meth:`LoadedProgram.bind` turns buffer addresses (and host scalars) into each node's argument
dict, in the node's argument order. Who allocates the buffers differs (a forward's runner gives
every tensor its own buffer, a session shares weights and KV cache between programs), so the
addresses come from the caller. Forward (``runner.py``), generate (``emit/session.py``),
diagnose (``diagnose.py``) and latency all start from this module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from .. import ktir
from ..errors import UserError
from ..ktir.exec.twin_plans import compile_functions
from ..ktir.exec.twins import TwinLoader
from .manifest import Manifest, NodeDecl, Signature, check_node_arguments


@dataclass(frozen=True)
class ProgramNode:
    """Node ``index`` of the manifest: its declaration and its parsed, verified function."""

    index: int
    decl: NodeDecl
    function: Any


@dataclass(frozen=True)
class ParsedProgram:
    """Every node of ``manifest`` parsed and verified (manifest order); ``modules`` maps each node
    file to its parsed module; ``seconds`` is the wall time the parse took; ``twins`` the loader
    that knows which functions were derived from which (None: every file on its own)."""

    manifest: Manifest
    nodes: tuple[ProgramNode, ...]
    modules: Mapping[str, Any]
    seconds: float
    twins: TwinLoader | None = None

    def module(self, node: int) -> Any:
        """The parsed module of node ``node``'s file."""
        return self.modules[self.nodes[node].decl.mlir]

    def named_functions(self) -> list[tuple[str, Any]]:
        """(``node<i>``, function) for every node, in manifest order (the latency model's input)."""
        return [(f"node{n.index}", n.function) for n in self.nodes]

    def latency_calls(self, scalars: Mapping[str, int]) -> list[tuple[str, Any, dict[str, int]]]:
        """(``node<i>``, function, arguments) for every node, in manifest order: each node's
        host-scalar arguments bound from ``scalars`` (loop bounds the latency walker must see);
        tensor pointers are left out (the cost model does not read addresses)."""
        calls = []
        for n in self.nodes:
            args = {a.name: scalars[a.scalar] for a in n.decl.args
                    if a.tensor is None and a.scalar in scalars}
            calls.append((f"node{n.index}", n.function, args))
        return calls

    def compile(self, machine: Any) -> "LoadedProgram":
        """Compile every node on ``machine`` (one plan per node, reused by every pass)."""
        start = time.perf_counter()
        with ktir.bulk_load():  # plans are long-lived cyclic graphs: no collector rescans meanwhile
            plans = tuple(compile_functions(machine, [n.function for n in self.nodes], self.twins))
        return LoadedProgram(self, machine, plans, time.perf_counter() - start)


@dataclass(frozen=True)
class LoadedProgram:
    """A parsed program compiled on ``machine``: ``plans[i]`` runs node ``i``."""

    parsed: ParsedProgram
    machine: Any
    plans: tuple[Any, ...]
    compile_seconds: float

    @property
    def manifest(self) -> Manifest:
        return self.parsed.manifest

    def bind(self, address: Mapping[int, int], scalars: Mapping[str, int] | None = None) -> list[dict[str, int]]:
        """Each node's arguments: a tensor argument gets ``address[tensor]``, a host-scalar
        argument the value ``scalars[name]`` (a UserError names a scalar that was not given)."""
        scalars = scalars or {}
        bound = []
        for node in self.parsed.nodes:
            args: dict[str, int] = {}
            for a in node.decl.args:
                if a.tensor is not None:
                    args[a.name] = address[a.tensor]
                elif a.scalar in scalars:
                    args[a.name] = scalars[a.scalar]
                else:
                    raise UserError(f"nodes[{node.index}].args: no value for host scalar {a.scalar!r}")
            bound.append(args)
        return bound


def parse_program(manifest: Manifest, check_arguments: bool = True,
                  twins: bool | None = None) -> ParsedProgram:
    """Parse and verify every node file of ``manifest`` once; each node's function must exist and,
    with ``check_arguments``, take exactly the node's argument names in order (a ManifestError
    naming the node otherwise). ``twins``: derive twin files from their first (default: unless
    ``KTIR_MODELS_TWINS=0``)."""
    start = time.perf_counter()
    loader = TwinLoader(twins)
    modules: dict[str, Any] = {}
    nodes = []
    with ktir.bulk_load():
        for i, decl in enumerate(manifest.nodes):
            path = manifest.directory / decl.mlir
            if decl.mlir not in modules:
                modules[decl.mlir] = loader.load(path)
            fn = modules[decl.mlir].functions.get(decl.fn)
            signature = None
            if fn is not None:
                loc = getattr(fn, "loc", None)
                names = tuple(fn.arg_names) if check_arguments else tuple(a.name for a in decl.args)
                signature = Signature(decl.fn, names, getattr(loc, "line", 0), getattr(loc, "col", 0))
            check_node_arguments(i, decl, signature, path)
            nodes.append(ProgramNode(i, decl, fn))
    return ParsedProgram(manifest, tuple(nodes), modules, time.perf_counter() - start,
                         loader if loader.share else None)


def load_program(manifest: Manifest, machine: Any) -> LoadedProgram:
    """:func:`parse_program` then :meth:`ParsedProgram.compile` on ``machine``, both with the
    collector paused throughout (see ``ktir.bulk_load``)."""
    with ktir.bulk_load():
        return parse_program(manifest).compile(machine)
