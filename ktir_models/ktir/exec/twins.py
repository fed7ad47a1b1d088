"""Twin files: node files that are the same text up to their function's name and argument names.

Real emitters write one file per node, and the nodes of every layer of a model are the same
kernel: the files differ only in the function symbol (``@..._n5`` / ``@..._n105``) and in the
names of the arguments (``%t337_ptr`` / ``%t1337_ptr``). Parsing, verifying and compiling each of
them again repeats the same work; here it is done once per *twin key* and the twins are derived.

The twin rule. The *renamed tokens* of a file are its function's symbol ``@f`` and its argument
names ``%a0 .. %an`` (from its first ``func.func @f(...)`` header in the custom syntax), counted
as whole tokens of the lexer (``%a0`` in ``%a0_view`` or ``%a0#1`` is not one). A file parsed and
verified becomes the *first* of a twin key (a :class:`Skeleton`) when it holds exactly one
function, which has those names, no other value of the function bears an argument's name, the
symbol stands once in the text (no call names it), no other token is an argument's name with a
``#k`` suffix, and no renamed token may stand in a string or a comment (no ``"`` and no ``//``
before it on its line). A later file is its *twin* when its header has the same argument list up
to the names, its text is exactly the first's with each renamed token replaced by the twin's
(symbol by symbol, argument k by argument k), and no name of the twin is a token the first's text
holds elsewhere. The two token streams then differ exactly in the renamed tokens, one to one, so
the twin's parse is the first's parse with those names changed: same ops, types, attributes,
verdict and compiled steps. A one-character difference anywhere else makes another key.

The location rule. Renaming changes no line; on a line, every token after a renamed token shifts
by the difference of the two names' lengths, and nothing else moves. A twin's IR is a copy of the
first file's in which every Location (module, function, argument, op, result, block argument)
names the twin's file, keeps its line, and has its column shifted by the length differences of
the renamed tokens that start before it on that line (:class:`Renaming`). So op locations are the
twin's own even where a longer argument name precedes an op's start on its line
(tests/ktir/test_twins.py checks every Location against a parse of the twin itself). The copy of
a twin's body is made when it is first read (:class:`DerivedFunction`): a twin that only runs
never pays for it.

Verification runs once per key (a verdict depends on tokens, not on names): a file that fails
never becomes a first, so each of its twins is loaded on its own and its error is exactly the one
:func:`~.api.load_module` gives for that file.

Compiling is twin_plans.py's: one compile per key and machine, a fork of it per twin, run in the
twin's names (results, faults, op locations). ``KTIR_MODELS_TWINS=0`` turns twin sharing off:
every file parsed, verified and compiled on its own.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from .. import api
from ..ir.errors import Diagnostic, EmulationFault, KtirError, Location
from ..ir.nodes import Block, Function, Module, Op, Region, Value
from ..parse.op_templates import fresh_lists

_HEADER = re.compile(r"func\.func\s+(?:(?:public|private|nested)\s+)?@([\w$.]+)\s*\(")
_ARG = re.compile(r"%([\w$.\-]+)\s*:")
_TOKEN = re.compile(r"%[\w$.\-]+(?:#\d+)?|@[\w$.\"]+")  # the lexer's SSA and symbol tokens


def sharing_enabled() -> bool:
    """Twin sharing is on unless ``KTIR_MODELS_TWINS`` is ``0``."""
    return os.environ.get("KTIR_MODELS_TWINS", "1") != "0"


@dataclasses.dataclass(frozen=True)
class Names:
    """The names a file's header gives: ``symbol`` (without ``@``), ``args`` (without ``%``, in
    order) and ``shape``, the argument list with the names left out (where twins are looked
    up)."""

    symbol: str
    args: tuple[str, ...]
    shape: str

    def token(self, k: int) -> str:
        """Renamed token ``k`` with its sigil (-1: the symbol, else argument ``k``)."""
        return "@" + self.symbol if k < 0 else "%" + self.args[k]


def header_names(text: str) -> Names | None:
    """The names of ``text``'s first ``func.func @name(...)`` header (None: no such header)."""
    m = _HEADER.search(text)
    if m is None:
        return None
    depth, i, n = 1, m.end(), len(text)
    while i < n and depth:
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    if depth:
        return None
    segment = text[m.end():i]
    args = tuple(_ARG.findall(segment))
    if len(set(args)) != len(args):
        return None
    return Names(m.group(1), args, _ARG.sub("%:", segment))


