"""`ktir-models emit` and `generate` from the command line (tiny vendored model, no network)."""

from __future__ import annotations

import json

import pytest

from ktir_models.cli import main
from ktir_models.model.emit.fixtures import FIXTURES_DIR

TINY = str(FIXTURES_DIR / "models" / "tiny-mha")


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.fixture(autouse=True)
def _program_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))


def test_emit_writes_a_fixture_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "prog"
    code, stdout, _ = run(["emit", TINY, "--mode", "prefill", "--tokens", "7", "--past", "2", "--out", str(out)], capsys)
    assert code == 0 and "24 nodes" in stdout
    doc = json.loads((out / "manifest.json").read_text())
    assert (doc["mode"], doc["m"], doc["past"], doc["capacity"]) == ("prefill", 7, 2, 9)
    before = (out / "node0.mlir").read_bytes()
    code, _, err = run(["emit", TINY, "--out", str(out)], capsys)
    assert code == 2 and "not empty" in err and "--force" in err and "Traceback" not in err
    assert (out / "node0.mlir").read_bytes() == before
    code, _, _ = run(["emit", TINY, "--out", str(out), "--force"], capsys)
    assert code == 0 and json.loads((out / "manifest.json").read_text())["mode"] == "decode"


@pytest.mark.parametrize("argv,message", [
    (["--mode", "decode", "--tokens", "4"], "--tokens"),
    (["--mode", "sample"], "--mode"),
])
def test_emit_bad_options_exit_2(tmp_path, capsys, argv, message):
    code, _, err = run(["emit", TINY, "--out", str(tmp_path / "p"), *argv], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_emit_unsupported_config_names_the_field(tmp_path, capsys):
    model = tmp_path / "gelu-model"
    model.mkdir()
    cfg = json.loads((FIXTURES_DIR / "models" / "tiny-mha" / "config.json").read_text())
    cfg["hidden_act"] = "gelu"
    (model / "config.json").write_text(json.dumps(cfg))
    code, _, err = run(["emit", str(model), "--out", str(tmp_path / "p")], capsys)
    assert code == 2 and "hidden_act" in err


def test_generate_with_live_golden(capsys):
    code, stdout, err = run(["generate", TINY, "--tokens", "5", "--steps", "4", "--golden", "live", "-q"], capsys)
    assert code == 0, stdout + err
    assert stdout.count("[ok]") == 5 and "step 4" in stdout and "generated:" in stdout


def test_forward_past_runs_our_prefill_first(capsys):
    code, stdout, err = run(["forward", TINY, "--past", "6", "--golden", "live", "-q"], capsys)
    assert code == 0, stdout + err
    assert "PASS" in stdout
