"""Whether a GGUF's lm_head is its embedding is decided by the file, as transformers' GGUF loader
decides it (``load_gguf_checkpoint``: tied exactly when there is no ``output.weight``): a tied
model's file that still carries ``output.weight`` (here the embedding quantized to Q8_0, as a
converter may write a separate output of a tied model) runs that matrix, as MODEL and as
``--weights`` of the tied checkpoint it was written from (whose config.json says tied)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from safetensors import safe_open

import gguf
from gguf_files import GgufSpec, seeded_checkpoint, write_gguf
from ktir_models.cli import main
from ktir_models.model.gguf import load_gguf
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.checkpoint import get_checkpoint

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gguf-tying")


@pytest.fixture(scope="module")
def tied(root) -> Path:
    return seeded_checkpoint(root, tied=True)


@pytest.fixture(scope="module")
def tied_with_output(root, tied) -> Path:
    with safe_open(str(tied / "model.safetensors"), "np") as f:
        embedding = f.get_tensor("model.embed_tokens.weight").astype(np.float32)
    output = gguf.quants.quantize(embedding, Q.Q8_0)
    return write_gguf(root / "tied-output.gguf", tied, GgufSpec(extra={"output.weight": (Q.Q8_0, output)}))


def test_a_tied_models_output_tensor_is_read_as_transformers_reads_it(tied, tied_with_output) -> None:
    assert json.loads((tied / "config.json").read_text())["tie_word_embeddings"] is True
    ckpt = load_gguf(tied_with_output)
    model = ckpt.transformers_model()
    assert not ckpt.config.tie_word_embeddings and not model.config.tie_word_embeddings
    ours = ckpt.read_f16("lm_head.weight")
    np.testing.assert_array_equal(model.state_dict()["lm_head.weight"].numpy(), ours.astype(np.float32))
    assert not np.array_equal(ours, ckpt.read_f16("model.embed_tokens.weight"))  # Q8_0, not the F16 rows


def test_weights_file_decides_the_tying_of_a_tied_model(tied, tied_with_output) -> None:
    ckpt = get_checkpoint(resolve_model(str(tied)), str(tied_with_output))
    assert not ckpt.config.tie_word_embeddings
    assert ckpt.resolve("lm_head") == "lm_head.weight"


@pytest.mark.slow
def test_forward_of_the_tied_model_on_that_file_passes_the_live_golden(tied, tied_with_output, tmp_path,
                                                                       capsys, monkeypatch) -> None:
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    report = tmp_path / "report.json"
    with pytest.raises(SystemExit) as exc:
        main(["forward", str(tied), "--weights", str(tied_with_output), "--golden", "live", "-q",
              "--json", str(report)])
    text = capsys.readouterr().out
    assert exc.value.code == 0, text
    doc = json.loads(report.read_text())
    assert doc["pass"] is True and doc["weights"] == f"gguf:{tied_with_output.resolve()}"
    assert doc["metrics"]["top1_agreement"] == 1.0
