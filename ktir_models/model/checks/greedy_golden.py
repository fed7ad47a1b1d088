"""transformers' own greedy generation, and where ours first departs from it.

``generate`` checks every pass's logits against transformers fed *our* tokens (each pass judged
by the pass rule). This module adds the check a user reads: the token sequence transformers itself
generates (``model.generate(do_sample=False)``, its own KV cache, its own stopping at EOS) against
ours, token by token. At the first step where they differ, :class:`Divergence` names both tokens
with their golden logits at that step and the golden's margin between them, and says whether the
margin lies within the pass rule's near-tie band (then the step is a near-tie the f16 numerics
can explain: reported, accepted, and the two continuations are no longer comparable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GreedyGolden:
    """transformers' greedy continuation: ``tokens[s]`` and the logits ``[vocab]`` it chose from."""

    tokens: list[int]
    logits: list[np.ndarray]


@dataclass(frozen=True)
class Divergence:
    """The first step where our token differs from transformers' greedy token."""

    step: int  # index into the generated tokens (0 = the token the prefill pass chose)
    ours: int | None  # None: we had stopped (EOS) before this step
    theirs: int | None  # None: transformers had stopped (EOS) before this step
    ours_logit: float  # golden logits at that step
    theirs_logit: float
    margin: float  # theirs_logit - ours_logit
    band: float  # report.NEAR_TIE_REL * max|golden logits of that step|

    @property
    def near_tie(self) -> bool:
        return self.ours is not None and self.theirs is not None and self.margin <= self.band


def greedy_golden(ckpt: Any, prompt_ids: list[int], new_tokens: int, eos_ids) -> GreedyGolden:
    """Up to ``new_tokens`` greedy tokens of transformers (f32, eager) after ``prompt_ids``,
    stopping after a token in ``eos_ids`` (none given: exactly ``new_tokens``)."""
    import torch

    from .golden import load_transformers_model

    model = load_transformers_model(ckpt)
    x = torch.as_tensor(np.asarray(prompt_ids, dtype=np.int64).reshape(1, -1))
    eos = sorted(int(i) for i in eos_ids)
    with torch.no_grad():
        out = model.generate(
            x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=new_tokens,
            min_new_tokens=0, eos_token_id=eos or None, pad_token_id=eos[0] if eos else 0,
            output_logits=True, return_dict_in_generate=True, use_cache=True,
            # transformers would otherwise read these from the checkpoint's generation_config
            temperature=None, top_p=None, top_k=None,
        )
    tokens = [int(t) for t in out.sequences[0, x.shape[1]:]]
    logits = [row[0].float().numpy() for row in out.logits]
    if eos:  # keep tokens up to the first EOS (generate pads nothing for one sequence, but be exact)
        for i, t in enumerate(tokens):
            if t in eos:
                tokens, logits = tokens[: i + 1], logits[: i + 1]
                break
    return GreedyGolden(tokens, logits)


def first_divergence(ours: list[int], golden: GreedyGolden) -> Divergence | None:
    """The first step where ``ours`` and ``golden.tokens`` differ, or None when they are equal
    (same tokens, same length)."""
    from .report import NEAR_TIE_REL

    n = min(len(ours), len(golden.tokens))
    for s in range(n):
        if ours[s] != golden.tokens[s]:
            row = golden.logits[s]
            return Divergence(s, ours[s], golden.tokens[s], float(row[ours[s]]), float(row[golden.tokens[s]]),
                              float(row[golden.tokens[s]] - row[ours[s]]),
                              NEAR_TIE_REL * float(np.max(np.abs(row))))
    if len(ours) != len(golden.tokens):  # one side stopped (EOS) where the other went on
        return Divergence(n, ours[n] if len(ours) > n else None,
                          golden.tokens[n] if len(golden.tokens) > n else None,
                          float("nan"), float("nan"), float("nan"), 0.0)
    return None
