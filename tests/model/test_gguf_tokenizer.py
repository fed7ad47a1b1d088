"""The tokenizer a GGUF file's metadata describes (the sentencepiece vocabulary of the stories260k
fixture written into a test file): the same ids as the stories260K tokenizer.json, text round-trips, and a file
without a vocabulary has none."""

from __future__ import annotations

from pathlib import Path

import pytest

from gguf_files import STORIES_TOKENIZER, GgufSpec, seeded_checkpoint, write_gguf
from ktir_models.errors import UserError
from ktir_models.model.gguf import load_gguf

TEXTS = ["Once upon a time, there was a little girl named Lily.",
         "She liked to play outside.  Tom said: \"Hi!\" 42 times, ü and 日本 too."]

@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return seeded_checkpoint(tmp_path_factory.mktemp("gguf-tok"))


def test_vocabulary_from_metadata_round_trips_text(source, tmp_path) -> None:
    from tokenizers import Tokenizer

    from ktir_models.model.inputs.tokenizer import load_tokenizer

    ckpt = load_gguf(write_gguf(tmp_path / "vocab.gguf", source, GgufSpec(vocab=True)))
    tok = load_tokenizer(ckpt)
    assert tok is not None and "metadata" in tok.source
    reference = Tokenizer.from_file(str(STORIES_TOKENIZER))
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == reference.encode(text).ids  # BOS first, byte fallback for ü and 日本
        assert ids[0] == 1 and len(ids) > 10
        assert tok.decode(ids) == text
    assert tok.eos_id == 2


def test_file_without_vocabulary_has_no_tokenizer(source, tmp_path) -> None:
    ckpt = load_gguf(write_gguf(tmp_path / "bare.gguf", source, GgufSpec()))
    assert ckpt.prepared_tokenizer() is None


def test_unknown_tokenizer_model_is_named(source, tmp_path) -> None:
    path = write_gguf(tmp_path / "odd.gguf", source,
                      GgufSpec(vocab=True, metadata={"tokenizer.ggml.model": "nonsense"}))
    with pytest.raises(UserError, match=r"odd\.gguf: cannot build a tokenizer from the metadata "
                                        r"\(tokenizer\.ggml\.model = 'nonsense';"):
        load_gguf(path).prepared_tokenizer()


def test_byte_level_vocabulary_from_metadata(source, tmp_path) -> None:
    """A gpt2-style vocabulary with merges (SmolLM2's kind): the same ids as the trained
    tokenizer, and text (with non-ASCII bytes) round-trips."""
    from gguf_files import byte_level_vocab

    from ktir_models.model.inputs.tokenizer import load_tokenizer

    metadata, reference = byte_level_vocab()
    tok = load_tokenizer(load_gguf(write_gguf(tmp_path / "bpe.gguf", source, GgufSpec(metadata=metadata))))
    for text in ["Once upon a time, Lily played in the park.", "Hello wörld 42! 日本"]:
        ids = tok.encode(text)
        assert ids == reference.encode(text).ids and len(ids) > 5
        assert tok.decode(ids) == text
