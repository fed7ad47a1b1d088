"""The typed reports the public API returns, one per command.

Every report has the same three faces:

* ``passed``: the verdict (True for commands without one: ``latency``, ``emit``);
* ``to_dict()``: exactly the JSON document the command's ``--json`` writes (a command without
  ``--json`` gives its fields); non-finite numbers are ``None`` (strict JSON);
* ``render()``: exactly the text the command prints on stdout.

``mismatch`` is the one-line message of the :class:`~ktir_models.errors.Mismatch` the CLI raises
(exit code 1) when ``passed`` is False, None otherwise. The model layer's own records
(``model.report.ForwardReport``, ``model.diagnose.DiagnoseReport``, ``ktir.latency``'s
``ModelLatency``, the sweep's ``SweepSummary``) are kept whole inside, for callers who want every
number.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..model.checks.report import ForwardReport as ForwardRecord
from ..model.checks.report import json_safe


def write_report_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` (a report's ``to_dict()``) to ``path`` atomically: a temporary sibling renamed
    over it, so a crash never leaves a half-written file where the user's was."""
    from ..outputs import atomic_output

    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    with atomic_output(path, "--json", "w") as f:
        f.write(text)


@dataclass
class LatencyReport:
    """``ktir-models latency``: the roofline of a program's nodes (``ktir.latency.ModelLatency``
    in ``latency``); ``top``: how many nodes ``render()`` lists (None: all)."""

    latency: Any
    top: int | None = None

    passed = True
    mismatch = None

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"latency": self.latency.as_dict()})

    def render(self) -> str:
        return self.latency.render(limit=self.top)


@dataclass
class DiagnoseReport:
    """``ktir-models diagnose``: the node-by-node comparison (``model.diagnose.DiagnoseReport`` in
    ``diagnosis``); ``table``: ``render()`` lists every compared node's error."""

    diagnosis: Any
    table: bool = False

    @property
    def passed(self) -> bool:
        return bool(self.diagnosis.ok)

    @property
    def mismatch(self) -> str | None:
        return None if self.passed else "diagnose: " + self.diagnosis.headline()

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"diagnose": self.diagnosis.as_dict()})

    def render(self) -> str:
        return self.diagnosis.render(table=self.table)


@dataclass
class ForwardReport:
    """``ktir-models forward``: the forward's record (``forward``: model/checks/report.py's, with its
    metrics, timings and verdict), plus the roofline (``--latency``) and the diagnosis of a failed
    forward (``--diagnose``; ``diagnosis_error`` when the program cannot be diagnosed)."""

    forward: ForwardRecord
    latency: Any = None
    diagnosis: Any = None
    diagnosis_error: str | None = None

    @property
    def passed(self) -> bool:
        """True when the logits pass the rule, or when there was no golden to compare with."""
        return self.forward.metrics is None or self.forward.passed

    @property
    def metrics(self) -> dict[str, Any] | None:
        return self.forward.metrics

    @property
    def reasons(self) -> list[str]:
        return self.forward.reasons

    @property
    def mismatch(self) -> str | None:
        return None if self.passed else "forward: FAIL: " + "; ".join(self.forward.reasons)

    def to_dict(self) -> dict[str, Any]:
        doc = dict(self.forward.to_json())
        if self.latency is not None:
            doc["latency"] = self.latency.as_dict()
        if self.diagnosis is not None:
            doc["diagnose"] = self.diagnosis.as_dict()
        elif self.diagnosis_error is not None:
            doc["diagnose"] = {"error": self.diagnosis_error}
        return json_safe(doc)

    def render(self) -> str:
        parts = [self.forward.render()]
        if self.latency is not None:
            parts.append(self.latency.render())
        if self.diagnosis is not None:
            parts.append(self.diagnosis.render())
        elif self.diagnosis_error is not None:
            parts.append(f"diagnose: not available for this program: {self.diagnosis_error}")
        return "\n".join(parts)


