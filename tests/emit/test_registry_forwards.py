"""Our emitted programs for the registry models on synthetic weights, through `ktir-models
forward --golden live` (decode, prefill m=32, decode after a 31-token prefill) and `generate`
(N=4 decode steps, each checked against transformers). Slow: whole 135M / 1.2B forwards."""

from __future__ import annotations

import json

import pytest

from ktir_models.cli import main

pytestmark = pytest.mark.slow


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.parametrize("model", ["smollm2-135m", "llama-3.2-1b"])
@pytest.mark.parametrize("flags", [["--mode", "decode"], ["--mode", "prefill", "--tokens", "32"],
                                   ["--mode", "decode", "--past", "31"]])
def test_emitted_forward_passes_live_golden(model, flags, tmp_path, capsys):
    report = tmp_path / "report.json"
    code, stdout, err = run(["forward", model, "--weights", "synthetic", "--golden", "live", "-q",
                             "--json", str(report), *flags], capsys)
    assert code == 0, stdout + err[-2000:]
    doc = json.loads(report.read_text())
    assert doc["pass"] is True and doc["metrics"]["top1_agreement"] == 1.0


def test_generate_smollm2_four_steps(capsys):
    code, stdout, err = run(["generate", "smollm2-135m", "--weights", "synthetic", "--tokens", "8",
                             "--steps", "4", "--golden", "live", "-q"], capsys)
    assert code == 0, stdout + err[-2000:]
    assert stdout.count("[ok]") == 5
