"""The reference interpreter's latency records (``ktir_cpu.latency``), filled from our cost model.

:class:`HardwareConfig` and :class:`ExecutionModel` carry the reference's field names and
defaults; :func:`report_from_node` turns one :class:`~ktir_models.ktir.latency.NodeLatency`
(every core walked with the call's scalar arguments) into a :class:`LatencyReport` whose
per-core :class:`CoreLatencyCounters` use the reference's categories:

==========================  ==========================================
ours (ktir/latency/)        reference
==========================  ==========================================
``hbm``, ``lx``             ``memory`` (bytes: ``memory`` = HBM bytes)
``vector``, ``layout``      ``compute_float``
``transcendental``          ``compute_transcendental``
``matmul``                  ``compute_matmul``
``comm``                    ``comm`` (bytes: ring bytes moved)
==========================  ==========================================

Invariants: a report is a pure function of its config, counters and model (users may build
one themselves); a core's total is its compute + memory + comm combined by the model's pipeline;
the kernel's cycles are the largest core total.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..ktir.latency import HardwareParams, NodeLatency
from ..ktir.latency.records import CoreCost

__all__ = ["CoreLatencyCounters", "ExecutionModel", "HardwareConfig", "LatencyCategory",
           "LatencyReport", "TraceEntry", "report_from_node"]


class LatencyCategory(str, Enum):
    """The reference's op categories (the values are the names used in counters and traces)."""

    ZERO = "zero"
    MEMORY = "memory"
    COMPUTE_FLOAT = "compute_float"
    COMPUTE_TRANSCENDENTAL = "compute_transcendental"
    COMPUTE_INT = "compute_int"
    COMPUTE_MATMUL = "compute_matmul"
    COMM = "comm"


#: our cost category -> the reference's
CATEGORY_MAP = {"hbm": "memory", "lx": "memory", "vector": "compute_float",
                "layout": "compute_float", "transcendental": "compute_transcendental",
                "matmul": "compute_matmul", "comm": "comm"}
PIPELINES = ("serial", "overlapped", "overlapped_3way")


@dataclass
class ExecutionModel:
    """How the hardware is programmed: which compute categories each unit claims, how compute,
    memory and comm overlap (``serial``: their sum; ``overlapped``: max(compute, memory +
    comm); ``overlapped_3way``: the max of the three) and how cores share HBM (only
    ``contended``: the chip's bandwidth split among the active cores)."""

    unit_categories: dict[str, set] = field(default_factory=lambda: {
        "systolic": {"compute_matmul"},
        "simd": {"compute_float", "compute_transcendental", "compute_int"}})
    pipeline: str = "serial"
    bw_sharing: str = "contended"
    fallback_unit: str = "simd"

    def __post_init__(self) -> None:
        if self.pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {', '.join(PIPELINES)} "
                             f"(got {self.pipeline!r})")
        if self.bw_sharing == "static":
            raise NotImplementedError("bw_sharing='static' is not modelled; only 'contended'")
        if self.bw_sharing != "contended":
            raise ValueError(f"bw_sharing must be 'contended' (got {self.bw_sharing!r})")


@dataclass
class HardwareConfig:
    """The machine, with the reference's names and defaults (docs/latency.md has where each
    number comes from). ``systolic_flops_per_cycle`` = 2 x SIMD width x ``systolic_rows``."""

    num_cores: int = 32
    clock_ghz: float = 1.0
    hbm_bandwidth_tb_s: float = 0.128
    ring_bandwidth_tb_s: float = 0.064
    simd_elements_per_cycle: int = 64
    systolic_rows: int = 8
    transcendental_penalty: int = 4
    lx_size_mb: int = 2

    @property
    def clock_hz(self) -> float:
        return self.clock_ghz * 1e9

    @property
    def hbm_bw_chip(self) -> float:
        """Chip HBM bandwidth in bytes per second."""
        return self.hbm_bandwidth_tb_s * 1e12

    @property
    def hbm_bytes_per_cycle_per_core(self) -> float:
        """Bytes per cycle of one core when all ``num_cores`` share HBM."""
        return self.hbm_bw_chip / self.clock_hz / self.num_cores

    @property
    def ring_bytes_per_cycle(self) -> float:
        return self.ring_bandwidth_tb_s * 1e12 / self.clock_hz

    @property
    def systolic_flops_per_cycle(self) -> int:
        return 2 * self.simd_elements_per_cycle * self.systolic_rows

    @property
    def systolic_peak(self) -> float:
        """One core's systolic FLOP/s."""
        return self.systolic_flops_per_cycle * self.clock_hz

    @property
    def simd_peak(self) -> float:
        """One core's SIMD FLOP/s."""
        return self.simd_elements_per_cycle * self.clock_hz

    def lx_bytes_per_cycle(self) -> float:
        return self.ring_bytes_per_cycle

    def lx_bytes_per_cycle_per_core(self) -> float:
        return self.lx_bytes_per_cycle()

    def to_params(self, model: ExecutionModel | None = None) -> HardwareParams:
        """Our cost model's parameters for this machine. LX traffic stays free (as in the
        reference, which charges LX only for mixed distributed views)."""
        return HardwareParams(
            num_cores=self.num_cores, clock_ghz=self.clock_ghz,
            hbm_tb_per_s=self.hbm_bandwidth_tb_s, ring_tb_per_s=self.ring_bandwidth_tb_s,
            simd_elems_per_cycle=self.simd_elements_per_cycle,
            systolic_flops_per_cycle=self.systolic_flops_per_cycle,
            transcendental_penalty=float(self.transcendental_penalty),
            lx_bytes=int(self.lx_size_mb * 1024 * 1024))


