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


def stories_gguf(root: Path) -> Path:
    """The trained stories260k fixture as a GGUF file with its vocabulary in the metadata: Q8_0,
    except the MLP tensors (rows of 172 values are no whole 32-value blocks), which stay F16 as
    llama.cpp's converter leaves them."""
    from gguf import GGMLQuantizationType as Q

    from gguf_files import STORIES

    ffn = {f"blk.{i}.{t}.weight": Q.F16 for i in range(5) for t in ("ffn_gate", "ffn_up", "ffn_down")}
    path = root / "stories260k-q8_0.gguf"
    if not path.is_file():
        write_gguf(path, STORIES, GgufSpec(qtype=Q.Q8_0, types=ffn, vocab=True))
    return path


def test_trained_gguf_with_a_prompt(root, tmp_path, capsys) -> None:
    """Real weights and real text: the prompt goes through the tokenizer built from the file's
    metadata, and the teacher-forced metrics agree with the golden."""
    path = stories_gguf(root)
    code, text, doc = forward([str(path), "--mode", "prefill", "--prompt", "Once upon a time, there was a"],
                              capsys, tmp_path / "s.json")
    assert_passed(code, text, doc, path)
    assert doc["text"]["tokenizer"] == f"gguf:{path.resolve()} metadata"
    from tokenizers import Tokenizer

    from gguf_files import STORIES_TOKENIZER

    ids = Tokenizer.from_file(str(STORIES_TOKENIZER)).encode("Once upon a time, there was a").ids
    assert doc["tokens"] == doc["text"]["text_tokens"] == len(ids)
    assert doc["text"]["kl_max"] < 1e-4 and doc["text"]["top5_overlap_mean"] == 1.0
    assert abs(doc["text"]["perplexity_emulated"] / doc["text"]["perplexity_golden"] - 1) < 1e-2


def test_trained_gguf_generates_transformers_greedy_text(root, capsys) -> None:
    path = stories_gguf(root)
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(path), "--prompt", "Once upon a time", "--steps", "8", "-q"])
    out = capsys.readouterr().out
    assert exc.value.code == 0, out
    assert "identical to transformers' greedy generation" in out
    assert ", there was a little girl" in out


def test_json_report_beside_the_gguf_file(root, tmp_path, capsys) -> None:
    """Only the GGUF file itself is an input: a report in its folder may be written and rewritten,
    the file itself may not be overwritten."""
    folder = tmp_path / "models"
    folder.mkdir()
    path = write_gguf(folder / "m.gguf", seeded_checkpoint(root, tied=True), GgufSpec())
    for _ in range(2):
        code, text, doc = forward([str(path)], capsys, folder / "report.json")
        assert_passed(code, text, doc, path)
    before = path.read_bytes()
    with pytest.raises(SystemExit) as exc:
        main(["forward", str(path), "--golden", "none", "-q", "--json", str(path), "--force"])
    assert exc.value.code == 2 and "refusing to overwrite an input of this run" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_llama3_scaled_gguf_prefill(root, tmp_path, capsys) -> None:
    """The tiny llama3 fixture (GQA 8/2, untied, llama3 RoPE scaling with original context 16)
    with the converter's rope_freqs.weight: prefill over 24 positions, where the scaling matters."""
    from gguf_files import LLAMA3_FIXTURE, llama3_spec

    path = write_gguf(root / "llama3.gguf", LLAMA3_FIXTURE, llama3_spec())
    code, text, doc = forward([str(path), "--mode", "prefill", "--tokens", "24"], capsys, tmp_path / "l3.json")
    assert_passed(code, text, doc, path)


def test_gguf_forward_on_the_torch_backend(root, tmp_path, capsys) -> None:
    path = write_gguf(root / "torch-q5_1.gguf", seeded_checkpoint(root, tied=True), FORWARD_FILES["Q5_1"])
    code, text, doc = forward([str(path), "--mode", "prefill", "--tokens", "8", "--backend", "torch"], capsys,
                              tmp_path / "t.json")
    assert_passed(code, text, doc, path)
    assert doc["backend"] == "torch"
