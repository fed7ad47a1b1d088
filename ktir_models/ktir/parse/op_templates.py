"""Replaying the parse of an op whose exact tokens were parsed before (a parse-time cache).

The node files of one program are near copies of each other: within a file kind the same ops
appear with the same SSA names, types and attributes. Parsing an op is a deterministic function
of (1) its tokens plus the three tokens after it (the handlers look at most two tokens past the
last one they consume, and the parser never moves backwards), and (2) the Values its operand
names resolve to in the current scopes, of which the handlers only use the types (linalg derives
result types from its ``outs``). :class:`OpTemplate` records that outcome once; a later op with
the same token texts whose operand names resolve, without any diagnostic, to Values of the same
types gets a fresh :class:`Op` built from the template instead of a second parse.

What is never recorded, so always parsed: ops with regions (they hold nested ops and scopes),
ops that name an attribute alias (``#name``: aliases differ per file), ops whose parse added a
diagnostic, and ops whose operands or attributes are not in the plain shapes checked below.

The replayed op is indistinguishable from a parsed one: same name, operands, operand groups and
results (fresh :class:`Value` objects defined through the parser, so redefinition diagnostics
and scopes behave the same), the Location of its own first token, and attributes whose lists are
fresh copies (attribute leaves are immutable: numbers, strings, types, affine maps/sets, memory
spaces, dense constants), so no mutable IR object is shared between functions.
"""

from __future__ import annotations

from ..ir.affine import AffineMap, AffineSet
from ..ir.nodes import (AccessTileType, DenseConstant, MemorySpace, MemRefType, Op, ScalarType,
                 TensorType, TileFutureType, Value)

LOOKAHEAD = 3  # tokens past the op's last one that its parse may have looked at (peek(2) + 1)

# attribute leaves that are immutable and may be shared between ops of different functions
_IMMUTABLE_LEAVES = (int, float, str, type(None), AffineMap, AffineSet, MemorySpace, DenseConstant,
                     ScalarType, TensorType, MemRefType, AccessTileType, TileFutureType)


def _plain_attr(value) -> bool:
    """True when ``value`` is an immutable leaf or a (nested) list/tuple of such leaves."""
    if isinstance(value, _IMMUTABLE_LEAVES):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain_attr(v) for v in value)
    return False


def fresh_lists(value):
    """A copy of ``value`` sharing no list with it (lists copied at every depth)."""
    if type(value) is list:
        return [fresh_lists(v) for v in value]
    if type(value) is tuple and any(type(v) in (list, tuple) for v in value):
        return tuple(fresh_lists(v) for v in value)
    return value


def _same_type(a, b) -> bool:
    # TileFutureType's == ignores its groups; a template must only match the very same type
    return a is b or (a == b and type(a) is type(b) and not isinstance(a, TileFutureType))


class OpTemplate:
    """The recorded parse of one op (see the module docstring for when it may be replayed)."""

    __slots__ = ("texts", "consumed", "name", "names", "types", "operands", "groups", "attrs",
                 "flat_keys", "deep_keys", "results", "alias", "operands_in_order", "verified")

    def __init__(self, texts, consumed, name, names, types, operands, groups, attrs, results,
                 alias):
        self.texts: list[str] = texts  # token texts of the op and the LOOKAHEAD tokens after it
        self.consumed: int = consumed  # tokens the op itself spans
        self.name: str = name
        self.names: tuple[str, ...] = names  # operand names in the order the parse looked them up
        self.types: tuple = types  # the types those names resolved to
        self.operands: tuple[int, ...] = operands  # op.operands as indices into names
        self.groups: tuple = groups  # (group name, indices into names) in op.groups order
        self.attrs: dict = attrs
        # attribute lists to copy per replay: flat ones with a slice, nested ones recursively
        self.flat_keys = tuple(k for k, v in attrs.items() if type(v) is list
                               and not any(type(x) in (list, tuple) for x in v))
        self.deep_keys = tuple(k for k, v in attrs.items() if type(v) in (list, tuple)
                               and k not in self.flat_keys)
        # the common case: the operands are the looked-up values, in lookup order
        self.operands_in_order = operands == tuple(range(len(names)))
        # verify.py: (parent op name, origins of the operands' defining ops) -> messages
        self.verified: dict[tuple, list[str]] = {}
        self.results: tuple = results  # (result name, result type) per result
        self.alias: str | None = alias  # `%x:N` binds %x to the first result too

    @classmethod
    def record(cls, texts: list[str], kinds: list[str], start: int, end: int, op: Op,
               lookups: list[tuple[str, Value]], alias: str | None) -> "OpTemplate | None":
        """The template of ``op`` (tokens ``start:end``), or None when it must not be replayed."""
        if op.regions or "hashid" in kinds[start:end]:
            return None
        index: dict[int, int] = {}
        for k, (name, value) in enumerate(lookups):
            first = index.setdefault(id(value), k)
            if lookups[first][0] != name:  # two names for one Value (`%x` and `%x#0`)
                return None
        lists = [op.operands] + list(op.groups.values())
        if len({id(x) for x in lists}) != len(lists):  # a list shared by operands and a group
            return None
        try:
            operands = tuple(index[id(v)] for v in op.operands)
            groups = tuple((g, tuple(index[id(v)] for v in vals)) for g, vals in op.groups.items())
        except KeyError:  # an operand not obtained through a lookup
            return None
        if not all(_plain_attr(v) for v in op.attrs.values()):
            return None
        return cls(texts[start:end + LOOKAHEAD], end - start, op.name,
                   tuple(n for n, _ in lookups), tuple(v.type for _, v in lookups), operands,
                   groups, fresh_lists(op.attrs), tuple((r.name, r.type) for r in op.results),
                   alias)

    def replay(self, parser, start: int) -> Op | None:
        """A fresh op parsed from ``parser``'s tokens at ``start``, or None when this template
        does not apply there (other tokens, an unresolved name, other operand types)."""
        texts = self.texts
        if parser.texts[start:start + len(texts)] != texts:
            return None
        scopes = parser.scopes
        top = scopes[-1]
        values = []
        for name, want in zip(self.names, self.types):
            v = top.get(name)
            if v is None:
                k = len(scopes) - 2
                while k >= 0:
                    v = scopes[k].get(name)
                    if v is not None:
                        break
                    k -= 1
                else:
                    return None  # undefined: the ordinary parse reports it
            if v.type is not want and not _same_type(v.type, want):
                return None
            values.append(v)
        loc = parser.loc(start)
        attrs = self.attrs.copy()
        for key in self.flat_keys:
            attrs[key] = attrs[key][:]
        for key in self.deep_keys:
            attrs[key] = fresh_lists(attrs[key])
        groups = {}
        for g, idx in self.groups:
            groups[g] = [values[k] for k in idx]
        results: list[Value] = []
        operands = values if self.operands_in_order else [values[k] for k in self.operands]
        op = Op(self.name, loc, operands, results, attrs, [], groups, self)
        define = parser.define
        for k, (rname, rtype) in enumerate(self.results):
            results.append(define(rname, rtype, loc, op, k))
        if self.alias is not None and results:
            top[self.alias] = results[0]
        parser.pos = start + self.consumed
        return op
