"""Host threads for the large, independent pieces of one step.

A K-loop's per-trip matmuls are independent BLAS calls, and its f16 chain is elementwise, so its
columns are independent: both can be split over threads without changing a single operation
(numpy's matmul and torch's half additions release the GIL while they run). Splitting only
changes *which thread* makes each call, never the calls themselves, so results are bit-identical
to one thread. The native model uses every core too; these splits let the emulator stream
weights from memory with as many cores as its BLAS is allowed (``OPENBLAS_NUM_THREADS`` /
``OMP_NUM_THREADS``, else the CPUs this process may use, at most 8).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

_MAX_THREADS = 8


def default_threads() -> int:
    """Threads for split steps: the BLAS thread setting if given, else the usable CPUs (<= 8)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return min(_MAX_THREADS, int(value))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(_MAX_THREADS, cpus or 1))


class Workers:
    """``count`` threads: the caller plus ``count - 1`` pool threads, started on first use."""

    def __init__(self, count: int):
        self.count = max(1, int(count))
        self._pool: ThreadPoolExecutor | None = None

    def run(self, fn, ranges: list[tuple[int, int]]) -> None:
        """``fn(lo, hi)`` for every range, the first in the calling thread; returns when all are
        done and re-raises the first failure."""
        if len(ranges) == 1:
            fn(*ranges[0])
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.count - 1, thread_name_prefix="ktir-split")
        futures = [self._pool.submit(fn, lo, hi) for lo, hi in ranges[1:]]
        try:
            fn(*ranges[0])
        finally:
            errors = []
            for f in futures:
                try:
                    f.result()
                except Exception as exc:  # noqa: BLE001 - re-raised below, after every join
                    errors.append(exc)
        if errors:
            raise errors[0]

    def ranges(self, n: int, align: int = 1) -> list[tuple[int, int]]:
        """[0, n) in at most ``count`` contiguous pieces, boundaries multiples of ``align``."""
        parts = min(self.count, max(1, n // max(1, align)))
        if parts <= 1:
            return [(0, n)]
        step = -(-n // parts)
        step = -(-step // align) * align
        return [(lo, min(n, lo + step)) for lo in range(0, n, step)]