@dataclass
class TraceEntry:
    """One executed op of one core: its cycles and its (largest) category."""

    op_type: str
    cycles: float
    category: str


@dataclass
class CoreLatencyCounters:
    """One core's cycles, FLOPs and bytes by the reference's categories; ``trace`` lists one
    :class:`TraceEntry` per executed op when tracing (else None)."""

    memory_cycles: float = 0.0
    comm_cycles: float = 0.0
    flops_by_category: dict[str, float] = field(default_factory=dict)
    cycles_by_category: dict[str, float] = field(default_factory=dict)
    bytes_by_category: dict[str, float] = field(default_factory=dict)
    trace: list[TraceEntry] | None = None

    @property
    def compute_cycles(self) -> float:
        return sum(self.cycles_by_category.values())

    @property
    def total_cycles(self) -> float:
        return self.compute_cycles + self.memory_cycles + self.comm_cycles

    @property
    def total_flops(self) -> float:
        return sum(self.flops_by_category.values())

    @property
    def total_bytes(self) -> float:
        return sum(self.bytes_by_category.values())

    @property
    def dram_bytes(self) -> float:
        """HBM bytes (the ``memory`` category): the roofline's traffic."""
        return self.bytes_by_category.get("memory", 0)

    @property
    def comm_bytes(self) -> float:
        return self.bytes_by_category.get("comm", 0)

    def record(self, category: str, cycles: float, op_type: str = "", flops: float = 0.0,
               nbytes: float = 0) -> None:
        """Add one op's charge (the reference's accumulation rule)."""
        if category.startswith("compute_"):
            self.cycles_by_category[category] = self.cycles_by_category.get(category, 0.0) + cycles
            self.flops_by_category[category] = self.flops_by_category.get(category, 0.0) + flops
        elif category == "memory":
            self.memory_cycles += cycles
        elif category == "comm":
            self.comm_cycles += cycles
        if nbytes:
            self.bytes_by_category[category] = self.bytes_by_category.get(category, 0) + nbytes
        if self.trace is not None:
            self.trace.append(TraceEntry(op_type, cycles, category))


