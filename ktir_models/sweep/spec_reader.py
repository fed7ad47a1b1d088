"""Reading a sweep spec file with bounds: what reaches the TOML parser is small, text, and shallow.

Invariants (each breach is one UserError naming the file, and the line where one applies):

* the spec is a regular file: its type is checked with ``stat`` before it is opened, and it is
  opened non-blocking and checked again, so a FIFO or a device is refused and never waited on;
* at most ``MAX_SPEC_BYTES`` bytes are read;
* the bytes are UTF-8 (the first bad byte is reported by line and column);
* brackets (``[``, ``{``) outside strings and comments nest at most ``MAX_SPEC_DEPTH`` deep,
  checked on the text before the parser sees it (tomllib recurses once per level), and the
  parsed document (dotted keys and table headers included) nests no deeper either.
"""

from __future__ import annotations

import os
import re
import reprlib
import stat
import tomllib
from pathlib import Path
from typing import Any

from ..errors import UserError

MAX_SPEC_BYTES = 1 << 20
MAX_SPEC_DEPTH = 8

# Strings and comments, whose brackets do not nest, or one bracket. A string left open matches
# none of the string forms; the parser then reports it.
_TOKENS = re.compile(r'"""(?:\\.|[^\\])*?"""|\'\'\'.*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\''
                     r"|#[^\n]*|[\[\]{}]", re.S)
_SHOW = reprlib.Repr()
_SHOW.maxstring, _SHOW.maxother, _SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict = 60, 60, 2, 4, 4


def show(value: Any) -> str:
    """A short repr of a spec value for messages (long strings and deep values abridged)."""
    return _SHOW.repr(value)


def read_spec(path: Path) -> dict[str, Any]:
    """The parsed TOML document of ``path`` (see the module docstring for what is refused)."""
    path = Path(path)
    text = _decode(path, _read_bounded(path))
    _check_text_depth(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # the text check bounds nesting first; this is its safety net
        raise UserError(f"{path}: nested more than {MAX_SPEC_DEPTH} levels deep") from None
    _check_document_depth(path, data)
    return data


def _read_bounded(path: Path) -> bytes:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the sweep spec: {exc.strerror or exc}") from None
    _require_regular(path, info.st_mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UserError(f"{path}: cannot read the sweep spec: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        _require_regular(path, os.fstat(fh.fileno()).st_mode)  # replaced since the stat
        try:
            raw = fh.read(MAX_SPEC_BYTES + 1)
        except OSError as exc:
            raise UserError(f"{path}: cannot read the sweep spec: {exc.strerror or exc}") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise UserError(f"{path}: the sweep spec is larger than {MAX_SPEC_BYTES} bytes")
    return raw


def _require_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    what = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise UserError(f"{path}: the sweep spec is {what} (expected a regular TOML file)")


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UserError(f"{path}:{line}:{column}: not UTF-8 (byte 0x{raw[exc.start]:02x}); "
                        "a sweep spec is UTF-8 text") from None


def _check_text_depth(path: Path, text: str) -> None:
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_SPEC_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise UserError(f"{path}:{line}: nested more than {MAX_SPEC_DEPTH} levels deep")
        elif token in "]}":
            depth = max(0, depth - 1)


def _check_document_depth(path: Path, data: Any) -> None:
    """The parsed document's depth, walked without recursion (dotted keys nest without brackets)."""
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_SPEC_DEPTH:
            raise UserError(f"{path}: nested more than {MAX_SPEC_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
