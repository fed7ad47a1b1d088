"""stories260k — the trained TinyStories llama shipped in fixtures/models/stories260k — through
our emitted KTIR programs on the emulator, on real text, against transformers run on the same
checkpoint (live, in process). Nothing mocked; no network (the model and its tokenizer are local).

Covers: decode and prefill with m in {1, 7, 16, 33} on the numpy and torch-cpu back ends, decode
after a prefill (``--past``), ``generate --prompt`` printing transformers' own greedy text, and a
planted bug (one layer's softmax scale x1.5) failing on these real weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from ktir_models.cache_entries import write_digest

from emit.test_cli import run  # the in-process CLI call: (exit code, stdout, stderr)
from torch_test_device import device_for

pytest.importorskip("transformers")
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = REPO / "fixtures" / "models" / "stories260k"
# Not the model's own greedy continuation, so its perplexity is that of ordinary text to it.
STORY = ("Once upon a time, there was a small dog named Max. Max liked to run in the big green park "
         "with his friend Tom. One day, Tom found a shiny red ball under a tree and gave it to Max.")
BACKENDS = ["numpy", "torch"]


@pytest.fixture(autouse=True)
def _offline(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path_factory.getbasetemp() / "stories-cache"))


@pytest.fixture(scope="module")
def hf():
    """transformers' own tokenizer and model, loaded independently of our code."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(MODEL_DIR), local_files_only=True, dtype=torch.float32)
    model.eval()
    return tok, model


@pytest.fixture(scope="module")
def story_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "story.txt"
    path.write_text(STORY, encoding="utf-8")
    return path


def _forward(capsys, tmp_path, *args):
    report = tmp_path / "r.json"
    code, out, err = run(["forward", "stories260k", *args, "--golden", "live", "--json", str(report), "-q"], capsys)
    return code, out, err, (json.loads(report.read_text()) if report.exists() else None)


def _assert_real_text_pass(doc, ids, past, m):
    assert doc["pass"] is True, doc["reasons"]
    assert doc["tokens"] == m and doc["weights"].startswith("local:")
    assert doc["metrics"]["max_abs_rel"] <= doc["tolerance"]
    text = doc["text"]
    # the targets are the text's own next tokens, as transformers' tokenizer reads the text
    assert text["targets"] == [ids[past + i + 1] if past + i + 1 < len(ids) else -1 for i in range(m)]
    assert text["text_tokens"] == len(ids)
    assert text["pass_ids"] == ids[past:past + m]  # the pass read the text's own tokens
    if text["nll_golden"]:  # ordinary text to this model (measured 1.06-2.4): the targets are right
        assert text["perplexity_golden"] < 5
    assert max(text["kl"]) < 1e-3  # nats: the emulated distributions are the golden's
    if text["nll_golden"]:
        assert abs(text["perplexity_emulated"] / text["perplexity_golden"] - 1) < 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("m", [1, 7, 16, 33])
def test_forward_on_real_text(hf, story_file, m, backend, tmp_path, capsys):
    ids = hf[0](STORY)["input_ids"]
    assert len(ids) > 33
    code, out, err, doc = _forward(capsys, tmp_path, "--text", str(story_file), "--tokens", str(m),
                                   "--backend", backend, "--device", device_for(backend))
    assert code == 0, out + err
    assert doc["mode"] == ("decode" if m == 1 else "prefill")  # inferred from m, as for the text's length
    assert "text     " in out and "ppl      golden" in out
    _assert_real_text_pass(doc, ids, 0, m)
    assert doc["backend"] == backend


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_after_prefill_on_real_text(hf, backend, tmp_path, capsys):
    prompt = "Once upon a time, there was a small dog named Max"
    ids = hf[0](prompt)["input_ids"]
    past = len(ids) - 1
    code, out, err, doc = _forward(capsys, tmp_path, "--prompt", prompt, "--past", str(past),
                                   "--backend", backend, "--device", device_for(backend))
    assert code == 0, out + err
    assert doc["mode"] == "decode"
    _assert_real_text_pass(doc, ids, past, 1)


def _greedy_text(hf, prompt: str, new_tokens: int) -> str:
    import torch

    tok, model = hf
    x = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**x, do_sample=False, max_new_tokens=new_tokens)
    return tok.decode(out[0], skip_special_tokens=True)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_generate_prints_transformers_greedy_text(hf, backend, capsys):
    code, out, err = run(["generate", "stories260k", "--prompt", "Once upon a time", "--steps", "32", "-q",
                          "--backend", backend, "--device", device_for(backend)], capsys)
    assert code == 0, out + err
    lines = out.splitlines()
    expected = _greedy_text(hf, "Once upon a time", 33)  # the prefill's token + 32 decode steps
    assert expected.startswith("Once upon a time, there was a little girl named Lily.")
    assert lines[1] == expected
    assert "check: 33 passes against transformers fed our tokens: all within the pass rule" in out
    assert "check: the 33 tokens are identical to transformers' greedy generation" in out


