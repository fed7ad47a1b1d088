"""Run our emitted programs pass after pass on one machine, with a real KV cache.

A :class:`Session` owns one emulated machine. Programs added to it share

* the weights: one HBM buffer per checkpoint tensor (``disk`` name), marshalled once;
* the KV cache: one ``[C, kv_dim]`` buffer per (layer, k|v), zeroed once and then only written by
  the programs themselves (rows ``past .. past+m-1`` of each pass);

so a prefill program followed by decode programs (or one decode program with a dynamic position,
run once per step) continues exactly where the previous pass left the cache. This is how
``generate`` and decode-after-prefill forwards run; the host binds what docs/emitter.md's "Host
contract" lists, nothing else.

The machine computes on any array back end (``backend=``: numpy, or torch on cpu/cuda/mps). Weights
and the KV cache stay where the back end keeps them; per pass the host writes only the pass inputs
(embedding rows, cos/sin, mask) and reads only the logits.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import ktir
from ...errors import UserError
from ..inputs import prefix_mask, rope_tables, scaled_embedding_rows

FORMAT = "ktir-models/1"


@dataclass
class NodeRun:
    """One node of a loaded program: its manifest entry and compiled plan."""

    fn: str
    args: list[dict[str, Any]]
    plan: Any


@dataclass
class LoadedProgram:
    """A compiled program and its per-pass tensors (activations, embed, cos/sin, mask)."""

    directory: Path
    doc: dict[str, Any]
    nodes: list[NodeRun]
    buffers: dict[int, Any]
    m: int
    capacity: int
    dynamic_position: bool
    roles: dict[str, int]  # embed / cos / sin / mask -> tensor id

    @property
    def result(self) -> int:
        return int(self.doc["result"])


@dataclass
class PassOutput:
    """Logits ``[m, vocab]`` (f16), seconds, and the LX high-water mark (bytes) of each node,
    the maximum over its cores."""

    logits: np.ndarray
    seconds: float
    node_lx: list[int] = field(default_factory=list)


class Session:
    """One machine, one checkpoint, shared weights and KV cache for our programs."""

    def __init__(self, ckpt: Any, machine: Any | None = None, backend: Any = None) -> None:
        """``machine``: run on it; else a new ``ktir.Machine`` on ``backend`` (a back-end object
        from ``ktir.backends.make_backend`` or a name; default numpy)."""
        if machine is not None and backend is not None:
            raise ValueError("Session: pass either machine or backend, not both")
        self.ckpt = ckpt
        self.cfg = ckpt.config
        self.machine = machine if machine is not None else \
            ktir.Machine(backend=backend if backend is not None else "numpy")
        self._weights: dict[str, Any] = {}
        self._cache: dict[tuple[str, int], Any] = {}
        self.capacity: int | None = None

    # ------------------------------------------------------------------ loading

    def load(self, directory: Path) -> LoadedProgram:
        directory = Path(directory)
        doc = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        if doc.get("format") != FORMAT:
            raise UserError(f"{directory}/manifest.json: not a program of our emitter (format {doc.get('format')!r})")
        capacity = int(doc["capacity"])
        if self.capacity is None:
            self.capacity = capacity
        elif capacity != self.capacity:
            raise UserError(f"{directory}: KV capacity {capacity} differs from this session's {self.capacity}")

        tensors = {t["id"]: t for t in doc["tensors"]}
        buffers: dict[int, Any] = {}
        roles: dict[str, int] = {"mask": int(doc["attn_mask"])}
        hbm = self.machine.hbm
        for src in doc["sources"]:
            tid, role = src["id"], src["role"]
            t = tensors[tid]
            if role == "weight":
                buffers[tid] = self._weight(src["disk"], t)
            elif role in ("prefix_k", "prefix_v"):
                key = (role, int(src["layer"]))
                if key not in self._cache:
                    self._cache[key] = hbm.allocate_from(
                        np.zeros((t["rows"], t["cols"]), dtype=np.float16), name=f"{role}{key[1]}")
                buffers[tid] = self._cache[key]
            else:
                roles[role] = tid
        for tid, t in tensors.items():
            if tid not in buffers:
                buffers[tid] = hbm.allocate((t["rows"], t["cols"]), "float16", name=f"t{tid}")

        modules: dict[str, Any] = {}
        nodes = []
        with ktir.bulk_load():
            for n in doc["nodes"]:
                if n["mlir"] not in modules:
                    modules[n["mlir"]] = ktir.load_module(directory / n["mlir"])
                fn = modules[n["mlir"]].function(n["fn"])
                nodes.append(NodeRun(n["fn"], n["args"], self.machine.compile(fn)))
        return LoadedProgram(directory, doc, nodes, buffers, int(doc["m"]), capacity,
                             bool(doc.get("dynamic_position", False)), roles)

    def _weight(self, disk: str, t: dict[str, Any]) -> Any:
        if disk not in self._weights:
            name = self.ckpt.resolve(disk)
            array = np.asarray(self.ckpt.read_f16(name))
            if array.size != t["rows"] * t["cols"]:
                raise UserError(f"weight {name}: shape {list(array.shape)} does not fit [{t['rows']}, {t['cols']}]")
            array = array.reshape(-1, array.shape[-1]) if array.ndim == 2 else array.reshape(1, -1)
            self._weights[disk] = self.machine.hbm.allocate_from(np.ascontiguousarray(array), name=name)
        return self._weights[disk]

    # ------------------------------------------------------------------ passes

    def run(self, program: LoadedProgram, token_ids: np.ndarray, past: int) -> PassOutput:
        """One pass of ``program`` over ``token_ids`` at positions ``past ..``; the cache must hold
        the ``past`` earlier tokens (run by earlier passes of this session)."""
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        m = program.m
        if ids.size != m:
            raise UserError(f"{program.directory}: the program runs {m} tokens per pass, got {ids.size}")
        if not program.dynamic_position and past != int(program.doc["past"]):
            raise UserError(f"{program.directory}: emitted for past={program.doc['past']}, asked past={past}")
        if past + m > program.capacity:
            raise UserError(f"past {past} + {m} tokens exceed the KV capacity {program.capacity}")
        bufs, roles = program.buffers, program.roles
        cos, sin = rope_tables(self.cfg, np.arange(past, past + m))
        host = program.doc.get("host", {})  # the family's host-side inputs, as emitted
        bufs[roles["embed"]].write(scaled_embedding_rows(self.ckpt, ids, float(host.get("embedding_multiplier", 1.0))))
        bufs[roles["cos"]].write(cos)
        bufs[roles["sin"]].write(sin)
        bufs[roles["mask"]].write(prefix_mask(program.capacity, past, rows=m, window=host.get("sliding_window")))
        scalars = {"position": past}

        node_lx = []
        start = time.perf_counter()
        for node in program.nodes:
            args = {}
            for a in node.args:
                args[a["name"]] = scalars[a["scalar"]] if "scalar" in a else bufs[a["tensor"]].address
            stats = node.plan.run(args)
            node_lx.append(max(stats.lx_high_water))
        self.machine.backend.synchronize()  # a device back end runs asynchronously
        seconds = time.perf_counter() - start
        return PassOutput(bufs[program.result].read(), seconds, node_lx)

    def cache(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """Copies of layer ``layer``'s K and V cache ``[C, kv_dim]``."""
        return (self._cache[("prefix_k", layer)].read(), self._cache[("prefix_v", layer)].read())