@dataclass
class LatencyReport:
    """A kernel call's estimated latency: per-core counters, the critical core, rooflines."""

    config: HardwareConfig
    counters: dict[int, CoreLatencyCounters]
    model: ExecutionModel = field(default_factory=ExecutionModel)
    notes: list[str] = field(default_factory=list)  # our model's stated assumptions

    def _effective_cycles(self, c: CoreLatencyCounters) -> float:
        if self.model.pipeline == "overlapped":
            return max(c.compute_cycles, c.memory_cycles + c.comm_cycles)
        if self.model.pipeline == "overlapped_3way":
            return max(c.compute_cycles, c.memory_cycles, c.comm_cycles)
        return c.total_cycles

    @property
    def critical_core(self) -> CoreLatencyCounters:
        return max(self.counters.values(), key=self._effective_cycles)

    @property
    def kernel_cycles(self) -> float:
        return self._effective_cycles(self.critical_core) if self.counters else 0.0

    @property
    def kernel_time_us(self) -> float:
        return self.kernel_cycles / (self.config.clock_hz / 1e6)

    @property
    def bottleneck(self) -> str:
        """``compute``, ``memory`` or ``comm``: the largest part of the critical core."""
        if not self.counters:
            return "none"
        c = self.critical_core
        parts = {"compute": c.compute_cycles, "memory": c.memory_cycles, "comm": c.comm_cycles}
        return max(parts, key=lambda k: parts[k])

    def per_core_summary(self) -> list[dict[str, Any]]:
        return [{"core_id": k, "compute_cycles": c.compute_cycles,
                 "memory_cycles": c.memory_cycles, "comm_cycles": c.comm_cycles,
                 "total_cycles": self._effective_cycles(c)}
                for k, c in sorted(self.counters.items())]

    # -- rooflines: the same five-input formula at chip and at core scope
    @staticmethod
    def _roofline_at(flops: float, nbytes: float, peak: float, bw: float,
                     seconds: float) -> dict[str, Any]:
        ai = flops / nbytes if nbytes > 0 else math.inf
        achieved = flops / seconds if seconds > 0 else 0.0
        ceiling = peak if ai == math.inf else min(peak, bw * ai)
        return {"AI": ai,
                "compute_throughput": achieved / peak if peak > 0 else 0.0,
                "dram_throughput": nbytes / (bw * seconds) if bw > 0 and seconds > 0 else 0.0,
                "achieved_gflops": achieved / 1e9, "ceiling_gflops": ceiling / 1e9,
                "attainment": achieved / ceiling if ceiling > 0 else 0.0,
                "ridge": peak / bw if bw > 0 else math.inf, "peak_gflops": peak / 1e9}

    def _dominant_unit(self) -> str:
        """The compute unit with the most cycles summed over all cores (decided once, so the
        chip and core rooflines agree)."""
        totals = {unit: sum(c.cycles_by_category.get(cat, 0.0) for c in self.counters.values()
                            for cat in cats)
                  for unit, cats in self.model.unit_categories.items()}
        if not any(totals.values()):
            return self.model.fallback_unit
        return max(totals, key=lambda u: totals[u])

    def _unit_peaks(self) -> dict[str, float]:
        return {"systolic": self.config.systolic_peak, "simd": self.config.simd_peak}

    def _cores_active(self) -> int:
        return sum(1 for c in self.counters.values() if self._effective_cycles(c) > 0)

    def chip_roofline(self) -> dict[str, Any]:
        """The whole chip as one unit: every core's FLOPs of the dominant unit over every
        core's HBM bytes, against the chip's peaks."""
        if not self.counters:
            return {}
        dom = self._dominant_unit()
        cats = self.model.unit_categories[dom]
        n = self.config.num_cores
        seconds = self.kernel_cycles / self.config.clock_hz
        flops = sum(c.flops_by_category.get(k, 0.0) for c in self.counters.values() for k in cats)
        nbytes = sum(c.dram_bytes for c in self.counters.values())
        out = self._roofline_at(flops, nbytes, self._unit_peaks()[dom] * n,
                                self.config.hbm_bw_chip, seconds)
        busy = sum(self._effective_cycles(c) for c in self.counters.values())
        active = self._cores_active()
        out.update({"mean_core_active_frac": busy / (n * self.kernel_cycles)
                    if n > 0 and self.kernel_cycles > 0 else 0.0,
                    "grid_coverage": active / n if n > 0 else 0.0,
                    "dominant_unit": dom, "num_cores": n, "cores_active": active})
        return out

    def core_roofline(self) -> dict[str, Any]:
        """The critical core, per compute unit, with the HBM share of one active core."""
        if not self.counters:
            return {}
        dom = self._dominant_unit()
        crit = self.critical_core
        seconds = self.kernel_cycles / self.config.clock_hz
        bw = self.config.hbm_bw_chip / max(1, self._cores_active())
        units = {unit: self._roofline_at(
            sum(crit.flops_by_category.get(k, 0.0) for k in self.model.unit_categories[unit]),
            crit.dram_bytes, peak, bw, seconds) for unit, peak in self._unit_peaks().items()}
        return {"core_AI": units[dom]["AI"], "core_attainment": units[dom]["attainment"],
                "core_dominant_unit": dom, "peak_bw_gb_s": bw / 1e9,
                "ridge": units[dom]["ridge"], "units": units}

    def roofline(self) -> dict[str, Any]:
        """The core roofline's keys and the chip roofline's, in one dict."""
        if not self.counters:
            return {}
        return {**self.core_roofline(), **self.chip_roofline()}

    def summary_dict(self) -> dict[str, Any]:
        return {"kernel_cycles": self.kernel_cycles, "kernel_time_us": self.kernel_time_us,
                "bottleneck": self.bottleneck, "grid_cores": len(self.counters),
                "num_cores": self.config.num_cores, "per_core": self.per_core_summary()}

    def __str__(self) -> str:
        rule, thin = "=" * 60, "-" * 60
        lines = [rule, "KTIR Latency Estimation Report", rule,
                 f"  Kernel cycles : {self.kernel_cycles:,.1f}",
                 f"  Kernel time   : {self.kernel_time_us:.3f} us",
                 f"  Bottleneck    : {self.bottleneck}",
                 f"  Cores         : {len(self.counters)}", thin,
                 f"  {'Core':>4}  {'Compute':>12}  {'Memory':>12}  {'Comm':>12}  {'Total':>12}",
                 thin]
        for row in self.per_core_summary():
            lines.append(f"  {row['core_id']:>4}  {row['compute_cycles']:>12.1f}  "
                         f"{row['memory_cycles']:>12.1f}  {row['comm_cycles']:>12.1f}  "
                         f"{row['total_cycles']:>12.1f}")
        lines.append(rule)
        if self.counters and (self.critical_core.total_flops or self.critical_core.total_bytes):
            lines += self._roofline_text()
        return "\n".join(lines)

    def _roofline_text(self) -> list[str]:
        chip, core = self.chip_roofline(), self.core_roofline()

        def ai(x: float) -> str:
            return f"{x:.2f} FLOP/B" if x != math.inf else "inf (no HBM traffic)"

        lines = ["", "Roofline: CHIP-LEVEL  (whole chip as one unit)", "-" * 60,
                 f"  AI                    : {ai(chip['AI'])}",
                 f"  compute_throughput    : {chip['compute_throughput']:.1%}",
                 f"  dram_throughput       : {chip['dram_throughput']:.1%}",
                 f"  attainment            : {chip['attainment']:.1%}",
                 f"  mean_core_active_frac : {chip['mean_core_active_frac']:.1%}",
                 f"  grid_coverage         : {chip['cores_active']}/{chip['num_cores']}  "
                 f"({chip['grid_coverage']:.1%})",
                 f"  dominant_unit         : {chip['dominant_unit']}",
                 "", "Roofline: PER-CORE  (critical-path core)", "-" * 60,
                 f"  core_AI               : {ai(core['core_AI'])}",
                 f"  core_attainment       : {core['core_attainment']:.1%}",
                 f"  core_dominant_unit    : {core['core_dominant_unit']}",
                 f"  peak_bw (per-core)    : {core['peak_bw_gb_s']:.2f} GB/s", "",
                 f"  {'Unit':>10}  {'Achieved':>12}  {'Ceiling':>12}  {'Ridge':>10}  "
                 f"{'Attain':>7}"]
        for name, u in core["units"].items():
            mark = " *" if name == core["core_dominant_unit"] else "  "
            lines.append(f"{mark} {name:>10}  {u['achieved_gflops']:>10.2f} G  "
                         f"{u['ceiling_gflops']:>10.2f} G  {u['ridge']:>8.1f} F/B  "
                         f"{u['attainment']:>6.1%}")
        lines.append("=" * 60)
        return lines