class Skeleton:
    """A twin key's first file: its text cut at every renamed token (the sites), so that a twin's
    text can be checked against it without parsing. ``module`` is its parsed, verified module."""

    def __init__(self, text: str, names: Names, file: str, module: Module):
        self.names = names
        self.file = file
        self.module = module
        self.pieces: list[str] = []  # the text between sites
        self.sites: list[tuple[int, int, int]] = []  # (line, col, k) of each site, in order
        self.others: set[str] = set()  # every other token
        index = {names.token(k): k for k in range(-1, len(names.args))}
        self.counts = dict.fromkeys(index.values(), 0)
        last, line, line_start = 0, 1, 0
        self.ok = True
        for m in _TOKEN.finditer(text):
            k = index.get(m.group(0))
            if k is None:
                self.others.add(m.group(0))
                if "#" in m.group(0) and m.group(0).split("#")[0] in index:
                    self.ok = False  # `%a#0` names the renamed `%a` without being its token
                continue
            i = m.start()
            line += text.count("\n", last, i)
            line_start = text.rfind("\n", 0, i) + 1
            prefix = text[line_start:i]
            if '"' in prefix or "//" in prefix:  # maybe in a string or a comment
                self.ok = False
            self.pieces.append(text[last:i])
            self.sites.append((line, i - line_start + 1, k))
            self.counts[k] += 1
            last = m.end()
        self.pieces.append(text[last:])
        self.length = len(text)
        if self.counts[-1] != 1:  # the symbol stands in the header only (no call names it)
            self.ok = False

    def matches(self, text: str, names: Names) -> bool:
        """``text`` (whose header gives ``names``) is this file's text with every renamed token
        replaced by the twin's, one to one, and none of the twin's names stands elsewhere."""
        mine = self.names
        if names.shape != mine.shape or len(names.args) != len(mine.args):
            return False
        tokens = {k: names.token(k) for k in self.counts}
        if len(set(tokens.values())) != len(tokens) or not self.others.isdisjoint(tokens.values()):
            return False
        if len(text) != self.length + sum(n * (len(tokens[k]) - len(mine.token(k)))
                                          for k, n in self.counts.items()):
            return False
        parts = [self.pieces[0]]
        for (_, _, k), piece in zip(self.sites, self.pieces[1:]):
            parts.append(tokens[k])
            parts.append(piece)
        return "".join(parts) == text


