"""A cycle-approximate roofline model of KTIR kernels: per op, per node (function), per model.

The model is *static*: it walks a function's IR once per core of its grid with a tiny evaluator
for index scalars (constants, tile ids, loop induction variables, integer arithmetic), so it needs
no data and no emulator run. Costs (see docs/latency.md for the derivation of every number):

* ``hbm``        -- ``ktdp.load``/``ktdp.store`` on HBM: bytes counted in whole 128-byte sticks
  touched, at ``HBM bandwidth / active cores`` bytes per cycle. Kernel pointer arguments are
  assumed stick-aligned (the runner's HBM regions are).
* ``lx``         -- loads/stores on LX: bytes counted; cycles only if ``lx_bytes_per_cycle`` is set
  (the default treats the scratchpad as free, like the reference model).
* ``vector``     -- float/int elementwise ops, reductions, casts on tensors: elements / SIMD width.
* ``transcendental`` -- ``math.exp``-like ops: vector cost times ``transcendental_penalty``.
* ``matmul``     -- ``linalg.matmul*``: ``2*M*N*K`` FLOP / systolic FLOP per cycle.
* ``layout``     -- ops that materialise data in LX without arithmetic (transpose, broadcast,
  fill, splat, slices): elements / SIMD width.
* ``comm``       -- ``ktdp.inter_tile_reduce``: bytes forwarded around the ring.

Scalar index math, views, access tiles, ``tensor.empty``/reshapes and control flow are free;
region bodies (loops, branches, produce regions) charge their inner ops per execution.

Per core: ``memory = hbm + lx``, ``compute = vector + transcendental + matmul + layout``;
``total = memory + compute + comm`` (pipeline "serial") or their maximum ("overlapped").
A node's cycles are the maximum over its cores; its bottleneck is the largest of memory, compute
and comm on that critical core. A model's cycles are the sum over its nodes (nodes run one after
the other).

Invariants: costs are never negative; a quantity that cannot be known statically (a loop bound
read from memory, say) is replaced by a stated assumption recorded in ``notes``, never silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable

import numpy as np

from .ir import Block, Function, Op, ScalarType, TensorType, Value
from .registry import Table

STICK_BYTES = 128
CATEGORIES = ("hbm", "lx", "vector", "transcendental", "matmul", "layout", "comm")
MEMORY_CATEGORIES = ("hbm", "lx")
COMPUTE_CATEGORIES = ("vector", "transcendental", "matmul", "layout")
#: loops with more trips than this are costed from their first iteration times the trip count
EXACT_TRIP_LIMIT = 64


@dataclass(frozen=True)
class HardwareParams:
    """Machine parameters of the latency model (defaults: the reference model's code defaults for
    a Spyre-like chip; see docs/latency.md for where each number comes from)."""

    num_cores: int = 32
    clock_ghz: float = 1.0
    hbm_tb_per_s: float = 0.128          # chip-wide HBM bandwidth, shared by the active cores
    ring_tb_per_s: float = 0.064         # inter-core ring bandwidth
    simd_elems_per_cycle: int = 64       # vector unit width per core
    systolic_flops_per_cycle: int = 1024  # 2 x 64 x 8 multiply-accumulate array per core
    transcendental_penalty: float = 4.0
    lx_bytes: int = 2 * 1024 * 1024      # scratchpad per core (reported, not a cost)
    lx_bytes_per_cycle: float | None = None  # None: LX traffic is free (reference behaviour)
    stick_bytes: int = STICK_BYTES
    pipeline: str = "serial"             # "serial": memory + compute + comm; "overlapped": max

    def __post_init__(self) -> None:
        if self.pipeline not in ("serial", "overlapped"):
            raise ValueError(f"pipeline must be 'serial' or 'overlapped', not {self.pipeline!r}")
        for name in ("num_cores", "clock_ghz", "hbm_tb_per_s", "ring_tb_per_s",
                     "simd_elems_per_cycle", "systolic_flops_per_cycle", "stick_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")

    @property
    def hbm_bytes_per_cycle(self) -> float:
        """Chip-wide HBM bytes per clock cycle (0.128 TB/s at 1 GHz = 128 B/cycle)."""
        return self.hbm_tb_per_s * 1e12 / (self.clock_ghz * 1e9)

    @property
    def ring_bytes_per_cycle(self) -> float:
        return self.ring_tb_per_s * 1e12 / (self.clock_ghz * 1e9)

    def hbm_bytes_per_cycle_per_core(self, active_cores: int) -> float:
        return self.hbm_bytes_per_cycle / max(1, min(active_cores, self.num_cores))

    def cycles_to_us(self, cycles: float) -> float:
        return cycles / (self.clock_ghz * 1e3)


# ------------------------------------------------------------------------------------ records


@dataclass
class OpCost:
    """What one op (one source location) cost on one core, summed over all its executions."""

    op: str
    loc: str
    executions: float = 0.0
    cycles: dict[str, float] = field(default_factory=dict)
    hbm_bytes: float = 0.0
    flops: float = 0.0

    @property
    def total(self) -> float:
        return sum(self.cycles.values())


@dataclass
class CoreCost:
    """Totals of one core of one node."""

    core: int
    cycles: dict[str, float] = field(default_factory=lambda: {c: 0.0 for c in CATEGORIES})
    hbm_read_bytes: float = 0.0
    hbm_write_bytes: float = 0.0
    lx_bytes: float = 0.0
    flops: float = 0.0
    ops: dict[int, OpCost] = field(default_factory=dict)  # id(op) -> cost

    @property
    def memory(self) -> float:
        return sum(self.cycles[c] for c in MEMORY_CATEGORIES)

    @property
    def compute(self) -> float:
        return sum(self.cycles[c] for c in COMPUTE_CATEGORIES)

    @property
    def comm(self) -> float:
        return self.cycles["comm"]

    def total(self, pipeline: str) -> float:
        parts = (self.memory, self.compute, self.comm)
        return max(parts) if pipeline == "overlapped" else sum(parts)


@dataclass
class NodeLatency:
    """One function (one node of a program) on its grid."""

    label: str
    function: str
    file: str
    grid: tuple[int, int, int]
    cycles: float
    time_us: float
    critical_core: int
    memory_cycles: float
    compute_cycles: float
    comm_cycles: float
    category_cycles: dict[str, float]
    bottleneck: str            # "memory" | "compute" | "comm" (largest part on the critical core)
    dominant: str              # the largest single category there ("hbm", "matmul", ...)
    hbm_bytes: float           # all cores, reads + writes
    flops: float               # all cores
    lx_bytes: float            # all cores
    lx_peak_bytes: int         # live LX bytes at the worst point of one core (the emulator's accounting)
    arithmetic_intensity: float  # flops per HBM byte
    roofline_bound: str        # "memory" | "compute": which side of the ridge point
    top_ops: list[OpCost]
    notes: list[str]

    def as_dict(self) -> dict:
        return {
            "label": self.label, "function": self.function, "file": self.file,
            "grid": list(self.grid), "cycles": self.cycles, "time_us": self.time_us,
            "critical_core": self.critical_core, "memory_cycles": self.memory_cycles,
            "compute_cycles": self.compute_cycles, "comm_cycles": self.comm_cycles,
            "category_cycles": dict(self.category_cycles), "bottleneck": self.bottleneck,
            "dominant": self.dominant, "hbm_bytes": self.hbm_bytes, "flops": self.flops,
            "lx_bytes": self.lx_bytes, "lx_peak_bytes": self.lx_peak_bytes,
            "arithmetic_intensity": self.arithmetic_intensity,
            "roofline_bound": self.roofline_bound,
            "top_ops": [{"op": o.op, "loc": o.loc, "executions": o.executions, "cycles": o.total,
                         "by_category": dict(o.cycles)} for o in self.top_ops],
            "notes": list(self.notes),
        }


@dataclass
class ModelLatency:
    """A whole program: nodes executed one after the other."""

    params: HardwareParams
    nodes: list[NodeLatency]

    @property
    def cycles(self) -> float:
        return sum(n.cycles for n in self.nodes)

    @property
    def time_us(self) -> float:
        return self.params.cycles_to_us(self.cycles)

    @property
    def hbm_bytes(self) -> float:
        return sum(n.hbm_bytes for n in self.nodes)

    @property
    def flops(self) -> float:
        return sum(n.flops for n in self.nodes)

    def category_cycles(self) -> dict[str, float]:
        """Cycles of each category on each node's critical core, summed over nodes."""
        out = {c: 0.0 for c in CATEGORIES}
        for n in self.nodes:
            for c, v in n.category_cycles.items():
                out[c] += v
        return out

    def bottleneck_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.nodes:
            out[n.bottleneck] = out.get(n.bottleneck, 0) + 1
        return out

    def as_dict(self) -> dict:
        p = self.params
        return {
            "params": {k: getattr(p, k) for k in p.__dataclass_fields__},
            "cycles": self.cycles, "time_us": self.time_us, "hbm_bytes": self.hbm_bytes,
            "flops": self.flops, "category_cycles": self.category_cycles(),
            "bottleneck_counts": self.bottleneck_counts(),
            "nodes": [n.as_dict() for n in self.nodes],
        }

    def render(self, limit: int | None = None) -> str:
        """A per-node table (all nodes, or the ``limit`` most expensive) and the totals."""
        rows = list(enumerate(self.nodes))
        if limit is not None:
            rows = sorted(rows, key=lambda r: -r[1].cycles)[:limit]
        head = (f"{'node':>5} {'function':<34} {'grid':>7} {'cycles':>10} {'us':>9} "
                f"{'HBM KiB':>9} {'LX KiB':>7} {'MFLOP':>8} {'bottleneck':<11} {'dominant':<14}")
        lines = [head, "-" * len(head)]
        for i, n in rows:
            g = "x".join(str(d) for d in n.grid if d != 1) or "1"
            lines.append(
                f"{i:>5} {n.function[:34]:<34} {g:>7} {n.cycles:>10.0f} {n.time_us:>9.2f} "
                f"{n.hbm_bytes / 1024:>9.1f} {n.lx_peak_bytes / 1024:>7.1f} {n.flops / 1e6:>8.3f} {n.bottleneck:<11} {n.dominant:<14}")
        cats = self.category_cycles()
        share = ", ".join(f"{c} {v / max(self.cycles, 1e-9):.1%}" for c, v in cats.items() if v)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.bottleneck_counts().items()))
        lines.append("-" * len(head))
        lines.append(f"total: {len(self.nodes)} nodes, {self.cycles:.0f} cycles = {self.time_us:.1f} us "
                     f"at {self.params.clock_ghz:g} GHz; HBM {self.hbm_bytes / 2**20:.2f} MiB; "
                     f"{self.flops / 1e6:.2f} MFLOP")
        lines.append(f"cycles by category: {share}")
        lines.append(f"bottlenecks: {counts}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ evaluator


@dataclass(frozen=True)
class _View:
    """A memory view: element offset from an (assumed stick-aligned) argument base."""

    offset: int | None
    shape: tuple
    strides: tuple
    itemsize: int
    space: str  # "hbm" | "lx"
    base_arg: str | None = None  # the kernel argument the offset comes from (None: computed)


@dataclass(frozen=True)
class _Tile:
    view: _View | None       # None when the base is not a plain view (distributed, tensor)
    space: str
    itemsize: int
    anchor: tuple | None     # base coordinate of the tile (None: unknown)
    extents: tuple | None    # box extents (None: not a box)
    points: int              # number of coordinates
    indirect_reads: int = 0  # index elements read from HBM (indirect tiles)


_TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sin", "cos",
                   "erf", "powf", "sqrt", "rsqrt", "atan", "atan2", "tan", "cbrt"}
