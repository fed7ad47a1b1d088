"""``ktir_models.forward``: the report of a passing and of a planted-bug forward on the tiny
vendored fixture (judged against its vendored transformers golden), its JSON round trip, the CLI
printing exactly the API's report, and bad input as the named UserError."""

from __future__ import annotations

import json

import pytest

import ktir_models
from ktir_models.errors import UserError
from ktir_models.cli import main

from .conftest import DECODE, TINY_MODEL

TIMED = ("seconds ", "slowest ")  # the lines of a forward's text that hold wall times


def _untimed(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(TIMED)]


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_forward_passes_and_its_report_is_the_cli_s(tmp_path, capsys):
    report = ktir_models.forward(str(TINY_MODEL), program=DECODE, weights=str(TINY_MODEL),
                                 golden="vendored", quiet=True, json=tmp_path / "api.json")
    assert isinstance(report, ktir_models.ForwardReport)
    assert report.passed and report.mismatch is None
    assert report.metrics["top1_agreement"] == 1.0
    assert report.metrics["max_abs_rel"] <= report.forward.tolerance
    doc = report.to_dict()
    assert json.loads(json.dumps(doc)) == doc  # strict JSON, nothing lost
    assert json.loads((tmp_path / "api.json").read_text()) == doc
    assert doc["pass"] is True and doc["tokens"] == 1 and doc["nodes"] == 24
    assert report.render().splitlines()[-1] == "result   PASS"

    code, out, _ = _cli(["forward", str(TINY_MODEL), "--program", str(DECODE), "--weights",
                         str(TINY_MODEL), "--golden", "vendored", "-q", "--json",
                         str(tmp_path / "cli.json")], capsys)
    assert code == 0
    assert _untimed(out) == _untimed(report.render())
    cli_doc = json.loads((tmp_path / "cli.json").read_text())
    assert set(cli_doc) == set(doc)
    untimed = ("seconds", "slowest_nodes", "node_seconds")
    assert {k: v for k, v in cli_doc.items() if k not in untimed} == \
        {k: v for k, v in doc.items() if k not in untimed}


def test_planted_bug_fails_with_the_cli_s_mismatch_and_a_diagnosis(broken_prefill, capsys):
    report = ktir_models.forward(str(TINY_MODEL), program=broken_prefill, weights=str(TINY_MODEL),
                                 golden="vendored", quiet=True, diagnose=True, latency=True)
    assert not report.passed
    assert report.mismatch.startswith("forward: FAIL: ")
    assert "exceeds the tolerance" in report.mismatch or "top-1 differs" in report.mismatch
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["pass"] is False
    assert len(doc["latency"]["nodes"]) == 24
    culprit = doc["diagnose"]["culprit"]
    assert culprit is not None and culprit["node"] == 6  # layer 0's attention: the first edited
    text = report.render()
    assert "result   FAIL: " in text and "total: 24 nodes" in text

    code, out, err = _cli(["forward", str(TINY_MODEL), "--program", str(broken_prefill),
                           "--weights", str(TINY_MODEL), "--golden", "vendored", "-q", "--diagnose",
                           "--latency"], capsys)
    assert code == 1 and err.strip().splitlines()[-1] == report.mismatch
    assert _untimed(out) == _untimed(text)


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode="sideways"), "--mode sideways: expected decode or prefill"),
    (dict(tokens=3), f"--tokens 3: the program in {DECODE} runs m=1 tokens per pass"),
    (dict(golden="vendored", program="MISSING"), "not found"),
    (dict(seed=-1, weights="synthetic"), "--seed -1: expected an integer"),
    (dict(past=2), "--past: only for our emitted programs"),
])
def test_bad_input_raises_the_cli_s_user_error(kwargs, message, capsys):
    kwargs = {"program": DECODE, "weights": str(TINY_MODEL), "quiet": True, **kwargs}
    with pytest.raises(UserError) as exc:
        ktir_models.forward(str(TINY_MODEL), **kwargs)
    assert message in str(exc.value)
    argv = ["forward", str(TINY_MODEL), "-q"]
    for key, value in kwargs.items():
        if key != "quiet":
            argv += [f"--{key}", str(value)]
    code, _, err = _cli(argv, capsys)
    assert code == 2 and err.strip() == str(exc.value)


def test_missing_vendored_golden_names_the_program(tmp_path):
    program = tmp_path / "prog"
    program.mkdir()
    for entry in DECODE.iterdir():
        if entry.name != "golden.f16.gz":
            (program / entry.name).symlink_to(entry)
    with pytest.raises(UserError, match=f"--golden vendored: golden.f16.gz not found in {program}"):
        ktir_models.forward(str(TINY_MODEL), program=program, weights=str(TINY_MODEL),
                            golden="vendored", quiet=True)


def test_a_program_of_another_model_raises_a_manifest_error():
    from ktir_models.model.manifest import ManifestError

    other = TINY_MODEL.parent / "tiny-gqa4-llama3"
    with pytest.raises(ManifestError, match=r"^manifest\.json: "):
        ktir_models.forward(str(other), program=DECODE, weights=str(other), golden="none",
                            quiet=True)
