"""The latency model's results: per op (:class:`OpCost`), per core (:class:`CoreCost`), per node
(:class:`NodeLatency`) and per model (:class:`ModelLatency`).

Invariants: every cycle count is a sum of non-negative charges; a core's ``cycles`` has one entry
per category of :data:`~.params.CATEGORIES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .params import CATEGORIES, COMPUTE_CATEGORIES, MEMORY_CATEGORIES, HardwareParams


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
class TraceEvent(OpCost):
    """One execution of an op on one core, in execution order: what that execution itself
    charged (ops inside its regions have their own events); ``executions`` is 1 whenever the
    walk is exact, as it is when tracing."""

    @property
    def category(self) -> str:
        """The category with the most cycles ("zero" for an op that charged nothing)."""
        return max(self.cycles, key=lambda c: self.cycles[c]) if self.cycles else "zero"


@dataclass
class CoreCost:
    """Totals of one core of one node; ``events`` is its per-op trace (None when not tracing)."""

    core: int
    cycles: dict[str, float] = field(default_factory=lambda: {c: 0.0 for c in CATEGORIES})
    hbm_read_bytes: float = 0.0
    hbm_write_bytes: float = 0.0
    lx_bytes: float = 0.0
    flops: float = 0.0
    ops: dict[int, OpCost] = field(default_factory=dict)  # id(op) -> cost
    events: list[TraceEvent] | None = None

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_read_bytes + self.hbm_write_bytes

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
    cores: list[CoreCost] = field(default_factory=list)  # every core of the grid, in order

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