_LAYOUT = {"linalg.transpose", "linalg.broadcast", "linalg.fill", "linalg.copy", "tensor.splat",
           "tensor.extract_slice", "tensor.insert_slice", "tensor.from_elements", "tensor.generate",
           "tensor.pad", "tensor.concat"}
_FREE = {"arith.constant", "tensor.empty", "tensor.expand_shape", "tensor.collapse_shape",
         "tensor.reshape", "tensor.extract", "tensor.dim", "tensor.cast", "ktdp.get_compute_tile_id",
         "ktdp.construct_memory_view", "ktdp.construct_distributed_memory_view",
         "ktdp.construct_access_tile", "ktdp.construct_indirect_access_tile", "scf.yield",
         "linalg.yield", "tensor.yield", "ktdp.yield_partial", "ktdp.yield_reduced", "return",
         "func.return", "linalg.index", "ktdp.region_terminator", "arith.bitcast"}

_INT_BINARY = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divui": lambda a, b: a // b if b else None,
    "arith.divsi": lambda a, b: int(a / b) if b else None,
    "arith.floordivsi": lambda a, b: a // b if b else None,
    "arith.ceildivsi": lambda a, b: -(-a // b) if b else None,
    "arith.ceildivui": lambda a, b: -(-a // b) if b else None,
    "arith.remui": lambda a, b: a % b if b else None,
    "arith.remsi": lambda a, b: int(math.fmod(a, b)) if b else None,
    "arith.minsi": min, "arith.maxsi": max, "arith.minui": min, "arith.maxui": max,
    "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b, "arith.shli": lambda a, b: a << b,
    "arith.shrsi": lambda a, b: a >> b, "arith.shrui": lambda a, b: a >> b,
}
_INT_CAST = {"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"}
_CMPI = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
         "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
         "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
         "uge": lambda a, b: a >= b}


