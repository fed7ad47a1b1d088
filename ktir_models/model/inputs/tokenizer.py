"""A checkpoint's own tokenizer: text to token ids and back (``generate --prompt``, ``forward --prompt``).

Where the tokenizer comes from, first match wins:

1. **Prepared by the checkpoint.** A checkpoint object that builds its tokenizer itself (a GGUF
   file's vocabulary, merges and special ids in its metadata) offers it through a method
   ``prepared_tokenizer()`` returning a transformers tokenizer, a ``tokenizers.Tokenizer``, or
   ``None``. It is wrapped by :func:`from_prepared`, which any other caller holding such an object
   may use directly.
2. **Files in the checkpoint directory** (``tokenizer.json``, ``tokenizer.model``,
   ``tokenizer_config.json``): transformers' ``AutoTokenizer`` with ``local_files_only=True``.
3. **The HuggingFace cache** for a hub checkpoint (cache first; the network only when the files
   are not cached and ``HF_HUB_OFFLINE`` is not set), through :mod:`ktir_models.model.weights.hub`.

``None`` means the checkpoint has no tokenizer (seeded synthetic checkpoints, bare weight
directories): commands keep working on token ids, and asking for text is a ``UserError``.

Invariants of a :class:`TextTokenizer`: ``encode`` returns ids in ``[0, vocab_size)`` of the model it
was loaded for (a tokenizer whose ids overflow the embedding is refused when encoding, naming the
id); ``decode`` drops special tokens (BOS/EOS), so decoded text is what a reader sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktir_models.errors import UserError
from ktir_models.model.inputs.chat_template import render_chat
from ktir_models.model.inputs.text_bounds import check_text
from ktir_models.model.inputs.tokenizer_files import check_tokenizer_dir, template_origin
from ktir_models.model.weights.hub import TOKENIZER_PATTERNS  # noqa: F401  (what load_tokenizer fetches; the hub client owns the list)

#: Files that make a directory hold a tokenizer transformers can load offline.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")


@dataclass
class TextTokenizer:
    """A loaded tokenizer for one model: ``hf`` is the transformers tokenizer object."""

    hf: Any
    source: str  # where it came from (a directory, or what prepared it)
    vocab_size: int  # the model's embedding rows: every encoded id must be below this
    template_origin: str = ""  # the file (or metadata key) its chat template comes from

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.hf, "chat_template", None))

    @property
    def eos_id(self) -> int | None:
        eos = getattr(self.hf, "eos_token_id", None)
        return int(eos) if isinstance(eos, int) else None

    def encode(self, text: str, chat: bool = False, where: str = "--prompt") -> list[int]:
        """Token ids of ``text`` as the model was trained to read it: the tokenizer's own special
        tokens (e.g. BOS) included; with ``chat``, wrapped as one user turn by the checkpoint's chat
        template, ready for the assistant's answer."""
        check_text(text, where)
        if not text:
            raise UserError(f"{where}: the text is empty")
        if chat:
            if not self.has_chat_template:
                raise UserError(f"--chat: the tokenizer in {self.source} has no chat template")
            special = getattr(self.hf, "special_tokens_map", None) or {}
            origin = self.template_origin or self.source
            text = render_chat(self.hf.chat_template, origin, text, special)
        try:
            ids = self.hf(text, add_special_tokens=not chat)["input_ids"]
        except Exception as exc:  # noqa: BLE001  the tokenizers library raises bare Exception
            raise UserError(f"{where}: the tokenizer in {self.source} cannot encode the text: "
                            f"{str(exc)[:200] or type(exc).__name__}") from None
        ids = [int(i) for i in ids]
        if not ids:
            raise UserError(f"{where}: {text[:40]!r} encodes to no tokens")
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise UserError(f"{where}: the tokenizer in {self.source} produced id {bad[0]}, outside the "
                            f"model's vocabulary of {self.vocab_size}")
        return ids

    def decode(self, ids) -> str:
        return str(self.hf.decode([int(i) for i in ids], skip_special_tokens=True))

    def token_text(self, token: int) -> str:
        """One token as text, for messages (``repr``-quoted, special tokens by name)."""
        piece = self.hf.convert_ids_to_tokens(int(token))
        return repr(piece if piece is not None else self.hf.decode([int(token)]))

    def stream(self, prompt_ids) -> "TextStream":
        return TextStream(self, [int(i) for i in prompt_ids])