class Renaming:
    """From a key's first file to one of its twins: names (tokens with their sigil) and
    Locations (file, and columns shifted by the renamed tokens before them on their line)."""

    def __init__(self, first: Skeleton, twin: Names, twin_file: str):
        self.first_file = first.file
        self.twin_file = twin_file
        self.tokens: dict[str, str] = {}  # first's token -> twin's token
        self.shifts: dict[int, list[tuple[int, int]]] = {}  # line -> (first's col, shift after)
        for line, col, k in first.sites:
            token, twin_token = first.names.token(k), twin.token(k)
            self.tokens[token] = twin_token
            delta = len(twin_token) - len(token)
            if delta:
                steps = self.shifts.setdefault(line, [])
                steps.append((col, (steps[-1][1] if steps else 0) + delta))
        self.symbol = (first.names.symbol, twin.symbol)
        self._token_re: re.Pattern | None = None  # built for the first message translated

    def loc(self, loc: Location) -> Location:
        """The twin's Location of the first file's ``loc`` (other files' Locations unchanged)."""
        if loc.file != self.first_file:
            return loc
        col = loc.col
        for at, shift in reversed(self.shifts.get(loc.line, ())):
            if at < col:
                col = loc.col + shift
                break
        return Location(self.twin_file, loc.line, col)

    def text(self, message: str) -> str:
        """``message`` (built from the first file's IR) in the twin's names: renamed tokens and
        the first file's ``file:line:col`` locations."""
        if self._token_re is None:
            names = sorted(map(re.escape, self.tokens), key=len, reverse=True)
            self._token_re = re.compile(f"(?:{'|'.join(names)})(?![\\w$.\\-])")
        message = self._token_re.sub(lambda m: self.tokens[m.group(0)], message)
        if self.first_file in message:
            def located(m: re.Match) -> str:
                return str(self.loc(Location(self.first_file, int(m.group(1)), int(m.group(2)))))

            message = re.sub(re.escape(self.first_file) + r":(\d+):(\d+)", located, message)
            message = message.replace(self.first_file, self.twin_file)
        return message

    def error(self, exc: Exception) -> Exception:
        """``exc`` (a KtirError or EmulationFault of the first function) in the twin's names."""
        if isinstance(exc, EmulationFault):
            function = self.symbol[1] if exc.function == self.symbol[0] else exc.function
            return EmulationFault(self.text(exc.message), function=function, op=exc.op,
                                  loc=self.loc(exc.loc), core=exc.core)
        if isinstance(exc, KtirError):
            return KtirError([Diagnostic(self.loc(d.loc), self.text(d.message))
                              for d in exc.diagnostics])
        return exc


# ---------------------------------------------------------------------------------------------
# the twin's IR: a copy of the first function's, in the twin's names and Locations

class _Copier:
    """Copies ops and blocks of the first function, in SSA order (a value is copied where it is
    defined, before any use), with the twin's Locations."""

    def __init__(self, renaming: Renaming, values: dict[int, Value]):
        self.loc = renaming.loc
        self.values = values  # id(first's value) -> the twin's (its arguments to begin with)

    def value(self, v: Value, owner: Op | None) -> Value:
        c = Value(v.name, v.type, self.loc(v.loc), owner, v.index)
        self.values[id(v)] = c
        return c

    def values_of(self, vs: list[Value], lists: dict) -> list[Value]:
        got = lists.get(id(vs))
        if got is None:
            values = self.values
            got = lists[id(vs)] = [values[id(v)] for v in vs]
        return got

    def block(self, b: Block) -> Block:
        return Block([self.value(a, None) for a in b.args], [self.op(o) for o in b.ops])

    def op(self, op: Op) -> Op:
        lists: dict = {}  # operand lists shared within the op stay shared
        attrs = op.attrs.copy()
        for k, v in attrs.items():
            if type(v) in (list, tuple):
                attrs[k] = fresh_lists(v)
        c = Op(op.name, self.loc(op.loc), self.values_of(op.operands, lists), [], attrs, [],
               {g: self.values_of(vs, lists) for g, vs in op.groups.items()}, op.origin)
        c.regions = [Region([self.block(b) for b in r.blocks]) for r in op.regions]
        c.results = [self.value(r, c) for r in op.results]
        return c


class DerivedFunction(Function):
    """A twin's function: its name, Location, arguments, attributes and grid are its own from
    the start; its body (the first function's, copied in the twin's names and Locations) is
    built when first read, so a twin that only runs (its plan runs the first's IR, see
    twin_plans.py) never pays for the copy. Otherwise a Function like any parsed one."""

    def __init__(self, first: Function, renaming: Renaming, module: Module):
        args = [Value(renaming.tokens.get(a.name, a.name), a.type, renaming.loc(a.loc))
                for a in first.args]
        self.source = first  # the key's first function, whose IR the body copies
        self.renaming = renaming
        super().__init__(renaming.symbol[1], renaming.loc(first.loc), args, None,
                         _fresh_attrs(first.attrs), first.grid, module, list(first.results))

    @property
    def body(self) -> Region:
        body = self.__dict__.get("_body")
        if body is None:
            copier = _Copier(self.renaming, {id(a): c for a, c in zip(self.source.args, self.args)})
            body = self.__dict__["_body"] = Region([copier.block(b)
                                                    for b in self.source.body.blocks])
        return body

    @body.setter
    def body(self, value) -> None:
        self.__dict__["_body"] = value


