"""``ktir_models.generate``: a checked generation on the tiny model (its tokens against
transformers' own greedy generation, run here), the stream and the step callback, a planted bug
in the decode program failing the check, text mode printing the text and the checks without the
token ids (unless ``ids``), and bad input as the named UserError."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ktir_models
from ktir_models.cache_entries import write_digest
from ktir_models.cli import main
from ktir_models.errors import UserError

from .conftest import TINY_MODEL, plant_scale_bug


def _transformers_greedy(model_dir: Path, ids: list[int], new_tokens: int) -> list[int]:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir),
                                                              torch_dtype=torch.float32)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=new_tokens,
                             attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return [int(t) for t in out[0, len(ids):]]


def test_generation_streams_its_report_and_matches_transformers():
    from ktir_models.model.inputs.runtime_inputs import golden_token_ids

    pieces, steps = [], []
    report = ktir_models.generate(str(TINY_MODEL), tokens=3, steps=3, weights=str(TINY_MODEL),
                                  quiet=True, stream=pieces.append, on_step=steps.append)
    assert isinstance(report, ktir_models.GenerationReport)
    assert report.passed and report.mismatch is None
    assert "".join(pieces) == report.render() + "\n"  # the stream is the printed text
    assert [s.step for s in steps] == [0, 1, 2, 3] and all(s.passed for s in steps)
    assert report.generated == [s.next_token for s in steps]
    prompt = [int(t) for t in golden_token_ids(3, 512)]
    assert report.generated == _transformers_greedy(TINY_MODEL, prompt, 4)
    doc = report.to_dict()
    assert json.loads(json.dumps(doc)) == doc and doc["generated"] == report.generated
    assert doc["pass"] is True and len(doc["steps"]) == 4
    assert f"generated: {report.generated}" in report.render()  # token ids: the ids are the output


def test_a_planted_bug_in_the_decode_program_fails_the_check(capsys):
    clean = ktir_models.generate(str(TINY_MODEL), tokens=3, steps=3, weights=str(TINY_MODEL),
                                 golden="none", quiet=True)
    assert clean.passed and not clean.checked
    cache = Path(os.environ["KTIR_MODELS_CACHE"]) / "programs"
    decode = [d for d in cache.iterdir() if "-decode-" in d.name]
    assert decode and sum(plant_scale_bug(d) for d in decode) >= 2
    for d in decode:  # sealed again: the entry is what an emitter with this bug would cache
        write_digest(d)
    report = ktir_models.generate(str(TINY_MODEL), tokens=3, steps=3, weights=str(TINY_MODEL),
                                  quiet=True)
    assert not report.passed
    assert report.mismatch.startswith("generate: FAIL: step 1: ")  # the prefill program is intact
    assert [s.passed for s in report.steps][:2] == [True, False]

    with pytest.raises(SystemExit) as exc:
        main(["generate", str(TINY_MODEL), "--tokens", "3", "--steps", "3", "--weights",
              str(TINY_MODEL), "-q"])
    out, err = capsys.readouterr()
    assert exc.value.code == 1 and err.strip().splitlines()[-1] == report.mismatch
    assert "[FAIL]" in out


def test_text_mode_prints_text_and_checks_and_ids_only_when_asked(tmp_path, capsys):
    kwargs = dict(prompt="Once upon a time", steps=4, quiet=True)
    report = ktir_models.generate("stories260k", **kwargs)
    assert report.passed
    lines = report.render().splitlines()
    assert lines[0].startswith("generate: stories260k") and lines[1] == report.text
    assert report.text.startswith("Once upon a time")
    assert any(line.startswith("check: the 5 tokens are identical") for line in lines)
    assert lines[-1].startswith("  generated: 5 tokens (")
    assert str(report.generated) not in report.render()

    with pytest.raises(SystemExit) as exc:
        main(["generate", "stories260k", "--prompt", "Once upon a time", "--steps", "4", "-q",
              "--ids", "--json", str(tmp_path / "g.json")])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert out.splitlines()[1] == report.text
    assert out.splitlines()[-1].startswith(f"  generated: {report.generated}  (")
    doc = json.loads((tmp_path / "g.json").read_text())
    assert doc["generated"] == report.generated and doc["text"] == report.text


@pytest.mark.parametrize("kwargs, message", [
    (dict(prompt="hi", tokens=3), "--prompt and --tokens: give one of them"),
    (dict(golden="vendored"), "--golden vendored: expected live or none"),
    (dict(chat=True), "--chat: needs --prompt"),
    (dict(tokens=250, steps=10), "--tokens + --steps = 260: beyond the model's positions"),
])
def test_bad_input_raises_the_cli_s_user_error(kwargs, message):
    with pytest.raises(UserError) as exc:
        ktir_models.generate(str(TINY_MODEL), weights=str(TINY_MODEL), quiet=True, **kwargs)
    assert message in str(exc.value)