@pytest.mark.slow
def test_planted_softmax_scale_bug_fails_on_real_weights(story_file, tmp_path, capsys):
    """Layer 2's attention scores scaled by 1.5/sqrt(8) instead of 1/sqrt(8) (the 3/16-for-1/8 bug
    of docs/forward.md): every argmax survives, the max-abs bound catches it (exit 1)."""
    program = tmp_path / "prog"
    code, out, err = run(["emit", "stories260k", "--mode", "prefill", "--tokens", "16", "--out", str(program)], capsys)
    assert code == 0, out + err
    doc = json.loads((program / "manifest.json").read_text())
    node = next(i for i, n in enumerate(doc["nodes"]) if n["fn"].endswith("_l2_attention"))
    path = program / doc["nodes"][node]["mlir"]
    scale = f"dense<{np.float32(8 ** -0.5):.9e}>"
    text = path.read_text()
    assert text.count(scale) == 1, scale
    path.write_text(text.replace(scale, f"dense<{np.float32(1.5 * 8 ** -0.5):.9e}>"))
    code, out, err, report = _forward(capsys, tmp_path, "--program", str(program), "--text", str(story_file))
    assert code == 1, out + err
    assert report["pass"] is False and "exceeds the tolerance" in out
    assert report["metrics"]["max_abs_rel"] > 1.5 * report["tolerance"]  # 0.0297 measured: not a borderline fail
    assert report["metrics"]["top1_agreement"] == 1.0


def test_forward_text_shorter_than_the_program_is_exit_2(tmp_path, capsys):
    program = tmp_path / "prog"
    code, out, err = run(["emit", "stories260k", "--mode", "prefill", "--tokens", "16", "--out", str(program)], capsys)
    assert code == 0, out + err
    code, out, err = run(["forward", "stories260k", "--program", str(program), "--prompt", "Once upon a time",
                          "--golden", "none", "-q"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "--prompt: encodes to 5 tokens, but the program in" in err and "m=16" in err


def test_prompt_on_a_checkpoint_without_tokenizer_is_exit_2(capsys):
    from ktir_models.model.emit.fixtures import FIXTURES_DIR

    tiny = str(FIXTURES_DIR / "models" / "tiny-mha")
    code, out, err = run(["generate", tiny, "--prompt", "hello", "--steps", "1", "-q"], capsys)
    assert code == 2 and "has no tokenizer" in err and "Traceback" not in err
    code, out, err = run(["forward", tiny, "--prompt", "hello", "-q"], capsys)
    assert code == 2 and "has no tokenizer" in err and "Traceback" not in err
    code, out, err = run(["generate", "stories260k", "--prompt", "hi", "--chat", "--steps", "1", "-q"], capsys)
    assert code == 2 and "no chat template" in err


@pytest.mark.slow
def test_generate_names_the_first_divergent_step(tmp_path, monkeypatch, capsys):
    """The decode program's softmax scale negated and x4 in every layer (the prefill left intact):
    the first decode step's token departs from transformers'; generate says where, with both tokens
    and their golden logits, and exits 1."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(cache))
    code, out, err = run(["generate", "stories260k", "--prompt", "Once upon a time", "--steps", "6", "--golden", "none",
                          "-q"], capsys)
    assert code == 0, out + err
    [decode] = list((cache / "programs").glob("stories260k-decode-*"))
    scale = f"dense<{np.float32(8 ** -0.5):.9e}>"
    broken = 0
    for node in decode.glob("node*.mlir"):
        text = node.read_text()
        if scale in text:
            node.write_text(text.replace(scale, f"dense<{np.float32(-4 * 8 ** -0.5):.9e}>"))
            broken += 1
    assert broken == 5  # one attention node per layer
    write_digest(decode)  # sealed again: the entry is what an emitter with this bug would cache
    code, out, err = run(["generate", "stories260k", "--prompt", "Once upon a time", "--steps", "6", "-q"], capsys)
    assert code == 1, out + err
    line = next(ln for ln in out.splitlines() if ln.startswith("check: FAIL: first divergence"))
    assert "at generated token 1 (step 1)" in line  # the prefill program is intact: its token agrees
    assert "ours " in line and "transformers " in line and line.count("golden logit") == 2
    assert "near-tie band" in line
    assert "FAIL" in err


@pytest.mark.slow
def test_generate_from_a_gguf_file_uses_its_metadata_tokenizer(hf, tmp_path, capsys):
    """stories260k written as an F16 GGUF with its vocabulary in the metadata and no tokenizer
    files beside it: generate reads the prompt through the tokenizer the file describes (the
    checkpoint's prepared_tokenizer()) and prints transformers' greedy text."""
    import sys

    pytest.importorskip("gguf")
    sys.path.insert(0, str(REPO / "tests" / "model"))
    from gguf_files import STORIES, GgufSpec, write_gguf

    path = write_gguf(tmp_path / "stories.gguf", STORIES, GgufSpec(vocab=True))
    assert [p.name for p in tmp_path.iterdir()] == ["stories.gguf"]
    code, out, err = run(["generate", str(path), "--prompt", "Once upon a time", "--steps", "8", "-q"], capsys)
    assert code == 0, out + err
    assert out.splitlines()[1] == _greedy_text(hf, "Once upon a time", 9)
    assert "check: the 9 tokens are identical to transformers' greedy generation" in out


def test_text_refuses_a_stored_golden(tmp_path, capsys):
    """A stored golden holds the logits of the ids it was made for: with text it is exit 2."""
    from ktir_models.model.checks.golden import write_f16_gz

    program = tmp_path / "prog"
    code, out, err = run(["emit", "stories260k", "--mode", "prefill", "--tokens", "4", "--out", str(program)], capsys)
    assert code == 0, out + err
    stored = tmp_path / "g.f16.gz"
    write_f16_gz(stored, np.zeros((4, 512), dtype=np.float16))
    code, out, err = run(["forward", "stories260k", "--program", str(program), "--prompt", "Once upon a time",
                          "--golden", str(stored), "-q"], capsys)
    assert code == 2 and "a stored golden holds the logits of other token ids" in err and "Traceback" not in err
