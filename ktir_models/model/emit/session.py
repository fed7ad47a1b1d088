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

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import ktir
from ...errors import UserError
from ..emitted import EmittedFields, emitted_fields
from ..inputs.runtime_inputs import prefix_mask, rope_tables, scaled_embedding_rows
from ..manifest import Manifest, TensorDecl, load_manifest
from ..program import LoadedProgram, load_program


@dataclass
class SessionProgram:
    """One of our programs in a session: the loaded program (typed manifest, compiled plans), our
    emitter's fields, and the program's per-pass tensors (activations, embed, cos/sin, mask);
    weights and KV cache buffers are the session's, shared."""

    program: LoadedProgram
    fields: EmittedFields
    buffers: dict[int, Any]
    roles: dict[str, int]  # embed / cos / sin / mask -> tensor id

    @property
    def manifest(self) -> Manifest:
        return self.program.manifest

    @property
    def directory(self) -> Path:
        return self.manifest.directory

    @property
    def m(self) -> int:
        return self.fields.m

    @property
    def capacity(self) -> int:
        return self.fields.capacity

    @property
    def result(self) -> int:
        return self.manifest.result


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

    def load(self, program: Path | Manifest) -> SessionProgram:
        """Load one of our programs (a directory, or its manifest already loaded with
        ``host_scalars=True``): parse and compile it on this session's machine and bind its
        tensors to the session's weights and KV cache."""
        manifest = program if isinstance(program, Manifest) else load_manifest(program, host_scalars=True)
        directory = manifest.directory
        fields = emitted_fields(manifest)
        capacity = fields.capacity
        if self.capacity is None:
            self.capacity = capacity
        elif capacity != self.capacity:
            raise UserError(f"{directory}: KV capacity {capacity} differs from this session's {self.capacity}")

        if manifest.attn_mask is None:
            raise UserError(f"{directory}/manifest.json: attn_mask: missing (our programs declare their mask)")
        buffers: dict[int, Any] = {}
        roles: dict[str, int] = {"mask": manifest.attn_mask}
        hbm = self.machine.hbm
        for src in manifest.sources:
            t = manifest.tensor(src.id)
            if src.role == "weight":
                assert src.disk is not None  # load_manifest: a weight source names its tensor
                buffers[src.id] = self._weight(src.disk, t)
            elif src.role in ("prefix_k", "prefix_v"):
                assert src.layer is not None  # load_manifest: a cache source names its layer
                key = (src.role, src.layer)
                if key not in self._cache:
                    self._cache[key] = hbm.allocate_from(
                        np.zeros(t.shape, dtype=np.float16), name=f"{src.role}{key[1]}")
                buffers[src.id] = self._cache[key]
            else:
                roles[src.role] = src.id
        for t in manifest.tensors:
            if t.id not in buffers:
                buffers[t.id] = hbm.allocate(t.shape, "float16", name=f"t{t.id}")
        return SessionProgram(load_program(manifest, self.machine), fields, buffers, roles)

    def _weight(self, disk: str, t: TensorDecl) -> Any:
        if disk not in self._weights:
            name = self.ckpt.resolve(disk)
            array = np.asarray(self.ckpt.read_f16(name))
            if array.size != t.rows * t.cols:
                raise UserError(f"weight {name}: shape {list(array.shape)} does not fit [{t.rows}, {t.cols}]")
            array = array.reshape(-1, array.shape[-1]) if array.ndim == 2 else array.reshape(1, -1)
            self._weights[disk] = self.machine.hbm.allocate_from(np.ascontiguousarray(array), name=name,
                                                                 read_only=True)
        return self._weights[disk]

    # ------------------------------------------------------------------ passes

    def run(self, program: SessionProgram, token_ids: np.ndarray, past: int) -> PassOutput:
        """One pass of ``program`` over ``token_ids`` at positions ``past ..``; the cache must hold
        the ``past`` earlier tokens (run by earlier passes of this session)."""
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        m = program.m
        if ids.size != m:
            raise UserError(f"{program.directory}: the program runs {m} tokens per pass, got {ids.size}")
        fields = program.fields
        if not fields.dynamic_position and past != fields.past:
            raise UserError(f"{program.directory}: emitted for past={fields.past}, asked past={past}")
        if past + m > program.capacity:
            raise UserError(f"past {past} + {m} tokens exceed the KV capacity {program.capacity}")
        bufs, roles = program.buffers, program.roles
        cos, sin = rope_tables(self.cfg, np.arange(past, past + m))
        # The family's host-side inputs, as emitted.
        bufs[roles["embed"]].write(scaled_embedding_rows(self.ckpt, ids, fields.embedding_multiplier))
        bufs[roles["cos"]].write(cos)
        bufs[roles["sin"]].write(sin)
        bufs[roles["mask"]].write(prefix_mask(program.capacity, past, rows=m, window=fields.sliding_window))
        node_args = program.program.bind({tid: buf.address for tid, buf in bufs.items()}, {"position": past})

        node_lx = []
        start = time.perf_counter()
        for plan, args in zip(program.program.plans, node_args):
            stats = plan.run(args)
            node_lx.append(max(stats.lx_high_water))
        self.machine.backend.synchronize()  # a device back end runs asynchronously
        seconds = time.perf_counter() - start
        return PassOutput(bufs[program.result].read(), seconds, node_lx)

    def cache(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """Copies of layer ``layer``'s K and V cache ``[C, kv_dim]``."""
        return (self._cache[("prefix_k", layer)].read(), self._cache[("prefix_v", layer)].read())
