"""Tokenizer and recursive-descent parser: KTIR text -> :mod:`ir`.

The tokenizer is one regular expression. Types (``tensor<...>``, ``memref<...>``,
``!ktdp.access_tile<...>``), affine maps/sets and ``#ktdp.*<...>`` attributes are single tokens, and
their parsed objects are cached by text: whole-model programs repeat the same few hundred of them
thousands of times, which keeps parsing of a 452-node program well under a second.

Every op gets the :class:`Location` of its first token. Undefined SSA names are reported here (the
parser must resolve operands anyway); the structural and type rules live in :mod:`verify`.
"""

from __future__ import annotations

import bisect
import gc
import re
import struct
from pathlib import Path

from . import affine
from .op_templates import OpTemplate
from .parse import generic_form
from .parse import tile_types
from .parse import types as frontend_types
from .errors import Diagnostic, KtirError, Location
from .ir import (INDEX, AccessTileType, Block, DenseConstant, ELEMENT_DTYPES, Function, MemorySpace,
                 MemRefType, Module, Op, Region, ScalarType, TensorType, TileFutureType, Value)

_P2 = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"
# One capture group: the token. Whitespace and // comments are skipped by the prefix. The kind of a
# token is derived from its text afterwards (_classify), which is much faster than named groups.
_TOKEN_RE = re.compile(
    r"(?:\s+|//[^\n]*)*("
    r"%[\w$.\-]+(?:#\d+)?"  # most frequent first: SSA names and plain punctuation
    r"|[,:=\[\](){}]"
    r"|affine_(?:map|set)<\s*\([^()]*\)\s*(?:\[[^\]]*\])?\s*(?:->|:)\s*" + _P2 + r"\s*>"
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


_SHAPE_RE = re.compile(r"((?:(?:\d+|\?)x)*)([a-z]\w*)$")

_type_cache: dict[str, object] = {}


def _shape_and_elem(body: str):
    m = _SHAPE_RE.match(body.replace(" ", ""))
    if m is None:
        return None
    dims = tuple(None if d == "?" else int(d) for d in m.group(1).split("x")[:-1])
    return dims, m.group(2)


def _tokenize_text(text: str) -> tuple[list[str], list[str], list[int]]:
    """Texts, kinds and start offsets of every token of ``text`` (trailing eof tokens dropped).

    The reference tokenizer: one pass of :data:`_TOKEN_RE` over the whole text."""
    found = [(m.start(1), m.group(1)) for m in _TOKEN_RE.finditer(text)]
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
        self.texts, self.kinds, self.rels = _tokenize_text(line + "\n")
        self.safe = "<" not in self.texts and '"' not in self.texts


_LINE_CACHE: dict[str, _LineTokens] = {}

# ops parsed before, keyed by their first four token texts (see op_templates.py); newest first
_OP_TEMPLATES: dict[tuple[str, str, str, str], list[OpTemplate]] = {}


class _LineOffsets:
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


def _tokenize(text: str) -> tuple[list[str], list[str], list[int] | _LineOffsets, list[int]]:
    """Texts, kinds and offsets of ``text``'s tokens, plus the offset where each line starts.

    Node files of one program repeat the same few thousand lines tens of thousands of times, so
    each distinct line is tokenized once (cached by its exact text) and the file's token lists
    are the concatenation of its lines' lists, offsets shifted by the line start. A line whose
    tokenization alone might differ from the whole text's (see :class:`_LineTokens`) sends the
    whole file to the reference tokenizer, so the result is always that of
    :func:`_tokenize_text`."""
    texts: list[str] = []
    kinds: list[str] = []
    starts: list[int] = []
    first: list[int] = []
    rels: list[list[int]] = []
    cache = _LINE_CACHE
    if len(cache) > 50_000:  # bound what a session of unrelated programs holds (~1 KiB a line)
        cache.clear()
    base = 0
    for line in text.split("\n"):
        starts.append(base)
        first.append(len(texts))
        entry = cache.get(line)
        if entry is None:
            entry = _LineTokens(line)
            cache[line] = entry
        if not entry.safe:
            texts, kinds, offs = _tokenize_text(text)
            return texts, kinds, offs, [0] + [m.end() for m in re.finditer("\n", text)]
        rels.append(entry.rels)
        if entry.texts:
            texts += entry.texts
            kinds += entry.kinds
        base += len(line) + 1
    return texts, kinds, _LineOffsets(first, rels, starts, len(texts), len(text)), starts


class _Parser:
    def __init__(self, text: str, filename: str, cached: bool = True):
        """``cached=False`` uses neither the line cache nor op templates (the reference path
        the tests compare the cached one with)."""
        self.text = text
        self.filename = filename
        self.diags: list[Diagnostic] = []
        self.templates = _OP_TEMPLATES if cached else None
        if cached:
            self.texts, self.kinds, self.offs, self._line_starts = _tokenize(text)
        else:
            self.texts, self.kinds, self.offs = _tokenize_text(text)
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        if "bad" in self.kinds:
            j = self.kinds.index("bad")
            raise KtirError.at(self.loc_at(self.offs[j]), f"unexpected character {self.texts[j]!r}")
        for _ in range(4):  # sentinels: peek(k) never runs off the end
            self.kinds.append("eof")
            self.texts.append("<end of file>")
        if type(self.offs) is list:
            self.offs += [len(text)] * 4
        self.pos = 0
        self.scopes: list[dict[str, Value]] = []
        self._lookups: list[tuple[str, Value]] = []  # of the op being parsed, for its template
        self.aliases: dict[str, object] = {}

    # -- basics ---------------------------------------------------------------------------
    def loc_at(self, offset: int) -> Location:
        line = bisect.bisect_right(self._line_starts, offset)
        return Location(self.filename, line, offset - self._line_starts[line - 1] + 1)

    def loc(self, i: int | None = None) -> Location:
        if i is None:
            i = self.pos
        offs = self.offs
        if type(offs) is _LineOffsets and i < offs.count:
            line, col = offs.line_col(i)
            return Location(self.filename, line, col)
        return self.loc_at(offs[i])

    def fail(self, message: str, i: int | None = None):
        raise KtirError(self.diags + [Diagnostic(self.loc(i), message)])

    def peek(self, k: int = 0) -> str:
        return self.texts[self.pos + k]

    def kind(self, k: int = 0) -> str:
        return self.kinds[self.pos + k]

    def next(self) -> str:
        t = self.texts[self.pos]
        if self.kinds[self.pos] == "eof":
            self.fail("unexpected end of file")
        self.pos += 1
        return t

    def accept(self, text: str) -> bool:
        if self.texts[self.pos] == text and self.kinds[self.pos] != "string":
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> None:
        if not self.accept(text):
            found = self.texts[self.pos]
            self.fail(f"expected '{text}'{' ' + what if what else ''}, found '{found}'")

    def expect_kind(self, kind: str, what: str) -> str:
        if self.kinds[self.pos] != kind:
            self.fail(f"expected {what}, found '{self.texts[self.pos]}'")
        return self.next()

    # -- values ---------------------------------------------------------------------------
    def lookup(self, name: str, i: int) -> Value:
        scopes = self.scopes
        k = len(scopes) - 1
        while k >= 0:
            v = scopes[k].get(name)
            if v is not None:
                self._lookups.append((name, v))
                return v
            k -= 1
        self.diags.append(Diagnostic(self.loc(i), f"use of undefined value '{name}'"))
        v = Value(name, ScalarType("<undefined>"), self.loc(i))
        self.scopes[-1][name] = v
        return v

    def operand(self) -> Value:
        i = self.pos
        name = self.expect_kind("ssa", "an SSA value (%name)")
        return self.lookup(name, i)

    def operand_list(self, close: str | None = None) -> list[Value]:
        vals: list[Value] = []
        if close is not None and self.peek() == close:
            return vals
        vals.append(self.operand())
        while self.peek() == "," and self.kind(1) == "ssa":
            self.pos += 1
            vals.append(self.operand())
        return vals

    def define(self, name: str, type_, loc: Location, owner: Op | None = None, index: int = 0):
        scope = self.scopes[-1]
        if name in scope and scope[name].type != ScalarType("<undefined>"):
            self.diags.append(Diagnostic(loc, f"redefinition of value '{name}'"))
        v = Value(name, type_, loc, owner, index)
        scope[name] = v
        return v

    # -- types ----------------------------------------------------------------------------
    def parse_type(self):
        i = self.pos
        kind, text = self.kinds[i], self.texts[i]
        if kind == "type" or kind == "anglety":
            self.pos += 1
            t = _type_cache.get(text)
            if t is None:
                t = self._type_from_text(text, i)
                _type_cache[text] = t
            return t
        if kind == "ident":
            if text in ELEMENT_DTYPES:
                self.pos += 1
                return ScalarType(text)
            self.fail(f"unknown type '{text}'")
        if text == "!ktdp.tile_future" or text == "<":
            if text == "!ktdp.tile_future":
                self.pos += 1
            self.expect("<")
            paren = self.accept("(")
            tensor = self.parse_type()
            if paren:
                self.expect(")")
            if not isinstance(tensor, TensorType):
                self.fail("tile_future wraps a tensor type", i)
            groups = None
            if self.accept(","):
                key = self.expect_kind("ident", "'groups'")
                if key != "groups":
                    self.fail(f"expected 'groups', found '{key}'")
                self.expect("=")
                groups = self.parse_attr_value()
                if not isinstance(groups, affine.AffineSet):
                    self.fail("tile_future groups must be an affine_set", i)
            self.expect(">", "closing the tile_future type")
            return TileFutureType(tensor, groups)
        self.fail(f"expected a type, found '{text}'")

    def _type_from_text(self, text: str, i: int):
        if text.startswith("<"):
            parsed = _shape_and_elem(text[1:-1])
            return AccessTileType(parsed[0])
        head, _, body = text.partition("<")
        body = body[:-1]
        if head == "vector":
            self.fail("vector types are not supported by the emulator", i)
        if head == "!ktdp.runtime_arg":
            return frontend_types.runtime_arg(body, self._fail_in_token(i, len(head) + 1))
        space = None
        if head == "memref" and "," in body:
            body, attr, at = frontend_types.split_memref_body(body)
            if attr is not None and attr.startswith("#"):
                space = self.memory_space(attr, i, self._fail_in_token(i, len(head) + 1 + at))
        if "," in body:
            self.fail(f"memref/tensor layouts and encodings are not supported: '{text}'", i)
        parsed = _shape_and_elem(body)
        if parsed is None:
            self.fail(f"malformed type '{text}'", i)
        dims, elem = parsed
        if head == "!ktdp.access_tile":
            if elem != "index":
                self.fail(f"access tile element type must be 'index', not '{elem}'", i)
            return AccessTileType(dims)
        if elem not in ELEMENT_DTYPES:
            self.fail(f"unknown element type '{elem}' in '{text}'", i)
        return TensorType(dims, elem) if head == "tensor" else MemRefType(dims, elem, space)

    def _fail_in_token(self, i: int, base: int):
        """A ``fail(message, offset)`` that locates ``offset`` characters past ``base`` inside
        token ``i`` (types and attributes are single tokens that may span lines)."""
        def fail(message: str, offset: int = 0):
            start = self.offs[i] + base + offset
            raise KtirError(self.diags + [Diagnostic(self.loc_at(start), message)])
        return fail

    def type_list(self) -> list:
        types = [self.parse_type()]
        while self.peek() == "," and self.kind(1) in ("type", "ident", "anglety", "bang") \
                or (self.peek() == "," and self.peek(1) == "<"):
            self.pos += 1
            types.append(self.parse_type())
        return types

    # -- attributes -----------------------------------------------------------------------
    def parse_attr_value(self):
        i = self.pos
        kind, text = self.kinds[i], self.texts[i]
        if kind == "affine":
            self.pos += 1
            body = text[text.index("<") + 1:-1]
            try:
                if text.startswith("affine_map"):
                    return affine.parse_map(body)
                return affine.parse_set(body)
            except affine.AffineSyntaxError as exc:
                start = self.offs[i] + text.index("<") + 1 + exc.offset
                raise KtirError(self.diags + [Diagnostic(self.loc_at(start), str(exc))]) from None
        if kind == "hashid":
            self.pos += 1
            if text not in self.aliases:
                self.fail(f"undefined attribute alias '{text}'", i)
            return self.aliases[text]
        if kind == "attr":
            self.pos += 1
            return self.memory_space(text, i)
        if kind == "string":
            self.pos += 1
            return text[1:-1]
        if text == "[":
            self.pos += 1
            items = []
            while not self.accept("]"):
                items.append(self.parse_attr_value())
                if not self.accept(","):
                    self.expect("]", "closing the array attribute")
                    break
            return items
        if kind in ("int", "float", "hex") or text == "-":
            return self.number()
        if kind == "ident" and text in ("true", "false"):
            self.pos += 1
            return text == "true"
        if kind == "ident" and text == "unit":
            self.pos += 1
            return True
        if kind == "dense":
            self.pos += 1
            return self.dense(text, i)
        if kind in ("type", "anglety") or (kind == "ident" and text in ELEMENT_DTYPES):
            return self.parse_type()
        self.fail(f"unsupported attribute value '{text}'")

    def attr_dict(self, value=None) -> dict:
        """``{name = value, flag, ...}``; ``value()`` parses one value (default
        :meth:`parse_attr_value`; the generic form passes its richer reader)."""
        value = value or self.parse_attr_value
        attrs: dict = {}
        self.expect("{")
        while not self.accept("}"):
            i = self.pos
            key = self.next()
            if self.kinds[i] not in ("ident", "string"):
                self.fail(f"expected an attribute name, found '{key}'", i)
            key = key.strip('"')
            if self.accept("="):
                attrs[key] = value()
            else:
                attrs[key] = True
            if not self.accept(","):
                self.expect("}", "closing the attribute dictionary")
                break
        return attrs

    def memory_space(self, text: str, i: int, fail=None) -> MemorySpace:
        """``fail(message)`` reports at the attribute (default: at token ``i``)."""
        if fail is None:
            def fail(message: str):
                self.fail(message, i)
        head, _, body = text.partition("<")
        parts = [p.strip() for p in body[:-1].split(",")]
        name = parts[0]
        core = None
        for extra in parts[1:]:
            key, eq, val = extra.partition("=")
            key = key.strip()
            if not eq or key not in ("ct_id", "core") or not val.strip().isdigit():
                fail(f"bad memory space parameter '{extra}'")
            core = int(val.strip())
        if head == "#ktdp.memory_space":
            kinds = {"global": "hbm", "ct_local": "lx"}
        elif head == "#ktdp.spyre_memory_space":
            kinds = {"HBM": "hbm", "LX": "lx", "L0": "lx", "unspecified": "hbm"}
        else:
            fail(f"unknown attribute '{head}'")
        if name not in kinds:
            fail(f"unknown memory space '{name}' (expected one of {', '.join(kinds)})")
        if core is not None and kinds[name] != "lx":
            # a core names whose scratchpad holds the data; HBM is shared by every core
            fail(f"memory space '{name}' cannot name a core (core = {core}): core affinity "
                 "belongs to a core's LX or L0 scratchpad only")
        return MemorySpace(kinds[name], core)

    def number(self):
        neg = self.accept("-")
        i = self.pos
        kind, text = self.kinds[i], self.texts[i]
        if kind == "int":
            self.pos += 1
            return -int(text) if neg else int(text)
        if kind == "float":
            self.pos += 1
            return -float(text) if neg else float(text)
        if kind == "hex":
            self.pos += 1
            return ("hex", int(text, 16))
        if kind == "ident" and text in ("inf", "nan"):
            self.pos += 1
            return -float(text) if neg else float(text)
        self.fail(f"expected a number, found '{text}'")

    def dense(self, text: str, i: int) -> DenseConstant:
        body = text[6:-1].strip()
        if body.startswith("["):
            flat = body.replace("[", " ").replace("]", " ").split(",")
            vals = tuple(self._literal(v.strip(), i) for v in flat if v.strip())
            return DenseConstant(vals, splat=False)
        return DenseConstant((self._literal(body, i),), splat=True)

    def _literal(self, s: str, i: int):
        try:
            if s in ("true", "false"):
                return s == "true"
            if s.lower().startswith("0x"):
                return ("hex", int(s, 16))
            if re.fullmatch(r"[-+]?\d+", s):
                return int(s)
            return float(s)
        except ValueError:
            self.fail(f"bad literal '{s}' in dense constant", i)

    # -- module / function ----------------------------------------------------------------
    def alias_definitions(self) -> None:
        """``#name = <attribute>`` lines; MLIR allows them anywhere at the top level (before
        their first use), e.g. between functions."""
        while self.kind() == "hashid" and self.peek(1) == "=":
            name = self.next()
            self.expect("=", "after the attribute alias name")
            self.aliases[name] = self.parse_attr_value()

    def parse_module(self) -> Module:
        module = Module(self.filename, loc=self.loc())
        self.alias_definitions()
        braced = generic_module = False
        if self.accept("module"):
            if self.kind() == "sym":
                self.pos += 1
            if self.accept("attributes"):
                self.attr_dict()
            self.expect("{", "opening the module body")
            braced = True
        while self.kind() != "eof":
            self.alias_definitions()
            if braced and self.peek() == "}":
                break
            if self.kind() == "eof":
                break
            if self.kind() == "string" and self.peek() == '"func.func"':
                fn = generic_form.parse_function(self)
            elif self.kind() == "string" and self.peek() == '"builtin.module"' and not braced:
                self.pos += 1  # "builtin.module"() ({ ... }) : () -> ()
                for t in ("(", ")", "(", "{"):
                    self.expect(t, "in the generic form of builtin.module")
                if self.kind() == "label":  # ^bb0:
                    self.pos += 1
                    self.expect(":", "after the block label")
                braced = generic_module = True
                continue
            else:
                if self.peek() not in ("func.func", "func"):
                    self.fail(f"expected 'func.func', found '{self.peek()}'")
                fn = self.parse_function()
            if fn.name in module.functions:
                self.diags.append(Diagnostic(fn.loc, f"redefinition of function @{fn.name}"))
            fn.module = module
            module.functions[fn.name] = fn
        if braced:
            self.expect("}", "closing the module")
            if generic_module:
                for t in (")", ":", "(", ")", "->", "(", ")"):
                    self.expect(t, "closing the generic form of builtin.module")
            self.alias_definitions()
        module.aliases = dict(self.aliases)
        if self.kind() != "eof":
            self.fail(f"unexpected '{self.peek()}' after the module")
        if self.diags:
            raise KtirError(self.diags)
        return module

    def parse_function(self) -> Function:
        loc = self.loc()
        self.next()
        name_i = self.pos
        name = self.expect_kind("sym", "a function name (@name)")[1:].strip('"')
        self.scopes = [{}]
        self.expect("(", "opening the argument list")
        args: list[Value] = []
        while not self.accept(")"):
            ai = self.pos
            aname = self.expect_kind("ssa", "an argument name")
            self.expect(":", "after the argument name")
            atype = self.parse_type()
            if self.kind() == "punct" and self.peek() == "{":
                self.attr_dict()
            args.append(self.define(aname, atype, self.loc(ai)))
            if not self.accept(","):
                self.expect(")", "closing the argument list")
                break
        results: list = []
        if self.accept("->"):
            if self.accept("("):
                while not self.accept(")"):
                    results.append(self.parse_type())
                    if self.kind() == "punct" and self.peek() == "{":
                        self.attr_dict()  # result attributes: nothing the emulator reads
                    self.accept(",")
            else:
                results.append(self.parse_type())
        attrs: dict = {}
        if self.accept("attributes"):
            attrs = self.attr_dict()
        grid = (1, 1, 1)
        if "grid" in attrs:
            g = attrs["grid"]
            if (not isinstance(g, list) or not 1 <= len(g) <= 3
                    or not all(isinstance(x, int) and x >= 1 for x in g)):
                self.fail("grid must be a list of 1 to 3 positive integers", name_i)
            grid = tuple(list(g) + [1] * (3 - len(g)))
        body = self.parse_region(open_scope=False)
        fn = Function(name, loc, args, body, attrs, grid, results=results)
        return fn

    def parse_region(self, block_args: list[Value] | None = None, open_scope: bool = True,
                     terminators: tuple[str, ...] = ()) -> Region:
        self.expect("{", "opening a region")
        if open_scope:
            self.scopes.append({})
        block = Block(list(block_args or []))
        for a in block.args:
            self.scopes[-1][a.name] = a
        if self.kind() == "label":
            self.pos += 1
            if self.accept("("):
                while not self.accept(")"):
                    ai = self.pos
                    aname = self.expect_kind("ssa", "a block argument")
                    self.expect(":")
                    at = self.parse_type()
                    block.args.append(self.define(aname, at, self.loc(ai)))
                    if not self.accept(","):
                        self.expect(")", "closing the block arguments")
                        break
            self.expect(":", "after the block label")
        texts, kinds, ops, parse_op = self.texts, self.kinds, block.ops, self.parse_op
        while texts[self.pos] != "}":
            if kinds[self.pos] == "eof":
                self.fail("unexpected end of file: missing '}'")
            ops.append(parse_op())
        self.pos += 1
        if open_scope:
            self.scopes.pop()
        return Region([block])

    # -- ops ------------------------------------------------------------------------------
    def parse_op(self) -> Op:
        start = self.pos
        cache = self.templates
        if cache is None:
            return self._parse_op(start)[0]
        texts = self.texts
        key = (texts[start], texts[start + 1], texts[start + 2], texts[start + 3])
        templates = cache.get(key)
        if templates is not None:
            for template in templates:
                op = template.replay(self, start)
                if op is not None:
                    return op
        outer_lookups = self._lookups
        self._lookups = lookups = []
        ndiags = len(self.diags)
        op, alias = self._parse_op(start)
        self._lookups = outer_lookups
        if len(self.diags) == ndiags:
            template = OpTemplate.record(texts, self.kinds, start, self.pos, op, lookups, alias)
            if template is not None:
                op.origin = template
                if len(cache) > 20_000:  # bound what unrelated programs pile up (~2 KiB a record)
                    cache.clear()
                templates = cache.setdefault(key, [])
                templates.insert(0, template)
                del templates[8:]
        return op

    def _parse_op(self, start: int) -> tuple[Op, str | None]:
        """The op at token ``start`` and the ``%x`` alias of a ``%x:N`` result list (or None)."""
        loc = self.loc()
        names: list[tuple[str, Location]] = []
        count = None
        if self.kind() == "ssa":
            while True:
                names.append((self.expect_kind("ssa", "a result name"), loc))
                if self.peek() == ":" and self.kind(1) == "int":
                    self.pos += 1
                    count = int(self.next())
                if not self.accept(","):
                    break
            self.expect("=", "after the result names")
        name_i = self.pos
        if self.kind() == "string":  # MLIR's generic form: "dialect.op"(...) ... : (...) -> ...
            opname = self.next()[1:-1]
            op = Op(opname, loc)
            result_types = generic_form.parse_op(self, op, name_i)
            opname = op.name
        else:
            if self.kind() != "ident":
                self.fail(f"expected an operation name, found '{self.peek()}'")
            opname = self.next()
            if opname == "func.return":
                opname = "return"
            elif opname == "call":
                opname = "func.call"
            handler = _HANDLERS.get(opname)
            if handler is None:
                self.fail(f"unknown operation '{opname}'", name_i)
            op = Op(opname, loc)
            result_types = handler(self, op) or []
        # bind results
        if count is not None:
            if len(names) != 1:
                self.fail("'%name:N' cannot be combined with other result names", start)
            base, nloc = names[0]
            names = [(f"{base}#{k}", nloc) for k in range(count)]
            alias = base
        else:
            alias = None
        if len(names) != len(result_types):
            self.fail(f"'{opname}' produces {len(result_types)} result(s) but "
                      f"{len(names)} name(s) are bound", start)
        for k, ((rname, rloc), rtype) in enumerate(zip(names, result_types)):
            op.results.append(self.define(rname, rtype, rloc, op, k))
        if alias is not None and op.results:
            self.scopes[-1][alias] = op.results[0]
        return op, alias


# ---------------------------------------------------------------------------------------------
# op handlers: parse the rest of the op after its name; return the result types

def _shaped_like(t, elem: str):
    if isinstance(t, TensorType):
        return TensorType(t.shape, elem)
    return ScalarType(elem)


def _h_constant(p: _Parser, op: Op):
    i = p.pos
    if p.kind() == "dense":
        p.pos += 1
        value = p.dense(p.texts[i], i)
    elif p.peek() in ("true", "false"):
        value = DenseConstant((p.next() == "true",), splat=True)
    else:
        value = DenseConstant((p.number(),), splat=True)
    p.expect(":", "before the constant's type")
    t = p.parse_type()
    op.attrs["value"] = value
    return [t]


def _h_simple(p: _Parser, op: Op):
    """``op [pred,] %a, %b, ... [attr] : T[, T...] [to T2]`` for arith/math elementwise ops."""
    name = op.name
    if name in ("arith.cmpi", "arith.cmpf"):
        pred = p.expect_kind("ident", "a comparison predicate")
        p.expect(",")
        op.attrs["predicate"] = pred
    op.operands = p.operand_list()
    if p.peek() == "fastmath" or p.kind() == "hashid" and p.peek().startswith("#arith"):
        while p.peek() != ":":
            p.next()
    if p.kind() == "punct" and p.peek() == "{":
        op.attrs.update(p.attr_dict())
    p.expect(":", f"before the type of '{name}'")
    types = p.type_list()
    op.attrs["types"] = types
    if p.accept("to"):
        to = p.parse_type()
        op.attrs["to"] = to
        return [to]
    if name in ("arith.cmpi", "arith.cmpf"):
        return [_shaped_like(types[0], "i1")]
    return [types[-1]]


def _h_get_tile_id(p: _Parser, op: Op):
    p.expect(":", "before the result types")
    return p.type_list()


def _bracket_ints_or_values(p: _Parser, what: str) -> tuple[list, list[Value]]:
    """``[4, %n, ...]`` -> static list (None marks a dynamic slot), dynamic operand list."""
    p.expect("[", f"opening {what}")
    static: list = []
    dyn: list[Value] = []
    while not p.accept("]"):
        if p.kind() == "ssa":
            static.append(None)
            dyn.append(p.operand())
        else:
            i = p.pos
            v = p.number()
            if not isinstance(v, int):
                p.fail(f"{what} entries must be integers or SSA values", i)
            static.append(v)
        if not p.accept(","):
            p.expect("]", f"closing {what}")
            break
    return static, dyn


def _h_memory_view(p: _Parser, op: Op):
    op.operands = [p.operand()]
    p.expect(",")
    for key in ("sizes", "strides"):
        p.expect(key, "in construct_memory_view")
        p.expect(":")
        static, dyn = _bracket_ints_or_values(p, key)
        op.attrs["static_" + key] = static
        op.groups[key] = dyn
        if key == "sizes":
            p.expect(",")
    op.attrs.update(p.attr_dict() if p.peek() == "{" else {})
    p.expect(":", "before the memref type")
    op.operands = op.operands + op.groups["sizes"] + op.groups["strides"]
    op.groups["offset"] = op.operands[:1]
    return [p.parse_type()]


def _h_distributed_view(p: _Parser, op: Op):
    p.expect("(")
    op.operands = p.operand_list()
    p.expect(":", "before the partition types")
    op.attrs["types"] = p.type_list()
    p.expect(")")
    if p.peek() == "{":
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the result type")
    return [p.parse_type()]


def _subscript_expr(p: _Parser, captured: list[Value], table: dict[str, tuple],
                    stop: tuple[str, ...]) -> affine.Expr:
    """Parse an affine expression over SSA names; new outer names are appended to ``captured``."""
    start = p.pos
    # fast path: a lone SSA name or integer (the common `%c0`, `%k7`, `3`)
    if p.texts[start + 1] in stop:
        kind, text = p.kinds[start], p.texts[start]
        if kind == "int":
            p.pos += 1
            return ("c", int(text))
        if kind == "ssa":
            p.pos += 1
            ref = table.get(text)
            if ref is None:
                captured.append(p.lookup(text, start))
                ref = ("d", len(captured) - 1)
                table[text] = ref
            return ref
    depth = 0
    while True:
        t = p.peek()
        if p.kind() == "eof":
            p.fail("unexpected end of file inside a subscript")
        if depth == 0 and t in stop:
            break
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        p.pos += 1
    toks = [(p.kinds[j] if p.kinds[j] != "int" else "num", p.texts[j], j)
            for j in range(start, p.pos)]
    if not toks:
        p.fail("empty subscript", start)

    def resolve(name: str):
        if not name.startswith("%"):
            return ("d", -1) if name in ("floordiv", "ceildiv", "mod") else None
        if name in table:
            return table[name]
        v = p.lookup(name, start)
        captured.append(v)
        ref = ("d", len(captured) - 1)
        table[name] = ref
        return ref

    ep = affine.ExprParser([(k if k != "ssa" else "ssa", t, j) for k, t, j in toks], resolve)
    try:
        e = ep.parse_expr()
        if ep.pos != len(toks):
            raise affine.AffineSyntaxError(f"unexpected {toks[ep.pos][1]!r} in subscript",
                                           toks[ep.pos][2])
    except affine.AffineSyntaxError as exc:
        p.fail(str(exc), exc.offset if isinstance(exc.offset, int) and exc.offset >= start
               else start)
    return e


def _symbols_clause(p: _Parser) -> list[Value]:
    if p.peek() == "[" and p.peek(1) == "symbols":
        p.pos += 2
        p.expect("(")
        vals = p.operand_list(")")
        p.expect(")")
        p.expect("]")
        return vals
    if p.peek() == "symbols":
        p.pos += 1
        p.expect("(")
        vals = p.operand_list(")")
        p.expect(")")
        return vals
    return []


def _h_access_tile(p: _Parser, op: Op):
    base = p.operand()
    p.expect("[", "opening the subscripts")
    captured: list[Value] = []
    table: dict[str, tuple] = {}
    exprs: list = []
    if not p.accept("]"):
        while True:
            exprs.append(_subscript_expr(p, captured, table, (",", "]")))
            if p.accept(","):
                continue
            p.expect("]", "closing the subscripts")
            break
    syms = _symbols_clause(p)
    op.attrs.update(p.attr_dict())
    generic_form.default_order(op, "access_tile_set", "access_tile_order")
    p.expect(":", "before the base type")
    base_t = p.parse_type()
    p.expect("->")
    result = p.parse_type()
    if isinstance(result, AccessTileType):
        op.attrs["access_tile_set"] = tile_types.clip_set_to_type(
            op.attrs.get("access_tile_set"), op.attrs.get("access_tile_order"), result.shape)
    op.attrs["base_map"] = affine.AffineMap(len(captured), 0, tuple(exprs))
    op.attrs["base_type"] = base_t
    op.groups = {"base": [base], "indices": captured, "symbols": syms}
    op.operands = [base] + captured + syms
    return [result]


def _h_indirect_tile(p: _Parser, op: Op):
    p.expect("intermediate_variables", "after construct_indirect_access_tile")
    p.expect("(")
    var_names: list[tuple[str, Location]] = []
    while not p.accept(")"):
        vi = p.pos
        var_names.append((p.expect_kind("ssa", "an intermediate variable"), p.loc(vi)))
        if not p.accept(","):
            p.expect(")")
            break
    base = p.operand()
    p.expect("[", "opening the subscripts")
    captured: list[Value] = []
    nvars = len(var_names)
    # variables come after captured values in the domain; give them provisional refs
    table: dict[str, tuple] = {n: ("v", k) for k, (n, _) in enumerate(var_names)}
    # A variable named like a value of an enclosing scope (`intermediate_variables(%c2, %k)`)
    # stands for that value plus its iterator: only sound when the iterator is pinned to 0,
    # which verify.py requires (outer_variables records them).
    outer: list[tuple[int, str]] = []
    for k, (n, _) in enumerate(var_names):
        if any(n in scope for scope in p.scopes):
            captured.append(p.lookup(n, p.pos))
            table[n] = ("+", ("v", k), ("d", len(captured) - 1))
            outer.append((k, n))
    subs: list[tuple] = []  # ("direct", expr) | ("indirect", index_view, [exprs])
    while True:
        if p.peek() == "ind":
            p.pos += 1
            p.expect("(")
            iv = p.operand()
            p.expect("[")
            exprs = []
            while True:
                exprs.append(_subscript_expr(p, captured, table, (",", "]")))
                if p.accept(","):
                    continue
                p.expect("]")
                break
            p.expect(")", "closing ind(...)")
            subs.append(("indirect", iv, exprs))
        else:
            subs.append(("direct", _subscript_expr(p, captured, table, (",", "]"))))
        if p.accept(","):
            continue
        p.expect("]", "closing the subscripts")
        break
    syms = _symbols_clause(p)
    op.attrs.update(p.attr_dict())
    p.expect(":", "before the operand types")
    types = p.type_list()
    p.expect("->")
    result = p.parse_type()
    ncap = len(captured)

    def fix(e):  # ("v", k) -> ("d", ncap + k)
        if e[0] == "v":
            return ("d", ncap + e[1])
        if e[0] in ("c", "d", "s"):
            return e
        return (e[0], fix(e[1]), fix(e[2]))

    kinds, maps, index_views = [], [], []
    for s in subs:
        if s[0] == "direct":
            kinds.append("direct")
            maps.append(affine.AffineMap(ncap + nvars, 0, (fix(s[1]),)))
        else:
            kinds.append("indirect")
            maps.append(affine.AffineMap(ncap + nvars, 0, tuple(fix(e) for e in s[2])))
            index_views.append(s[1])
    op.attrs["subscript_kinds"] = kinds
    op.attrs["subscript_maps"] = maps
    if isinstance(result, AccessTileType):
        generic_form.default_order(op, "variables_space_set", "variables_space_order")
        op.attrs["variables_space_set"] = tile_types.clip_set_to_type(
            op.attrs.get("variables_space_set"), op.attrs.get("variables_space_order"),
            result.shape)
    op.attrs["types"] = types
    op.attrs["num_variables"] = nvars
    op.attrs["variable_names"] = [n for n, _ in var_names]
    if outer:
        op.attrs["outer_variables"] = [k for k, _ in outer]
    op.groups = {"base": [base], "indirect": index_views, "captured": captured, "symbols": syms}
    op.operands = [base] + index_views + captured + syms
    return [result]


def _h_load(p: _Parser, op: Op):
    op.operands = [p.operand()]
    if p.peek() == "{":  # attr-dict (KtdpOps.td), e.g. {padding = -1.0} for masked points
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the access tile type")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    return [p.parse_type()]


def _h_store(p: _Parser, op: Op):
    op.operands = p.operand_list()
    p.expect(":", "before the operand types")
    op.attrs["types"] = p.type_list()
    return []


def _region_with_typed_args(p: _Parser) -> Region:
    return p.parse_region()


def _h_produce(p: _Parser, op: Op):
    p.expect("producer_tiles_per_group")
    p.expect("=")
    op.attrs["producer_tiles_per_group"] = p.parse_attr_value()
    if p.accept(":"):
        op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    result = p.parse_type()
    op.regions = [p.parse_region()]
    return [result]


def _h_reduce_tiles(p: _Parser, op: Op):
    p.expect("(")
    op.operands = [p.operand()]
    p.expect(")")
    while p.peek() != ":":
        key = p.expect_kind("ident", "an inter_tile_reduce clause")
        if key == "identity":
            p.expect("(")
            ident = p.operand()
            p.expect(":")
            p.parse_type()
            p.expect(")")
            op.groups["identity"] = [ident]
        else:
            p.expect("=")
            op.attrs[key] = p.parse_attr_value()
        p.accept(",")
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    result = p.parse_type()
    op.operands = op.operands + op.groups.get("identity", [])
    op.regions = [p.parse_region()]
    return [result]


def _h_yield(p: _Parser, op: Op):
    if p.kind() == "ssa":
        op.operands = p.operand_list()
        p.expect(":", "before the yielded types")
        op.attrs["types"] = p.type_list()
    return []


def _h_return(p: _Parser, op: Op):
    if p.kind() == "ssa":
        op.operands = p.operand_list()
        p.expect(":")
        op.attrs["types"] = p.type_list()
    return []


def _h_for(p: _Parser, op: Op):
    ivi = p.pos
    iv_name = p.expect_kind("ssa", "the induction variable")
    p.expect("=")
    lb = p.operand()
    p.expect("to")
    ub = p.operand()
    p.expect("step")
    st = p.operand()
    inits: list[Value] = []
    arg_names: list[tuple[str, Location]] = []
    if p.accept("iter_args"):
        p.expect("(")
        while not p.accept(")"):
            ai = p.pos
            arg_names.append((p.expect_kind("ssa", "an iter_args name"), p.loc(ai)))
            p.expect("=")
            inits.append(p.operand())
            if not p.accept(","):
                p.expect(")")
                break
    result_types: list = []
    if p.accept("->"):
        if p.accept("("):
            if not p.accept(")"):
                result_types = p.type_list()
                p.expect(")")
        else:
            result_types = [p.parse_type()]
    iv_type = INDEX
    if p.accept(":"):
        iv_type = p.parse_type()
    if len(result_types) != len(inits):
        p.fail(f"scf.for has {len(inits)} iter_args but {len(result_types)} result types", ivi)
    p.scopes.append({})
    args = [p.define(iv_name, iv_type, p.loc(ivi))]
    for (n, l), t in zip(arg_names, result_types):
        args.append(p.define(n, t, l))
    body = p.parse_region(args, open_scope=False)
    p.scopes.pop()
    op.operands = [lb, ub, st] + inits
    op.groups = {"bounds": [lb, ub, st], "inits": inits}
    op.regions = [body]
    return result_types


def _h_if(p: _Parser, op: Op):
    op.operands = [p.operand()]
    result_types: list = []
    if p.accept("->"):
        if p.accept("("):
            if not p.accept(")"):
                result_types = p.type_list()
                p.expect(")")
        else:
            result_types = [p.parse_type()]
    op.regions = [p.parse_region()]
    if p.accept("else"):
        op.regions.append(p.parse_region())
    return result_types


def _ins_outs(p: _Parser, key: str) -> tuple[list[Value], list]:
    p.expect(key)
    p.expect("(")
    vals = p.operand_list(")")
    types: list = []
    if p.accept(":"):
        types = p.type_list()
    p.expect(")", f"closing {key}(...)")
    return vals, types


def _h_linalg(p: _Parser, op: Op):
    """Named and generic linalg ops: clauses in any order until the op ends."""
    result_types: list = []
    while True:
        t = p.peek()
        k = p.kind()
        if t == "{" and k == "punct":
            if p.kind(1) == "ident" and p.peek(2) == "}":  # shorthand combiner { arith.addf }
                p.pos += 1
                op.attrs["combiner"] = p.next()
                p.pos += 1
            elif p.kind(1) == "ident" and p.peek(2) == "=":
                op.attrs.update(p.attr_dict())
            else:
                op.regions.append(p.parse_region())
        elif t == "ins" and p.peek(1) == "(":
            op.groups["ins"], op.attrs["in_types"] = _ins_outs(p, "ins")
        elif t == "outs" and p.peek(1) == "(":
            op.groups["outs"], op.attrs["out_types"] = _ins_outs(p, "outs")
        elif k == "ident" and p.peek(1) == "=" and t not in ("ins", "outs"):
            p.pos += 2
            op.attrs[t] = p.parse_attr_value()
        elif t == "(" and p.kind(1) == "ssa" and p.peek(2) == ":":
            # explicit region arguments: (%a: T, %b: T) { ... }
            p.pos += 1
            args = []
            while not p.accept(")"):
                ai = p.pos
                n = p.expect_kind("ssa", "a region argument")
                p.expect(":")
                args.append(Value(n, p.parse_type(), p.loc(ai)))
                if not p.accept(","):
                    p.expect(")")
                    break
            op.regions.append(p.parse_region(args))
        elif t == "->":
            p.pos += 1
            if p.accept("("):
                result_types = p.type_list()
                p.expect(")")
            else:
                result_types = p.type_list()
        else:
            break
    ins = op.groups.setdefault("ins", [])
    outs = op.groups.setdefault("outs", [])
    op.operands = ins + outs
    if not result_types:
        result_types = [o.type for o in outs if isinstance(o.type, TensorType)]
    return result_types


def _h_linalg_index(p: _Parser, op: Op):
    i = p.pos
    dim = p.number()
    if not isinstance(dim, int):
        p.fail("linalg.index takes an integer dimension", i)
    op.attrs["dim"] = dim
    p.expect(":")
    return [p.parse_type()]


def _h_empty(p: _Parser, op: Op):
    p.expect("(")
    op.operands = p.operand_list(")")
    p.expect(")")
    p.expect(":")
    return [p.parse_type()]


def _h_splat(p: _Parser, op: Op):
    op.operands = [p.operand()]
    if p.peek() == "[":  # dynamic sizes
        p.pos += 1
        op.operands += p.operand_list("]")
        p.expect("]")
    p.expect(":")
    return [p.parse_type()]


def _h_extract(p: _Parser, op: Op):
    op.operands = [p.operand()]
    p.expect("[")
    op.operands += p.operand_list("]")
    p.expect("]")
    p.expect(":")
    t = p.parse_type()
    op.attrs["types"] = [t]
    if not isinstance(t, TensorType):
        p.fail("tensor.extract needs a tensor type")
    return [ScalarType(t.elem)]


def _reassoc(p: _Parser) -> list[list[int]]:
    i = p.pos
    v = p.parse_attr_value()
    if not isinstance(v, list) or not all(isinstance(g, list) for g in v):
        p.fail("expected a reassociation list like [[0, 1], [2]]", i)
    return v


def _h_reshape(p: _Parser, op: Op):
    op.operands = [p.operand()]
    op.attrs["reassociation"] = _reassoc(p)
    if p.accept("output_shape"):
        static, dyn = _bracket_ints_or_values(p, "output_shape")
        op.attrs["output_shape"] = static
        op.operands += dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("into")
    return [p.parse_type()]


def _slice_lists(p: _Parser, op: Op):
    dyn_all: list[Value] = []
    for key in ("offsets", "sizes", "strides"):
        static, dyn = _bracket_ints_or_values(p, key)
        op.attrs["static_" + key] = static
        op.groups[key] = dyn
        dyn_all += dyn
    return dyn_all


def _h_extract_slice(p: _Parser, op: Op):
    src = p.operand()
    dyn = _slice_lists(p, op)
    op.operands = [src] + dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("to")
    return [p.parse_type()]


def _h_insert_slice(p: _Parser, op: Op):
    src = p.operand()
    p.expect("into")
    dst = p.operand()
    dyn = _slice_lists(p, op)
    op.operands = [src, dst] + dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("into")
    return [p.parse_type()]


def _h_from_elements(p: _Parser, op: Op):
    op.operands = p.operand_list()
    p.expect(":")
    return [p.parse_type()]


def _h_generate(p: _Parser, op: Op):
    op.operands = p.operand_list() if p.kind() == "ssa" else []
    op.regions = [p.parse_region()]
    p.expect(":")
    return [p.parse_type()]


_HANDLERS = {
    "arith.constant": _h_constant,
    "ktdp.get_compute_tile_id": _h_get_tile_id,
    "ktdp.construct_memory_view": _h_memory_view,
    "ktdp.construct_distributed_memory_view": _h_distributed_view,
    "ktdp.construct_access_tile": _h_access_tile,
    "ktdp.construct_indirect_access_tile": _h_indirect_tile,
    "ktdp.load": _h_load,
    "ktdp.store": _h_store,
    "ktdp.inter_tile_produce": _h_produce,
    "ktdp.inter_tile_reduce": _h_reduce_tiles,
    "ktdp.yield_partial": _h_yield,
    "ktdp.yield_reduced": _h_yield,
    "scf.for": _h_for,
    "scf.if": _h_if,
    "scf.yield": _h_yield,
    "linalg.yield": _h_yield,
    "tensor.yield": _h_yield,
    "return": _h_return,
    "linalg.index": _h_linalg_index,
    "tensor.empty": _h_empty,
    "tensor.splat": _h_splat,
    "tensor.extract": _h_extract,
    "tensor.expand_shape": _h_reshape,
    "tensor.collapse_shape": _h_reshape,
    "tensor.extract_slice": _h_extract_slice,
    "tensor.insert_slice": _h_insert_slice,
    "tensor.from_elements": _h_from_elements,
    "tensor.generate": _h_generate,
}
for _n in ("matmul", "matmul_transpose_b", "batch_matmul", "reduce", "broadcast", "transpose",
           "generic", "fill", "add", "sub", "mul", "div", "max", "min", "exp", "copy"):
    _HANDLERS["linalg." + _n] = _h_linalg
for _n in ("addf subf mulf divf remf negf absf maximumf minimumf maxf minf maxnumf minnumf "
           "addi subi muli divui divsi floordivsi ceildivsi remui remsi andi ori xori shli shrsi "
           "shrui minsi maxsi minui maxui cmpi cmpf select extf truncf sitofp uitofp fptosi "
           "fptoui index_cast index_castui extsi extui trunci bitcast").split():
    _HANDLERS["arith." + _n] = _h_simple
for _n in ("exp exp2 log log2 log10 log1p sqrt rsqrt tanh sin cos erf powf absf absi ceil floor "
           "fma round").split():
    _HANDLERS["math." + _n] = _h_simple

from .parse import ops_frontend as _ops_frontend  # noqa: E402  (handlers need no parser import)

_HANDLERS.update(_ops_frontend.HANDLERS)

KNOWN_OPS = frozenset(_HANDLERS)


def parse_text(text: str, filename: str = "<string>", cached: bool = True) -> Module:
    """Parse KTIR text into a :class:`Module` (no verification). Raises :class:`KtirError`.

    ``cached`` (the default) reuses tokenized lines and recorded op parses of earlier texts;
    the result is the same as with ``cached=False`` (tests/ktir/test_parse_cache.py)."""
    # The parser allocates many small objects and no garbage cycles; pausing the cyclic GC
    # avoids repeated full-heap scans while a large program is built (about a third of the time).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _Parser(text, filename, cached).parse_module()
    finally:
        if was_enabled:
            gc.enable()


def parse_file(path: str | Path) -> Module:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KtirError.at(Location(str(path), 0, 0), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KtirError.at(Location(str(path), 0, 0), f"cannot read file: {exc}") from None
    return parse_text(text, str(path))


def hex_float(bits: int, elem: str) -> float:
    """Reinterpret an integer bit pattern as a float of type ``elem``."""
    if elem == "f32":
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if elem == "f16":
        return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    if elem == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0]
    raise ValueError(elem)
