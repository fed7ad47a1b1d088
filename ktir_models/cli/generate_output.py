"""What `ktir-models generate` prints: the streamed text (or the per-pass table on token ids), the
per-pass verdicts, and the comparison with transformers' own greedy generation.

Output contract (tests read it): the first line starts ``generate:``; with ``--prompt`` the next
line is the prompt's text followed by the generated text, streamed token by token as our programs
produce it; then ``check:`` lines (one for the passes' logits, one for the tokens against
transformers' greedy generation) and the ``generated:`` ids. Without ``--prompt`` one line per pass
(``prefill`` / ``step N``) with ``[ok]`` or ``[FAIL]``. A failed check is also returned, so that
the command exits 1.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ..errors import UserError

DEFAULT_TOKENS = 8


def run_and_print(ckpt: Any, spec: Any, weights: str, prompt: str | None, chat: bool, tokens: int | None,
                  steps: int, check: bool, quiet: bool, verbose: bool, backend: Any) -> list[str]:
    """Run the generation, print as it goes; return the failures (empty: pass)."""
    from ..model.emit.generation import generate
    from ..model.tokenizer import eos_token_ids, load_tokenizer

    tokenizer = load_tokenizer(ckpt, spec if prompt is not None else None)
    prompt_ids = None
    if prompt is not None:
        if tokenizer is None:
            raise UserError(f"--prompt: the checkpoint {getattr(ckpt, 'origin', '')} has no tokenizer (no "
                            f"tokenizer.json / tokenizer.model in {ckpt.directory}); use --tokens M for token ids")
        prompt_ids = tokenizer.encode(prompt, chat=chat)
        from .option_checks import check_positions

        check_positions(ckpt.config, spec.name, past=0, tokens=len(prompt_ids) + steps,
                        what=f"--prompt ({len(prompt_ids)} tokens) + --steps")
    elif tokens is None:
        tokens = DEFAULT_TOKENS
    eos = eos_token_ids(ckpt, tokenizer)
    n_prompt = len(prompt_ids) if prompt_ids is not None else tokens
    if check and (quiet or not sys.stderr.isatty()):
        from .model_commands import quiet_transformers

        quiet_transformers()

    checked = "checked against transformers" if check else "not checked"
    print(f"generate: {spec.name} ({getattr(ckpt, 'origin', weights)}), prompt {n_prompt} tokens, up to {steps} "
          f"decode steps, on {backend.describe()}; {checked}", flush=True)
    stream = tokenizer.stream(prompt_ids) if prompt_ids is not None else None
    bar = None
    if stream is None and not quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=steps + 1, unit="pass", file=sys.stderr, leave=False, desc="generate")
    started = []

    def on_step(s) -> None:
        if bar is not None:
            bar.update(1)
        if stream is None:
            return
        if not started:  # the prompt once the first pass is done (after any model loading messages)
            print(stream.shown, end="", flush=True)
            started.append(True)
        if s.next_token not in eos:
            print(stream.push(s.next_token), end="", flush=True)

    start = time.perf_counter()
    try:
        result = generate(ckpt, spec.name, tokens, steps, golden=check, progress=on_step, backend=backend,
                          prompt_ids=prompt_ids, eos_ids=eos)
    finally:
        if bar is not None:
            bar.close()
    total = time.perf_counter() - start
    if stream is not None:
        print(flush=True)

    failures = _pass_checks(result, table=stream is None or verbose)
    if check:
        failures += _greedy_check(ckpt, result, prompt_ids, n_prompt, steps, eos, tokenizer)
    print(f"  generated: {result.generated}  ({total:.1f} s in all)")
    return failures


def _pass_checks(result: Any, table: bool) -> list[str]:
    """Judge every pass against transformers fed our tokens; print the table or a summary."""
    from ..model.report import judge

    failures, near, worst, closing = [], 0, 0.0, 0.0
    for s in result.steps:
        what = "prefill" if s.step == 0 else f"step {s.step}"
        shown = s.tokens if len(s.tokens) <= 4 else str(s.tokens[:4])[:-1] + ", ...]"
        line = (f"  {what:>8}: past {s.past:>4}, in {shown} -> next {s.next_token}  ({s.seconds:.2f} s, "
                f"LX peak {s.max_node_lx / 1024:.0f} KiB)")
        verdict = None
        if s.metrics is not None:
            verdict = judge(s.metrics)
            near += len(verdict.near_ties)
            worst = max(worst, float(s.metrics.max_abs_rel))
            closing = max(closing, float(s.metrics.max_closing))
            line += f"  [{'ok' if verdict.passed else 'FAIL'}] {s.metrics.summary()}"
            if verdict.near_ties:
                line += f"; near-tie rows {[t.row for t in verdict.near_ties]} (band {verdict.band:.3g})"
            if not verdict.passed:
                failures.append(f"{what}: " + "; ".join(verdict.reasons))
        if table or (verdict is not None and not verdict.passed):
            print(line)
    if result.steps and result.steps[0].metrics is not None:
        status = "all within the pass rule" if not failures else f"{len(failures)} outside the pass rule"
        print(f"check: {len(result.steps)} passes against transformers fed our tokens: {status} "
              f"(worst max_abs/max|golden| {worst:.3g}, our error closes a golden top-1 margin by at most "
              f"{closing:.3g}, {near} near-tie rows)")
    return failures


def _greedy_check(ckpt: Any, result: Any, prompt_ids: list[int] | None, n_prompt: int, steps: int, eos,
                  tokenizer: Any) -> list[str]:
    """Our tokens against transformers' own greedy generation; print the verdict."""
    from ..model.greedy_golden import first_divergence, greedy_golden
    from ..model.inputs import golden_token_ids

    ids = prompt_ids if prompt_ids is not None else \
        [int(t) for t in golden_token_ids(n_prompt, ckpt.config.vocab_size)]
    theirs = greedy_golden(ckpt, ids, steps + 1, eos)
    ours = result.generated
    div = first_divergence(ours, theirs)
    if div is None:
        print(f"check: the {len(ours)} tokens are identical to transformers' greedy generation "
              f"(model.generate, do_sample=False)")
        return []

    def name(token: int | None) -> str:
        if token is None:
            return "nothing (it had stopped at EOS)"
        return f"{token} {tokenizer.token_text(token)}" if tokenizer is not None else str(token)

    where = "prefill" if div.step == 0 else f"step {div.step}"
    text = (f"first divergence from transformers' greedy generation at generated token {div.step} ({where}): "
            f"ours {name(div.ours)}")
    if div.ours is not None and div.theirs is not None:
        text += (f" (golden logit {div.ours_logit:.4f}), transformers {name(div.theirs)} (golden logit "
                 f"{div.theirs_logit:.4f}): golden margin {div.margin:.4g}, near-tie band {div.band:.4g}")
    else:
        text += f", transformers {name(div.theirs)}"
    if div.near_tie:
        print(f"check: {text}: a near-tie, accepted; the continuations after it are not compared")
        return []
    print(f"check: FAIL: {text}")
    return [text]
