"""Real text as a forward's input: ``forward --prompt TEXT`` / ``--text FILE``.

The text goes through the checkpoint's own tokenizer (:mod:`.tokenizer`); its ids replace the
synthetic id formula. A pass at positions ``past .. past+m-1`` reads ids ``[past, past+m)`` of the
text, and the ``past`` ids before them are the prefix in the KV cache (our prefill writes it); an
external program of fixed m takes the text's first ``past + m`` tokens, and a text shorter than
that is a ``UserError`` (exit 2) saying how many tokens it has and how many the program needs.
Text is bounded before the tokenizer sees it (:data:`MAX_TEXT_BYTES`, valid Unicode, a regular
file): anything else is a ``UserError`` naming the option.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ktir_models.errors import UserError
from ktir_models.model.inputs.text_bounds import MAX_TEXT_BYTES, check_text


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


def read_text_file(path: Path) -> str:
    """The UTF-8 text of the regular file ``path``, at most :data:`MAX_TEXT_BYTES`; a UserError
    naming ``--text`` and the file for anything else. The file's type and size come from ``stat``
    before it is opened, so a FIFO without a writer, ``/dev/zero`` or a 50 MB file costs nothing;
    it is opened non-blocking and read with the bound in case it was replaced in between."""
    where = f"--text {path}"
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UserError(f"{where}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO, socket or device"
        raise UserError(f"{where}: is {kind}, not a regular file")
    if st.st_size > MAX_TEXT_BYTES:
        raise UserError(f"{where}: {st.st_size} bytes, more than the {MAX_TEXT_BYTES} bytes "
                        "of text a pass can use (cut the text to its first part)")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UserError(f"{where}: is no longer a regular file")
            raw = f.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{where}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_TEXT_BYTES:
        raise UserError(f"{where}: grew past {MAX_TEXT_BYTES} bytes while it was read")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where}: not UTF-8 text (byte {exc.start})") from None


def read_text(prompt: str | None, text_file: Path | None) -> tuple[str, str] | None:
    """``(text, where)`` from ``--prompt`` or ``--text FILE`` (not both), or None for neither."""
    if prompt is not None and text_file is not None:
        raise UserError("--prompt and --text: give one of them")
    if prompt is not None:
        return check_text(prompt, "--prompt"), "--prompt"
    if text_file is None:
        return None
    return read_text_file(Path(text_file)), f"--text {text_file}"


def encode_text(ckpt: Any, spec: Any, text: str, where: str) -> TextInput:
    """Tokenise ``text`` with ``ckpt``'s tokenizer; a checkpoint without one is a UserError."""
    from .tokenizer import load_tokenizer

    tokenizer = load_tokenizer(ckpt, spec)
    if tokenizer is None:
        raise UserError(f"{where}: the checkpoint {getattr(ckpt, 'origin', '')} has no tokenizer "
                        f"(no tokenizer.json / tokenizer.model in {getattr(ckpt, 'directory', '?')}); "
                        "without text, forward uses synthetic token ids")
    return TextInput(tuple(tokenizer.encode(text, where=where)), where, tokenizer.source)
