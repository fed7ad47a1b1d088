"""Each family difference, planted wrong, fails the forward check against transformers.

A mistake is planted in the *program* only (the checkpoint, its config and the golden stay
right): the program is emitted from a config with one feature changed (a multiplier left at 1, the
biases dropped, the window one position off or ignored), or by an emitter subclass that applies
q_norm after RoPE. Each must fail the project's pass rule; the same passes, emitted right, pass in
test_family_forwards.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ktir_models.model.emit import emit_program
from ktir_models.model.emit.llama import LayerWeights, LlamaEmitter
from ktir_models.model.emit.program import Tensor
from ktir_models.model.emit.session import Session
from ktir_models.model.checks.golden import live_logits
from ktir_models.model.inputs.runtime_inputs import golden_token_ids

from .configs import FAMILY_CONFIGS, WINDOW, verdict

pytest.importorskip("transformers")


class QNormAfterRope(LlamaEmitter):
    """The mistake: q is rotated first and normalised after (k stays right)."""

    def attention_inputs(self, i: int, h: Tensor, w: LayerWeights) -> Tensor:
        c = self.cfg
        q = self.gemm("q_proj", i, h, [w.q_proj], self.q_dim)
        k = self.gemm("k_proj", i, h, [w.k_proj], self.kv_dim)
        self.gemm("v_proj", i, h, [w.v_proj], self.kv_dim, into_cache=w.v_cache)
        assert w.q_norm is not None and w.k_norm is not None
        k = self.head_norm("k_norm", i, k, w.k_norm, c.num_key_value_heads)
        q_rot = self.rope("rope_q", i, q, c.num_attention_heads)
        self.rope("rope_k", i, k, c.num_key_value_heads, into_cache=w.k_cache)
        return self.head_norm("q_norm", i, q_rot, w.q_norm, c.num_attention_heads)


def features(family: str, **changes):
    cfg = FAMILY_CONFIGS[family]
    return replace(cfg, features=replace(cfg.features, **changes))


MISTAKES = {
    "granite-embedding-multiplier-ignored": ("granite", features("granite", embedding_multiplier=1.0), LlamaEmitter),
    "granite-residual-multiplier-ignored": ("granite", features("granite", residual_multiplier=1.0), LlamaEmitter),
    "granite-attention-multiplier-ignored": ("granite", features("granite", attention_multiplier=None), LlamaEmitter),
    "granite-logits-scaling-ignored": ("granite", features("granite", logits_scaling=1.0), LlamaEmitter),
    "qwen2-bias-dropped": ("qwen2", features("qwen2", qkv_bias=False), LlamaEmitter),
    "qwen3-q-norm-after-rope": ("qwen3", FAMILY_CONFIGS["qwen3"], QNormAfterRope),
    "mistral-window-one-too-wide": ("mistral", features("mistral", sliding_window=WINDOW + 1), LlamaEmitter),
    "mistral-window-one-too-narrow": ("mistral", features("mistral", sliding_window=WINDOW - 1), LlamaEmitter),
}


def planted_forward(ckpt, cfg, emitter_class, tmp_path, mode: str, m: int, past: int):
    """Our prefill over the ``past`` prefix, then the pass — both programs emitted from ``cfg`` by
    ``emitter_class`` — on ``ckpt``'s weights; returns (logits, token ids)."""
    session = Session(ckpt)
    capacity = past + m
    vocab = ckpt.config.vocab_size
    if past:
        prefill = emit_program(cfg, "prefill", past, 0, tmp_path / "prefix", "planted", capacity=capacity,
                               emitter_class=emitter_class)
        session.run(session.load(prefill), golden_token_ids(past, vocab), past=0)
    program = emit_program(cfg, mode, m, past, tmp_path / "pass", "planted", capacity=capacity,
                           emitter_class=emitter_class)
    ids = golden_token_ids(m, vocab, start=past)
    return session.run(session.load(program), ids, past=past).logits, ids


@pytest.mark.slow
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_planted_mistake_fails_the_check(family_checkpoints, tmp_path, mistake):
    family, cfg, emitter_class = MISTAKES[mistake]
    ckpt = family_checkpoints[family]
    # prefill-32 covers every difference (the window slides 27 times inside it)
    logits, ids = planted_forward(ckpt, cfg, emitter_class, tmp_path, "prefill", 32, 0)
    result, met = verdict(logits, live_logits(ckpt, ids))
    assert not result.passed, f"{mistake} passed the check: {met.summary()}"


@pytest.mark.slow
@pytest.mark.parametrize("window", [WINDOW - 1, WINDOW + 1, None])
def test_decode_with_a_wrong_window_fails(family_checkpoints, tmp_path, window):
    """Decode at position 31: only the host mask windows the cached prefix (the fresh block is the
    query itself), so this checks the mask, prefill and decode programs together."""
    ckpt = family_checkpoints["mistral"]
    logits, ids = planted_forward(ckpt, features("mistral", sliding_window=window), LlamaEmitter,
                                  tmp_path, "decode", 1, 31)
    prefix = golden_token_ids(31, ckpt.config.vocab_size)
    result, met = verdict(logits, live_logits(ckpt, ids, past=31, prefix_ids=prefix))
    assert not result.passed, f"window {window} passed the check: {met.summary()}"


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_the_same_harness_passes_without_a_mistake(family_checkpoints, tmp_path, family):
    """Control: the harness above, with the right config and emitter, passes."""
    ckpt = family_checkpoints[family]
    logits, ids = planted_forward(ckpt, FAMILY_CONFIGS[family], LlamaEmitter, tmp_path, "prefill", 32, 0)
    result, met = verdict(logits, live_logits(ckpt, ids))
    assert result.passed, f"{result.reasons}: {met.summary()}"
