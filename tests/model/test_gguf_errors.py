"""Malformed GGUF files through the CLI (``ktir_models.cli.main``, in process): each is exit code 2
with one message naming the file and the tensor or metadata key, and no traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from gguf_files import GgufSpec, patch_type_code, seeded_checkpoint, write_gguf
from ktir_models.cli import main


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return seeded_checkpoint(tmp_path_factory.mktemp("gguf-errors"))


def run(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out + out.err


def assert_user_error(code: int, text: str, path: Path, *fragments: str) -> None:
    assert code == 2, text
    assert "Traceback" not in text, text
    assert str(path) in text, text
    for fragment in fragments:
        assert fragment in text, (fragment, text)


def truncate(keep: int):
    def cut(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[:keep if keep > 0 else len(data) + keep])
    return cut


def bad_magic(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:4] = b"GGML"
    path.write_bytes(bytes(data))


IQ2 = np.zeros((256, 66), np.uint8)  # IQ2_XXS: 66 bytes per 256 values

CASES = {
    # name: (spec, post-processing of the written file, fragments of the message)
    "truncated data": (GgufSpec(), truncate(-1000), ["tensor '", "data runs past the end of the file", "truncated"]),
    "truncated header": (GgufSpec(), truncate(40), ["not a readable GGUF file: truncated or corrupt header"]),
    "bad magic": (GgufSpec(), bad_magic, ["not a GGUF file (bad magic b'GGML'"]),
    "unknown type code": (GgufSpec(), lambda p: patch_type_code(p, "blk.0.ffn_up.weight", 99),
                          ["tensor 'blk.0.ffn_up.weight' has unknown GGML type code 99"]),
    "unsupported type": (GgufSpec(drop=("blk.1.attn_v.weight",), extra={"blk.1.attn_v.weight": (Q.IQ2_XXS, IQ2[:128])}),
                         None, ["tensor 'blk.1.attn_v.weight' has element type IQ2_XXS, which is not supported"]),
    "missing tensor": (GgufSpec(drop=("blk.1.ffn_up.weight",)), None,
                       ["tensor 'blk.1.ffn_up.weight' (model.layers.1.mlp.up_proj.weight) is missing"]),
    "wrong shape": (GgufSpec(reshape={"blk.0.attn_k.weight": (64, 256)}), None,
                    ["tensor 'blk.0.attn_k.weight' has shape [64, 256]", "llama.attention.head_count_kv",
                     "implies [128, 256]"]),
    "head count against tensors": (GgufSpec(metadata={"llama.attention.head_count": 8}), None,
                                   ["tensor 'blk.0.attn_q.weight' has shape [256, 256]",
                                    "llama.attention.head_count x head size", "implies [512, 256]"]),
    "vocab size against embedding": (GgufSpec(metadata={"llama.vocab_size": 600}), None,
                                     ["metadata key llama.vocab_size = 600 contradicts tensor 'token_embd.weight', "
                                      "which has 512 rows"]),
    "block count against tensors": (GgufSpec(metadata={"llama.block_count": 1}), None,
                                    ["metadata key llama.block_count = 1 contradicts the tensors", "blk.1.*"]),
    "token list against embedding": (GgufSpec(vocab=True, metadata={"llama.vocab_size": None},
                                              drop=("token_embd.weight",),
                                              extra={"token_embd.weight": (None, np.zeros((500, 256), np.float16))}),
                                     None, ["'tokenizer.ggml.tokens' holds 512 tokens but the vocabulary has 500 rows"]),
    "missing key": (GgufSpec(metadata={"llama.embedding_length": None}), None,
                    ["metadata key 'llama.embedding_length' is missing"]),
    "wrong key type": (GgufSpec(metadata={"llama.block_count": "two"}), None,
                       ["metadata key 'llama.block_count' must be a positive integer, got 'two'"]),
    "architecture": (GgufSpec(arch="qwen2"), None,
                     ["metadata key 'general.architecture' = 'qwen2' is not supported (only 'llama')"]),
    "partial rotary": (GgufSpec(metadata={"llama.rope.dimension_count": 32}), None,
                       ["metadata key llama.rope.dimension_count = 32", "partial rotary"]),
}


def test_merge_outside_the_vocabulary(source, tmp_path, capsys) -> None:
    """The tokenizer is built when text is asked for: a merge naming a token that is not in the
    vocabulary is one located error naming the key and the merge, found before the converter
    (whose tokenizers library would raise a bare Exception) sees it."""
    from gguf_files import byte_level_vocab

    metadata, _ = byte_level_vocab()
    metadata["tokenizer.ggml.merges"] = metadata["tokenizer.ggml.merges"] + ["zzq qqz"]
    path = write_gguf(tmp_path / "merges.gguf", source, GgufSpec(metadata=metadata))
    code, text = run(["forward", str(path), "--mode", "prefill", "--prompt", "Once", "--golden", "none", "-q"],
                     capsys)
    assert_user_error(code, text, path, "metadata key 'tokenizer.ggml.merges'[",
                      "'zzq qqz' does not join two tokens")


def _vocab_with(**changes):
    from gguf_files import stories_vocab

    meta = stories_vocab()
    for key, edit in changes.items():
        meta[f"tokenizer.ggml.{key}"] = edit(meta.get(f"tokenizer.ggml.{key}"))
    return meta


# name: (metadata, fragment); without the checks the converter cuts the vocabulary to the shortest
# array (a short scores list made the prompt tokenize to 37 ids instead of 12, silently)
TOKENIZER_METADATA = {
    "short scores": (lambda: _vocab_with(scores=lambda v: v[:100]),
                     "metadata key 'tokenizer.ggml.scores' has 100 entries, "
                     "but 'tokenizer.ggml.tokens' has 512"),
    "long token types": (lambda: _vocab_with(token_type=lambda v: v + [1] * 5),
                         "metadata key 'tokenizer.ggml.token_type' has 517 entries"),
    "bos id outside the vocabulary": (
        lambda: _vocab_with(bos_token_id=lambda v: 9999),
        "metadata key 'tokenizer.ggml.bos_token_id' = 9999 is not a token id"),
}


@pytest.mark.parametrize("case", sorted(TOKENIZER_METADATA))
def test_tokenizer_arrays_are_checked_against_the_vocabulary(case, source, tmp_path,
                                                             capsys) -> None:
    make, fragment = TOKENIZER_METADATA[case]
    path = write_gguf(tmp_path / "vocab.gguf", source, GgufSpec(metadata=make()))
    argv = ["forward", str(path), "--mode", "prefill", "--prompt", "Once upon a time, Lily",
            "--golden", "none", "-q"]
    code, text = run(argv, capsys)
    assert_user_error(code, text, path, fragment)


def test_broken_chat_template_in_the_metadata_names_the_file(source, tmp_path, capsys) -> None:
    path = write_gguf(tmp_path / "chat.gguf", source,
                      GgufSpec(vocab=True,
                               metadata={"tokenizer.chat_template": "{% for m in messages %}"}))
    argv = ["generate", str(path), "--weights", str(path), "--prompt", "Once", "--chat",
            "--steps", "1", "--golden", "none", "-q"]
    code, text = run(argv, capsys)
    assert_user_error(code, text, path, "(its chat template): chat template line 1: syntax error")


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_file_is_one_located_error(case, source, tmp_path, capsys) -> None:
    spec, post, fragments = CASES[case]
    path = write_gguf(tmp_path / "bad.gguf", source, spec)
    if post is not None:
        post(path)
    code, text = run(["forward", str(path), "--golden", "none", "-q"], capsys)
    assert_user_error(code, text, path, *fragments)


def test_weights_gguf_of_another_architecture_is_refused(source, tmp_path, capsys) -> None:
    path = write_gguf(tmp_path / "tiny.gguf", source, GgufSpec())
    code, text = run(["forward", "smollm2-135m", "--weights", str(path), "--golden", "none", "-q"], capsys)
    assert_user_error(code, text, path, "config field 'hidden_size' is 256, but the model expects 576")


def test_missing_file(tmp_path, capsys) -> None:
    path = tmp_path / "absent.gguf"
    code, text = run(["forward", str(path), "-q"], capsys)
    assert_user_error(code, text, path, "GGUF file does not exist")