def derive_module(first: Module, renaming: Renaming) -> Module:
    """The twin's module: ``first``'s single function in the twin's names and Locations."""
    module = Module(renaming.twin_file, {}, dict(first.aliases),
                    None if first.loc is None else renaming.loc(first.loc))
    twin = DerivedFunction(first.only_function, renaming, module)
    module.functions[twin.name] = twin
    return module


def _fresh_attrs(attrs: dict) -> dict:
    return {k: fresh_lists(v) for k, v in attrs.items()}


def _names_agree(module: Module, names: Names) -> bool:
    """The parse saw what the header names: one function, ``names.symbol``, with arguments
    ``names.args``, and no other value bearing an argument's name."""
    if len(module.functions) != 1:
        return False
    fn = module.only_function
    if fn.name != names.symbol or tuple(fn.arg_names) != names.args:
        return False
    renamed = {"%" + a for a in names.args}
    for op in fn.walk():
        if any(r.name in renamed for r in op.results) or \
                any(a.name in renamed for r in op.regions for b in r.blocks for a in b.args):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class Twin:
    """``function`` (a twin's) was derived from ``first`` (its key's first function)."""

    function: Function
    first: Function
    renaming: Renaming


class TwinLoader:
    """Loads (parses and verifies) files like :func:`~.api.load_module`, once per twin key.

    ``load(path)`` returns the module :func:`~.api.load_module` would return (same IR, names and
    Locations) or raises its error; ``twin(fn)`` tells which loaded functions were derived and
    from what (for :func:`~.twin_plans.compile_functions`); ``keys`` counts the twin keys,
    ``parsed`` the files parsed and verified. ``share=False`` (or ``KTIR_MODELS_TWINS=0``)
    loads every file on its own."""

    def __init__(self, share: bool | None = None):
        self.share = sharing_enabled() if share is None else share
        self._firsts: dict[str, list[Skeleton]] = {}  # header shape -> first files
        self._twins: dict[int, Twin] = {}  # id(derived function) -> its record
        self._is_first: set[int] = set()  # id(function) of every key's first with a twin
        self.keys = 0
        self.parsed = 0

    def twin(self, fn: Function) -> Twin | None:
        return self._twins.get(id(fn))

    def has_twins(self, fn: Function) -> bool:
        """``fn`` is a key's first function and some loaded function was derived from it."""
        return id(fn) in self._is_first

    def load(self, path: str | Path) -> Module:
        if not self.share:
            self.parsed += 1
            return api.load_module(path)
        name = str(Path(path))
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return api.load_module(path)  # raises the reading error as load_module words it
        names = header_names(text)
        if names is not None:
            for first in self._firsts.get(names.shape, ()):
                if first.matches(text, names):
                    return self._derive(first, names, name)
        self.parsed += 1
        module = api.parse_text(text, name)
        api.verify(module)  # a file that fails never becomes a first: its twins load alone
        if names is not None and _names_agree(module, names):
            first = Skeleton(text, names, name, module)
            if first.ok:
                self._firsts.setdefault(names.shape, []).append(first)
                self.keys += 1
        return module

    def _derive(self, first: Skeleton, names: Names, name: str) -> Module:
        module = derive_module(first.module, Renaming(first, names, name))
        fn, source = module.only_function, first.module.only_function
        self._twins[id(fn)] = Twin(fn, source, fn.renaming)
        self._is_first.add(id(source))
        return module


def load_modules(paths, share: bool | None = None) -> list[Module]:
    """Every file of ``paths`` loaded (parsed and verified) like :func:`~.api.load_module`,
    twins derived from their key's first file (see the module docstring)."""
    loader = TwinLoader(share)
    return [loader.load(p) for p in paths]