def counters_from_core(cost: CoreCost, params: HardwareParams) -> CoreLatencyCounters:
    """One core's counters in the reference's categories (see the module table)."""
    out = CoreLatencyCounters()
    for ours, cycles in cost.cycles.items():
        out.record(CATEGORY_MAP[ours], cycles)
    for op in cost.ops.values():
        if op.flops:
            theirs = op_category(op.cycles, default="compute_float")
            out.flops_by_category[theirs] = out.flops_by_category.get(theirs, 0.0) + op.flops
    if cost.hbm_bytes:
        out.bytes_by_category["memory"] = cost.hbm_bytes
    if cost.cycles["comm"]:
        out.bytes_by_category["comm"] = cost.cycles["comm"] * params.ring_bytes_per_cycle
    if cost.events is not None:
        out.trace = [TraceEntry(e.op, e.total, op_category(e.cycles, default="zero"))
                     for e in cost.events]
    return out


def op_category(cycles: dict[str, float], default: str) -> str:
    """The reference category of an op's largest charge (``default`` when it charged none)."""
    if not cycles:
        return default
    return CATEGORY_MAP[max(cycles, key=lambda c: cycles[c])]


def report_from_node(node: NodeLatency, config: HardwareConfig, params: HardwareParams,
                     model: ExecutionModel | None = None) -> LatencyReport:
    """The reference's report of one call, from our per-core costs."""
    counters = {c.core: counters_from_core(c, params) for c in node.cores}
    return LatencyReport(config, counters, model or ExecutionModel(), list(node.notes))
