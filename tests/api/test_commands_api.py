"""``ktir_models.diagnose``, ``latency``, ``emit`` and ``ktir_models.api.sweeps.sweep`` on the tiny
fixtures: pass and planted-fail reports, their JSON round trip (the file ``json=`` writes is
``to_dict()``), the CLI printing ``render()``, and bad input as the named UserError."""

from __future__ import annotations

import json

import pytest

import ktir_models
from ktir_models.api.sweeps import sweep
from ktir_models.cli import main
from ktir_models.errors import UserError
from ktir_models.model.manifest import load_manifest

from .conftest import DECODE, PREFILL, TINY_MODEL


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_diagnose_passes_on_the_fixture_and_names_the_planted_node(broken_prefill, tmp_path,
                                                                   capsys):
    good = ktir_models.diagnose(str(TINY_MODEL), program=PREFILL, weights=str(TINY_MODEL),
                                table=True)
    assert good.passed and good.mismatch is None
    assert len(good.diagnosis.compared) > 10  # mapped nodes compared with transformers
    bad = ktir_models.diagnose(str(TINY_MODEL), program=broken_prefill, weights=str(TINY_MODEL),
                               json=tmp_path / "d.json")
    assert not bad.passed
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc == bad.to_dict() and doc["diagnose"]["culprit"]["node"] == 6
    assert bad.mismatch == "diagnose: node 6 (@ktir_prefill_tiny_mha_n6_l0_attention, " \
                          f"{bad.diagnosis.culprit.role}) is out of its f16 band"
    code, out, err = _cli(["diagnose", str(TINY_MODEL), "--program", str(broken_prefill),
                           "--weights", str(TINY_MODEL)], capsys)
    assert code == 1 and out == bad.render() + "\n" and err.strip().splitlines()[-1] == bad.mismatch


def test_latency_report_is_what_the_cli_prints_and_writes(tmp_path, capsys):
    report = ktir_models.latency(DECODE, top=3, json=tmp_path / "api.json")
    assert report.passed
    doc = report.to_dict()
    assert len(doc["latency"]["nodes"]) == 24 and doc["latency"]["params"]["num_cores"] == 32
    assert json.loads((tmp_path / "api.json").read_text()) == doc
    argv = ["latency", str(DECODE), "--top", "3", "--json", str(tmp_path / "cli.json")]
    code, out, _ = _cli(argv, capsys)
    assert code == 0 and out == report.render() + "\n"
    assert json.loads((tmp_path / "cli.json").read_text()) == doc
    with pytest.raises(UserError, match="latency parameters: "):
        ktir_models.latency(DECODE, pipeline="sideways")
    with pytest.raises(UserError, match="refusing to overwrite .*manifest.json, a file of the pro"):
        ktir_models.latency(DECODE, json=DECODE / "manifest.json")


def test_emit_writes_the_program_it_reports(tmp_path, capsys):
    report = ktir_models.emit(str(TINY_MODEL), out=tmp_path / "p", mode="prefill", tokens=4)
    manifest = load_manifest(tmp_path / "p")
    assert (report.mode, report.m, report.past, report.capacity) == ("prefill", 4, 0, 4)
    assert report.nodes == len(manifest.nodes) == 24
    assert json.loads(json.dumps(report.to_dict()))["directory"] == str(tmp_path / "p")
    code, out, _ = _cli(["emit", str(TINY_MODEL), "--out", str(tmp_path / "q"), "--mode", "prefill",
                         "--tokens", "4"], capsys)
    first, second = out.strip(), report.render()
    assert code == 0
    # the same line but for the directory and the seconds
    assert first.split("(")[0].replace("/q", "/p") == second.split("(")[0]
    with pytest.raises(UserError, match="beyond the model's positions"):
        ktir_models.emit(str(TINY_MODEL), out=tmp_path / "r", mode="prefill", tokens=300)


def test_sweep_runs_its_cases_and_reports_their_verdicts(tmp_path, broken_prefill):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'name = "api"\ntimeout = 300\n\n'
        f'[[matrix]]\nmodel = "{TINY_MODEL}"\nprogram = ["{DECODE}", "{broken_prefill}"]\n'
        f'weights = "{TINY_MODEL}"\ngolden = "vendored"\n')
    report = sweep(spec, out=tmp_path / "out", jobs=1)
    verdicts = {"broken-prefill" in r.case_id: r.verdict for r in report.summary.results}
    assert verdicts == {False: "pass", True: "fail"}
    assert not report.passed and report.mismatch.startswith("sweep: 1 case(s) not as expected: ")
    assert "broken-prefill" in report.mismatch and "(fail, expected pass)" in report.mismatch
    doc = report.to_dict()
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == doc
    with pytest.raises(UserError, match="--project-key tree: expected"):
        sweep(spec, out=tmp_path / "out", project_key="tree")
