"""Affine expressions, maps and integer sets (``affine_map<...>``, ``affine_set<...>``).

An expression is a small immutable tree of tuples:

* ``("c", k)`` constant, ``("d", i)`` dimension i, ``("s", i)`` symbol i,
* ``("+", a, b)``, ``("*", a, b)`` (one side constant after parsing), ``("floordiv", a, k)``,
  ``("ceildiv", a, k)``, ``("mod", a, k)`` with ``k`` a positive constant expression.

Semantics follow MLIR: floordiv/ceildiv/mod use floor rounding and ``mod`` is non-negative for a
positive divisor. Evaluation goes through generated Python lambdas, so the same map evaluates on
Python ints and on numpy integer arrays (vectorised point enumeration).

Invariant: a parsed expression's tree is at most ``MAX_AFFINE_DEPTH`` deep, so the recursive
helpers below and the generated lambdas (whose parentheses nest as the tree) never reach a
Python limit. Parsing keeps trees shallow where the text is long but flat: constant factors of
a product fold into one (``d0 * 2 * 3`` is ``6 * d0``), a run of unary minus signs is one sign
or none, and a long sum is built as a balanced tree; only real nesting (parentheses, chains of
floordiv/ceildiv/mod) deepens a tree, and nesting deeper than the bound is a syntax error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..parse.bounds import MAX_AFFINE_DEPTH, MAX_LITERAL_CHARS

Expr = tuple


class AffineSyntaxError(ValueError):
    """Bad affine text; ``offset`` is the character offset inside the parsed text."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


# ----------------------------------------------------------------------------------------------
# expression helpers

_I64 = 1 << 63


def const(k: int) -> Expr:
    """A constant; MLIR's affine constants are 64-bit, and one that does not fit (a literal or
    a folded sum or product) is a syntax error rather than a value numpy cannot hold."""
    k = int(k)
    if not -_I64 <= k < _I64:
        raise AffineSyntaxError(f"affine constant {k} does not fit in 64 bits")
    return ("c", k)


def add(a: Expr, b: Expr) -> Expr:
    if a[0] == "c" and b[0] == "c":
        return const(a[1] + b[1])
    if a[0] == "c" and a[1] == 0:
        return b
    if b[0] == "c" and b[1] == 0:
        return a
    return ("+", a, b)


def mul(a: Expr, b: Expr) -> Expr:
    if a[0] == "c" and b[0] == "c":
        return const(a[1] * b[1])
    if b[0] == "c":
        a, b = b, a
    if a[0] != "c":
        raise AffineSyntaxError("product of two non-constant affine expressions")
    if a[1] == 1:
        return b
    if b[0] == "*":  # k1 * (k2 * x) is (k1 * k2) * x: a product of constants stays one node
        return mul(const(a[1] * b[1][1]), b[2])
    return ("*", a, b)


def neg(a: Expr) -> Expr:
    return mul(const(-1), a)


