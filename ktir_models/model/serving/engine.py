"""Run serving step programs on one emulated machine.

A :class:`ServingEngine` owns one ``ktir.Machine`` and, shared by all its step programs, the
weights (one HBM buffer per checkpoint tensor) and the block pools (one ``[num_blocks *
block_size, kv_dim]`` f16 buffer per layer and k|v, zeroed once, then written only by the
programs' ``cache_write`` nodes). Each program has its own activations and index tables. Per step
the host writes the embedding rows, cos/sin rows, slots, block table and mask of
:class:`~.tables.StepTables` and reads the logits.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import ktir
from ...errors import UserError
from ...ktir.exec.twin_plans import compile_functions
from ...ktir.exec.twins import TwinLoader
from ..emit.serving import ServingProgram, ServingShape, build_serving_program
from ..inputs.runtime_inputs import rope_tables, scaled_embedding_rows
from .tables import StepTables

#: Host-bound per-step roles and the tensors' element types.
STEP_ROLES = ("embed", "cos", "sin", "slot_mapping", "block_table")


@dataclass
class LoadedStep:
    """One compiled step program: its plans, each node's bound arguments, its buffers by role."""

    program: ServingProgram
    plans: list[Any]
    args: list[dict[str, int]]
    inputs: dict[str, Any]  # role -> buffer (embed, cos, sin, slot_mapping, block_table, mask)
    logits: Any


class ServingEngine:
    """One machine, one checkpoint, the step programs of one serve run (module docstring)."""

    def __init__(self, ckpt: Any, name: str, backend: Any = None) -> None:
        self.ckpt = ckpt
        self.cfg = ckpt.config
        self.name = name
        self.machine = ktir.Machine(backend=backend if backend is not None else "numpy")
        self._weights: dict[str, Any] = {}
        self._pools: dict[tuple[str, int], Any] = {}
        self.compile_seconds = 0.0
        self.lx_high_water = 0  # bytes: the largest per-core LX peak of any node run so far

    def load(self, shape: ServingShape, rewrite=None) -> LoadedStep:
        """Emit, parse, verify and compile the step program of ``shape``; bind its tensors.
        ``rewrite(node_index, text) -> text`` edits a node's text before parsing (tests plant
        mistakes so)."""
        start = time.perf_counter()
        program = build_serving_program(self.cfg, shape, self.name)
        nodes = program.program.nodes
        loader = TwinLoader(None)
        with tempfile.TemporaryDirectory(prefix="ktir-serve-") as tmp, ktir.bulk_load():
            functions = []
            for i, node in enumerate(nodes):
                path = Path(tmp) / node.mlir
                path.write_text(rewrite(i, node.text) if rewrite else node.text, encoding="utf-8")
                functions.append(loader.load(path).functions[node.fn])
            plans = compile_functions(self.machine, functions, loader if loader.share else None)
        buffers = self._buffers(program)
        args = [{a.name: buffers[a.tensor.id].address for a in node.args if a.tensor is not None}
                for node in nodes]
        inputs = {role: buffers[program.tensor_of(role).id] for role in STEP_ROLES}
        inputs["mask"] = buffers[program.program.mask.id]
        self.compile_seconds += time.perf_counter() - start
        return LoadedStep(program, plans, args, inputs, buffers[program.program.result.id])

    def _buffers(self, program: ServingProgram) -> dict[int, Any]:
        hbm = self.machine.hbm
        out: dict[int, Any] = {}
        for t in program.program.tensors:
            src = t.source or {}
            role = src.get("role")
            if role == "weight":
                out[t.id] = self._weight(src["disk"], t.rows * t.cols)
            elif role in ("kv_k", "kv_v"):
                key = (role, src["layer"])
                if key not in self._pools:
                    self._pools[key] = hbm.allocate_from(np.zeros((t.rows, t.cols), np.float16),
                                                         name=f"{role}{src['layer']}")
                elif self._pools[key].shape != (t.rows, t.cols):
                    raise UserError(f"step programs disagree on the block pool: "
                                    f"{self._pools[key].shape} against {(t.rows, t.cols)}")
                out[t.id] = self._pools[key]
            else:
                dtype = "int32" if src.get("dtype") == "i32" else "float16"
                shape = (t.rows,) if role == "slot_mapping" else (t.rows, t.cols)
                out[t.id] = hbm.allocate(shape, dtype, name=role or f"t{t.id}")
        return out

    def _weight(self, disk: str, size: int) -> Any:
        if disk not in self._weights:
            name = self.ckpt.resolve(disk)
            array = np.asarray(self.ckpt.read_f16(name))
            if array.size != size:
                raise UserError(f"weight {name}: {array.size} elements, the program expects {size}")
            array = array.reshape(-1, array.shape[-1]) if array.ndim == 2 else array.reshape(1, -1)
            self._weights[disk] = self.machine.hbm.allocate_from(np.ascontiguousarray(array),
                                                                 name=name, read_only=True)
        return self._weights[disk]

    def run(self, step: LoadedStep, tables: StepTables) -> np.ndarray:
        """Write the step's host tables, run every node, return the logits ``[rows, vocab]`` f16."""
        cfg = self.cfg
        cos, sin = rope_tables(cfg, tables.positions)
        inputs = step.inputs
        multiplier = cfg.features.embedding_multiplier
        inputs["embed"].write(scaled_embedding_rows(self.ckpt, tables.ids, multiplier))
        inputs["cos"].write(cos)
        inputs["sin"].write(sin)
        inputs["slot_mapping"].write(tables.slots)
        inputs["block_table"].write(tables.block_table)
        inputs["mask"].write(tables.mask)
        for plan, args in zip(step.plans, step.args):
            stats = plan.run(args)
            self.lx_high_water = max(self.lx_high_water, max(stats.lx_high_water))
        self.machine.backend.synchronize()
        return step.logits.read()

    def pool(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """Copies of layer ``layer``'s K and V block pools."""
        return self._pools[("kv_k", layer)].read(), self._pools[("kv_v", layer)].read()
