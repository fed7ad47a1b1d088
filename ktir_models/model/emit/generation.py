"""Greedy generation with our programs: one prefill pass, then decode steps on the KV cache the
programs wrote; optionally each pass checked against transformers run with its own cache.

Also the decode-after-prefill forward (:func:`forward_after_prefill`): the prefix tokens run
through our prefill program first, so the cache the measured pass reads is the one our program
wrote, never host-made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..emitted import emitted_fields
from ..inputs.runtime_inputs import golden_token_ids
from ..manifest import Manifest, load_manifest
from .api import cached_program
from .session import PassOutput, Session


@dataclass
class StepResult:
    """One pass of a generation: which tokens went in, the logits of the last row, the chosen
    token, and (with a live golden) the metrics against transformers."""

    step: int  # 0 = prefill
    past: int
    tokens: list[int]
    logits: np.ndarray  # f16 [m, vocab]
    next_token: int
    seconds: float
    max_node_lx: int
    metrics: Any | None = None
    golden: np.ndarray | None = None  # f32 [m, vocab] from transformers, with a live golden


@dataclass
class Generation:
    steps: list[StepResult] = field(default_factory=list)

    @property
    def generated(self) -> list[int]:
        return [s.next_token for s in self.steps]


def generate(ckpt: Any, name: str, tokens: int | None, steps: int, golden: bool = False,
             progress: Callable[[StepResult], None] | None = None, backend: Any = None,
             prompt_ids: list[int] | None = None, eos_ids: set[int] | frozenset[int] = frozenset()) -> Generation:
    """Prefill the prompt, then up to ``steps`` greedy decode steps (``steps + 1`` new tokens at most).

    The prompt is ``prompt_ids`` (a tokenised text) or else ``tokens`` golden-convention ids. The
    prefill program (static, past 0, m = the prompt's length) and one decode program with a dynamic
    position share the session's KV cache of capacity ``len(prompt) + steps``. Generation stops
    after the first token in ``eos_ids``. With ``golden``, transformers runs the same token sequence
    (ours, so a differing argmax does not derail the comparison) with its own cache and every pass's
    logits are compared. ``backend``: the emulator's array back end (see :class:`~.session.Session`).
    """
    cfg = ckpt.config
    if prompt_ids is not None:
        ids = [int(t) for t in prompt_ids]
    else:
        assert tokens is not None, "generate: give tokens or prompt_ids"
        ids = [int(t) for t in golden_token_ids(tokens, cfg.vocab_size)]
    tokens = len(ids)
    capacity = tokens + steps
    session = Session(ckpt, backend=backend)
    prefill = session.load(cached_program(cfg, "prefill", tokens, 0, capacity=capacity, name=name))
    decode = None
    if steps:
        decode = session.load(cached_program(cfg, "decode", 1, tokens, capacity=capacity,
                                             dynamic_position=True, name=name))
    live = _LiveCache(ckpt) if golden else None

    result = Generation()
    out = session.run(prefill, np.asarray(ids), past=0)
    result.steps.append(_step(0, 0, ids, out, live))
    if progress:
        progress(result.steps[-1])
    for step in range(1, steps + 1):
        if result.steps[-1].next_token in eos_ids:
            break
        past = tokens + step - 1
        token = [result.steps[-1].next_token]
        assert decode is not None
        out = session.run(decode, np.asarray(token), past=past)
        result.steps.append(_step(step, past, token, out, live))
        if progress:
            progress(result.steps[-1])
    return result


def _step(step: int, past: int, ids: list[int], out: PassOutput, live: "_LiveCache | None") -> StepResult:
    logits = out.logits
    res = StepResult(step, past, ids, logits, int(np.argmax(logits[-1].astype(np.float32))), out.seconds,
                     max(out.node_lx) if out.node_lx else 0)
    if live is not None:
        from ..checks.golden import compare

        res.golden = live.run(ids)
        res.metrics = compare(logits.astype(np.float32), res.golden)
    return res


class _LiveCache:
    """transformers (f32, eager) fed token by token with its own KV cache."""

    def __init__(self, ckpt: Any) -> None:
        from ..checks.golden import load_transformers_model

        self.model = load_transformers_model(ckpt)
        self.cache = None
        self.past = 0

    def run(self, ids: list[int]) -> np.ndarray:
        import torch

        from ..checks.golden import cache_kwarg, output_cache

        x = torch.as_tensor(np.asarray(ids, dtype=np.int64).reshape(1, -1))
        positions = torch.arange(self.past, self.past + x.shape[1]).reshape(1, -1)
        kwargs = {} if self.cache is None else {cache_kwarg(self.model): self.cache}
        with torch.no_grad():
            out = self.model(x, position_ids=positions, use_cache=True, **kwargs)
        self.cache = output_cache(out)
        self.past += x.shape[1]
        return out.logits[0].float().numpy()


def forward_after_prefill(ckpt: Any, name: str, mode: str, tokens: int, past: int,
                          backend: Any = None) -> tuple[PassOutput, list[int]]:
    """Run our prefill program over the ``past`` golden-convention prefix ids, then the pass of
    ``tokens`` ids at positions ``past ..`` on the cache it wrote. Returns that pass's output and
    its token ids (the golden convention: ids of positions ``past .. past+tokens-1``)."""
    cfg = ckpt.config
    capacity = past + tokens
    session = Session(ckpt, backend=backend)
    ids = [int(t) for t in golden_token_ids(tokens, cfg.vocab_size, start=past)]
    if past:
        prefix = session.load(cached_program(cfg, "prefill", past, 0, capacity=capacity, name=name))
        session.run(prefix, golden_token_ids(past, cfg.vocab_size), past=0)
    program = session.load(cached_program(cfg, mode, tokens, past, capacity=capacity, name=name))
    return session.run(program, np.asarray(ids), past=past), ids


def prefill_cache_inputs(ckpt: Any, program: Path | Manifest, backend: Any = None,
                         prefix_ids: np.ndarray | None = None) -> dict[int, np.ndarray]:
    """The KV cache a decode-after-prefill program of ours expects, made by our own prefill.

    For an emitted program with ``past = P > 0`` (``program``: its directory, or its manifest
    already loaded, which is then not read again), run our prefill program (m = P,
    same capacity) over ``prefix_ids`` (default: the golden-convention prefix ids; a real text's
    first P tokens with ``forward --prompt``) and return ``{tensor id: cache}`` for
    every ``prefix_k``/``prefix_v`` tensor of that program (f16 ``[C, kv_dim]``, rows ``>= P``
    zero) — ready to bind as the host values of those tensors. Empty for ``P = 0``. The prefill
    runs on ``backend`` (see :class:`~.session.Session`), the one the measured pass will use.
    """
    manifest = program if isinstance(program, Manifest) else load_manifest(program, host_scalars=True)
    fields = emitted_fields(manifest)
    past, capacity = fields.past, fields.capacity
    if past == 0:
        return {}
    cfg = ckpt.config
    session = Session(ckpt, backend=backend)
    prefill = session.load(cached_program(cfg, "prefill", past, 0, capacity=capacity, name=fields.model))
    if prefix_ids is None:
        prefix_ids = golden_token_ids(past, cfg.vocab_size)
    session.run(prefill, np.asarray(prefix_ids, dtype=np.int64), past=0)
    out: dict[int, np.ndarray] = {}
    for entry in fields.kv_layers:
        k, v = session.cache(entry.layer)
        out[entry.k], out[entry.v] = k, v
    return out
