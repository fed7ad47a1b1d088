"""Teacher-forced metrics of a forward over real text: how the emulated logits would read the text,
next to how the golden reads it.

Row ``i`` of a pass holds the logits after the text's token at position ``past + i``; its target is
the text's next token (position ``past + i + 1``), when the text has one. Per row:

* ``kl``: KL(golden || emulated) of the two softmax distributions, in nats (0 when equal; how much
  the emulated distribution misplaces the golden's probability);
* ``top5_overlap``: the fraction of the golden's five most likely tokens that are also among the
  emulated five;
* ``nll_golden`` / ``nll_emulated``: ``-log p(target)`` under each (rows with a target only).

Perplexities are ``exp(mean NLL)`` over the rows with a target. Everything is computed in float64
from the logits as given (f16 programs' logits are widened first); NaN/Inf logits give NaN/Inf
metrics, never hidden.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

TOP_K = 5


@dataclass
class TextMetrics:
    """Per-row and summary text metrics; ``targets[i] = -1`` where row i has no next token."""

    targets: list[int]
    kl: list[float]
    top5_overlap: list[float]
    nll_golden: list[float]  # one per row with a target, in row order
    nll_emulated: list[float]
    kl_mean: float
    kl_max: float
    top5_overlap_mean: float
    perplexity_golden: float
    perplexity_emulated: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    top = np.max(x, axis=1, keepdims=True)
    shifted = x - top
    return shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


def text_metrics(logits, golden, targets) -> TextMetrics:
    """Metrics of ``logits`` against ``golden`` (both ``[m, vocab]``) for next tokens ``targets``
    (``[m]``, ``-1`` for a row without one)."""
    a = np.asarray(logits, dtype=np.float64)
    g = np.asarray(golden, dtype=np.float64)
    t = np.asarray(targets, dtype=np.int64).reshape(-1)
    if a.shape != g.shape or a.ndim != 2 or t.size != a.shape[0]:
        raise ValueError(f"text_metrics: logits {a.shape}, golden {g.shape}, targets {t.shape} do not agree")
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        la, lg = _log_softmax(a), _log_softmax(g)
        kl = np.sum(np.exp(lg) * (lg - la), axis=1)
    k = min(TOP_K, a.shape[1])
    overlap = []
    for row_a, row_g in zip(a, g):
        if not np.isfinite(row_a).all():
            overlap.append(float("nan"))
            continue
        top_a = set(np.argsort(-row_a, kind="stable")[:k].tolist())
        top_g = set(np.argsort(-row_g, kind="stable")[:k].tolist())
        overlap.append(len(top_a & top_g) / k)
    rows = np.flatnonzero(t >= 0)
    nll_g = [float(-lg[i, t[i]]) for i in rows]
    nll_a = [float(-la[i, t[i]]) for i in rows]
    return TextMetrics(
        targets=[int(x) for x in t],
        kl=[float(x) for x in kl],
        top5_overlap=overlap,
        nll_golden=nll_g,
        nll_emulated=nll_a,
        kl_mean=float(np.mean(kl)) if kl.size else 0.0,
        kl_max=float(np.max(kl)) if kl.size else 0.0,
        top5_overlap_mean=float(np.mean(overlap)) if overlap else 1.0,
        perplexity_golden=_perplexity(nll_g),
        perplexity_emulated=_perplexity(nll_a),
    )


def _perplexity(nll: list[float]) -> float:
    if not nll:
        return float("nan")
    mean = float(np.mean(nll))
    if math.isnan(mean):
        return mean
    return math.exp(mean) if mean < 700 else float("inf")


def next_token_targets(text_ids, past: int, m: int) -> list[int]:
    """The target of each of the pass's ``m`` rows: the text's token after position ``past + i``,
    or ``-1`` where the text ends first."""
    ids = [int(i) for i in text_ids]
    return [ids[past + i + 1] if past + i + 1 < len(ids) else -1 for i in range(m)]


def render_text_metrics(doc: dict[str, Any]) -> list[str]:
    """The report lines of a :meth:`TextMetrics.to_dict`."""
    scored = len(doc["nll_golden"])
    return [
        f"text     {len(doc['targets'])} rows, {scored} with a next token: "
        f"KL(golden||ours) mean {_g(doc['kl_mean'])} max {_g(doc['kl_max'])} nats, "
        f"top-5 overlap {_g(doc['top5_overlap_mean'])}",
        f"ppl      golden {_g(doc['perplexity_golden'])}  ours {_g(doc['perplexity_emulated'])}",
    ]


def _g(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4g}"
