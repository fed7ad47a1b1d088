"""The latency model's core walker: one core's walk of a function, its bookkeeping and the generic
charging rules.

:class:`CoreWalker` walks a function's IR for one core with a tiny evaluator of index scalars
(constants, tile ids, loop induction variables, integer arithmetic) and the abstract values
:class:`View` (a memory view) and :class:`Tile` (an access tile) that cost handlers read and
write in ``walker.env``. Each op is charged by its ``cost`` part in the registry (registry.py):

* a handler ``handler(walker, op, scale)`` -- called (it charges with :meth:`CoreWalker.charge`,
  evaluates results into ``walker.env`` and walks regions with :meth:`CoreWalker.block`);
* a category name of :data:`GENERIC_RULES` -- that generic rule: ``"free"`` (no cost),
  ``"scalar"`` (evaluated and free on scalars, vector work on tensors), ``"layout"``, ``"vector"``,
  ``"transcendental"`` (elements / SIMD width, the last times the transcendental penalty);
* no cost part -- free, with a "not in the cost table" note (every op kind the emulator
  implements declares its cost in its dialect module; the note is for the others, such as
  opaque ops of unknown dialects kept in generic form).

Invariants: ``scale`` is the number of executions a charge stands for (loop trips folded in);
charges are never negative; an unknown value is None in ``env``, never a guess. This module
imports nothing from dialects/ (cost handlers import it, not the other way round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir import registry
from ..ir.nodes import Block, Function, Op, ScalarType, TensorType, Value
from .params import EXACT_TRIP_LIMIT, HardwareParams
from .records import CoreCost, OpCost, TraceEvent


@dataclass(frozen=True)
class View:
    """A memory view: element offset from an (assumed stick-aligned) argument base."""

    offset: int | None
    shape: tuple
    strides: tuple
    itemsize: int
    space: str  # "hbm" | "lx"
    base_arg: str | None = None  # the kernel argument the offset comes from (None: computed)


@dataclass(frozen=True)
class Tile:
    """An access tile: where its points lie (when known) and how many there are."""

    view: View | None       # None when the base is not a plain view (distributed, tensor)
    space: str
    itemsize: int
    anchor: tuple | None     # base coordinate of the tile (None: unknown)
    extents: tuple | None    # box extents (None: not a box)
    points: int              # number of coordinates
    indirect_reads: int = 0  # index elements read from HBM (indirect tiles)


TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sin", "cos",
                   "erf", "powf", "sqrt", "rsqrt", "atan", "atan2", "tan", "cbrt"}
INT_BINARY = {
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
INT_CAST = {"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci"}
_CMPI = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
         "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
         "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
         "uge": lambda a, b: a >= b}


def elements(t) -> int:
    if isinstance(t, TensorType):
        n = t.num_elements
        return 1 if n is None else n  # dynamic shapes: counted as one element (noted by caller)
    return 1


def itemsize(t) -> int:
    try:
        return int(t.dtype.itemsize)
    except Exception:  # noqa: BLE001 - exotic element types: assume 2 bytes (f16)
        return 2


class CoreWalker:
    """Walks a function for one core, accumulating :class:`CoreCost`."""

    def __init__(self, fn: Function, core: int, coords: tuple, params: HardwareParams,
                 notes: list[str], stick_cache: dict, args: dict | None = None,
                 trace: bool = False):
        """``args``: the call's integer scalar arguments by name (loop bounds, dynamic sizes);
        the others stay unknown. ``trace``: record one :class:`TraceEvent` per executed op in
        ``cost.events``, walking every loop trip (no sampling past the trip limit)."""
        self.fn = fn
        self.params = params
        self.cost = CoreCost(core, events=[] if trace else None)
        self.coords = coords
        self.notes = notes
        self.env: dict[Value, object] = {}
        self.hbm_bpc = params.hbm_bytes_per_cycle_per_core(fn.num_cores)
        self.stick_cache = stick_cache
        self.footprints: list | None = None  # (op, tile) of every store, when recording
        self.trip_limit = math.inf if trace else EXACT_TRIP_LIMIT
        # arguments used as view offsets are pointers, modelled as stick-aligned bases (0);
        # other integer arguments take the call's value when given, else stay unknown
        pointers = {v for op in fn.walk() if op.name == "ktdp.construct_memory_view"
                    for v in op.groups.get("offset", [])}
        known = scalar_args(fn, args or {})
        for a in fn.args:
            self.env[a] = 0 if a in pointers else known.get(a)

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
        """Charge one op by its registered cost part (:meth:`dispatch`); when tracing, append
        its :class:`TraceEvent` holding what this execution charged to the op itself."""
        events = self.cost.events
        if events is None:
            self.dispatch(op, scale)
            return
        # the event goes in before the op's region bodies run, so events keep execution order
        event = TraceEvent(op.name, str(op.loc), executions=scale)
        events.append(event)
        entry = self.cost.ops.get(id(op))
        before = (dict(entry.cycles), entry.hbm_bytes, entry.flops) if entry else ({}, 0.0, 0.0)
        self.dispatch(op, scale)
        entry = self.cost.ops.get(id(op))
        if entry is not None:
            event.cycles = {c: v - before[0].get(c, 0.0) for c, v in entry.cycles.items()
                            if v - before[0].get(c, 0.0) > 0}
            event.hbm_bytes = entry.hbm_bytes - before[1]
            event.flops = entry.flops - before[2]

    def dispatch(self, op: Op, scale: float) -> None:
        """A handler is called, a category name runs that generic rule; an op kind without a
        cost part is free, with a note."""
        name = op.name
        cost = registry.part("cost", name)
        if cost is None:
            self.note(f"{op.loc}: {name} is not in the cost table; counted as free")
            return
        if callable(cost):
            cost(self, op, scale)
            return
        rule = GENERIC_RULES.get(cost)
        if rule is None:
            raise ValueError(f"{name}: unknown cost category {cost!r} "
                             f"(categories: {', '.join(GENERIC_RULES)})")
        rule(self, op, scale)

    # -- the generic rules (the cost categories, GENERIC_RULES)
    def free(self, op: Op) -> None:
        """No cost; results the evaluator does not know stay unknown (None)."""
        for r in op.results:
            self.env.setdefault(r, None)

    def scalar_or_vector(self, op: Op, scale: float) -> None:
        """Integer math, compares and selects: evaluated (and free) on scalars, elementwise
        vector work on tensors."""
        if all(isinstance(r.type, ScalarType) for r in op.results):
            self.scalar(op)
        else:
            self.elementwise(op, scale, "vector")

    def scalar(self, op: Op) -> None:
        vals = [self.env.get(v) for v in op.operands]
        out = None
        if op.name in INT_BINARY:
            if len(vals) == 2 and all(isinstance(v, int) for v in vals):
                out = INT_BINARY[op.name](vals[0], vals[1])
        elif op.name in INT_CAST:
            out = vals[0] if vals and isinstance(vals[0], int) else None
        elif op.name == "arith.cmpi":
            pred = op.attrs.get("predicate")
            if pred in _CMPI and all(isinstance(v, int) for v in vals[:2]):
                out = int(_CMPI[pred](vals[0], vals[1]))
        elif op.name == "arith.select":
            if isinstance(vals[0], int) and len(vals) == 3:
                out = vals[1] if vals[0] else vals[2]
        self.env[op.result] = out

    # -- data movement
    def sticks(self, tile: Tile) -> float:
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
        if not isinstance(tile, Tile):
            n = elements(data_t)
            tile = Tile(None, "hbm", itemsize(data_t), None, None, n)
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
                if op.name in INT_BINARY or op.name in INT_CAST:
                    self.scalar(op)
                self.charge(op, scale)  # scalar integer math is free
                for r in op.results:
                    self.env.setdefault(r, None)
                return
        n = max(elements(r.type) for r in op.results)
        if op.name == "linalg.reduce" or op.name == "linalg.generic":
            n = max([n] + [elements(v.type) for v in op.groups.get("ins", [])])
        cycles = math.ceil(n / self.params.simd_elems_per_cycle)
        if kind == "transcendental":
            cycles *= self.params.transcendental_penalty
        if op.name == "linalg.generic" and op.regions:
            body = [o for o in op.regions[0].block.ops if o.name != "linalg.yield"]
            heavy = sum(1 for o in body if _transcendental(o))
            cycles *= max(1, len(body) - heavy) + heavy * self.params.transcendental_penalty
        flops = n if kind in ("vector", "transcendental") and _is_float_op(op) else 0
        self.charge(op, scale, kind, cycles, flops=flops)
        for r in op.results:
            self.env.setdefault(r, None)


def _transcendental(op: Op) -> bool:
    """Whether a generic body's op pays the transcendental penalty (math's transcendental
    functions; spyreop's intrinsics whose cost category says so)."""
    if op.name.startswith("math."):
        return op.name[5:] in TRANSCENDENTAL
    return op.name.startswith("spyreop.") and registry.part("cost", op.name) == "transcendental"


