"""``serve_requests``: schedule, run and check a set of requests (the model layer of ``serve``).

The pool: ``kv_blocks`` blocks (default: the blocks of the ``max_seqs`` largest reservations, so
that ``max_seqs`` sequences can always run together) plus one scratch block. A request whose
reservation exceeds the whole pool can never run: one RequestsError names it. Block tables are
``max_blocks`` wide, the largest reservation. Two step programs share the pool: ``prefill+decode``
(``chunk`` prefill rows and ``max_seqs`` decode rows) for steps with a prefill chunk and
``decode`` (``max_seqs`` rows) for the others, each compiled on first use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...errors import UserError
from ..emit.serving import ServingShape
from . import tables as step_tables_module
from .check import SequenceGoldens, check_rows
from .engine import LoadedStep, ServingEngine
from .pool import BlockPool, blocks_for
from .report import RequestResult, ServeReport, StepRecord
from .requests import Request, RequestsError
from .scheduler import Scheduler, reservation


@dataclass(frozen=True)
class ServeOptions:
    """``max_seqs`` slots, ``block_size`` slots per block, ``kv_blocks`` pool blocks (None:
    default), ``chunk`` prefill rows per step."""

    max_seqs: int
    block_size: int
    kv_blocks: int | None
    chunk: int

    def check(self) -> None:
        for name, value, low, high in (("--max-seqs", self.max_seqs, 1, 64),
                                       ("--block-size", self.block_size, 1, 4096),
                                       ("--chunk", self.chunk, 1, 4096)):
            if not low <= value <= high:
                raise UserError(f"{name} {value}: expected an integer in [{low}, {high}]")
        if self.kv_blocks is not None and not 1 <= self.kv_blocks <= 1_000_000:
            raise UserError(f"--kv-blocks {self.kv_blocks}: expected an integer in [1, 1000000]")


def pool_blocks(requests: list[Request], options: ServeOptions) -> int:
    """The pool size: ``kv_blocks``, checked against every request, or the default."""
    need = {r.id: blocks_for(reservation(r), options.block_size) for r in requests}
    if options.kv_blocks is None:
        return sum(sorted(need.values(), reverse=True)[:options.max_seqs])
    for r in requests:
        if need[r.id] > options.kv_blocks:
            raise RequestsError(
                f"line {r.line}: request {r.id!r} needs {need[r.id]} KV blocks "
                f"({len(r.prompt_ids)} prompt + {r.max_new_tokens} new tokens at block size "
                f"{options.block_size}) but the pool has {options.kv_blocks} (--kv-blocks): it can "
                "never run")
    return options.kv_blocks


def serve_requests(ckpt: Any, name: str, requests: list[Request], options: ServeOptions,
                   golden: bool, backend: Any = None, eos_ids: frozenset[int] = frozenset(),
                   tokenizer: Any = None, rewrite: Callable[[int, str], str] | None = None,
                   progress: Callable[[StepRecord], None] | None = None) -> ServeReport:
    """Serve ``requests`` greedily on the emulator; with ``golden`` check every step and every
    request's tokens against transformers run on each sequence alone (check.py). ``rewrite``
    edits emitted node texts before they are compiled (tests plant mistakes so)."""
    options.check()
    kv_blocks = pool_blocks(requests, options)
    max_blocks = max(blocks_for(reservation(r), options.block_size) for r in requests)
    pool_shape = (options.block_size, kv_blocks + 1, max_blocks)
    shapes = {"prefill+decode": ServingShape(options.chunk, options.max_seqs, *pool_shape),
              "decode": ServingShape(0, options.max_seqs, *pool_shape)}
    cfg = ckpt.config
    window = cfg.features.sliding_window
    engine = ServingEngine(ckpt, name, backend=backend)
    describe = getattr(engine.machine.backend, "describe", None)
    report = ServeReport(name, describe() if callable(describe) else str(backend or "numpy"),
                         {"max_seqs": options.max_seqs, "block_size": options.block_size,
                          "kv_blocks": kv_blocks, "chunk": options.chunk}, golden)
    pool = BlockPool(kv_blocks, options.block_size)
    sched = Scheduler(requests, options.max_seqs, pool, options.chunk, frozenset(eos_ids))
    goldens = SequenceGoldens(ckpt) if golden else None
    loaded: dict[str, LoadedStep] = {}
    token_steps: dict[str, list[int]] = {r.id: [] for r in requests}
    start = time.perf_counter()
    run_seconds = 0.0
    while (plan := sched.plan()) is not None:
        kind = "prefill+decode" if plan.prefill is not None else "decode"
        if kind not in loaded:
            loaded[kind] = engine.load(shapes[kind], rewrite)
        tables = step_tables_module.step_tables(plan, shapes[kind], window)
        t0 = time.perf_counter()
        logits = engine.run(loaded[kind], tables)
        run_seconds += time.perf_counter() - t0
        prefill_rows = len(plan.prefill.ids) if plan.prefill is not None else 0
        record = StepRecord(plan.step, kind, [r.request for r in plan.runs], prefill_rows,
                            len(plan.decodes), pool.in_use)
        next_tokens: dict[str, int | None] = {}
        worst = 0.0
        for run in plan.runs:
            first, n = tables.rows_of[run.request]
            rows = logits[first:first + n]
            prompt = len(_request(requests, run.request).prompt_ids)
            yields = not run.prefill or run.positions[-1] == prompt - 1  # a token comes out
            token = int(np.argmax(rows[-1].astype(np.float32)))
            next_tokens[run.request] = token if yields else None
            if yields:
                token_steps[run.request].append(plan.step)
            if goldens is not None:
                golden_rows = goldens.run(run.request, run.ids, run.positions)
                verdict = check_rows(run.request, rows, golden_rows)
                worst = max(worst, verdict.max_abs_rel)
                if not verdict.passed and not report.failures:
                    report.failures.append(
                        f"step {plan.step}, request {run.request!r} (positions "
                        f"{run.positions[0]}..{run.positions[-1]}, row {verdict.row} of its {n}): "
                        f"logits differ from transformers running it alone: "
                        f"{'; '.join(verdict.reasons)}; ours token {verdict.ours} (golden logit "
                        f"{verdict.ours_logit:.4f}), transformers token {verdict.theirs} (golden "
                        f"logit {verdict.theirs_logit:.4f})")
        record.max_abs_rel = worst if goldens is not None else None
        report.steps.append(record)
        if progress is not None:
            progress(record)
        for s in sched.advance(plan, next_tokens):
            if goldens is not None:
                goldens.forget(s.id)
        if report.failures:
            break  # the first differing step is named; later steps would only repeat it
    report.lx_high_water = engine.lx_high_water
    report.seconds = {"compile": engine.compile_seconds, "steps": run_seconds,
                      "total": time.perf_counter() - start}
    by_id = {s.id: s for s in sched.done + [s for s in sched.slots if s is not None]}
    for r in requests:
        s = by_id.get(r.id)
        tokens = list(s.tokens) if s is not None else []
        text = None
        if tokenizer is not None and r.text is not None:
            text = _generated_text(tokenizer, r.prompt_ids, tokens)
        report.requests.append(RequestResult(
            r.id, list(r.prompt_ids), tokens, s.finish if s is not None else None,
            s.first_step if s is not None else None, s.last_step if s is not None else None,
            list(s.blocks) if s is not None else [], token_steps[r.id], text, r.text))
    if golden and not report.failures:
        _check_greedy(ckpt, requests, report, frozenset(eos_ids))
    return report


def _generated_text(tokenizer: Any, prompt: tuple[int, ...], tokens: list[int]) -> str:
    """The text the tokens add to the prompt's (decoded together: a word-initial space survives)."""
    before = tokenizer.decode(list(prompt))
    full = tokenizer.decode(list(prompt) + tokens)
    return full[len(before):] if full.startswith(before) else tokenizer.decode(tokens)


def _request(requests: list[Request], rid: str) -> Request:
    return next(r for r in requests if r.id == rid)


def _check_greedy(ckpt: Any, requests: list[Request], report: ServeReport,
                  eos_ids: frozenset[int]) -> None:
    """Every request's tokens against transformers' greedy generation of its prompt alone."""
    from ..checks.greedy_golden import first_divergence, greedy_golden

    for r in requests:
        result = report.request(r.id)
        theirs = greedy_golden(ckpt, list(r.prompt_ids), r.max_new_tokens, eos_ids)
        div = first_divergence(result.tokens, theirs)
        if div is None:
            continue
        steps = result.token_steps
        step = steps[div.step] if div.step < len(steps) else result.last_step
        what = (f"step {step}, request {r.id!r}, token {div.step}: ours {div.ours} (golden logit "
                f"{div.ours_logit:.4f}), transformers' greedy generation {div.theirs} (golden "
                f"logit {div.theirs_logit:.4f})")
        if div.near_tie:
            report.notes.append(f"{what}: a near-tie (margin {div.margin:.3g} <= band "
                                f"{div.band:.3g}), accepted")
        else:
            report.failures.append(f"{what}: the tokens differ")
