"""JSON files with bounds: depth, integer size, finite numbers, file size.

Python's ``json`` recurses once per nesting level (a document nested 200000 deep raises
RecursionError) and refuses integers over 4300 digits with a ValueError; both are turned into an
:class:`InputFileError` here, and tighter bounds apply: :data:`MAX_DEPTH` levels,
:data:`MAX_INT_DIGITS` digits, finite floats only (``NaN``/``Infinity`` are not JSON).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .errors import InputFileError

MAX_DEPTH = 64
MAX_INT_DIGITS = 40  # far above any size or id a manifest or config holds (2^64 has 20)
MAX_JSON_BYTES = 512 << 20


class _Refused(ValueError):
    """A number the hooks below refuse; carries the reason."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {text[:30]} is outside the float64 range")
    return value


def _parse_constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON value")


def _depth_at_most(doc: Any, limit: int) -> bool:
    """True when ``doc`` nests at most ``limit`` containers deep (iterative: no recursion)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return False
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


def read_json_text(text: str, where: Path | str) -> Any:
    """Parse JSON ``text``; errors name ``where`` (with line:col for syntax errors)."""
    try:
        doc = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{where}:{exc.lineno}:{exc.colno}", f"invalid JSON: {exc.msg}") from None
    except _Refused as exc:
        raise InputFileError(where, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise InputFileError(where, f"invalid JSON: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. Python's own integer-string limit
        raise InputFileError(where, f"invalid JSON: {exc}") from None
    if not _depth_at_most(doc, MAX_DEPTH):
        raise InputFileError(where, f"invalid JSON: nested deeper than {MAX_DEPTH} levels")
    return doc


def read_json(path: Path | str, what: str = "JSON") -> Any:
    """Read and parse the JSON file ``path`` (``what`` says what it should hold, for messages)."""
    path = Path(path)
    try:
        if not path.is_file():
            raise InputFileError(path, f"cannot read {what}: " + ("file not found" if not path.exists()
                                                                   else "not a regular file"))
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise InputFileError(path, f"{size} bytes, larger than any {what} file ({MAX_JSON_BYTES} bytes at most)")
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return read_json_text(text, path)