def _is_float_op(op: Op) -> bool:
    t = op.results[0].type
    elem = getattr(t, "elem", getattr(t, "name", ""))
    return elem in ("f16", "f32", "f64", "bf16")


def tile_points(t) -> int:
    shape = getattr(t, "shape", ())
    n = 1
    for d in shape:
        n *= d if d is not None else 1
    return n


def static_or_dynamic(static, dynamic: list, env: dict) -> list:
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


#: the cost categories a ``cost`` part may name, and the generic rule each one charges
GENERIC_RULES = {
    "free": lambda w, op, scale: w.free(op),
    "scalar": CoreWalker.scalar_or_vector,
    "layout": lambda w, op, scale: w.elementwise(op, scale, "layout"),
    "vector": lambda w, op, scale: w.elementwise(op, scale, "vector"),
    "transcendental": lambda w, op, scale: w.elementwise(op, scale, "transcendental"),
}


def scalar_args(fn: Function, args: dict) -> dict[Value, int]:
    """The integer arguments of ``fn`` given in ``args`` (by name, with or without ``%``), as the
    walker's evaluator sees them; float and non-integer values are left out (unknown)."""
    by_name = {str(k).lstrip("%"): v for k, v in args.items()}
    out: dict[Value, int] = {}
    for a in fn.args:
        v = by_name.get(a.name.lstrip("%"))
        if isinstance(a.type, ScalarType) and not a.type.is_float and v is not None:
            if isinstance(v, (bool, int, np.integer)) or (
                    isinstance(v, (float, np.floating)) and float(v).is_integer()):
                out[a] = int(v)
    return out


def uses_tile_id(fn: Function) -> bool:
    """Whether the cores of ``fn`` can differ (it reads its tile id); if not, one walk serves all."""
    return any(op.name == "ktdp.get_compute_tile_id" for op in fn.walk())


def core_coords(grid: tuple[int, int, int], core: int) -> tuple[int, int, int]:
    x, y, _ = grid
    return (core % x, (core // x) % y, core // (x * y))
