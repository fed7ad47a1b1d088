"""Execute a fixture's node graph on one emulated machine.

Life cycle (each step once, passes many times):

1. :meth:`Runner.load` parses and verifies every node file, checks each node's function and
   argument names, and compiles each function into a plan (reused by every pass): a
   :class:`~.program.LoadedProgram` (``program.py``), from a given parsed program when the caller
   already has one.
2. :meth:`Runner.marshal` streams the checkpoint's weights into HBM, one tensor at a time, and
   allocates every other tensor (activations, per-pass inputs, the mask) once. Weights stay resident.
3. :meth:`Runner.run` writes one pass's inputs into their resident buffers, runs the nodes in
   manifest order, and returns a copy of the result tensor with per-node timings. Once a node's
   plan replays a tape for its (fixed) arguments, the runner calls that replay directly
   (``plan.replayer``: the same steps on the same values, without the plan's per-run binding
   and dispatch) for as long as ``ktir.replay_state`` of the machine is unchanged. With
   ``last_token=True`` it returns the result's last row only, the lm_head computed for that row
   alone where the program allows it (``last_token.py``); the default computes every row.

Invariants: a tensor id maps to exactly one HBM buffer for the runner's whole life; weights are
never written after marshalling (their regions are read-only: a store into one faults); activations are overwritten by the node that produces them before
any node reads them (checked by the manifest's dataflow validation).

Back ends: the machine computes on its array back end (``ktir.Machine(backend=...)``, numpy by
default, or torch tensors on cpu/cuda/mps). On a device back end, host<->device copies happen only
at the graph's edges: the per-pass inputs are written in, the result tensor is read out, and the
per-node NaN/Inf check asks the device for one boolean per output (a tensor is copied to the host
only once it is known to hold a non-finite value).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import ktir
from ..cache_entries import cache_folder
from ..errors import UserError
from ..ktir.exec.machine import buffers_nonfinite_scan
from ..ktir.exec.row_major import host_memory_bytes, room_for_mapped
from .inputs.bindings import check_weight_shapes, input_tensor_ids, load_weight, map_weight, weight_source_bytes
from .manifest import MANIFEST_FILE, Manifest
from .program import LoadedProgram, ParsedProgram, parse_program
from .weights.f16_spill import SPILL_FOLDER, F16Spill


@dataclass(frozen=True)
class NonFinite:
    """The first node whose output held NaN or Inf during a pass."""

    node: int
    fn: str
    tensor: int
    count: int
    first_index: tuple[int, int]


@dataclass
class PassResult:
    """One forward pass: the result tensor (f16 copy), seconds per node, total seconds."""

    result: np.ndarray
    node_seconds: list[float]
    seconds: float
    nonfinite: NonFinite | None = None


@dataclass
class Timings:
    """Wall-clock seconds of each phase; ``execute`` holds one entry per pass."""

    parse: float = 0.0
    compile: float = 0.0
    marshal: float = 0.0
    execute: list[float] = field(default_factory=list)

    @property
    def execute_median(self) -> float:
        return statistics.median(self.execute) if self.execute else 0.0


def maps_weights(machine: Any, weight_bytes: int, memory_bytes: int) -> bool:
    """Whether a runner maps its weights from files by default: where the machine makes copies
    of weight boxes for its native kernel (``ktir/exec/row_major.py``) and the weights are over
    a third of the host's memory, so that the copies would not fit beside weights read into
    memory (an 8B model's 16 GB on 24 GiB). Mapped (from an F16 checkpoint, or converted and
    spilled to an unnamed file: ``weights/f16_spill.py``), the weights live in the page cache,
    which gives their pages up as the copies take the memory; read in, they sit in huge pages,
    which stream faster where no copy is made."""
    return bool(getattr(machine, "native_matmul", False)) and machine.row_major_bytes > 0 and \
        weight_bytes > memory_bytes // 3


class Runner:
    """Runs one manifest's program; see the module docstring for the phases."""

    def __init__(
        self,
        manifest: Manifest,
        machine: Any | None = None,
        show_progress: bool = True,
        backend: Any = None,
        lx_model: str = "allocator",
        map_weights: bool | None = None,
    ) -> None:
        """``machine``: run on this machine; else a new ``ktir.Machine`` on ``backend`` (a back-end
        object from ``ktir.backends.make_backend`` or a name; default numpy) counting LX with
        ``lx_model`` (docs/emulator.md, "LX accounting"). ``map_weights``: whether
        :meth:`marshal` maps the weights from files instead of holding them in memory (those
        stored as F16 from the checkpoint, the others converted and written to an unnamed file
        in the cache folder, ``weights/f16_spill.py``); None (default): where
        :func:`maps_weights` says it pays."""
        if machine is not None and backend is not None:
            raise ValueError("Runner: pass either machine or backend, not both")
        self.manifest = manifest
        self.machine = machine if machine is not None else \
            ktir.Machine(backend=backend if backend is not None else "numpy", lx_model=lx_model)
        self.show_progress = show_progress
        self.timings = Timings()
        self.program: LoadedProgram | None = None
        self._plans: list[Any] = []
        self._buffers: dict[int, Any] = {}
        self._node_args: list[dict[str, int]] = []
        self._input_ids = input_tensor_ids(manifest)
        self.hbm_bytes = 0
        self.weight_bytes = 0  # the f16 weight bytes in HBM: what one pass reads of weights
        self._last_row: Any = None  # the one-row lm_head (last_token.LastRowHead), built once
        self._replays: _Replays | None = None  # each node's plan.replayer, made between passes
        self.passes: list[PassResult] = []
        self.map_weights = map_weights
        self.mapped_bytes = 0  # weight bytes mapped from files (marshal): checkpoint or spill
        self.spilled_bytes = 0  # of those, converted weights mapped from the run's own file

    # ------------------------------------------------------------------ phase 1: parse + compile

    def load(self, parsed: ParsedProgram | None = None) -> LoadedProgram:
        """Parse, verify and compile every node; check every node's function and arguments.
        ``parsed``: this manifest's program, already parsed (its parse is not repeated; its
        parse seconds are reported)."""
        if parsed is not None and parsed.manifest is not self.manifest:
            raise ValueError("Runner.load: the parsed program belongs to another manifest")
        with ktir.bulk_load():
            parsed = parsed if parsed is not None else parse_program(self.manifest)
            self.program = parsed.compile(self.machine)
        self.timings.parse = parsed.seconds
        self.timings.compile = self.program.compile_seconds
        self._plans = list(self.program.plans)
        return self.program

    # ------------------------------------------------------------------ phase 2: marshal

    def marshal(self, checkpoint: Any, weight_loader: Callable[..., np.ndarray] = load_weight) -> None:
        """Bind weights (real shapes checked first) and allocate every other tensor once."""
        start = time.perf_counter()
        check_weight_shapes(self.manifest, checkpoint)
        hbm = self.machine.hbm
        mapping = weight_loader is load_weight and (
            self.map_weights if self.map_weights is not None else
            maps_weights(self.machine, weight_source_bytes(self.manifest), host_memory_bytes()))
        spill = F16Spill(cache_folder(SPILL_FOLDER)) if mapping else None
        for src in self.manifest.sources:
            if src.role != "weight":
                continue
            array = None
            if mapping and hasattr(checkpoint, "map_f16"):
                array = map_weight(self.manifest, checkpoint, src)
            mapped = array is not None
            if not mapped:
                array = weight_loader(self.manifest, checkpoint, src)
                mapped = spill is not None and array.nbytes > 0 and \
                    F16Spill.room(spill.folder, array.nbytes)
                if mapped:
                    array = spill.put(array)  # converted (BF16, F32, GGUF): mapped from the spill
            if mapped:
                self.mapped_bytes += array.nbytes  # over a file: the checkpoint's or the spill's
            buf = hbm.allocate_from(array, name=src.disk or f"t{src.id}", read_only=True)
            self._buffers[src.id] = buf
            self.hbm_bytes += array.nbytes
            self.weight_bytes += array.nbytes
        for t in self.manifest.tensors:
            if t.id in self._buffers:
                continue
            self._buffers[t.id] = hbm.allocate((t.rows, t.cols), "float16", name=f"t{t.id}")
            self.hbm_bytes += 2 * t.rows * t.cols
        if spill is not None:
            self.spilled_bytes += spill.bytes
            spill.close()  # the mapped arrays keep the unnamed file for as long as they live
        if self.mapped_bytes:
            room_for_mapped(self.machine, self.mapped_bytes)
        self._node_args = []  # bound at the first pass (addresses never change after this)
        self._finite_tests = []  # per node: (tensor id, its buffer's finite_test) per output
        self._finite_scan = None  # (scan of every node's outputs after a pass, owner nodes) or None
        self._replays = None
        self.timings.marshal = time.perf_counter() - start

    # ------------------------------------------------------------------ phase 3: passes

    def run(self, inputs: dict[int, np.ndarray], last_token: bool = False) -> PassResult:
        """One pass: write ``inputs`` (every per-pass input tensor) and run the nodes in order.
        ``last_token``: the result is its last row only (``[1, cols]``), bit for bit the last row
        of the all-rows result; the lm_head then computes that row alone where
        :func:`last_token.last_row_head` allows (its ``reason`` says why not)."""
        if self.program is None or not self._buffers:
            raise RuntimeError("Runner.run before load() and marshal()")
        if not self._node_args:
            self._node_args = self.program.bind({tid: buf.address for tid, buf in self._buffers.items()})
            self._finite_tests = [[(a.tensor, self._buffers[a.tensor].finite_test())
                                   for a in node.args if a.is_output]
                                  for node in self.manifest.nodes]
            self._finite_scan = self._deferred_finite_scan()
        missing = [tid for tid in self._input_ids if tid not in inputs]
        if missing:
            raise UserError(f"{MANIFEST_FILE}: no host value for input tensor {missing[0]}")
        for tid in self._input_ids:
            self._buffers[tid].write(np.asarray(inputs[tid], dtype=np.float16))

        nodes = self.manifest.nodes
        head = self.last_row_head() if last_token else None
        one_row = head is not None and head.plan is not None
        replays = self._replays
        if replays is not None and replays.state != ktir.replay_state(self.machine):
            replays = self._replays = None  # holds views of regions that may be gone
        calls = replays.calls if replays is not None else [None] * len(nodes)
        # outputs tested after the pass in one native call where that finds the same first node
        scan = self._finite_scan if not one_row else None
        times = [0.0] * len(nodes)
        nonfinite: NonFinite | None = None
        progress = _progress(len(nodes), self.show_progress)
        start = time.perf_counter()
        # one error state for the whole pass: every plan run and replay computes under
        # np.errstate(all="ignore"), and entering it once instead of per node saves ~1 us a node
        try:
            with np.errstate(all="ignore"):
                for i, (node, plan) in enumerate(zip(nodes, self._plans)):
                    t0 = time.perf_counter()
                    try:
                        if one_row and i == head.node:
                            head.x.write(self._buffers[head.source].read()[-1:])
                            head.plan.run(head.args)
                        elif calls[i] is not None:
                            calls[i].run_quiet()
                        else:
                            plan.run(self._node_args[i])
                        _synchronize(self.machine.backend)
                    except UserError as exc:
                        raise UserError(
                            f"{MANIFEST_FILE}: nodes[{i}] ({node.mlir}): {exc}") from None
                    times[i] = time.perf_counter() - t0
                    if nonfinite is None and scan is None:
                        own = head.out if one_row and i == head.node else None
                        nonfinite = self._first_nonfinite(i, own)
                    if progress is not None:
                        progress.update(1)
        finally:
            if progress is not None:
                progress.close()
        if scan is not None:
            first = scan[0]()
            if first >= 0:
                nonfinite = self._first_nonfinite(scan[1][first])
        total = time.perf_counter() - start
        self._make_replays()
        result = (head.out if one_row else self._buffers[self.manifest.result]).read()
        if last_token and not one_row:
            result = result[-1:]
        self.timings.execute.append(total)
        outcome = PassResult(result=result, node_seconds=times, seconds=total, nonfinite=nonfinite)
        self.passes.append(outcome)
        return outcome

    def _make_replays(self) -> None:
        """After a pass: each node's replayer (None where its plan would not replay a tape yet),
        made again while some are missing, at most ``_Replays.TRIES`` times for one machine
        state (a plan that never tapes is not asked every pass), and whenever the state moved."""
        state = ktir.replay_state(self.machine)
        old = self._replays
        same = old is not None and old.state == state
        if same and (old.complete or old.tries >= _Replays.TRIES):
            return
        self._replays = None
        calls = []
        for plan, args in zip(self._plans, self._node_args):
            make = getattr(plan, "replayer", None)
            calls.append(make(args) if make is not None else None)
        self._replays = _Replays(state, calls, old.tries + 1 if same else 1)

    @property
    def replayed_nodes(self) -> int:
        """How many nodes the next pass runs as a direct tape replay (0 before any tape)."""
        r = self._replays
        if r is None or r.state != ktir.replay_state(self.machine):
            return 0
        return sum(c is not None for c in r.calls)

    def tensor(self, tensor_id: int) -> np.ndarray:
        """A copy of a tensor's current contents (for diagnostics and tests; no side effect on the
        emulator's tracking of which bytes were written)."""
        return self._buffers[tensor_id].read()

    def last_row_head(self) -> Any:
        """The one-row lm_head of this program on this machine (``last_token.LastRowHead``),
        built at the first call and kept."""
        if self._last_row is None:
            from .last_token import last_row_head

            self._last_row = last_row_head(self.manifest, self.machine, self._buffers)
        return self._last_row

    def _deferred_finite_scan(self):
        """(a callable giving the index of the first node output, in node order, that holds an
        inf or NaN, or -1; the node of each output) where testing every output once after the
        pass finds what testing after each node finds: each output tensor is written by one
        node only (so its bytes stay as that node left them), and every one is a host float16
        buffer the native scan reads. Else None: the runner tests after each node."""
        writers: dict[int, int] = {}
        owners, buffers = [], []
        for i, node in enumerate(self.manifest.nodes):
            for a in node.args:
                if a.is_output:
                    writers[a.tensor] = writers.get(a.tensor, 0) + 1
                    owners.append(i)
                    buffers.append(self._buffers[a.tensor])
        if any(count > 1 for count in writers.values()) or set(writers) & set(self._input_ids):
            return None
        scan = buffers_nonfinite_scan(buffers)
        return None if scan is None else (scan, owners)

    def _first_nonfinite(self, i: int, last_row: Any = None) -> NonFinite | None:
        """NaN/Inf in node ``i``'s outputs. Checked where the bytes live (one boolean crosses
        from a device per output); only a tensor that holds one is read to locate it.
        ``last_row``: the one-row buffer node ``i`` wrote instead of its output (last-token
        pass); a non-finite element there is reported in the output's last row."""
        for tensor, finite in self._finite_tests[i]:
            if last_row is None:
                if finite():
                    continue
                buf = self._buffers[tensor]
            else:
                buf = last_row
                if buf.all_finite():
                    continue
            data = buf.read()
            bad = ~np.isfinite(data)
            if bad.any():
                flat = int(np.flatnonzero(bad)[0])
                cols = data.shape[-1]
                row = flat // cols if last_row is None else self.manifest.tensor(tensor).rows - 1
                return NonFinite(i, self.manifest.nodes[i].fn, tensor, int(bad.sum()),
                                 (row, flat % cols))
        return None

    # ------------------------------------------------------------------ reporting helpers

    def node_seconds(self) -> list[float]:
        """Median seconds of each node over the passes run so far (manifest order)."""
        if not self.passes:
            return []
        return [statistics.median(p.node_seconds[i] for p in self.passes) for i in range(len(self.manifest.nodes))]

    def slowest_nodes(self, count: int = 5) -> list[tuple[int, str, float]]:
        """(node index, fn, median seconds over passes), slowest first."""
        per_node = self.node_seconds()
        if not per_node:
            return []
        order = sorted(range(len(per_node)), key=lambda i: -per_node[i])[:count]
        return [(i, self.manifest.nodes[i].fn, per_node[i]) for i in order]


@dataclass
class _Replays:
    """Each node's ``plan.replayer`` (None where it has none yet), made in machine state
    ``state`` (``ktir.replay_state``): used only while the machine is still in it."""

    TRIES = 6  # attempts for one state while some node has no replayer (tapes: at a run <= 4)

    state: tuple
    calls: list
    tries: int

    @property
    def complete(self) -> bool:
        return all(c is not None for c in self.calls)


def _synchronize(backend: Any) -> None:
    """Wait for the work a device back end queued (asynchronous on cuda/mps), so that a node's
    seconds are its own and an asynchronous device error is reported at the node that caused it."""
    try:
        backend.synchronize()
    except RuntimeError as exc:  # torch reports device failures (CUDA/MPS) as RuntimeError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"the {backend.describe()} device failed: {first}") from None


def _progress(total: int, enabled: bool):
    """A tqdm bar on stderr, only on a terminal, appearing after 1 s (short runs stay quiet)."""
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="node", file=sys.stderr, delay=1.0, leave=False, desc="forward")

