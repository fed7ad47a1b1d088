"""stories260k (the shipped real checkpoint): four prompts served together, with their prefill
chunks interleaved with each other's decode steps, give exactly the texts four separate
``generate`` runs give; the serve run itself passes the check against transformers."""

from __future__ import annotations

import pytest

from ktir_models.api.serve import serve
from ktir_models.model.emit.generation import generate
from ktir_models.model.registry import resolve_model
from ktir_models.model.inputs.tokenizer import eos_token_ids, load_tokenizer
from ktir_models.model.weights.checkpoint import get_checkpoint

pytest.importorskip("transformers")

PROMPTS = {
    "a": ("Once upon a time", 24, 0),
    "b": ("Lily had a red ball. One day", 12, 0),
    "c": ("The cat sat", 16, 1),
    "d": ("Tom and his dog went to the park to play. They", 10, 3),
}


def test_served_texts_equal_separate_generate_runs():
    spec = resolve_model("stories260k")
    ckpt = get_checkpoint(spec, "hub")
    tok = load_tokenizer(ckpt, spec)
    eos = eos_token_ids(ckpt, tok)
    requests = [{"id": rid, "prompt": text, "max_new_tokens": new, "arrival": arrival}
                for rid, (text, new, arrival) in PROMPTS.items()]
    report = serve("stories260k", requests, max_seqs=4, block_size=16, chunk=8, golden="live")
    assert report.passed, report.failures
    # prefill chunks interleaved with decode rows
    assert any(s.prefill_rows and s.decode_rows for s in report.steps)
    for rid, (text, new, _) in PROMPTS.items():
        ids = tok.encode(text)
        alone = generate(ckpt, spec.name, None, new - 1, prompt_ids=ids, eos_ids=eos).generated
        served = report.request(rid)
        assert served.tokens == alone, rid
        assert served.text == tok.decode(ids + alone)[len(tok.decode(ids)):]
        assert served.text and served.prompt_text == text
