"""``generate``: greedy generation with our programs, each pass and the tokens checked against
transformers.

Streaming: ``stream`` receives the command's output as it is produced (the ``generate:`` line,
the prompt's text once the prefill ran, then each decoded piece, then the closing lines); the
pieces concatenated are ``report.render() + "\\n"``. ``on_step`` receives each pass as a
:class:`~.reports.GenerationStep` as soon as it ran (its verdict included with a live golden).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError
from .option_checks import check_positions, check_seed
from .reports import GenerationReport, GenerationStep, write_report_json
from .runtime import build_backend, quiet_transformers

#: Default decode steps with a prompt: a story of a few paragraphs (stops earlier at EOS).
PROMPT_STEPS = 200
#: Default decode steps on token ids.
TOKEN_STEPS = 4
#: Default golden-convention prompt ids without a prompt.
DEFAULT_TOKENS = 8


def generate(model: str, *, prompt: str | None = None, chat: bool = False,
             tokens: int | None = None, steps: int | None = None, weights: str = "hub",
             golden: str = "live", seed: int = 0,
             quiet: bool = False, verbose: bool = False, ids: bool = False,
             json: Path | str | None = None, force: bool = False, backend: str = "numpy",
             device: str = "auto", stream: Callable[[str], None] | None = None,
             on_step: Callable[[GenerationStep], None] | None = None) -> GenerationReport:
    """Prefill the prompt (``prompt``'s tokens, or ``tokens`` golden-convention ids, default 8),
    then up to ``steps`` greedy decode steps on the KV cache our programs wrote (default 200 with
    a prompt, else 4), stopping at EOS.

    With ``golden="live"`` every pass's logits are judged against transformers fed the same
    tokens, and the tokens against transformers' own greedy generation (``report.failures`` names
    the first step that differs). ``ids``: ``render()`` lists the generated token ids after a
    prompt's text too. ``json``: also write ``report.to_dict()`` there (``force`` replaces a file
    that is not JSON). Bad options raise a UserError before anything runs."""
    from ..model.registry import resolve_model
    from ..model.checks.report import check_json_target
    from ..model.weights.checkpoint import get_checkpoint

    if golden not in ("live", "none"):
        raise UserError(f"--golden {golden}: expected live or none")
    if prompt is not None and tokens is not None:
        raise UserError("--prompt and --tokens: give one of them "
                        "(--tokens means synthetic prompt ids)")
    if chat and prompt is None:
        raise UserError("--chat: needs --prompt")
    if tokens is not None and tokens < 1:
        raise UserError(f"--tokens {tokens}: expected a positive integer")
    if steps is not None and steps < 0:
        raise UserError(f"--steps {steps}: expected a non-negative integer")
    if steps is None:
        steps = PROMPT_STEPS if prompt is not None else TOKEN_STEPS
    check_seed(seed)
    json_path = Path(json) if json is not None else None
    if json_path is not None:
        check_json_target(json_path, force=force)
    array_backend = build_backend(backend, device)
    spec = resolve_model(model)
    if prompt is None:  # a prompt's length is checked once it is tokenised
        check_positions(spec.config, spec.name, past=0, tokens=(tokens or DEFAULT_TOKENS) + steps,
                        what="--tokens + --steps")
    ckpt = get_checkpoint(spec, weights, seed=seed)
    report = _run(ckpt, spec, weights, prompt, chat, tokens, steps, golden == "live", quiet,
                  verbose, ids, array_backend, stream or (lambda text: None), on_step)
    if json_path is not None:
        write_report_json(json_path, report.to_dict())
    return report


def _run(ckpt: Any, spec: Any, weights: str, prompt: str | None, chat: bool, tokens: int | None,
         steps: int, check: bool, quiet: bool, verbose: bool, ids: bool, backend: Any,
         emit: Callable[[str], None], on_step: Callable[[GenerationStep], None] | None
         ) -> GenerationReport:
    from ..model.emit.generation import generate as run_generation
    from ..model.inputs.tokenizer import eos_token_ids, load_tokenizer

    tokenizer = load_tokenizer(ckpt, spec if prompt is not None else None)
    prompt_ids = None
    if prompt is not None:
        if tokenizer is None:
            raise UserError(f"--prompt: the checkpoint {getattr(ckpt, 'origin', '')} has no "
                            f"tokenizer (no tokenizer.json / tokenizer.model in {ckpt.directory}); "
                            "use --tokens M for token ids")
        prompt_ids = tokenizer.encode(prompt, chat=chat)
        check_positions(ckpt.config, spec.name, past=0, tokens=len(prompt_ids) + steps,
                        what=f"--prompt ({len(prompt_ids)} tokens) + --steps")
    elif tokens is None:
        tokens = DEFAULT_TOKENS
    eos = eos_token_ids(ckpt, tokenizer)
    if check and (quiet or not sys.stderr.isatty()):
        quiet_transformers()

    report = GenerationReport(
        model=spec.name, origin=str(getattr(ckpt, "origin", weights)), backend=backend.describe(),
        prompt_tokens=len(prompt_ids) if prompt_ids is not None else int(tokens), max_steps=steps,
        checked=check, table=prompt_ids is None or verbose, ids=ids)
    emit(report.header() + "\n")
    text = tokenizer.stream(prompt_ids) if prompt_ids is not None else None
    judged = _StepJudge()

    def step_done(s: Any) -> None:
        piece = ""
        if text is not None:
            if not report.steps:  # the prompt after the first pass (and any loading messages)
                report.prompt_text = text.shown
                emit(text.shown)
            if s.next_token not in eos:
                piece = text.push(s.next_token)
                emit(piece)
        step = judged.step(s, piece)
        report.steps.append(step)
        if on_step is not None:
            on_step(step)

    start = time.perf_counter()
    result = run_generation(ckpt, spec.name, tokens, steps, golden=check, progress=step_done,
                            backend=backend, prompt_ids=prompt_ids, eos_ids=eos)
    report.seconds = time.perf_counter() - start
    if text is not None:
        emit("\n")
    report.failures = list(judged.failures)
    report.check_lines = judged.summary(len(report.steps))
    if check:
        line, failure = _greedy_check(ckpt, result, prompt_ids, report.prompt_tokens, steps, eos,
                                      tokenizer)
        report.check_lines.append(line)
        report.failures += [failure] if failure else []
    emit("\n".join(report.tail()) + "\n")
    return report


class _StepJudge:
    """Judges each pass against transformers fed our tokens (the pass rule of model/checks/report.py)
    and keeps the totals of the ``check:`` summary line."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.near = 0
        self.worst = 0.0
        self.closing = 0.0
        self.checked = False

    def step(self, s: Any, piece: str) -> GenerationStep:
        from ..model.checks.report import judge

        what = "prefill" if s.step == 0 else f"step {s.step}"
        shown = s.tokens if len(s.tokens) <= 4 else str(s.tokens[:4])[:-1] + ", ...]"
        line = (f"  {what:>8}: past {s.past:>4}, in {shown} -> next {s.next_token}  "
                f"({s.seconds:.2f} s, LX peak {s.max_node_lx / 1024:.0f} KiB)")
        passed = None
        if s.metrics is not None:
            self.checked = True
            verdict = judge(s.metrics)
            passed = verdict.passed
            self.near += len(verdict.near_ties)
            self.worst = max(self.worst, float(s.metrics.max_abs_rel))
            self.closing = max(self.closing, float(s.metrics.max_closing))
            line += f"  [{'ok' if verdict.passed else 'FAIL'}] {s.metrics.summary()}"
            if verdict.near_ties:
                rows = [t.row for t in verdict.near_ties]
                line += f"; near-tie rows {rows} (band {verdict.band:.3g})"
            if not verdict.passed:
                self.failures.append(f"{what}: " + "; ".join(verdict.reasons))
        return GenerationStep(step=s.step, past=s.past, tokens=[int(t) for t in s.tokens],
                              next_token=int(s.next_token), seconds=float(s.seconds),
                              max_node_lx=int(s.max_node_lx), text=piece, line=line, passed=passed)

    def summary(self, passes: int) -> list[str]:
        if not self.checked:
            return []
        status = ("all within the pass rule" if not self.failures
                  else f"{len(self.failures)} outside the pass rule")
        return [f"check: {passes} passes against transformers fed our tokens: {status} "
                f"(worst max_abs/max|golden| {self.worst:.3g}, our error closes a golden top-1 "
                f"margin by at most {self.closing:.3g}, {self.near} near-tie rows)"]


