"""MLIR location syntax: ``loc(...)`` after ops, arguments, functions and the module, and
``#name = loc(...)`` aliases (records in source_loc.py).

    location ::= `unknown` | string (`:` line (`:` col (`to` [line] [`:` col])?)?)?
               | string `(` location `)` | `callsite` `(` location `at` location `)`
               | `fused` (`<` attribute `>`)? `[` location (`,` location)* `]` | `#alias`

An alias may be used before it is defined (MLIR's printer writes location aliases at the end
of the module), so what is read is first a tree that may hold :class:`AliasRef` leaves; the
parser resolves every tree once the module is read (:func:`resolve`), and only then are the
locations attached to the ops and values that carry them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.source_loc import (CallSiteLoc, FileLoc, FusedLoc, NameLoc, SourceLoc, UnknownLoc,
                          unquote)
from .bounds import MAX_NESTING


@dataclass(frozen=True)
class AliasRef:
    """``#name`` inside a location, resolved when the module is read; ``index`` is its token."""

    name: str
    index: int


def at_location(p) -> bool:
    """True when the parser stands on ``loc(``."""
    return p.texts[p.pos] == "loc" and p.texts[p.pos + 1] == "(" and p.kinds[p.pos] == "ident"


def trailing(p):
    """``loc(...)`` when the parser stands on one (the unresolved tree), else None."""
    if not at_location(p):
        return None
    p.pos += 2
    tree = location(p, 1)
    p.expect(")", "closing loc(...)")
    return tree


def location(p, depth: int):
    """One location (without the ``loc(`` wrapper), as a tree that may hold alias refs."""
    if depth > MAX_NESTING:
        p.fail(f"locations nest deeper than {MAX_NESTING} levels")
    i = p.pos
    kind, text = p.kinds[i], p.texts[i]
    if kind == "hashid":
        p.pos += 1
        return AliasRef(text, i)
    if kind == "ident" and text == "unknown":
        p.pos += 1
        return UnknownLoc()
    if kind == "ident" and text == "callsite" and p.peek(1) == "(":
        p.pos += 2
        callee = location(p, depth + 1)
        if not (p.kind() == "ident" and p.peek() == "at"):
            p.fail(f"expected 'at' in a callsite location, found '{p.peek()}'")
        p.pos += 1
        caller = location(p, depth + 1)
        p.expect(")", "closing the callsite location")
        return CallSiteLoc(callee, caller)
    if kind == "ident" and text == "fused" and p.peek(1) in ("[", "<"):
        p.pos += 1
        metadata = None
        if p.accept("<"):
            metadata = _metadata(p)
        p.expect("[", "opening the fused locations")
        locs = []
        while not p.accept("]"):
            locs.append(location(p, depth + 1))
            if not p.accept(","):
                p.expect("]", "closing the fused locations")
                break
        return FusedLoc(tuple(locs), metadata)
    if kind == "string":
        p.pos += 1
        name = unquote(text)
        if p.peek() == ":" and p.kind(1) == "int":
            return _file_line_col(p, name)
        if p.accept("("):
            child = location(p, depth + 1)
            p.expect(")", "closing the name location")
            return NameLoc(name, child)
        return NameLoc(name)
    p.fail(f"expected a location (unknown, \"file\":line:col, \"name\"(...), callsite(...), "
           f"fused[...] or #alias), found '{text}'")


def _int(p) -> int:
    from .numbers import check_literal

    i = p.pos
    text = p.expect_kind("int", "a line or column number")
    check_literal(p, text, i)
    return int(text)


def _file_line_col(p, file: str) -> FileLoc:
    p.pos += 1  # ':'
    line = _int(p)
    col = end_line = end_col = None
    if p.peek() == ":" and p.kind(1) == "int":
        p.pos += 1
        col = _int(p)
        if p.kind() == "ident" and p.peek() == "to":
            p.pos += 1
            if p.kind() == "int":
                end_line = _int(p)
            if p.accept(":"):
                end_col = _int(p)
            if end_line is None and end_col is None:
                p.fail("expected the end line or ':column' of a location range")
    return FileLoc(file, line, col, end_line, end_col)


def _metadata(p) -> str:
    """The tokens of ``fused<...>``'s attribute up to its closing ``>``, as written."""
    parts = []
    depth = 0
    while True:
        t = p.next()
        if t == ">" and depth == 0:
            break
        if t in ("<", "(", "[", "{"):
            depth += 1
        elif t in (">", ")", "]", "}"):
            depth -= 1
        parts.append(t)
    return " ".join(parts)


def resolve(p, tree, aliases: dict, done: dict, depth: int = 0) -> SourceLoc:
    """``tree`` with every alias replaced by its (resolved) definition. ``aliases`` maps a name
    to its unresolved tree, ``done`` caches resolved aliases; a missing or circular alias is an
    error at its use."""
    if depth > MAX_NESTING:
        p.fail(f"locations nest deeper than {MAX_NESTING} levels (through aliases)",
               _first_ref(tree))
    if isinstance(tree, AliasRef):
        hit = done.get(tree.name)
        if hit is not None:
            if hit is _IN_PROGRESS:
                p.fail(f"location alias '{tree.name}' refers to itself", tree.index)
            return hit
        if tree.name not in aliases:
            p.fail(f"undefined location alias '{tree.name}'", tree.index)
        done[tree.name] = _IN_PROGRESS
        resolved = resolve(p, aliases[tree.name], aliases, done, depth + 1)
        done[tree.name] = resolved
        return resolved
    if isinstance(tree, NameLoc) and tree.child is not None:
        return NameLoc(tree.name, resolve(p, tree.child, aliases, done, depth + 1))
    if isinstance(tree, CallSiteLoc):
        return CallSiteLoc(resolve(p, tree.callee, aliases, done, depth + 1),
                           resolve(p, tree.caller, aliases, done, depth + 1))
    if isinstance(tree, FusedLoc):
        return FusedLoc(tuple(resolve(p, x, aliases, done, depth + 1) for x in tree.locs),
                        tree.metadata)
    return tree


_IN_PROGRESS = object()  # marks an alias being resolved (a cycle meets it again)


def _first_ref(tree) -> int | None:
    if isinstance(tree, AliasRef):
        return tree.index
    return None
