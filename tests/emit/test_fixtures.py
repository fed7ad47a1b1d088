"""The vendored fixtures (fixtures/): our emitted programs for tiny synthetic checkpoints with
transformers goldens and runtime inputs. Replaying them needs no transformers, so every run of the
suite checks emitted programs against transformers numbers; and a fresh emission must reproduce
the vendored program byte for byte (rebuild with scripts/make_fixtures.py --force otherwise)."""

from __future__ import annotations

import json

import pytest

from ktir_models.cli import main
from ktir_models.model.emit import emit_program
from ktir_models.model.emit.fixtures import FIXTURE_MODELS, FIXTURE_PASSES, FIXTURES_DIR

PASSES = {fx.directory: fx for fx in FIXTURE_PASSES}


def test_every_fixture_is_present():
    for fx in FIXTURE_PASSES:
        d = FIXTURES_DIR / fx.directory
        assert (d / "manifest.json").is_file() and (d / "golden.f16.gz").is_file(), d
    for name in FIXTURE_MODELS:
        assert (FIXTURES_DIR / "models" / name / "config.json").is_file()


@pytest.mark.parametrize("directory", sorted(PASSES))
def test_vendored_program_equals_a_fresh_emission(tmp_path, directory):
    fx = PASSES[directory]
    fresh = emit_program(FIXTURE_MODELS[fx.model], fx.mode, fx.tokens, fx.past, tmp_path / "p", fx.model)
    vendored = FIXTURES_DIR / directory
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in vendored.iterdir() if p.name.startswith(("node", "manifest")))
    for name in names:
        assert (fresh / name).read_bytes() == (vendored / name).read_bytes(), (
            f"{directory}/{name} differs from a fresh emission: run scripts/make_fixtures.py --force")


@pytest.mark.parametrize("directory", sorted(PASSES))
def test_vendored_fixture_matches_its_golden(tmp_path, directory, capsys):
    fx = PASSES[directory]
    report = tmp_path / "report.json"
    with pytest.raises(SystemExit) as exc:
        main(["forward", str(FIXTURES_DIR / "models" / fx.model), "--program", str(FIXTURES_DIR / directory),
              "--golden", "vendored", "--quiet", "--json", str(report)])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.out + out.err
    doc = json.loads(report.read_text())
    assert doc["pass"] is True and doc["metrics"]["top1_agreement"] == 1.0
    assert doc["tokens"] == fx.tokens
