"""The tokenizer of KTIR text: one regular expression, token kinds derived from the text, and
a per-line cache whose concatenation is exactly the whole text's tokenization.

Types (``tensor<...>``, ``memref<...>``, ``!ktdp.access_tile<...>``), affine maps/sets and
``#ktdp.*<...>`` attributes are single tokens (the parser caches their parsed objects by text).
"""

from __future__ import annotations

import bisect
import re

from .bounds import MAX_LINE_CHARS, MAX_LITERAL_CHARS, MAX_TOKEN_CHARS


class TokenBoundError(Exception):
    """A line or token over its bound (parse/bounds.py); ``offset`` is where it starts in the
    text. The parser turns it into a located error."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset

# affine_map/affine_set results: parentheses nested up to AFFINE_PAREN_DEPTH levels (a regular
# expression cannot count; each level is spelled out, and the alternatives of a level start with
# different characters, so matching never backtracks more than one character)
AFFINE_PAREN_DEPTH = 16
_PAREN = r"\([^()]*\)"
for _ in range(AFFINE_PAREN_DEPTH - 1):
    _PAREN = r"\((?:[^()]|" + _PAREN + r")*\)"
# One capture group: the token. Whitespace and // comments are skipped by the prefix. The kind of a
# token is derived from its text afterwards (_classify), which is much faster than named groups.
_TOKEN_RE = re.compile(
    r"(?:\s+|//[^\n]*)*("
    r"%[\w$.\-]+(?:#\d+)?"  # most frequent first: SSA names and plain punctuation
    r"|[,:=\[\](){}]"
    r"|affine_(?:map|set)<\s*\([^()]*\)\s*(?:\[[^\]]*\])?\s*(?:->|:)\s*" + _PAREN + r"\s*>"
    r"|(?:tensor|memref|vector)<[^<>]*(?:<[^<>]*>[^<>]*)*>"  # memref<4xf16, #ms<HBM>> nests once
    r"|dense<[^<>]*>"
    r"|[A-Za-z_][\w$.]*"
    r"|0x[0-9a-fA-F]+"
    r"|\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+"
    r"|\d+"
    r"|!ktdp\.(?:access_tile|runtime_arg)<[^<>]*>"
    r"|#[\w$.]+<[^<>]*>"
    r"|<(?:[\d?]+x)*index>"
    r"|#[\w$.]+"
    r"|![\w$.]+"
    r"|@[\w$.\"]+"
    r"|\^[\w$.]+"
    r"|\"(?:[^\"\\\n]|\\.)*\""
    r"|->"
    r"|[<>+\-*?]"
    r"|.|$)", re.S)

_FIRST_KIND = {"%": "ssa", "@": "sym", "^": "label", '"': "string"}


_KIND_CACHE: dict[str, str] = {}


def _classify_new(t: str) -> str:
    k = _classify(t)
    if len(_KIND_CACHE) > 1_000_000:
        _KIND_CACHE.clear()
    _KIND_CACHE[t] = k
    return k


def _classify(t: str) -> str:
    c = t[:1]
    k = _FIRST_KIND.get(c)
    if k is not None:
        return k
    if c.isdigit():
        if len(t) > MAX_LITERAL_CHARS:
            return "long"  # refused by the parser with the literal bound's message
        if t[:2] in ("0x", "0X") and len(t) > 2:
            return "hex"
        return "float" if ("." in t or "e" in t or "E" in t) else "int"
    if c.isalpha() or c == "_":
        if t[-1] == ">":
            if t.startswith("affine_"):
                return "affine"
            if t.startswith("dense<"):
                return "dense"
            return "type"
        return "ident"
    if c == "#":
        return "attr" if t[-1] == ">" else "hashid"
    if c == "!":
        return "type" if t[-1] == ">" else "bang"
    if c == "<":
        return "anglety" if len(t) > 1 else "punct"
    if t == "->":
        return "arrow"
    if t == "":
        return "eof"
    if t in "()[]{}<>,:=+-*?":
        return "punct"
    return "bad"


def tokenize_text(text: str) -> tuple[list[str], list[str], list[int]]:
    """Texts, kinds and start offsets of every token of ``text`` (trailing eof tokens dropped).

    The reference tokenizer: one pass of :data:`_TOKEN_RE` over the whole text. Raises
    :class:`TokenBoundError` for a line or token over its bound."""
    base = 0
    for line in text.split("\n"):
        if len(line) > MAX_LINE_CHARS:
            raise TokenBoundError(f"line of {len(line)} characters is too long (at most "
                                  f"{MAX_LINE_CHARS})", base)
        base += len(line) + 1
    found = [(m.start(1), m.group(1)) for m in _TOKEN_RE.finditer(text)]
    for off, t in found:
        if len(t) > MAX_TOKEN_CHARS:
            raise TokenBoundError(f"token of {len(t)} characters is too long (at most "
                                  f"{MAX_TOKEN_CHARS})", off)
    offs = [o for o, _ in found]
    texts = [t for _, t in found]
    known = _KIND_CACHE.get
    kinds = [known(t) or _classify_new(t) for t in texts]
    while kinds and kinds[-1] == "eof":
        kinds.pop()
        texts.pop()
        offs.pop()
    return texts, kinds, offs


class _LineTokens:
    """The tokens of one source line tokenized on its own (offsets relative to the line start).

    ``safe`` is False when the line holds a lone ``<`` or ``"`` token: the only ways a token of
    the whole text can run across a line end (a type, affine map/set, dense or ``#attr<...>``
    whose closing ``>`` is on a later line; a string continued with a backslash) leave one of
    those two tokens behind when the line is tokenized alone. Without them, every token of the
    line ends before its newline, so the whole text's tokens are exactly the concatenation of
    its lines' tokens (the regex picks a token from the text at its start up to the token's end,
    and skipped whitespace/comments never hide a newline-crossing token)."""

    __slots__ = ("texts", "kinds", "rels", "safe")

    def __init__(self, line: str):
        # the newline belongs to the line: a token's end is decided with the same next character
        self.texts, self.kinds, self.rels = tokenize_text(line + "\n")
        self.safe = "<" not in self.texts and '"' not in self.texts


LINE_CACHE: dict[str, _LineTokens] = {}

class LineOffsets:
    """Token index -> offset in the text, for a text tokenized line by line.

    Computed only when asked (for an op's or a value's Location, or an error): building one int
    per token up front cost more than the rest of tokenizing. ``first[k]`` is the index of line
    k's first token (lines without tokens repeat the next line's), ``rels[k]`` its tokens'
    offsets from the line start; indices past the last token are the end of the text (the
    parser's sentinels)."""

    __slots__ = ("first", "rels", "starts", "count", "end")

    def __init__(self, first: list[int], rels: list[list[int]], starts: list[int], count: int,
                 end: int):
        self.first, self.rels, self.starts, self.count, self.end = first, rels, starts, count, end

    def line_col(self, i: int) -> tuple[int, int]:
        """1-based line and column of token ``i`` (``i < count``)."""
        k = bisect.bisect_right(self.first, i) - 1  # the last line starting at or before i
        return k + 1, self.rels[k][i - self.first[k]] + 1

    def __getitem__(self, i: int) -> int:
        if i >= self.count:
            return self.end
        line, col = self.line_col(i)
        return self.starts[line - 1] + col - 1


def tokenize(text: str) -> tuple[list[str], list[str], list[int] | LineOffsets, list[int]]:
    """Texts, kinds and offsets of ``text``'s tokens, plus the offset where each line starts.

    Node files of one program repeat the same few thousand lines tens of thousands of times, so
    each distinct line is tokenized once (cached by its exact text) and the file's token lists
    are the concatenation of its lines' lists, offsets shifted by the line start. A line whose
    tokenization alone might differ from the whole text's (see :class:`_LineTokens`) sends the
    whole file to the reference tokenizer, so the result is always that of
    :func:`tokenize_text`."""
    texts: list[str] = []
    kinds: list[str] = []
    starts: list[int] = []
    first: list[int] = []
    rels: list[list[int]] = []
    cache = LINE_CACHE
    if len(cache) > 50_000:  # bound what a session of unrelated programs holds (~1 KiB a line)
        cache.clear()
    base = 0
    for line in text.split("\n"):
        starts.append(base)
        first.append(len(texts))
        entry = cache.get(line)
        if entry is None:
            if len(line) > MAX_LINE_CHARS:
                raise TokenBoundError(f"line of {len(line)} characters is too long (at most "
                                      f"{MAX_LINE_CHARS})", base)
            entry = _LineTokens(line)
            cache[line] = entry
        if not entry.safe:
            texts, kinds, offs = tokenize_text(text)
            return texts, kinds, offs, [0] + [m.end() for m in re.finditer("\n", text)]
        rels.append(entry.rels)
        if entry.texts:
            texts += entry.texts
            kinds += entry.kinds
        base += len(line) + 1
    return texts, kinds, LineOffsets(first, rels, starts, len(texts), len(text)), starts
