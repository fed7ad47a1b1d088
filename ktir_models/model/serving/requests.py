"""The requests file of ``serve``: JSON Lines, one request per line.

``{"id": "r1", "prompt": "text"}`` (the checkpoint's tokenizer) or ``{"id": "r1", "ids": [..]}``,
with ``"max_new_tokens": N`` and optionally ``"arrival": STEP`` (the scheduler step from which it
may start; default 0). Blank lines are skipped. Every problem is one :class:`RequestsError` naming
the file and line (exit 2): bad JSON, a missing or unknown field, a wrong type, a negative or huge
number, an id outside the vocabulary, a duplicate request id, too many requests.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UserError

#: Bounds that keep a requests file to what one emulated serve can run.
MAX_REQUESTS = 4096
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_ARRIVAL = 1_000_000
MAX_ID_CHARS = 200
FIELDS = ("id", "prompt", "ids", "max_new_tokens", "arrival")


class RequestsError(UserError):
    """A malformed requests file (exit 2), with its file and line."""


@dataclass(frozen=True)
class Request:
    """One request: ``prompt_ids`` (tokenised), up to ``max_new_tokens`` greedy tokens, admitted
    no earlier than step ``arrival``; ``text`` is the prompt when it was given as text; ``line``
    is its line in the file."""

    id: str
    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    arrival: int = 0
    text: str | None = None
    line: int = 0


def read_requests(path: Path, vocab_size: int, max_positions: int,
                  tokenizer: Any = None) -> list[Request]:
    """Parse and validate ``path`` (module docstring). ``tokenizer`` (a model.tokenizer
    TextTokenizer, or None) encodes ``prompt`` texts; ``max_positions`` bounds prompt +
    max_new_tokens (the model's position range)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise RequestsError(f"{path}: {size} bytes, more than the {MAX_FILE_BYTES} a "
                                "requests file may hold")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RequestsError(f"{path}: no such requests file") from None
    except IsADirectoryError:
        raise RequestsError(f"{path}: is a directory, not a requests file") from None
    except UnicodeDecodeError as exc:
        raise RequestsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise RequestsError(f"{path}: cannot read it ({exc.strerror})") from None
    return parse_requests(text.splitlines(), str(path), vocab_size, max_positions, tokenizer)


def parse_requests(lines: list[str], source: str, vocab_size: int, max_positions: int,
                   tokenizer: Any = None) -> list[Request]:
    """Requests from JSON ``lines`` (line numbers from 1; ``source`` names them in errors)."""
    out: list[Request] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        if len(out) == MAX_REQUESTS:
            raise RequestsError(f"{where}: more than {MAX_REQUESTS} requests")
        req = _request(raw, where, number, vocab_size, max_positions, tokenizer)
        if req.id in seen:
            raise RequestsError(f"{where}: request id {req.id!r} already used on line "
                                f"{seen[req.id]}")
        seen[req.id] = number
        out.append(req)
    if not out:
        raise RequestsError(f"{source}: no requests (one JSON object per line)")
    return out


def _request(raw: str, where: str, line: int, vocab: int, max_positions: int,
             tokenizer: Any) -> Request:
    try:
        doc = json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise RequestsError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:
        raise RequestsError(f"{where}: {exc}") from None
    if not isinstance(doc, dict):
        raise RequestsError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise RequestsError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(FIELDS)})")
    rid = doc.get("id")
    if not isinstance(rid, str) or not rid or len(rid) > MAX_ID_CHARS:
        raise RequestsError(f"{where}: \"id\": expected a non-empty string of at most "
                            f"{MAX_ID_CHARS} characters, got {_show(rid)}")
    where = f"{where} (request {rid!r})"
    if ("prompt" in doc) == ("ids" in doc):
        raise RequestsError(f"{where}: give exactly one of \"prompt\" (text) and \"ids\" "
                            "(token ids)")
    if "max_new_tokens" not in doc:
        raise RequestsError(f"{where}: \"max_new_tokens\": missing")
    text = None
    if "prompt" in doc:
        text = doc["prompt"]
        if not isinstance(text, str) or not text:
            raise RequestsError(f"{where}: \"prompt\": expected a non-empty string, got "
                                f"{_show(text)}")
        if tokenizer is None:
            raise RequestsError(f"{where}: \"prompt\": the checkpoint has no tokenizer; "
                                "give \"ids\"")
        ids = tokenizer.encode(text, where=f"{where}: \"prompt\"")
    else:
        ids = doc["ids"]
        if not isinstance(ids, list) or not ids:
            raise RequestsError(f"{where}: \"ids\": expected a non-empty list of token ids, "
                                f"got {_show(ids)}")
        for k, t in enumerate(ids):
            if not _is_int(t) or not 0 <= t < vocab:
                raise RequestsError(f"{where}: \"ids\"[{k}] = {_show(t)}: expected a token id in "
                                    f"[0, {vocab}) (the model's vocabulary)")
    room = max_positions - len(ids)
    new = doc["max_new_tokens"]
    if not _is_int(new) or not 1 <= new <= max(room, 0):
        limit = (f"[1, {room}] (the model's {max_positions} positions minus the prompt's "
                 f"{len(ids)})"
                 if room >= 1 else f"nothing: the prompt's {len(ids)} tokens fill the model's "
                 f"{max_positions} positions")
        raise RequestsError(f"{where}: \"max_new_tokens\" = {_show(new)}: expected an integer "
                            f"in {limit}")
    arrival = doc.get("arrival", 0)
    if not _is_int(arrival) or not 0 <= arrival <= MAX_ARRIVAL:
        raise RequestsError(f"{where}: \"arrival\" = {_show(arrival)}: expected an integer step in "
                            f"[0, {MAX_ARRIVAL}]")
    return Request(rid, tuple(int(t) for t in ids), int(new), int(arrival), text, line)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _show(value: Any) -> str:
    finite = not (isinstance(value, float) and not math.isfinite(value))
    text = json.dumps(value) if finite else str(value)
    return text if len(text) <= 40 else text[:37] + "..."
