"""The verdict and report of a whole-model forward: pass/fail rule, readable text, JSON.

Pass rule (justified in docs/forward.md):

* top-1 agreement on every row: the emulated program's argmax equals the golden argmax, or the
  row is a **near-tie**: the golden rates its own top-1 at most ``NEAR_TIE_REL * max|golden|``
  above the emulated top-1 (the band a correct program's f16 numerics can close; near-ties are
  listed in the report, never silently accepted), and
* ``max_abs / max|golden| <= REL_TOLERANCE`` (max over all logits of the absolute difference,
  relative to the largest golden logit magnitude).

The JSON written by ``--json`` always holds at least ``pass``, ``metrics.top1_agreement``,
``metrics.max_abs``, ``metrics.cosine``, ``seconds.parse``, ``seconds.marshal`` and
``seconds.execute`` (median seconds per pass over ``--repeat``), and the emulator's array back end:
``backend`` (``numpy`` or ``torch``), ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``mps``) and
``backend_version`` (e.g. ``torch 2.13.0+cpu (cpu)``), and ``matmul``: how f16 matmuls were
summed (the native kernel's sequential order, or the back end's BLAS; docs/backends.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...errors import UserError

#: Largest accepted ``max_abs / max|golden|``; see docs/forward.md for its derivation.
REL_TOLERANCE = 2.0**-6


#: Widest accepted golden margin of a row whose top-1 differs, relative to ``max|golden|``: each of
#: the two logits of a correct program is off by at most 2^-7 of the logit scale (docs/forward.md,
#: "Near-ties"), so their order can flip only where the golden separates them by <= 2 * 2^-7.
NEAR_TIE_REL = 2.0**-6


@dataclass(frozen=True)
class NearTie:
    """A row whose emulated top-1 differs from the golden's within the near-tie band."""

    row: int
    golden_top1: int
    emulated_top1: int
    margin: float  # golden[golden_top1] - golden[emulated_top1], >= 0
    band: float  # NEAR_TIE_REL * max|golden| of the forward judged


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]
    near_ties: tuple[NearTie, ...] = ()
    band: float = 0.0  # the near-tie band in logit units


def judge(metrics: Any, tolerance: float = REL_TOLERANCE, near_tie_rel: float = NEAR_TIE_REL) -> Verdict:
    """Apply the pass rule to a ``golden.Metrics``; ``reasons`` says why a forward failed,
    ``near_ties`` which differing rows the band accepted."""
    reasons = []
    rows = list(metrics.top1_rows)
    margins = list(getattr(metrics, "top1_margin", None) or [])
    golden_top = list(getattr(metrics, "golden_top1", None) or [])
    emulated_top = list(getattr(metrics, "emulated_top1", None) or [])
    band = near_tie_rel * float(getattr(metrics, "golden_scale", 0.0) or 0.0)
    near: list[NearTie] = []
    wrong: list[tuple[int, float]] = []
    for i, ok in enumerate(rows):
        if ok:
            continue
        margin = margins[i] if i < len(margins) else float("nan")
        if math.isfinite(margin) and margin <= band:
            near.append(NearTie(i, golden_top[i], emulated_top[i], margin, band))
        else:
            wrong.append((i, margin))
    if wrong:
        shown = ", ".join(f"{i}" + (f": margin {mg:.3g}" if math.isfinite(mg) else "") for i, mg in wrong[:8])
        shown += ", ..." if len(wrong) > 8 else ""
        reasons.append(f"top-1 differs on {len(wrong)} of {len(rows)} rows beyond the near-tie band "
                       f"{band:.3g} (rows {shown})")
    rel = float(metrics.max_abs_rel)
    if not math.isfinite(rel) or rel > tolerance:
        reasons.append(f"max_abs/max|golden| = {rel:.3g} exceeds the tolerance {tolerance:.3g}")
    return Verdict(passed=not reasons, reasons=tuple(reasons), near_ties=tuple(near), band=band)