def _greedy_check(ckpt: Any, result: Any, prompt_ids: list[int] | None, n_prompt: int, steps: int,
                  eos: Any, tokenizer: Any) -> tuple[str, str | None]:
    """Our tokens against transformers' own greedy generation: the ``check:`` line and the
    failure (None: identical, or a near-tie)."""
    from ..model.checks.greedy_golden import first_divergence, greedy_golden
    from ..model.inputs.runtime_inputs import golden_token_ids

    ids = prompt_ids if prompt_ids is not None else \
        [int(t) for t in golden_token_ids(n_prompt, ckpt.config.vocab_size)]
    theirs = greedy_golden(ckpt, ids, steps + 1, eos)
    ours = result.generated
    div = first_divergence(ours, theirs)
    if div is None:
        return (f"check: the {len(ours)} tokens are identical to transformers' greedy generation "
                f"(model.generate, do_sample=False)"), None

    def name(token: int | None) -> str:
        if token is None:
            return "nothing (it had stopped at EOS)"
        return f"{token} {tokenizer.token_text(token)}" if tokenizer is not None else str(token)

    where = "prefill" if div.step == 0 else f"step {div.step}"
    text = (f"first divergence from transformers' greedy generation at generated token {div.step} "
            f"({where}): ours {name(div.ours)}")
    if div.ours is not None and div.theirs is not None:
        text += (f" (golden logit {div.ours_logit:.4f}), transformers {name(div.theirs)} (golden "
                 f"logit {div.theirs_logit:.4f}): golden margin {div.margin:.4g}, near-tie band "
                 f"{div.band:.4g}")
    else:
        text += f", transformers {name(div.theirs)}"
    if div.near_tie:
        return (f"check: {text}: a near-tie, accepted; the continuations after it are not "
                "compared"), None
    return f"check: FAIL: {text}", text
