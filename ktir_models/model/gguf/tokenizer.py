"""The tokenizer a GGUF file describes in its ``tokenizer.ggml.*`` metadata.

transformers builds it (``AutoTokenizer.from_pretrained(folder, gguf_file=name)``, local files
only, no network): its GGUF converter turns the token list, scores or merges, token types and
special ids into a fast tokenizer of the right kind (sentencepiece-style ``llama``, byte-level
``gpt2``). Invariants: a file without ``tokenizer.ggml.tokens`` has no tokenizer (None); the
metadata arrays are checked against the vocabulary before the converter sees them; any failure
to build one is a UserError naming the file and the key (or ``tokenizer.ggml.model``).
"""

from __future__ import annotations

from pathlib import Path

from ktir_models.errors import UserError

TOKENS_KEY = "tokenizer.ggml.tokens"
MODEL_KEY = "tokenizer.ggml.model"
TEMPLATE_KEY = "tokenizer.chat_template"
#: Arrays with one entry per token: their length must be the token list's.
PER_TOKEN_KEYS = ("tokenizer.ggml.scores", "tokenizer.ggml.token_type")
MERGES_KEY = "tokenizer.ggml.merges"
SPECIAL_ID_KEYS = (
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.seperator_token_id",
)


def _array_length(file, key: str) -> int | None:
    """The length of array metadata ``key`` (None when absent); a UserError for a non-array."""
    from gguf import GGUFValueType

    field = file.reader.fields.get(key)
    if field is None:
        return None
    if not field.types or field.types[0] != GGUFValueType.ARRAY:
        raise UserError(f"{file.path}: metadata key {key!r} must be an array")
    return len(field.data)


def check_tokenizer_metadata(file) -> None:
    """The ``tokenizer.ggml.*`` arrays agree with the vocabulary (``file``: an opened GgufFile):
    scores and token types have one entry per token, every merge ``a b`` joins two tokens into a
    third, and the special ids are tokens. A mismatch is a UserError naming the key: transformers'
    converter would silently cut the vocabulary to the shortest array and tokenize to wrong ids."""
    n = _array_length(file, TOKENS_KEY)
    if n is None:
        return
    if n == 0:
        raise UserError(f"{file.path}: metadata key {TOKENS_KEY!r} is empty")
    for key in PER_TOKEN_KEYS:
        length = _array_length(file, key)
        if length is not None and length != n:
            raise UserError(
                f"{file.path}: metadata key {key!r} has {length} entries, "
                f"but {TOKENS_KEY!r} has {n} "
                "(one per token)"
            )
    for key in SPECIAL_ID_KEYS:
        value = file.value(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n
        ):
            raise UserError(
                f"{file.path}: metadata key {key!r} = {value!r} is not a token id (the vocabulary "
                f"has {n} tokens)"
            )
    if _array_length(file, MERGES_KEY):
        vocab = set(file.value(TOKENS_KEY))
        for i, merge in enumerate(file.value(MERGES_KEY)):
            parts = merge.split(" ") if isinstance(merge, str) else []
            if len(parts) != 2 or not {parts[0], parts[1], parts[0] + parts[1]} <= vocab:
                raise UserError(
                    f"{file.path}: metadata key {MERGES_KEY!r}[{i}] = {str(merge)[:40]!r} does not "
                    f"join two tokens of {TOKENS_KEY!r} into a third"
                )


def gguf_tokenizer(file):
    """A transformers fast tokenizer for the opened GGUF ``file`` (a GgufFile), or None without a
    vocabulary; its metadata is checked first (:func:`check_tokenizer_metadata`)."""
    if not file.has(TOKENS_KEY):
        return None
    check_tokenizer_metadata(file)
    path, kind = Path(file.path), file.value(MODEL_KEY)
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(
            str(path.parent), gguf_file=path.name, local_files_only=True
        )
    except ImportError as exc:
        raise UserError(
            f"{path}: building the tokenizer from GGUF metadata needs transformers and gguf "
            f"({exc})"
        ) from None
    except Exception as exc:  # noqa: BLE001  the tokenizers library raises bare Exception on bad data
        if isinstance(exc, UserError):
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(
            f"{path}: cannot build a tokenizer from the metadata ({MODEL_KEY} = {kind!r}; "
            f"tokenizer.ggml.tokens / merges / scores): {first}"
        ) from None
