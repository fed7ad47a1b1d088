"""`ktir-models forward PATH.gguf`: our emitted program on the GGUF's dequantized weights against a
live golden from transformers' own GGUF loader (same weights, rounded to f16 as the program takes
them), through ``ktir_models.cli.main`` in process. Files are written by the tests with the
``gguf`` package from a seeded llama checkpoint (tests/model/gguf_files.py): every type the
package quantizes, K-quant files made of block bytes, a tied and an untied file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
from gguf_files import FORWARD_FILES, GgufSpec, seeded_checkpoint, write_gguf  # noqa: E402

from ktir_models.cli import main  # noqa: E402

pytestmark = pytest.mark.slow
GOLDEN_LINE = "golden   live (transformers on the GGUF's dequantized weights, f32)"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gguf-forward")


def forward(argv, capsys, json_path: Path) -> tuple[int, str, dict]:
    with pytest.raises(SystemExit) as exc:
        main(["forward", *argv, "--golden", "live", "-q", "--json", str(json_path)])
    out = capsys.readouterr()
    doc = json.loads(json_path.read_text()) if json_path.is_file() else {}
    return exc.value.code, out.out + out.err[-3000:], doc


def assert_passed(code: int, text: str, doc: dict, path: Path) -> None:
    assert code == 0, text
    assert "result   PASS" in text and GOLDEN_LINE in text, text
    assert doc["pass"] is True and doc["weights"] == f"gguf:{path.resolve()}"
    assert doc["metrics"]["top1_agreement"] == 1.0
    assert doc["metrics"]["max_abs_rel"] <= doc["tolerance"] and doc["metrics"]["cosine"] > 0.9999


@pytest.mark.parametrize("kind", sorted(FORWARD_FILES) + ["Q8_0-untied"])
def test_gguf_forward_passes_against_transformers_on_the_same_weights(kind, root, tmp_path, capsys) -> None:
    tied = not kind.endswith("-untied")
    path = write_gguf(root / f"{kind}.gguf", seeded_checkpoint(root, tied=tied),
                      FORWARD_FILES[kind.removesuffix("-untied")])
    code, text, doc = forward([str(path)], capsys, tmp_path / "report.json")
    assert_passed(code, text, doc, path)
    assert doc["mode"] == "decode"


def test_gguf_prefill_and_weights_option(root, tmp_path, capsys) -> None:
    """Prefill m=7 on a Q4_K file given as MODEL, then the same file as ``--weights`` of the
    checkpoint directory it was written from (the metadata must match its config.json)."""
    source = seeded_checkpoint(root, tied=True)
    path = write_gguf(root / "prefill.gguf", source, FORWARD_FILES["Q4_K_M"])
    code, text, doc = forward([str(path), "--mode", "prefill", "--tokens", "7"], capsys, tmp_path / "a.json")
    assert_passed(code, text, doc, path)
    assert doc["tokens"] == 7
    code, text, doc = forward([str(source), "--weights", str(path)], capsys, tmp_path / "b.json")
    assert_passed(code, text, doc, path)


def test_a_wrong_permutation_fails_the_forward(root, tmp_path, capsys, monkeypatch) -> None:
    """The golden does not share our reader's permutation code: with our Q/K row order broken
    (query rows read in stored order), the forward must fail against it."""
    from ktir_models.model.gguf import checkpoint

    path = write_gguf(root / "perm.gguf", seeded_checkpoint(root, tied=True), GgufSpec())
    monkeypatch.setattr(checkpoint.GgufCheckpoint, "_row_order", lambda self, entry: None)
    code, text, doc = forward([str(path), "--mode", "prefill", "--tokens", "7"], capsys, tmp_path / "c.json")
    assert code == 1, text
    assert doc["pass"] is False
