"""The verdict and report of a whole-model forward: pass/fail rule, readable text, JSON.

Pass rule (justified in docs/forward.md):

* top-1 agreement on every row: the emulated program's argmax equals the golden argmax, and
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

from ..errors import UserError

#: Largest accepted ``max_abs / max|golden|``; see docs/forward.md for its derivation.
REL_TOLERANCE = 2.0**-6


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]


def judge(metrics: Any, tolerance: float = REL_TOLERANCE) -> Verdict:
    """Apply the pass rule to a ``golden.Metrics``; ``reasons`` says why a forward failed."""
    reasons = []
    rows = list(metrics.top1_rows)
    if not all(rows):
        bad = [i for i, ok in enumerate(rows) if not ok]
        shown = ", ".join(str(i) for i in bad[:8]) + (", ..." if len(bad) > 8 else "")
        reasons.append(f"top-1 differs on {len(bad)} of {len(rows)} rows (rows {shown})")
    rel = float(metrics.max_abs_rel)
    if not math.isfinite(rel) or rel > tolerance:
        reasons.append(f"max_abs/max|golden| = {rel:.3g} exceeds the tolerance {tolerance:.3g}")
    return Verdict(passed=not reasons, reasons=tuple(reasons))


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
        if self.metrics is not None:
            mt = self.metrics
            lines += [
                f"top-1    {mt['top1_agreement']:.4f} of rows agree",
                f"max_abs  {mt['max_abs']:.4g}  (relative to max|golden|: {mt['max_abs_rel']:.4g}, "
                f"tolerance {self.tolerance:.4g})",
                f"cosine   {mt['cosine']:.6f}",
            ]
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


def check_json_target(path: Path, force: bool = False) -> None:
    """Fail early (before any work) if ``--json`` cannot be written, or would replace a file that
    is not JSON without ``force`` (ktir_models/outputs.py)."""
    from ..outputs import JSON, check_output_target

    check_output_target(path, "--json", JSON, force=force)


def write_json(path: Path, report: ForwardReport) -> None:
    """Write the report atomically (a temp file renamed over ``path``) so a crash never leaves a
    half-written file where the user's was."""
    from ..outputs import atomic_output

    text = json.dumps(report.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    with atomic_output(path, "--json", "w") as f:
        f.write(text)
