"""The host scheduler of ``serve``: continuous batching with chunked prefill.

Each step:

1. **admit** waiting requests in arrival order (file order among equal arrivals) once their
   ``arrival`` step has come, while a slot is free and the pool has the blocks of the request's
   whole reservation (prompt + max_new_tokens - 1 cache slots: the last generated token is never
   fed back). First come, first served: a
   request that does not fit yet holds back the ones behind it.
2. **plan** one prefill chunk (the earliest admitted sequence whose prompt is not fully cached:
   its next ``chunk`` prompt tokens at their positions) and one decode row for every sequence
   that has produced a token and not finished (its last token at the next position).
3. after the step ran, **advance**: a chunk that completes its prompt yields the sequence's first
   token (the argmax of its last row), a decode row the next; a sequence stops at an EOS token or
   at max_new_tokens, frees its blocks and its slot.

Steps with nothing to run (every sequence waiting for its arrival) are skipped: the step counter
jumps to the next arrival.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .pool import BlockPool, PoolExhausted, blocks_for
from .requests import Request
from .tables import RowRun, StepPlan


@dataclass
class Sequence:
    """A request admitted into slot ``slot``, holding ``blocks``; ``cached`` prompt tokens are in
    the cache; ``tokens`` generated so far."""

    request: Request
    slot: int
    blocks: list[int]
    admitted: int
    cached: int = 0
    tokens: list[int] = field(default_factory=list)
    finish: str | None = None
    first_step: int | None = None
    last_step: int | None = None

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def prompt(self) -> tuple[int, ...]:
        return self.request.prompt_ids


def reservation(request: Request) -> int:
    """Cache slots a request can use: its prompt and every generated token but the last."""
    return len(request.prompt_ids) + request.max_new_tokens - 1


class Scheduler:
    """State of one serve run: waiting requests, the slots, the pool."""

    def __init__(self, requests: list[Request], max_seqs: int, pool: BlockPool, chunk: int,
                 eos_ids: frozenset[int] = frozenset()) -> None:
        self.waiting = sorted(requests, key=lambda r: r.arrival)  # stable: file order among equals
        self.slots: list[Sequence | None] = [None] * max_seqs
        self.pool = pool
        self.chunk = chunk
        self.eos_ids = eos_ids
        self.done: list[Sequence] = []
        self.step = 0

    @property
    def finished(self) -> bool:
        return not self.waiting and all(s is None for s in self.slots)

    def active(self) -> list[Sequence]:
        return sorted((s for s in self.slots if s is not None), key=lambda s: s.admitted)

    def admit(self) -> None:
        while self.waiting and self.waiting[0].arrival <= self.step and None in self.slots:
            req = self.waiting[0]
            try:
                need = blocks_for(reservation(req), self.pool.block_size)
                blocks = self.pool.allocate(req.id, need)
            except PoolExhausted:
                return
            self.waiting.pop(0)
            slot = self.slots.index(None)
            self.slots[slot] = Sequence(req, slot, blocks, admitted=self.step)

    def plan(self) -> StepPlan | None:
        """Admit, then the next step's plan (None when every request has finished). Skips steps
        where nothing can run."""
        while not self.finished:
            self.admit()
            active = self.active()
            if not active:
                head = self.waiting[0]
                if head.arrival <= self.step:  # every block is free: pool_blocks() rules this out
                    raise AssertionError(f"request {head.id!r} cannot start while nothing runs")
                self.step = head.arrival
                continue
            prefill = None
            decodes = []
            for s in active:
                if s.cached < len(s.prompt):
                    if prefill is None:
                        n = min(self.chunk, len(s.prompt) - s.cached)
                        prefill = self._run(s, s.prompt[s.cached:s.cached + n], s.cached, True)
                elif s.finish is None:
                    at = len(s.prompt) + len(s.tokens) - 1
                    decodes.append(self._run(s, (s.tokens[-1],), at, False))
            return StepPlan(self.step, prefill, tuple(decodes))
        return None

    def _run(self, s: Sequence, ids, start: int, prefill: bool) -> RowRun:
        if s.first_step is None:
            s.first_step = self.step
        positions = tuple(range(start, start + len(ids)))
        return RowRun(s.id, tuple(ids), positions, tuple(s.blocks), prefill, s.slot)

    def advance(self, plan: StepPlan, next_tokens: dict[str, int | None]) -> list[Sequence]:
        """Apply the step's outcome (``next_tokens[request]``: the token its last row chose, None
        for a prefill chunk that does not end the prompt); returns the sequences that finished."""
        ended = []
        for run in plan.runs:
            s = self._by_id(run.request)
            assert s is not None and s.id == run.request
            if run.prefill:
                s.cached += len(run.ids)
            token = next_tokens.get(run.request)
            if token is None:
                continue
            s.tokens.append(int(token))
            if token in self.eos_ids:
                s.finish = "eos"
            elif len(s.tokens) >= s.request.max_new_tokens:
                s.finish = "length"
            if s.finish is not None:
                s.last_step = self.step
                self.pool.free(s.id, s.blocks)
                self.slots[s.slot] = None
                self.done.append(s)
                ended.append(s)
        self.step += 1
        return ended

    def _by_id(self, request: str) -> Sequence | None:
        return next((s for s in self.slots if s is not None and s.id == request), None)
