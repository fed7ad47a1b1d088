"""What ``serve`` reports: per request, per step, the verdict; as text and as JSON.

JSON (``--json``): ``{"passed", "model", "backend", "options", "requests": [{"id", "prompt_ids",
"tokens", "text"?, "finish": "eos"|"length", "first_step", "last_step", "blocks", "token_steps"}],
"steps": [{"step", "program", "sequences", "prefill_rows", "decode_rows", "blocks_in_use",
"max_abs_rel"}], "failures": [...], "notes": [...], "checked", "seconds", "lx_high_water"}``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RequestResult:
    """One served request: its prompt, generated tokens (and text), why it stopped, the steps it
    ran in, the pool blocks it held, and the step that produced each token."""

    id: str
    prompt_ids: list[int]
    tokens: list[int]
    finish: str | None
    first_step: int | None
    last_step: int | None
    blocks: list[int]
    token_steps: list[int]
    text: str | None = None
    prompt_text: str | None = None


@dataclass
class StepRecord:
    """One step: which program ran (``prefill+decode`` or ``decode``), the sequences in it, the
    real rows of each kind, the pool blocks in use, and the worst ``max|d|/max|golden|`` of its
    sequences (None unchecked)."""

    step: int
    program: str
    sequences: list[str]
    prefill_rows: int
    decode_rows: int
    blocks_in_use: int
    max_abs_rel: float | None = None


@dataclass
class ServeReport:
    """The outcome of one serve run. ``passed``: every checked step and every request's tokens
    agree with transformers (always True with the check off, ``checked`` False)."""

    model: str
    backend: str
    options: dict[str, Any]
    checked: bool
    requests: list[RequestResult] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    lx_high_water: int = 0  # bytes: the largest per-core LX peak of any node the run executed

    @property
    def passed(self) -> bool:
        return not self.failures

    def request(self, rid: str) -> RequestResult:
        return next(r for r in self.requests if r.id == rid)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"passed": self.passed, "model": self.model, "backend": self.backend,
                               "options": dict(self.options), "checked": self.checked}
        reqs = []
        for r in self.requests:
            d = asdict(r)
            for key in ("text", "prompt_text"):
                if d[key] is None:
                    del d[key]
            reqs.append(d)
        out["requests"] = reqs
        out["steps"] = [asdict(s) for s in self.steps]
        out["failures"] = list(self.failures)
        out["notes"] = list(self.notes)
        out["seconds"] = dict(self.seconds)
        out["lx_high_water"] = self.lx_high_water
        return out

    def render(self) -> str:
        o = self.options
        checked = "checked against transformers (each sequence alone)" if self.checked \
            else "not checked"
        lines = [f"serve: {self.model} on {self.backend}: {len(self.requests)} requests, "
                 f"max-seqs {o['max_seqs']}, block size {o['block_size']}, {o['kv_blocks']} KV "
                 f"blocks, chunk {o['chunk']}; {checked}"]
        for r in self.requests:
            shown = f"{r.prompt_ids} -> {r.tokens}"
            if r.text is not None and r.prompt_text is not None:
                shown = repr(r.prompt_text + r.text)
            lines.append(f"  {r.id}: steps {r.first_step}..{r.last_step}, {len(r.tokens)} tokens "
                         f"({r.finish}), blocks {r.blocks}: {shown}")
        lines.append("  step  program          prefill  decode  blocks  max|d|/max|g|  sequences")
        for s in self.steps:
            rel = "-" if s.max_abs_rel is None else f"{s.max_abs_rel:.2e}"
            lines.append(f"  {s.step:>4}  {s.program:<15}  {s.prefill_rows:>7}  "
                         f"{s.decode_rows:>6}  {s.blocks_in_use:>6}  {rel:>13}  "
                         f"{' '.join(s.sequences)}")
        lines += [f"note: {n}" for n in self.notes]
        secs = ", ".join(f"{k} {v:.2f} s" for k, v in self.seconds.items())
        if self.failures:
            lines += [f"FAIL: {f}" for f in self.failures]
        elif self.checked:
            lines.append(f"check: PASS (every step's logits and every request's tokens); {secs}")
        else:
            lines.append(f"ran (not checked); {secs}")
        return "\n".join(lines)
