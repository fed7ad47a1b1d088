"""The check of ``serve`` against transformers, every sequence run alone.

* **Per step**: each sequence's rows of the step's logits against transformers fed the same tokens
  at the same positions with that sequence's own KV cache (one cache per request, the model
  shared), judged by the project's pass rule (``report.judge``: top-1 on every row up to the
  near-tie band, and ``max|d| <= 2^-6 max|golden|``).
* **Per request**, at the end: the generated tokens against transformers' own greedy generation of
  that prompt alone (``model.generate``, ``greedy_golden.py``), stopping at the same EOS ids.

A failure names the step, the request and two tokens (ours and transformers') with their golden
logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks.golden import Metrics, compare
from ..checks.report import judge


@dataclass(frozen=True)
class RowCheck:
    """One sequence's rows in one step, judged: its worst row's tokens and golden logits."""

    request: str
    passed: bool
    reasons: tuple[str, ...]
    max_abs_rel: float
    row: int  # within the sequence's rows of the step
    ours: int
    theirs: int
    ours_logit: float  # golden logits of both tokens
    theirs_logit: float


class SequenceGoldens:
    """transformers (f32, eager), one KV cache per request."""

    def __init__(self, ckpt: Any) -> None:
        from ..checks.golden import load_transformers_model

        self.model = load_transformers_model(ckpt)
        self.caches: dict[str, Any] = {}

    def run(self, request: str, ids: tuple[int, ...], positions: tuple[int, ...]) -> np.ndarray:
        """float32 logits ``[len(ids), vocab]`` of ``ids`` at ``positions``, continuing the cache
        of ``request``."""
        import torch

        from ..checks.golden import cache_kwarg, output_cache

        x = torch.as_tensor(np.asarray(ids, dtype=np.int64).reshape(1, -1))
        pos = torch.as_tensor(np.asarray(positions, dtype=np.int64).reshape(1, -1))
        cache = self.caches.get(request)
        kwargs = {} if cache is None else {cache_kwarg(self.model): cache}
        with torch.no_grad():
            out = self.model(x, position_ids=pos, use_cache=True, **kwargs)
        self.caches[request] = output_cache(out)
        return out.logits[0].float().numpy()

    def forget(self, request: str) -> None:
        self.caches.pop(request, None)


def check_rows(request: str, logits: np.ndarray, golden: np.ndarray) -> RowCheck:
    """Judge one sequence's rows; the row named is the first whose top-1 differs, else the row of
    the largest difference."""
    ours32 = logits.astype(np.float32)
    met: Metrics = compare(ours32, golden)
    verdict = judge(met)
    wrong = [i for i, ok in enumerate(met.top1_rows) if not ok]
    row = wrong[0] if wrong else int(np.argmax(np.abs(ours32 - golden).max(axis=1)))
    ours, theirs = int(np.argmax(ours32[row])), int(np.argmax(golden[row]))
    return RowCheck(request, verdict.passed, verdict.reasons, float(met.max_abs_rel), row, ours,
                    theirs, float(golden[row, ours]), float(golden[row, theirs]))
