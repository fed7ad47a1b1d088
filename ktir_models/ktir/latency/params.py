"""The latency model's machine: :class:`HardwareParams` and the cost categories.

Invariants: every parameter that divides a cost is positive (checked at construction); the
category tuples partition :data:`CATEGORIES` into memory, compute and ``comm``.
"""

from __future__ import annotations

from dataclasses import dataclass

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