def divlike(kind: str, a: Expr, b: Expr) -> Expr:
    if b[0] != "c" or b[1] <= 0:
        raise AffineSyntaxError(f"'{kind}' needs a positive constant right-hand side")
    if a[0] == "c":
        k = b[1]
        if kind == "floordiv":
            return ("c", a[1] // k)
        if kind == "ceildiv":
            return ("c", -((-a[1]) // k))
        return ("c", a[1] % k)
    return (kind, a, b)


def depth(e: Expr) -> int:
    """How deep the tree of ``e`` is (a leaf is 1), without recursion."""
    deepest = 0
    stack = [(e, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if len(node) == 3:  # an operator; leaves (constants, dims, symbols, ...) have two
            stack.append((node[1], d + 1))
            stack.append((node[2], d + 1))
    return deepest


def balanced_sum(terms: list[Expr]) -> Expr:
    """``terms[0] + terms[1] + ...`` in that order, as a tree of logarithmic depth."""
    if len(terms) == 1:
        return terms[0]
    mid = len(terms) // 2
    return add(balanced_sum(terms[:mid]), balanced_sum(terms[mid:]))


# sums with more terms than this are built balanced (shorter ones keep the left-deep tree the
# parser always built, which printers and tests know)
_LONG_SUM = 16


def linear_form(e: Expr) -> tuple[dict[tuple[str, int], int], int] | None:
    """``({("d", i) | ("s", i): coeff}, const)`` when ``e`` is linear, else None."""
    kind = e[0]
    if kind == "c":
        return {}, e[1]
    if kind in ("d", "s"):
        return {e: 1}, 0
    if kind == "+":
        la, lb = linear_form(e[1]), linear_form(e[2])
        if la is None or lb is None:
            return None
        coeffs = dict(la[0])
        for key, v in lb[0].items():
            coeffs[key] = coeffs.get(key, 0) + v
        return {k: v for k, v in coeffs.items() if v != 0}, la[1] + lb[1]
    if kind == "*":
        k = e[1][1]
        lb = linear_form(e[2])
        if lb is None:
            return None
        return {key: v * k for key, v in lb[0].items() if v * k != 0}, lb[1] * k
    return None


def to_python(e: Expr, dim_names: list[str], sym_names: list[str]) -> str:
    kind = e[0]
    if kind == "c":
        return f"({e[1]})"
    if kind == "d":
        return dim_names[e[1]]
    if kind == "s":
        return sym_names[e[1]]
    a = to_python(e[1], dim_names, sym_names)
    b = to_python(e[2], dim_names, sym_names)
    if kind == "+":
        return f"({a} + {b})"
    if kind == "*":
        return f"({a} * {b})"
    if kind == "floordiv":
        return f"({a} // {b})"
    if kind == "ceildiv":
        return f"(-((-{a}) // {b}))"
    if kind == "mod":
        return f"({a} % {b})"
    raise AssertionError(kind)


def to_text(e: Expr, dim_names: list[str] | None = None, sym_names: list[str] | None = None) -> str:
    dn = dim_names or []
    sn = sym_names or []
    kind = e[0]
    if kind == "c":
        return str(e[1])
    if kind == "d":
        return dn[e[1]] if e[1] < len(dn) else f"d{e[1]}"
    if kind == "s":
        return sn[e[1]] if e[1] < len(sn) else f"s{e[1]}"
    a, b = to_text(e[1], dn, sn), to_text(e[2], dn, sn)
    op = {"+": "+", "*": "*"}.get(kind, kind)
    return f"({a} {op} {b})"


def uses(e: Expr, kind: str) -> set[int]:
    if e[0] == kind:
        return {e[1]}
    if e[0] in ("c", "d", "s"):
        return set()
    return uses(e[1], kind) | uses(e[2], kind)


# ----------------------------------------------------------------------------------------------
# parsing of affine text

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+)|(?P<id>[A-Za-z_][\w$.]*)|(?P<ssa>%[\w$.]+(?:#\d+)?)"
                    r"|(?P<op>>=|==|<=|->|[-+*()\[\],:<>]))")


def tokenize(text: str) -> list[tuple[str, str, int]]:
    out = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise AffineSyntaxError(f"unexpected character {text[pos]!r} in affine expression", pos)
        kind = m.lastgroup
        out.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


class ExprParser:
    """Recursive descent over affine tokens; ``resolve(name)`` maps identifiers to ("d"|"s", i).

    Parentheses recurse, so their nesting is bounded (``MAX_AFFINE_DEPTH``); every expression
    :meth:`parse_expr` returns is at most that deep (see the module docstring)."""

    def __init__(self, tokens: list[tuple[str, str, int]], resolve, pos: int = 0):
        self.toks = tokens
        self.pos = pos
        self.resolve = resolve
        self.parens = 0

    def peek(self) -> str | None:
        return self.toks[self.pos][1] if self.pos < len(self.toks) else None

    def offset(self) -> int:
        return self.toks[self.pos][2] if self.pos < len(self.toks) else (
            self.toks[-1][2] + len(self.toks[-1][1]) if self.toks else 0)

    def expect(self, text: str) -> None:
        if self.peek() != text:
            raise AffineSyntaxError(f"expected '{text}' in affine expression, found "
                                    f"{self.peek()!r}", self.offset())
        self.pos += 1

    def parse_expr(self) -> Expr:
        start = self.offset()
        terms = [self.parse_term()]
        while True:
            t = self.peek()
            if t == "+":
                self.pos += 1
                terms.append(self.parse_term())
            elif t == "-":
                self.pos += 1
                terms.append(neg(self.parse_term()))
            else:
                break
        if len(terms) > _LONG_SUM:
            e = balanced_sum(terms)
        else:
            e = terms[0]
            for term in terms[1:]:
                e = add(e, term)
        if depth(e) > MAX_AFFINE_DEPTH:
            raise AffineSyntaxError(f"affine expression nests deeper than {MAX_AFFINE_DEPTH} "
                                    "levels", start)
        return e

    def parse_term(self) -> Expr:
        e = self.parse_unary()
        while True:
            t = self.peek()
            if t == "*":
                self.pos += 1
                e = mul(e, self.parse_unary())
            elif t in ("floordiv", "ceildiv", "mod"):
                self.pos += 1
                e = divlike(t, e, self.parse_unary())
            else:
                return e

    def parse_unary(self) -> Expr:
        if self.pos >= len(self.toks):
            raise AffineSyntaxError("affine expression ends too early", self.offset())
        kind, text, off = self.toks[self.pos]
        if text == "-":  # a run of signs is read in a loop: any number of them, no recursion
            signs = 0
            while self.peek() == "-":
                self.pos += 1
                signs += 1
            e = self.parse_unary()
            return neg(e) if signs % 2 else e
        if text == "(":
            self.pos += 1
            self.parens += 1
            if self.parens > MAX_AFFINE_DEPTH:
                raise AffineSyntaxError(f"parentheses nest deeper than {MAX_AFFINE_DEPTH} "
                                        "levels in affine expression", off)
            e = self.parse_expr()
            self.expect(")")
            self.parens -= 1
            return e
        if kind == "num":
            if len(text) > MAX_LITERAL_CHARS:
                raise AffineSyntaxError(f"number literal of {len(text)} characters is too long "
                                        f"(at most {MAX_LITERAL_CHARS})", off)
            self.pos += 1
            return const(int(text))
        if kind in ("id", "ssa"):
            ref = self.resolve(text)
            if ref is None:
                raise AffineSyntaxError(f"unknown identifier '{text}' in affine expression", off)
            self.pos += 1
            return ref
        raise AffineSyntaxError(f"unexpected {text!r} in affine expression", off)


def _parse_id_list(p: ExprParser, close: str) -> list[str]:
    names: list[str] = []
    if p.peek() == close:
        p.pos += 1
        return names
    while True:
        if p.pos >= len(p.toks) or p.toks[p.pos][0] != "id":
            raise AffineSyntaxError("expected a dimension or symbol name", p.offset())
        names.append(p.toks[p.pos][1])
        p.pos += 1
        if p.peek() == ",":
            p.pos += 1
            continue
        p.expect(close)
        return names


def _parse_parenthesised(p: ExprParser, item):
    """``( item, item, ... )``, possibly empty: the items parsed by ``item()``, in order."""
    p.expect("(")
    items = []
    if p.peek() != ")":
        items.append(item())
        while p.peek() == ",":
            p.pos += 1
            items.append(item())
    p.expect(")")
    return items


def _parse_header(p: ExprParser) -> tuple[list[str], list[str]]:
    p.expect("(")
    dims = _parse_id_list(p, ")")
    syms: list[str] = []
    if p.peek() == "[":
        p.pos += 1
        syms = _parse_id_list(p, "]")
    table = {n: ("d", i) for i, n in enumerate(dims)}
    table.update({n: ("s", i) for i, n in enumerate(syms)})
    p.resolve = table.get
    return dims, syms


@dataclass(frozen=True, eq=False)
class AffineMap:
    num_dims: int
    num_syms: int
    results: tuple[Expr, ...]
    _fn: object = field(default=None, repr=False, compare=False)
    _perm: object = field(default=False, repr=False, compare=False)  # False: not computed yet

    @property
    def num_results(self) -> int:
        return len(self.results)

    def is_identity(self) -> bool:
        return self.num_syms == 0 and self.results == tuple(("d", i) for i in range(self.num_dims))

    def permutation(self) -> tuple[int, ...] | None:
        """The dim permutation when every result is a distinct plain dimension, else None."""
        perm = self._perm
        if perm is False:  # computed once per map (parsed maps are shared across a program)
            perm = None
            if len(self.results) == self.num_dims and all(r[0] == "d" for r in self.results):
                perm = tuple(r[1] for r in self.results)
                if sorted(perm) != list(range(self.num_dims)):
                    perm = None
            object.__setattr__(self, "_perm", perm)
        return perm

    def evaluator(self):
        """``f(dims..., syms...) -> tuple`` working on ints or numpy arrays."""
        if self._fn is None:
            dn = [f"d{i}" for i in range(self.num_dims)]
            sn = [f"s{i}" for i in range(self.num_syms)]
            body = ", ".join(to_python(r, dn, sn) for r in self.results)
            fn = eval(f"lambda {', '.join(dn + sn) or '*_'}: ({body}{',' if self.results else ''})")
            object.__setattr__(self, "_fn", fn)
        return self._fn

    def __call__(self, dims, syms=()) -> tuple:
        return self.evaluator()(*dims, *syms)

    def __str__(self) -> str:
        dn = [f"d{i}" for i in range(self.num_dims)]
        return f"affine_map<({', '.join(dn)}) -> ({', '.join(to_text(r) for r in self.results)})>"


@dataclass(frozen=True)
class Bound:
    """``lo <= d <= hi`` where lo/hi are affine expressions over the set's symbols only."""

    lo: Expr
    hi: Expr


@dataclass(frozen=True, eq=False)
class AffineSet:
    num_dims: int
    num_syms: int
    constraints: tuple[tuple[Expr, bool], ...]  # (expr, is_equality): expr >= 0 or expr == 0
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def box_bounds(self) -> tuple[Bound, ...] | None:
        """Per-dim bounds when the set is exactly a (possibly symbolic) box, else None."""
        if "box" in self._cache:
            return self._cache["box"]
        lo: list[list[Expr]] = [[] for _ in range(self.num_dims)]
        hi: list[list[Expr]] = [[] for _ in range(self.num_dims)]
        ok = True
        for expr, is_eq in self.constraints:
            lf = linear_form(expr)
            if lf is None:
                ok = False
                break
            coeffs, k = lf
            dims = [key for key in coeffs if key[0] == "d"]
            if len(dims) != 1 or coeffs[dims[0]] not in (1, -1):
                ok = False
                break
            d = dims[0][1]
            c = coeffs[dims[0]]
            rest: Expr = const(k)
            for key, v in coeffs.items():
                if key[0] == "s":
                    rest = add(rest, mul(const(v), key))
            # c*d + rest >= 0  ->  d >= -rest (c=1)  or  d <= rest (c=-1)
            if c == 1:
                lo[d].append(neg(rest))
                if is_eq:
                    hi[d].append(neg(rest))
            else:
                hi[d].append(rest)
                if is_eq:
                    lo[d].append(rest)
        result = None
        if ok and all(len(lo[d]) == 1 and len(hi[d]) == 1 for d in range(self.num_dims)):
            result = tuple(Bound(lo[d][0], hi[d][0]) for d in range(self.num_dims))
        self._cache["box"] = result
        return result

    def bounding_box(self, syms=()) -> list[tuple[int, int]]:
        """Inclusive [lo, hi] per dim from the single-dim constraints (symbols substituted)."""
        los: list[list[int]] = [[] for _ in range(self.num_dims)]
        his: list[list[int]] = [[] for _ in range(self.num_dims)]
        for expr, is_eq in self.constraints:
            lf = linear_form(expr)
            if lf is None:
                continue
            coeffs, k = lf
            dims = [key for key in coeffs if key[0] == "d"]
            if len(dims) != 1:
                continue
            c = coeffs[dims[0]]
            d = dims[0][1]
            rest = k + sum(v * int(syms[key[1]]) for key, v in coeffs.items() if key[0] == "s")
            # c*d + rest >= 0
            if c > 0:
                los[d].append(-(rest // c))
                if is_eq:
                    his[d].append((-rest) // c)
            else:
                his[d].append(rest // (-c))
                if is_eq:
                    los[d].append(-((rest) // (-c)))
        box = []
        for d in range(self.num_dims):
            if not los[d] or not his[d]:
                raise ValueError(f"affine set dimension d{d} is unbounded")
            box.append((max(los[d]), min(his[d])))
        return box

    def contains_fn(self):
        if "contains" not in self._cache:
            dn = [f"d{i}" for i in range(self.num_dims)]
            sn = [f"s{i}" for i in range(self.num_syms)]
            parts = []
            for expr, is_eq in self.constraints:
                parts.append(f"({to_python(expr, dn, sn)} {'==' if is_eq else '>='} 0)")
            body = " & ".join(parts) if parts else "True"
            self._cache["contains"] = eval(f"lambda {', '.join(dn + sn) or '*_'}: {body}")
        return self._cache["contains"]

    def points(self, syms=()) -> np.ndarray:
        """All points as an int64 array [n, num_dims], lexicographic (last dim fastest)."""
        box = self.bounding_box(syms)
        if any(hi < lo for lo, hi in box):
            return np.zeros((0, self.num_dims), dtype=np.int64)
        axes = [np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in box]
        grids = np.meshgrid(*axes, indexing="ij")
        flat = [g.reshape(-1) for g in grids]
        mask = self.contains_fn()(*flat, *[int(s) for s in syms])
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), flat[0].shape) if flat else mask
        return np.stack([f[mask] for f in flat], axis=1) if flat else np.zeros((1, 0), np.int64)

    def __str__(self) -> str:
        dn = [f"d{i}" for i in range(self.num_dims)]
        cs = ", ".join(f"{to_text(e)} {'==' if q else '>='} 0" for e, q in self.constraints)
        return f"affine_set<({', '.join(dn)}) : ({cs})>"


def order_points(points: np.ndarray, order: AffineMap, syms=()) -> np.ndarray:
    """Sort points by ``order(p)`` lexicographically, rightmost result fastest (stable)."""
    perm = order.permutation()
    if perm is not None and perm == tuple(range(len(perm))):
        return points
    if points.shape[0] == 0:
        return points
    keys = order.evaluator()(*[points[:, i] for i in range(points.shape[1])], *syms)
    keys = [np.broadcast_to(np.asarray(k), points.shape[:1]) for k in keys]
    idx = np.lexsort(tuple(reversed(keys)))
    return points[idx]


_map_cache: dict[str, AffineMap] = {}
_set_cache: dict[str, AffineSet] = {}


def parse_map(text: str) -> AffineMap:
    """Parse ``(d0, ...)[s0, ...] -> (e0, ...)`` (the part inside ``affine_map<...>``)."""
    hit = _map_cache.get(text)
    if hit is not None:
        return hit
    p = ExprParser(tokenize(text), None)
    dims, syms = _parse_header(p)
    p.expect("->")
    results = _parse_parenthesised(p, p.parse_expr)
    if p.pos != len(p.toks):
        raise AffineSyntaxError("unexpected text after affine map", p.offset())
    m = AffineMap(len(dims), len(syms), tuple(results))
    _map_cache[text] = m
    return m


def parse_set(text: str) -> AffineSet:
    """Parse ``(d0, ...)[s0, ...] : (c0 >= 0, c1 == 0, ...)`` (inside ``affine_set<...>``)."""
    hit = _set_cache.get(text)
    if hit is not None:
        return hit
    p = ExprParser(tokenize(text), None)
    dims, syms = _parse_header(p)
    p.expect(":")

    def constraint() -> tuple[Expr, bool]:
        lhs = p.parse_expr()
        rel = p.peek()
        if rel not in (">=", "==", "<="):
            raise AffineSyntaxError("expected '>=', '<=' or '==' in affine constraint", p.offset())
        p.pos += 1
        rhs = p.parse_expr()
        if rel == "<=":
            return add(rhs, neg(lhs)), False
        return add(lhs, neg(rhs)), rel == "=="

    constraints = _parse_parenthesised(p, constraint)
    if p.pos != len(p.toks):
        raise AffineSyntaxError("unexpected text after affine set", p.offset())
    s = AffineSet(len(dims), len(syms), tuple(constraints))
    _set_cache[text] = s
    return s


def box_set(extents: list[int]) -> AffineSet:
    """The box [0, e) per dim (used for views without a coordinate_set)."""
    cons = []
    for d, e in enumerate(extents):
        cons.append((("d", d), False))
        cons.append((add(const(e - 1), neg(("d", d))), False))
    return AffineSet(len(extents), 0, tuple(cons))


def eval_bound(e: Expr, syms) -> int:
    if e[0] == "c":
        return e[1]
    return int(eval(to_python(e, [], [f"_s[{i}]" for i in range(len(syms))]), {"_s": list(syms)}))

