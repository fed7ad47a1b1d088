"""gzip data read without trusting the stream.

A gzip member can expand a thousandfold; the reader decompresses at most ``max_bytes + 1`` bytes,
so a wrong or hostile file fails on its size without being inflated in full.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from .errors import InputFileError


def read_gzip_bytes(path: Path | str, max_bytes: int, what: str = "gzip data") -> bytes:
    """At most ``max_bytes + 1`` decompressed bytes of ``path``: a result longer than
    ``max_bytes`` means the stream holds more than that (the caller says why that is wrong)."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, f"cannot read {what}: " + ("file not found" if not path.exists()
                                                               else "not a regular file"))
    try:
        with gzip.open(path, "rb") as f:
            return f.read(max_bytes + 1)
    except gzip.BadGzipFile as exc:
        raise InputFileError(path, f"cannot read {what}: not gzip data ({exc})") from None
    except OSError as exc:
        raise InputFileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    except (EOFError, zlib.error) as exc:
        raise InputFileError(path, f"truncated or corrupt gzip data: {exc}") from None
