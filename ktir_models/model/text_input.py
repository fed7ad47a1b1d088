"""Real text as a forward's input: ``forward --prompt TEXT`` / ``--text FILE``.

The text goes through the checkpoint's own tokenizer (:mod:`.tokenizer`); its ids replace the
synthetic id formula. A pass at positions ``past .. past+m-1`` reads ids ``[past, past+m)`` of the
text, and the ``past`` ids before them are the prefix in the KV cache (our prefill writes it); an
external program of fixed m takes the text's first ``past + m`` tokens, and a text shorter than
that is a ``UserError`` (exit 2) saying how many tokens it has and how many the program needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ktir_models.errors import UserError


@dataclass(frozen=True)
class TextInput:
    """A tokenised text: its ids, where it came from (``--prompt`` or the file) and the tokenizer's."""

    ids: tuple[int, ...]
    where: str
    tokenizer: str

    def pass_ids(self, past: int, m: int, program: str) -> tuple[np.ndarray, np.ndarray | None]:
        """``(ids of the pass, ids of the prefix or None)`` for a pass of ``m`` tokens after ``past``."""
        need = past + m
        if len(self.ids) < need:
            after = f" after a prefix of {past}" if past else ""
            raise UserError(f"{self.where}: encodes to {len(self.ids)} tokens, but the program in {program} runs "
                            f"m={m} tokens per pass{after}: give a text of at least {need} tokens")
        ids = np.asarray(self.ids[past:need], dtype=np.int64)
        prefix = np.asarray(self.ids[:past], dtype=np.int64) if past else None
        return ids, prefix


def read_text(prompt: str | None, text_file: Path | None) -> tuple[str, str] | None:
    """``(text, where)`` from ``--prompt`` or ``--text FILE`` (not both), or None for neither."""
    if prompt is not None and text_file is not None:
        raise UserError("--prompt and --text: give one of them")
    if prompt is not None:
        return prompt, "--prompt"
    if text_file is None:
        return None
    try:
        return Path(text_file).read_text(encoding="utf-8"), f"--text {text_file}"
    except OSError as exc:
        raise UserError(f"--text {text_file}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"--text {text_file}: not UTF-8 text (byte {exc.start})") from None


def encode_text(ckpt: Any, spec: Any, text: str, where: str) -> TextInput:
    """Tokenise ``text`` with ``ckpt``'s tokenizer; a checkpoint without one is a UserError."""
    from .tokenizer import load_tokenizer

    tokenizer = load_tokenizer(ckpt, spec)
    if tokenizer is None:
        raise UserError(f"{where}: the checkpoint {getattr(ckpt, 'origin', '')} has no tokenizer "
                        f"(no tokenizer.json / tokenizer.model in {getattr(ckpt, 'directory', '?')}); "
                        "without text, forward uses synthetic token ids")
    return TextInput(tuple(tokenizer.encode(text, where=where)), where, tokenizer.source)
