"""Checks of a tokenizer directory's files before transformers reads them.

transformers and the tokenizers library fail on malformed files in many ways (a ``tokenizer.json``
that is a list, a model without a vocabulary, a 10^5-deep document, a special token that is a
number); here each file is read with the bounded JSON reader (:mod:`ktir_models.readers`: depth,
size, UTF-8) and its shape checked, so a bad file is one :class:`TokenizerFileError` (exit 2)
naming the file and the key. Only what the libraries need to be true is checked: anything a
valid checkpoint's files hold passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktir_models.readers import InputFileError, read_json

from .chat_template import MAX_TEMPLATE_CHARS


class TokenizerFileError(InputFileError):
    """A tokenizer file of the wrong shape; ``str()`` is ``<file>: <key>: <problem>``."""


#: tokenizers' model types and the JSON type of their ``vocab``.
MODEL_VOCAB = {"BPE": dict, "WordPiece": dict, "WordLevel": dict, "Unigram": list}
SPECIAL_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "sep_token",
    "cls_token",
    "mask_token",
)
FLAGS = (
    "add_bos_token",
    "add_eos_token",
    "clean_up_tokenization_spaces",
    "legacy",
    "add_prefix_space",
)
TEMPLATE_FILE = "chat_template.jinja"


def _kind(value: Any) -> str:
    return (
        "null"
        if value is None
        else {
            dict: "an object",
            list: "a list",
            str: "a string",
            bool: "a boolean",
            int: "a number",
            float: "a number",
        }.get(type(value), type(value).__name__)
    )


def check_tokenizer_json(path: Path) -> None:
    """``tokenizer.json``: an object whose ``model`` has a known ``type`` and a non-empty ``vocab``
    of that type's shape; ``added_tokens`` a list of objects with a string ``content``."""
    doc = read_json(path, "tokenizer")
    if not isinstance(doc, dict):
        raise TokenizerFileError(
            path, f"expected a JSON object (a tokenizers file), got {_kind(doc)}"
        )
    model = doc.get("model")
    if not isinstance(model, dict):
        raise TokenizerFileError(path, f"model: expected an object, got {_kind(model)}")
    kind = model.get("type")
    if kind is not None and kind not in MODEL_VOCAB:
        raise TokenizerFileError(
            path,
            f"model.type: {kind!r} is not a tokenizers model type "
            f"({', '.join(sorted(MODEL_VOCAB))})",
        )
    vocab = model.get("vocab")
    if vocab is None:
        raise TokenizerFileError(path, "model.vocab: missing (a tokenizer without a vocabulary)")
    want = MODEL_VOCAB.get(kind, type(vocab)) if kind is not None else (dict, list)
    if not isinstance(vocab, want) or not vocab:
        shape = "an object" if want is dict else "a list" if want is list else "an object or a list"
        raise TokenizerFileError(
            path,
            f"model.vocab: expected {shape} of tokens for model type {kind}, "
            f"got {_kind(vocab) if vocab else 'an empty one'}",
        )
    added = doc.get("added_tokens", [])
    if not isinstance(added, list) or any(
        not isinstance(t, dict) or not isinstance(t.get("content"), str) for t in added
    ):
        raise TokenizerFileError(
            path, "added_tokens: expected a list of objects with a string 'content'"
        )


def _check_token(path: Path, key: str, value: Any) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return
    raise TokenizerFileError(
        path,
        f"{key}: expected a string or an object with a string 'content', " f"got {_kind(value)}",
    )


def check_tokenizer_config(path: Path) -> None:
    """``tokenizer_config.json`` (or ``special_tokens_map.json``): an object whose special tokens,
    flags, ``model_max_length``, ``tokenizer_class``, ``added_tokens_decoder`` and
    ``chat_template`` have the types transformers reads them as."""
    doc = read_json(path, "tokenizer config")
    if not isinstance(doc, dict):
        raise TokenizerFileError(path, f"expected a JSON object, got {_kind(doc)}")
    for key in SPECIAL_TOKENS:
        _check_token(path, key, doc.get(key))
    for key in ("additional_special_tokens", "extra_special_tokens"):
        value = doc.get(key)
        items = (
            value
            if isinstance(value, list)
            else list(value.values())
            if isinstance(value, dict)
            else None
        )
        if value is not None and items is None:
            raise TokenizerFileError(path, f"{key}: expected a list of tokens, got {_kind(value)}")
        for item in items or []:
            _check_token(path, key, item)
    for key in FLAGS:
        if not isinstance(doc.get(key, False), (bool, type(None))):
            raise TokenizerFileError(path, f"{key}: expected true or false, got {_kind(doc[key])}")
    length = doc.get("model_max_length")
    if length is not None and (
        isinstance(length, bool) or not isinstance(length, (int, float)) or length < 1
    ):
        raise TokenizerFileError(
            path, f"model_max_length: expected a positive number, got {length!r}"
        )
    if not isinstance(doc.get("tokenizer_class", ""), (str, type(None))):
        raise TokenizerFileError(
            path, f"tokenizer_class: expected a string, got {_kind(doc['tokenizer_class'])}"
        )
    decoder = doc.get("added_tokens_decoder", {})
    if not isinstance(decoder, dict):
        raise TokenizerFileError(
            path, f"added_tokens_decoder: expected an object, got {_kind(decoder)}"
        )
    for key, token in decoder.items():
        if (
            not key.isdigit()
            or not isinstance(token, dict)
            or not isinstance(token.get("content"), str)
        ):
            raise TokenizerFileError(
                path,
                f"added_tokens_decoder[{key!r}]: expected an id mapped to an object "
                "with a string 'content'",
            )
    template = doc.get("chat_template")
    if template is None or isinstance(template, str):
        return
    if not isinstance(template, list) or any(
        not isinstance(t, dict)
        or not isinstance(t.get("name"), str)
        or not isinstance(t.get("template"), str)
        for t in template
    ):
        raise TokenizerFileError(
            path,
            f"chat_template: expected a string (or a list of named templates), "
            f"got {_kind(template)}",
        )


def check_template_file(path: Path) -> None:
    """``chat_template.jinja``: UTF-8 text of at most :data:`MAX_TEMPLATE_CHARS` characters."""
    if not path.is_file():
        raise TokenizerFileError(path, "not a regular file")
    try:
        size = path.stat().st_size
        if size > 4 * MAX_TEMPLATE_CHARS:
            raise TokenizerFileError(
                path,
                f"{size} bytes, larger than any chat template "
                f"({MAX_TEMPLATE_CHARS} characters at most)",
            )
        path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise TokenizerFileError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TokenizerFileError(path, f"not UTF-8 text (byte {exc.start})") from None


def check_tokenizer_dir(directory: Path) -> None:
    """Every tokenizer file present in ``directory`` (see the module docstring)."""
    directory = Path(directory)
    checks = (
        ("tokenizer.json", check_tokenizer_json),
        ("tokenizer_config.json", check_tokenizer_config),
        ("special_tokens_map.json", check_tokenizer_config),
        (TEMPLATE_FILE, check_template_file),
    )
    for name, check in checks:
        if (directory / name).exists():
            check(directory / name)


def template_origin(directory: Path) -> str:
    """The file a directory tokenizer's chat template comes from (for messages)."""
    directory = Path(directory)
    for name in (TEMPLATE_FILE, "chat_template.json"):
        if (directory / name).is_file():
            return str(directory / name)
    return str(directory / "tokenizer_config.json")