def _elements(t) -> int:
    if isinstance(t, TensorType):
        n = t.num_elements
        return 1 if n is None else n  # dynamic shapes: counted as one element (noted by caller)
    return 1


def _itemsize(t) -> int:
    try:
        return int(t.dtype.itemsize)
    except Exception:  # noqa: BLE001 - exotic element types: assume 2 bytes (f16)
        return 2


class _CoreWalker:
    """Walks a function for one core, accumulating :class:`CoreCost`."""

    def __init__(self, fn: Function, core: int, coords: tuple, params: HardwareParams,
                 notes: list[str], stick_cache: dict):
        self.fn = fn
        self.params = params
        self.cost = CoreCost(core)
        self.coords = coords
        self.notes = notes
        self.env: dict[Value, object] = {}
        self.hbm_bpc = params.hbm_bytes_per_cycle_per_core(fn.num_cores)
        self.stick_cache = stick_cache
        self.footprints: list | None = None  # (op, tile) of every store, when recording
        self.trip_limit = EXACT_TRIP_LIMIT
        # arguments used as view offsets are pointers, modelled as stick-aligned bases (0);
        # other scalar arguments (a decode position, say) are unknown until run time
        pointers = {v for op in fn.walk() if op.name == "ktdp.construct_memory_view"
                    for v in op.groups.get("offset", [])}
        for a in fn.args:
            self.env[a] = 0 if a in pointers else None

    # -- bookkeeping
    def charge(self, op: Op, scale: float, category: str | None = None, cycles: float = 0.0,
               hbm: float = 0.0, flops: float = 0.0) -> None:
        entry = self.cost.ops.get(id(op))
        if entry is None:
            entry = OpCost(op.name, str(op.loc))
            self.cost.ops[id(op)] = entry
        entry.executions += scale
        if category is not None and cycles:
            entry.cycles[category] = entry.cycles.get(category, 0.0) + cycles * scale
            self.cost.cycles[category] += cycles * scale
        entry.hbm_bytes += hbm * scale
        entry.flops += flops * scale
        self.cost.flops += flops * scale

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # -- walking
    def block(self, block: Block, scale: float) -> None:
        for op in block.ops:
            self.op(op, scale)

    def op(self, op: Op, scale: float) -> None:
        name = op.name
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, op, scale)
            return
        if name in _INT_BINARY or name in _INT_CAST or name in ("arith.cmpi", "arith.select"):
            if all(isinstance(r.type, ScalarType) for r in op.results):
                self.scalar(op)
                return
        if name in _FREE:
            self.free(op)
            return
        if name in _LAYOUT:
            self.elementwise(op, scale, "layout")
            return
        if name.startswith("math."):
            kind = "transcendental" if name[5:] in _TRANSCENDENTAL else "vector"
            self.elementwise(op, scale, kind)
            return
        if name.startswith("arith.") or name.startswith("linalg."):
            # elementwise float/int math (arith.*, linalg.add, linalg.max, ...)
            self.elementwise(op, scale, "vector")
            return
        self.note(f"{op.loc}: {name} is not in the cost table; counted as free")

    def free(self, op: Op) -> None:
        if op.name == "arith.constant" and op.results and isinstance(op.result.type, ScalarType):
            c = op.attrs.get("value")
            vals = getattr(c, "values", None)
            if vals and op.result.type.name in ("index", "i64", "i32", "i16", "i8", "i1"):
                v = vals[0]
                self.env[op.result] = int(v) if not isinstance(v, bool) else int(v)
        elif op.name == "ktdp.get_compute_tile_id":
            for k, r in enumerate(op.results):
                self.env[r] = self.coords[k] if k < len(self.coords) else 0
        elif op.name == "ktdp.construct_memory_view":
            self.memory_view(op)
        elif op.name == "ktdp.construct_access_tile":
            self.access_tile(op)
        elif op.name == "ktdp.construct_indirect_access_tile":
            self.indirect_tile(op)
        elif op.name == "ktdp.construct_distributed_memory_view":
            parts = [self.env.get(v) for v in op.operands]
            space = "hbm" if any(isinstance(p, _View) and p.space == "hbm" for p in parts) else "lx"
            self.env[op.result] = ("distributed", space, _itemsize(op.result.type))
        for r in op.results:
            self.env.setdefault(r, None)

    def scalar(self, op: Op) -> None:
        vals = [self.env.get(v) for v in op.operands]
        out = None
        if op.name in _INT_BINARY:
            if len(vals) == 2 and all(isinstance(v, int) for v in vals):
                out = _INT_BINARY[op.name](vals[0], vals[1])
        elif op.name in _INT_CAST:
            out = vals[0] if vals and isinstance(vals[0], int) else None
        elif op.name == "arith.cmpi":
            pred = op.attrs.get("predicate")
            if pred in _CMPI and all(isinstance(v, int) for v in vals[:2]):
                out = int(_CMPI[pred](vals[0], vals[1]))
        elif op.name == "arith.select":
            if isinstance(vals[0], int) and len(vals) == 3:
                out = vals[1] if vals[0] else vals[2]
        self.env[op.result] = out

    def memory_view(self, op: Op) -> None:
        t = op.result.type
        off = self.env.get(op.groups.get("offset", [None])[0]) if op.groups.get("offset") else None
        sizes = _static_or_dynamic(op.attrs.get("static_sizes"), op.groups.get("sizes", []), self.env)
        strides = _static_or_dynamic(op.attrs.get("static_strides"), op.groups.get("strides", []), self.env)
        space = getattr(op.attrs.get("memory_space"), "kind", "hbm")
        offset_value = op.groups["offset"][0] if op.groups.get("offset") else None
        base_arg = offset_value.name.lstrip("%") if offset_value in self.fn.args else None
        self.env[op.result] = _View(off if isinstance(off, int) else None, tuple(sizes),
                                    tuple(strides), _itemsize(t), "lx" if space == "lx" else "hbm",
                                    base_arg)

    def access_tile(self, op: Op) -> None:
        base = self.env.get(op.groups["base"][0]) if op.groups.get("base") else None
        idx = [self.env.get(v) for v in op.groups.get("indices", [])]
        syms = [self.env.get(v) for v in op.groups.get("symbols", [])]
        bmap = op.attrs.get("base_map")
        tset = op.attrs.get("access_tile_set")
        anchor = None
        if bmap is not None and all(isinstance(v, int) for v in idx):
            anchor = tuple(int(x) for x in bmap(idx))
        extents, npoints = None, 1
        if tset is not None and all(isinstance(s, int) for s in syms):
            try:
                box = tset.bounding_box(syms)
                if tset.box_bounds() is not None:
                    extents = tuple(hi - lo + 1 for lo, hi in box)
                    if anchor is not None:
                        anchor = tuple(a + lo for a, (lo, _) in zip(anchor, box))
                    npoints = int(np.prod(extents)) if extents else 1
                else:
                    npoints = len(tset.points(syms))
            except ValueError:
                npoints = _tile_points(op.result.type)
        else:
            npoints = _tile_points(op.result.type)
        base_type = op.attrs.get("base_type")
        if isinstance(base, _View):
            self.env[op.result] = _Tile(base, base.space, base.itemsize, anchor, extents, npoints)
        elif isinstance(base, tuple) and base and base[0] == "distributed":
            self.env[op.result] = _Tile(None, base[1], base[2], None, None, npoints)
        else:
            size = _itemsize(base_type) if base_type is not None else 2
            self.env[op.result] = _Tile(None, "lx", size, None, None, npoints)

    def indirect_tile(self, op: Op) -> None:
        base = self.env.get(op.groups["base"][0])
        space = base.space if isinstance(base, _View) else "hbm"
        size = base.itemsize if isinstance(base, _View) else 2
        n = _tile_points(op.result.type)
        reads = n * len(op.groups.get("indirect", []))
        self.env[op.result] = _Tile(None, space, size, None, None, n, indirect_reads=reads)

    # -- data movement
    def sticks(self, tile: _Tile) -> float:
        """Whole 128-byte sticks touched by a tile (bytes rounded up per contiguous run)."""
        stick = self.params.stick_bytes
        view = tile.view
        if view is None or tile.anchor is None or tile.extents is None or view.offset is None \
                or any(s is None for s in view.strides) or len(view.strides) != len(tile.extents):
            # unknown placement: rows of the innermost extent, each rounded up to sticks
            if tile.extents:
                inner = tile.extents[-1] * tile.itemsize
                rows = tile.points // max(1, tile.extents[-1])
                return rows * math.ceil(inner / stick) * stick
            return math.ceil(tile.points * tile.itemsize / stick) * stick
        key = (view, tile.anchor, tile.extents, stick)
        hit = self.stick_cache.get(key)
        if hit is not None:
            return hit
        size = view.itemsize
        strides = view.strides
        if strides[-1] == 1:
            # contiguous runs along the last dim; enumerate the run starts of the outer dims
            starts = np.array([view.offset + sum(a * s for a, s in zip(tile.anchor, strides))],
                              dtype=np.int64)
            for d in range(len(tile.extents) - 1):
                starts = (starts[:, None] + np.arange(tile.extents[d], dtype=np.int64)[None, :]
                          * strides[d]).reshape(-1)
            first = (starts * size) // stick
            last = ((starts + tile.extents[-1]) * size - 1) // stick
            order = np.argsort(first, kind="stable")
            first, last = first[order], last[order]
            count = int(np.sum(last - first + 1))
            if len(first) > 1:  # a stick shared by consecutive runs is moved once
                prev_last = np.maximum.accumulate(last)[:-1]
                overlap = np.clip(prev_last - first[1:] + 1, 0, None)
                overlap = np.minimum(overlap, last[1:] - first[1:] + 1)
                count -= int(np.sum(overlap))
        else:
            grids = np.meshgrid(*[np.arange(e, dtype=np.int64) for e in tile.extents], indexing="ij")
            addr = view.offset + sum((g + a) * s for g, a, s in zip(grids, tile.anchor, strides))
            count = int(np.unique((np.asarray(addr).reshape(-1) * size) // stick).size)
        result = float(count * stick)
        self.stick_cache[key] = result
        return result

    def move(self, op: Op, tile_value: Value, scale: float, write: bool) -> None:
        tile = self.env.get(tile_value)
        data_t = op.results[0].type if not write else op.operands[0].type
        if not isinstance(tile, _Tile):
            n = _elements(data_t)
            tile = _Tile(None, "hbm", _itemsize(data_t), None, None, n)
        lx_bytes = tile.points * tile.itemsize  # the LX side of every move
        self.cost.lx_bytes += lx_bytes * scale
        if tile.space == "hbm":
            nbytes = self.sticks(tile)
            if tile.indirect_reads:
                nbytes += math.ceil(tile.indirect_reads * 4 / self.params.stick_bytes) * self.params.stick_bytes
            if write:
                self.cost.hbm_write_bytes += nbytes * scale
            else:
                self.cost.hbm_read_bytes += nbytes * scale
            self.charge(op, scale, "hbm", nbytes / self.hbm_bpc, hbm=nbytes)
        else:
            bpc = self.params.lx_bytes_per_cycle
            self.charge(op, scale, "lx", lx_bytes / bpc if bpc else 0.0)

    # -- compute
    def elementwise(self, op: Op, scale: float, kind: str) -> None:
        if not op.results:
            self.charge(op, scale)
            return
        if all(isinstance(r.type, ScalarType) for r in op.results) and all(
                isinstance(v.type, ScalarType) for v in op.operands):
            if all(r.type.name in ("index", "i64", "i32", "i1") for r in op.results):
                if op.name in _INT_BINARY or op.name in _INT_CAST:
                    self.scalar(op)
                self.charge(op, scale)  # scalar integer math is free
                for r in op.results:
                    self.env.setdefault(r, None)
                return
        n = max(_elements(r.type) for r in op.results)
        if op.name == "linalg.reduce" or op.name == "linalg.generic":
            n = max([n] + [_elements(v.type) for v in op.groups.get("ins", [])])
        cycles = math.ceil(n / self.params.simd_elems_per_cycle)
        if kind == "transcendental":
            cycles *= self.params.transcendental_penalty
        if op.name == "linalg.generic" and op.regions:
            body = [o for o in op.regions[0].block.ops if o.name != "linalg.yield"]
            heavy = sum(1 for o in body if o.name.startswith("math.") and o.name[5:] in _TRANSCENDENTAL)
            cycles *= max(1, len(body) - heavy) + heavy * self.params.transcendental_penalty
        flops = n if kind in ("vector", "transcendental") and _is_float_op(op) else 0
        self.charge(op, scale, kind, cycles, flops=flops)
        for r in op.results:
            self.env.setdefault(r, None)


def _is_float_op(op: Op) -> bool:
    t = op.results[0].type
    elem = getattr(t, "elem", getattr(t, "name", ""))
    return elem in ("f16", "f32", "f64", "bf16")


def _tile_points(t) -> int:
    shape = getattr(t, "shape", ())
    n = 1
    for d in shape:
        n *= d if d is not None else 1
    return n


def _static_or_dynamic(static, dynamic: list, env: dict) -> list:
    if static is None:
        return [env.get(v) for v in dynamic]
    out, k = [], 0
    for s in static:
        if s is None:  # a `?` entry: the next dynamic operand
            out.append(env.get(dynamic[k]) if k < len(dynamic) else None)
            k += 1
        else:
            out.append(s)
    return out


# ------------------------------------------------------------------------------------ op handlers


def _h_load(w: _CoreWalker, op: Op, scale: float) -> None:
    w.move(op, op.operands[0], scale, write=False)
    w.env[op.result] = None


def _h_store(w: _CoreWalker, op: Op, scale: float) -> None:
    if w.footprints is not None:
        w.footprints.append((op, w.env.get(op.operands[1])))
    w.move(op, op.operands[1], scale, write=True)


def _h_matmul(w: _CoreWalker, op: Op, scale: float) -> None:
    ins = op.groups.get("ins", [])
    if len(ins) < 2:
        w.charge(op, scale)
        return
    a, b = ins[0].type, ins[1].type
    out = op.result.type if op.results else op.groups["outs"][0].type
    if not (isinstance(a, TensorType) and isinstance(out, TensorType)) or not a.is_static:
        w.note(f"{op.loc}: {op.name} with dynamic shapes; counted as free")
        w.charge(op, scale)
        return
    k = a.shape[-1]
    n_out = out.num_elements or 0
    flops = 2.0 * n_out * k
    w.charge(op, scale, "matmul", flops / w.params.systolic_flops_per_cycle, flops=flops)
    w.cost.lx_bytes += (out.nbytes or 0) * scale
    for r in op.results:
        w.env[r] = None


def _h_for(w: _CoreWalker, op: Op, scale: float) -> None:
    lb, ub, step = (w.env.get(v) for v in op.groups["bounds"])
    body = op.regions[0].block
    iv = body.args[0] if body.args else None
    for r in op.results:
        w.env[r] = None
    for a in body.args[1:]:
        w.env[a] = None
    w.charge(op, scale)
    if not all(isinstance(v, int) for v in (lb, ub, step)) or step <= 0:
        w.note(f"{op.loc}: scf.for bounds unknown before running; one trip assumed")
        w.env[iv] = lb if isinstance(lb, int) else None
        w.block(body, scale)
        return
    trips = max(0, -(-(ub - lb) // step))
    if trips <= w.trip_limit:
        for t in range(trips):
            w.env[iv] = lb + t * step
            w.block(body, scale)
    else:
        w.env[iv] = lb
        w.block(body, scale * trips)


def _h_if(w: _CoreWalker, op: Op, scale: float) -> None:
    cond = w.env.get(op.operands[0]) if op.operands else None
    for r in op.results:
        w.env[r] = None
    w.charge(op, scale)
    regions = [r for r in op.regions if r.blocks]
    if isinstance(cond, int):
        chosen = regions[0] if cond else (regions[1] if len(regions) > 1 else None)
        if chosen is not None:
            w.block(chosen.block, scale)
        return
    w.note(f"{op.loc}: scf.if condition unknown before running; the costlier branch assumed")
    best, best_cost = None, -1.0
    for r in regions:
        probe = _CoreWalker.__new__(_CoreWalker)
        probe.__dict__.update(w.__dict__)
        probe.cost = CoreCost(w.cost.core)
        probe.env = dict(w.env)
        probe.block(r.block, scale)
        c = probe.cost.total(w.params.pipeline)
        if c > best_cost:
            best, best_cost = r, c
    if best is not None:
        w.block(best.block, scale)


def _h_produce(w: _CoreWalker, op: Op, scale: float) -> None:
    w.charge(op, scale)
    for r in op.regions:
        for b in r.blocks:
            for a in b.args:
                w.env[a] = None
            w.block(b, scale)
    for r in op.results:
        w.env[r] = None


def _h_reduce_comm(w: _CoreWalker, op: Op, scale: float) -> None:
    out = op.result.type if op.results else None
    nbytes = (out.nbytes or 0) if isinstance(out, TensorType) else 0
    hops = max(0, min(w.fn.num_cores, w.params.num_cores) - 1)
    moved = nbytes * hops
    w.charge(op, scale, "comm", moved / w.params.ring_bytes_per_cycle)
    # the combiner runs once per received partial
    n = _elements(out) if out is not None else 1
    w.charge(op, scale * hops, "vector", math.ceil(n / w.params.simd_elems_per_cycle))
    for r in op.results:
        w.env[r] = None


_HANDLERS = Table("cost")  # op name -> handler, a view of the registry (registry.py)
_HANDLERS.update({
    "ktdp.load": _h_load,
    "ktdp.store": _h_store,
    "linalg.matmul": _h_matmul,
    "linalg.matmul_transpose_b": _h_matmul,
    "linalg.batch_matmul": _h_matmul,
    "linalg.matvec": _h_matmul,
    "scf.for": _h_for,
    "scf.if": _h_if,
    "ktdp.inter_tile_produce": _h_produce,
    "ktdp.inter_tile_reduce": _h_reduce_comm,
})


# ------------------------------------------------------------------------------------ public API


def _uses_tile_id(fn: Function) -> bool:
    return any(op.name == "ktdp.get_compute_tile_id" for op in fn.walk())


def _core_coords(grid: tuple[int, int, int], core: int) -> tuple[int, int, int]:
    x, y, _ = grid
    return (core % x, (core // x) % y, core // (x * y))


def _lx_peak(fn: Function, params: HardwareParams) -> int:
    """Peak live LX bytes per core, from the emulator's own static accounting (lx_liveness.py,
    its default allocator model)."""
    from .lx_liveness import account

    return int(account(fn, params.lx_bytes).peak)


def function_latency(fn: Function, params: HardwareParams | None = None, label: str | None = None,
                     top: int = 8) -> NodeLatency:
    """The latency of one kernel on its grid (every core walked; identical cores walked once)."""
    params = params or HardwareParams()
    notes: list[str] = []
    if fn.num_cores > params.num_cores:
        notes.append(f"grid {list(fn.grid)} has {fn.num_cores} cores, the machine {params.num_cores}")
    stick_cache: dict = {}
    cores: list[CoreCost] = []
    if _uses_tile_id(fn):
        for c in range(fn.num_cores):
            walker = _CoreWalker(fn, c, _core_coords(fn.grid, c), params, notes, stick_cache)
            walker.block(fn.body.block, 1.0)
            cores.append(walker.cost)
    else:
        walker = _CoreWalker(fn, 0, (0, 0, 0), params, notes, stick_cache)
        walker.block(fn.body.block, 1.0)
        cores = [replace(walker.cost, core=c) for c in range(fn.num_cores)]
    crit = max(cores, key=lambda cc: cc.total(params.pipeline))
    parts = {"memory": crit.memory, "compute": crit.compute, "comm": crit.comm}
    bottleneck = max(parts, key=lambda k: parts[k])
    dominant = max(CATEGORIES, key=lambda c: crit.cycles[c])
    hbm = sum(c.hbm_read_bytes + c.hbm_write_bytes for c in cores)
    flops = sum(c.flops for c in cores)
    ai = flops / hbm if hbm else float("inf")
    active = max(1, min(fn.num_cores, params.num_cores))
    ridge = (params.systolic_flops_per_cycle * active) / params.hbm_bytes_per_cycle
    total = crit.total(params.pipeline)
    lx_peak = _lx_peak(fn, params)
    if lx_peak > params.lx_bytes:
        notes.append(f"LX peak {lx_peak} bytes exceeds the {params.lx_bytes}-byte scratchpad")
    top_ops = sorted(crit.ops.values(), key=lambda o: -o.total)[:top]
    return NodeLatency(
        label=label or fn.name, function=fn.name,
        file=fn.loc.file if fn.loc is not None else "?", grid=tuple(fn.grid),
        cycles=total, time_us=params.cycles_to_us(total), critical_core=crit.core,
        memory_cycles=crit.memory, compute_cycles=crit.compute, comm_cycles=crit.comm,
        category_cycles=dict(crit.cycles), bottleneck=bottleneck if total > 0 else "none",
        dominant=dominant if total > 0 else "none", hbm_bytes=hbm, flops=flops,
        lx_bytes=sum(c.lx_bytes for c in cores), lx_peak_bytes=lx_peak, arithmetic_intensity=ai,
        roofline_bound="memory" if ai < ridge else "compute", top_ops=top_ops, notes=notes)


def model_latency(functions: Iterable[tuple[str, Function]],
                  params: HardwareParams | None = None) -> ModelLatency:
    """Latency of functions executed one after the other (a program's nodes in order); a
    function listed several times is costed once and counted each time."""
    params = params or HardwareParams()
    cache: dict[int, NodeLatency] = {}
    nodes = []
    for label, fn in functions:
        if id(fn) not in cache:
            cache[id(fn)] = function_latency(fn, params, label)
        nodes.append(replace(cache[id(fn)], label=label))
    return ModelLatency(params, nodes)


# ------------------------------------------------------------------------------------ store map


@dataclass
class StoreFootprint:
    """The elements one ``ktdp.store`` execution writes, as element offsets from the start of the
    kernel argument ``arg`` (None when the placement cannot be known without running)."""

    op: Op
    core: int
    arg: str | None
    offsets: np.ndarray | None


def store_footprints(fn: Function, max_trips: int = 4096) -> list[StoreFootprint]:
    """Every store execution of ``fn`` on every core, in program order (used to name the store
    that wrote a given output element). Loops longer than ``max_trips`` are sampled once."""
    params = HardwareParams(num_cores=max(32, fn.num_cores))
    out: list[StoreFootprint] = []
    cores = range(fn.num_cores) if _uses_tile_id(fn) else [0]
    for c in cores:
        walker = _CoreWalker(fn, c, _core_coords(fn.grid, c), params, [], {})
        walker.footprints = []
        walker.trip_limit = max_trips
        walker.block(fn.body.block, 1.0)
        for op, tile in walker.footprints:
            offs = None
            arg = None
            if isinstance(tile, _Tile) and tile.view is not None:
                arg = tile.view.base_arg
                v = tile.view
                if tile.anchor is not None and tile.extents is not None and v.offset is not None \
                        and len(v.strides) == len(tile.extents) and None not in v.strides:
                    grids = np.meshgrid(*[np.arange(e, dtype=np.int64) for e in tile.extents],
                                        indexing="ij")
                    offs = v.offset + sum((g + a) * s for g, a, s in
                                          zip(grids, tile.anchor, v.strides))
                    offs = np.asarray(offs, dtype=np.int64).reshape(-1)
            out.append(StoreFootprint(op, c, arg, offs))
    return out