@dataclass
class EmitReport:
    """``ktir-models emit``: the program written (``directory``) and its size."""

    model: str
    mode: str
    m: int
    past: int
    capacity: int
    nodes: int
    directory: str
    seconds: float
    largest_grid: int  # cores of the widest node
    largest_lx: int  # bytes: the largest per-core LX estimate of any node

    passed = True
    mismatch = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        return (f"emit: {self.model} {self.mode} m={self.m} past={self.past} "
                f"capacity={self.capacity}: {self.nodes} nodes in {self.directory} "
                f"({self.seconds:.2f} s); largest grid {self.largest_grid} cores, largest LX "
                f"estimate {self.largest_lx / 1024:.0f} KiB per core")


@dataclass
class SweepReport:
    """``ktir-models sweep``: the verdict of every case (``summary``: the sweep's
    ``SweepSummary``); the results are in ``out`` (one JSON per case, summary.json, report.md)."""

    summary: Any
    out: str
    junit: str | None = None

    @property
    def passed(self) -> bool:
        return not self.summary.unexpected

    @property
    def mismatch(self) -> str | None:
        unexpected = self.summary.unexpected
        if not unexpected:
            return None
        shown = ", ".join(f"{r.case_id} ({r.verdict}, expected {r.expect})" for r in unexpected[:5])
        return f"sweep: {len(unexpected)} case(s) not as expected: {shown}"

    def to_dict(self) -> dict[str, Any]:
        """summary.json's document."""
        return json_safe(self.summary.to_json())

    def render(self) -> str:
        return self.summary.render()


@dataclass(frozen=True)
class GenerationStep:
    """One pass of a generation as the API streams it: ``step`` 0 is the prefill; ``text`` the
    piece of decoded text this pass's token added (empty on token ids, or at EOS)."""

    step: int
    past: int
    tokens: list[int]
    next_token: int
    seconds: float
    max_node_lx: int
    text: str = ""
    line: str = ""  # the pass's table line (ids, timing, LX, and its verdict with a golden)
    passed: bool | None = None  # the pass's logits against transformers (None: not checked)


@dataclass
class GenerationReport:
    """``ktir-models generate``: the passes, the text (with ``--prompt``), the checks.

    ``render()`` is the command's whole output: the ``generate:`` line; with a prompt, the prompt's
    text followed by the generated text; the pass table (token ids, or ``verbose``), or only
    its failed passes; the ``check:`` lines; the ``generated:`` line, which lists the token ids
    only on token ids or with ``ids`` (with a prompt it counts them)."""

    model: str
    origin: str
    backend: str
    prompt_tokens: int
    max_steps: int
    checked: bool
    steps: list[GenerationStep] = field(default_factory=list)
    prompt_text: str | None = None  # with --prompt: the prompt as the tokenizer shows it
    check_lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    table: bool = True
    ids: bool = False

    @property
    def generated(self) -> list[int]:
        return [s.next_token for s in self.steps]

    @property
    def text(self) -> str | None:
        """The prompt's text and the generated text (None on token ids)."""
        if self.prompt_text is None:
            return None
        return self.prompt_text + "".join(s.text for s in self.steps)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def mismatch(self) -> str | None:
        return None if self.passed else "generate: FAIL: " + " | ".join(self.failures)

    def header(self) -> str:
        checked = "checked against transformers" if self.checked else "not checked"
        return (f"generate: {self.model} ({self.origin}), prompt {self.prompt_tokens} tokens, "
                f"up to {self.max_steps} decode steps, on {self.backend}; {checked}")

    def tail(self) -> list[str]:
        """The lines after the streamed text: pass table, checks, ``generated:``."""
        lines = [s.line for s in self.steps if self.table or s.passed is False]
        lines += self.check_lines
        if self.prompt_text is None or self.ids:
            lines.append(f"  generated: {self.generated}  ({self.seconds:.1f} s in all)")
        else:
            lines.append(f"  generated: {len(self.generated)} tokens ({self.seconds:.1f} s in all)")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return json_safe({
            "model": self.model, "weights": self.origin, "backend": self.backend,
            "prompt_tokens": self.prompt_tokens, "max_steps": self.max_steps,
            "checked": self.checked, "pass": self.passed, "failures": list(self.failures),
            "generated": self.generated, "text": self.text, "seconds": self.seconds,
            "steps": [asdict(s) for s in self.steps], "checks": list(self.check_lines),
        })

    def render(self) -> str:
        lines = [self.header()]
        if self.text is not None:
            lines.append(self.text)
        return "\n".join(lines + self.tail())
