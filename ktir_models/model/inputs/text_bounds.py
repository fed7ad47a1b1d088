"""The bounds every text meets before a tokenizer sees it (``--prompt``, ``--text``, ``--chat``).

Valid Unicode (a lone surrogate, which Python makes of argv bytes that are not UTF-8, cannot be
encoded) of at most :data:`MAX_TEXT_BYTES` as UTF-8; anything else is a UserError naming where the
text came from.
"""

from __future__ import annotations

from ktir_models.errors import UserError

#: The most text ``--prompt`` / ``--text`` may hold, as UTF-8 bytes: about 250k tokens of English,
#: more than any supported model's positions, and far below what the tokenizer library can take.
MAX_TEXT_BYTES = 1 << 20


def check_text(text: str, where: str) -> str:
    """``text`` itself when it is valid Unicode of at most :data:`MAX_TEXT_BYTES` as UTF-8, else a
    UserError naming ``where`` (a lone surrogate, as a shell passes undecodable argv bytes, cannot
    reach the tokenizer)."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UserError(f"{where}: not valid Unicode text (a lone surrogate {text[exc.start]!r} at "
                        f"character {exc.start}; pass UTF-8 text)") from None
    if size > MAX_TEXT_BYTES:
        raise UserError(f"{where}: {size} bytes of text, more than the {MAX_TEXT_BYTES} bytes "
                        "a pass can use")
    return text
