"""What a sweep tells its user: the summary table, ``summary.json`` and the markdown report.

All three are built from one :class:`SweepSummary` over every selected case, the reused ones
included, so a resumed sweep reports exactly what an uninterrupted one would (its ``ran`` /
``reused`` lists say which results this invocation produced).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .spec import VERDICTS
from .worker import CaseResult

SLOWEST = 5


@dataclass
class SweepSummary:
    name: str
    spec: str
    run_id: str
    executor: str
    seconds: float
    results: list[CaseResult]
    reused: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {v: sum(r.verdict == v for r in self.results) for v in VERDICTS}

    @property
    def unexpected(self) -> list[CaseResult]:
        """Cases whose verdict differs from their ``expect`` (the sweep's exit code is 1 if any)."""
        return [r for r in self.results if r.verdict != r.expect]

    @property
    def ran(self) -> list[str]:
        reused = set(self.reused)
        return [r.case_id for r in self.results if r.case_id not in reused]

    def worst(self) -> CaseResult | None:
        """The case with the largest max|logits - golden| / max|golden|."""
        measured = [r for r in self.results if r.metric is not None]
        return max(measured, key=lambda r: r.metric) if measured else None

    def slowest(self) -> list[CaseResult]:
        return sorted(self.results, key=lambda r: r.seconds, reverse=True)[:SLOWEST]

    def to_json(self) -> dict[str, Any]:
        worst = self.worst()
        reused = set(self.reused)
        return {
            "name": self.name, "spec": self.spec, "run_id": self.run_id, "executor": self.executor,
            "seconds": self.seconds, "counts": self.counts,
            "unexpected": [r.case_id for r in self.unexpected],
            "ran": self.ran, "reused": list(self.reused),
            "worst": None if worst is None else {"case": worst.case_id, "max_abs_rel": worst.metric},
            "slowest": [{"case": r.case_id, "seconds": r.seconds} for r in self.slowest()],
            "cases": [{
                "id": r.case_id, "verdict": r.verdict, "expect": r.expect, "cause": r.cause,
                "seconds": r.seconds, "exit_code": r.exit_code, "key": r.key, "run_id": r.run_id,
                "reused": r.case_id in reused, "metrics": (r.report or {}).get("metrics"),
                "peak_rss": r.peak_rss,
            } for r in self.results],
        }

    def render(self) -> str:
        c = self.counts
        lines = [
            f"sweep {self.name}: {len(self.results)} cases ({len(self.ran)} ran, {len(self.reused)} reused) "
            f"in {self.seconds:.1f} s on {self.executor}",
            f"  pass {c['pass']}   fail {c['fail']}   error {c['error']}   "
            f"unexpected {len(self.unexpected)}",
        ]
        worst = self.worst()
        if worst is not None:
            lines.append(f"  worst    {worst.case_id}: max_abs/max|golden| = {worst.metric:.3g}")
        lines.append("  slowest  " + ", ".join(f"{r.case_id} {r.seconds:.1f} s" for r in self.slowest()))
        width = max([len("case")] + [len(r.case_id) for r in self.results])
        lines.append("")
        lines.append(f"{'case':<{width}}  verdict  expect  seconds  cause")
        for r in self.results:
            mark = "" if r.verdict == r.expect else "  <- unexpected"
            lines.append(f"{r.case_id:<{width}}  {r.verdict:<7}  {r.expect:<6}  {r.seconds:7.1f}  "
                         f"{_one_line(r.cause)}{mark}")
        return "\n".join(lines)

    def markdown(self) -> str:
        c = self.counts
        out = [
            f"# Sweep `{self.name}`",
            "",
            f"{len(self.results)} cases from `{self.spec}` on {self.executor}, {self.seconds:.1f} s "
            f"({len(self.ran)} ran, {len(self.reused)} reused from earlier runs).",
            "",
            f"| pass | fail | error | unexpected |",
            f"|---:|---:|---:|---:|",
            f"| {c['pass']} | {c['fail']} | {c['error']} | {len(self.unexpected)} |",
            "",
        ]
        worst = self.worst()
        if worst is not None:
            out += [f"Worst metric: `{worst.case_id}`, max_abs/max|golden| = {worst.metric:.3g}.", ""]
        out += ["| case | verdict | expected | seconds | max_abs/max\\|golden\\| | cause |",
                "|---|---|---|---:|---:|---|"]
        for r in self.results:
            metric = "" if r.metric is None else f"{r.metric:.3g}"
            verdict = r.verdict if r.verdict == r.expect else f"**{r.verdict}**"
            cause = _one_line(r.cause).replace("|", "\\|")
            out.append(f"| `{r.case_id}` | {verdict} | {r.expect} | {r.seconds:.1f} | {metric} | {cause} |")
        return "\n".join(out) + "\n"


def _one_line(text: str | None, limit: int = 160) -> str:
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
