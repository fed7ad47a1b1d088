"""`forward --prompt TEXT --diagnose`: the diagnosis runs the text's token ids, the ones the forward
ran (emulator and reference alike), not the golden-convention synthetic ids. On the shipped
stories260k with its tokenizer; the forward is made to fail by a perturbed golden (the program is
right), so the diagnosis runs and finds every node within its band."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("transformers")

PROMPT = "Once upon a time"
PROMPT_IDS = [1, 403, 407, 261, 378]  # llama2.c's encoding (tests/model/test_text_tokenizer.py)


@pytest.mark.slow
def test_forward_diagnose_with_a_prompt_uses_the_prompts_ids(tmp_path, capsys, monkeypatch):
    from ktir_models.cli import main
    from ktir_models.model.checks import capture, golden
    from ktir_models.model.inputs import runtime_inputs as inputs

    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    live = golden.live_logits
    monkeypatch.setattr(golden, "live_logits", lambda *a, **k: -live(*a, **k))  # a golden to fail
    embedded, captured = [], []
    rows = inputs.scaled_embedding_rows

    def embedding_rows(ckpt, ids, *rest):
        embedded.append([int(i) for i in ids])
        return rows(ckpt, ids, *rest)

    reference = capture.capture_reference

    def capture_reference(ckpt, token_ids, *rest):
        captured.append([int(i) for i in token_ids])
        return reference(ckpt, token_ids, *rest)

    monkeypatch.setattr(inputs, "scaled_embedding_rows", embedding_rows)
    monkeypatch.setattr(capture, "capture_reference", capture_reference)
    out = tmp_path / "forward.json"
    with pytest.raises(SystemExit) as exc:
        main(["forward", "stories260k", "--prompt", PROMPT, "--diagnose", "-q", "--json", str(out)])
    assert exc.value.code == 1  # the perturbed golden fails the forward
    doc = json.loads(out.read_text())
    assert doc["text"]["pass_ids"] == PROMPT_IDS
    assert embedded == [PROMPT_IDS, PROMPT_IDS]  # the forward's pass, then the diagnosis's
    assert captured == [PROMPT_IDS]
    assert doc["diagnose"]["ok"] is True and doc["diagnose"]["culprit"] is None, capsys.readouterr().out
    assert np.isfinite([c["rel_error"] for c in doc["diagnose"]["compared"]]).all()