@dataclass
class ForwardReport:
    """Everything ``ktir-models forward`` tells the user, as text and as JSON."""

    model: str
    program: str
    mode: str
    tokens: int
    weights: str
    golden: str
    nodes: int
    repeat: int
    passed: bool
    reasons: list[str]
    tolerance: float
    metrics: dict[str, Any] | None
    seconds: dict[str, float]
    slowest_nodes: list[dict[str, Any]] = field(default_factory=list)
    node_seconds: list[float] = field(default_factory=list)  # median per node, manifest order
    nonfinite: dict[str, Any] | None = None
    hbm_bytes: int = 0
    backend: str = "numpy"  # the emulator's array back end (ktir.backends)
    device: str = "cpu"  # where its tensors live: cpu, cuda, cuda:N or mps
    backend_version: str = "numpy (cpu)"  # the back end's describe(): library version and device
    matmul: str = "BLAS"  # Machine.matmul_order(): the f32 summation order of f16 matmuls
    near_tie_band: float = 0.0  # logit units: NEAR_TIE_REL * max|golden| (0 without a golden)
    near_ties: list[dict[str, Any]] = field(default_factory=list)  # asdict(NearTie) per accepted row
    text: dict[str, Any] | None = None  # teacher-forced metrics over real text (text_metrics.TextMetrics)
    last_token: str | None = None  # --last-token: how the last row was computed (None: all rows)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict; NaN/Inf numbers become null (strict JSON)."""
        doc = asdict(self)
        doc["pass"] = doc.pop("passed")
        return json_safe(doc)

    def render(self) -> str:
        lines = [
            f"model    {self.model}",
            f"program  {self.program}  ({self.nodes} nodes, {self.mode}, m={self.tokens})",
            f"weights  {self.weights}",
            f"golden   {self.golden}",
            f"backend  {self.backend_version}",
            f"matmul   {self.matmul}",
        ]
        if self.last_token is not None:
            lines.append(f"rows     last row only ({self.last_token})")
        if self.metrics is not None:
            mt = self.metrics
            lines += [
                f"top-1    {mt['top1_agreement']:.4f} of rows agree",
                f"max_abs  {mt['max_abs']:.4g}  (relative to max|golden|: {mt['max_abs_rel']:.4g}, "
                f"tolerance {self.tolerance:.4g})",
                f"cosine   {mt['cosine']:.6f}",
            ]
            if mt.get("max_closing") is not None and self.near_tie_band:
                lines.append(f"margins  our error closes a golden top-1 margin by at most {mt['max_closing']:.4g} "
                             f"(near-tie band {self.near_tie_band:.4g})")
            if self.near_ties:
                shown = ", ".join(f"row {t['row']} (golden {t['golden_top1']}, ours {t['emulated_top1']}, "
                                  f"margin {t['margin']:.3g})" for t in self.near_ties[:4])
                more = f", ... ({len(self.near_ties)} in all)" if len(self.near_ties) > 4 else ""
                lines.append(f"near-tie {shown}{more}: within the band {self.near_tie_band:.3g}")
        if self.text is not None:
            from .text_metrics import render_text_metrics

            lines += render_text_metrics(self.text)
        if self.nonfinite is not None:
            nf = self.nonfinite
            lines.append(
                f"nonfinite first at node {nf['node']} (@{nf['fn']}): tensor {nf['tensor']} has "
                f"{nf['count']} NaN/Inf, first at {tuple(nf['first_index'])}"
            )
        s = self.seconds
        lines.append(
            "seconds  weights {weights:.2f}  parse {parse:.2f}  compile {compile:.2f}  marshal {marshal:.2f}  "
            "execute {execute:.2f} (median of {n})  golden {golden:.2f}".format(
                n=self.repeat, **{"weights": 0.0, "golden": 0.0, "compile": 0.0, **s}
            )
        )
        if self.slowest_nodes:
            shown = ", ".join(f"{d['node']} {d['seconds']:.2f}s" for d in self.slowest_nodes[:3])
            lines.append(f"slowest  {shown}")
        if self.metrics is None:
            lines.append("result   RAN (no golden to compare with)")
        elif self.passed:
            lines.append("result   PASS")
        else:
            lines.append("result   FAIL: " + "; ".join(self.reasons))
        return "\n".join(lines)


def json_safe(value: Any) -> Any:
    """A JSON-safe copy: non-finite floats (an infinite error, an undefined ratio) become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def check_json_target(path: Path, force: bool = False, inputs=()) -> None:
    """Fail early (before any work) if ``--json`` cannot be written, names one of ``inputs``, or
    would replace a file that is not JSON without ``force`` (ktir_models/outputs.py)."""
    from ...outputs import JSON, check_output_target

    check_output_target(path, "--json", JSON, force=force, inputs=inputs)


def write_json(path: Path, report: ForwardReport) -> None:
    """Write the report atomically (a temp file renamed over ``path``) so a crash never leaves a
    half-written file where the user's was."""
    from ...outputs import atomic_output

    text = json.dumps(report.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    with atomic_output(path, "--json", "w") as f:
        f.write(text)