@dataclass
class TextStream:
    """Incremental detokenisation: :meth:`push` returns the text a new token adds.

    Invariant: the concatenation of everything returned equals ``decode(prompt + tokens)`` minus
    ``decode(prompt)``. Pieces are found by decoding the whole sequence and taking what follows the
    text already returned, because a token's text depends on its neighbours (sentencepiece's
    leading-space marker, byte-fallback pieces that only form a character together); a trailing
    U+FFFD (an unfinished UTF-8 sequence) is held back until the next token completes it.
    """

    tokenizer: TextTokenizer
    ids: list[int]
    shown: str = field(init=False)

    def __post_init__(self) -> None:
        self.shown = self.tokenizer.decode(self.ids)

    def push(self, token: int) -> str:
        self.ids.append(int(token))
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""
        if not text.startswith(self.shown):  # the tokenizer rewrote earlier text: show from the divergence
            common = 0
            while common < min(len(text), len(self.shown)) and text[common] == self.shown[common]:
                common += 1
            self.shown = text[:common]
        piece = text[len(self.shown):]
        self.shown = text
        return piece


def from_prepared(tokenizer: Any, source: str, vocab_size: int,
                  template_origin: str = "") -> TextTokenizer:
    """Wrap a tokenizer someone already built (e.g. from GGUF metadata): a transformers tokenizer
    is taken as is; a bare ``tokenizers.Tokenizer`` is wrapped in ``PreTrainedTokenizerFast``."""
    if not callable(getattr(tokenizer, "decode", None)):
        raise TypeError(f"from_prepared: {type(tokenizer).__name__} is not a tokenizer (no decode)")
    if not hasattr(tokenizer, "apply_chat_template"):
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer)
    return TextTokenizer(tokenizer, source, vocab_size, template_origin or source)


def has_tokenizer_files(directory: Path) -> bool:
    return any((Path(directory) / name).is_file() for name in TOKENIZER_FILES[:2])


def load_tokenizer(ckpt: Any, spec: Any = None) -> TextTokenizer | None:
    """The tokenizer of ``ckpt`` (see the module docstring for the order), or ``None``.

    ``spec`` (a resolved MODEL) names the hub repo whose cache may hold the tokenizer files when
    the checkpoint directory does not."""
    vocab = int(ckpt.config.vocab_size)
    prepare = getattr(ckpt, "prepared_tokenizer", None)
    if callable(prepare):
        prepared = prepare()
        if prepared is not None:
            source = f"{getattr(ckpt, 'origin', 'checkpoint')} metadata"
            template = f"{getattr(ckpt, 'path', source)} (its chat template)"
            return from_prepared(prepared, source, vocab, template)
    directory = getattr(ckpt, "directory", None)
    if directory is not None and has_tokenizer_files(directory):
        return _auto_tokenizer(Path(directory), vocab)
    if str(getattr(ckpt, "origin", "")).startswith("hub:") and spec is not None and spec.repo_id:
        from ktir_models.model.weights.hub import tokenizer_dir

        cached = tokenizer_dir(spec.repo_id, spec.revision)
        if cached is not None and has_tokenizer_files(cached):
            return _auto_tokenizer(cached, vocab)
    return None


def _auto_tokenizer(directory: Path, vocab: int) -> TextTokenizer:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UserError("text needs transformers: pip install -e '.[torch]'") from None
    check_tokenizer_dir(directory)
    try:
        hf = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:  # noqa: BLE001  the libraries fail in many ways on bad files
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{directory}: cannot load its tokenizer (tokenizer.json, "
                        f"tokenizer_config.json): {first}") from None
    return TextTokenizer(hf, str(directory), vocab, template_origin(directory))


def eos_token_ids(ckpt: Any, tokenizer: TextTokenizer | None = None) -> set[int]:
    """The ids that end a generation: ``generation_config.json``'s ``eos_token_id`` (an id or a
    list), else ``config.json``'s, else the tokenizer's; empty when none says (token-id mode with a
    synthetic checkpoint generates exactly ``--steps``). A checkpoint that prepares its own
    tokenizer (a GGUF file with a vocabulary) says its EOS there, so its tokenizer's comes first:
    the folder around such a file may hold another model's configs."""
    if tokenizer is not None and tokenizer.eos_id is not None and callable(getattr(ckpt, "prepared_tokenizer", None)) \
            and tokenizer.source.endswith(" metadata"):
        return {tokenizer.eos_id}
    directory = getattr(ckpt, "directory", None)
    for name in ("generation_config.json", "config.json"):
        path = Path(directory) / name if directory is not None else None
        if path is None or not path.is_file():
            continue
        try:
            value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        ids = value if isinstance(value, list) else [value]
        found = {int(i) for i in ids if isinstance(i, int) and not isinstance(i, bool)}
        if found:
            return found
    if tokenizer is not None and tokenizer.eos_id is not None:
        return {tokenizer.eos_id}
    return set()
