"""spyreop's float intrinsics (SpyreOp.td): each op kind's syntax, verification rule, builder,
stacked form and cost side by side.

Operands and results are scalars (``f16``, ``!spyreop.df16`` or ``f32``; gelu and softplus take
no f32); inside a ``linalg.generic`` body the emulator runs a scalar op over the whole loop space
at once. Every function is evaluated in float64 from the exact operands and rounded once to the
result type (types.py). What each computes (docs/emulator.md, section spyreop):

* ``exp``, ``sqrt``, ``rsqrt`` (``1/sqrt(x)``), ``reciprocal`` (``1/x``), ``realdiv`` (``a/b``),
  ``sigmoid`` (``1/(1+exp(-x))``), ``silu`` (``x*sigmoid(x)``), ``gelu`` (``x*Phi(x)``, the
  exact normal CDF through erf);
* ``softplus x beta b threshold t``: ``log(1+exp(b*x))/b``, and ``x`` itself where
  ``b*x > t`` (PyTorch's Softplus, which torch-spyre's emitter lowers to it);
* ``exx2 x`` -> ``(x, x*x)``: the mean and the mean of squares of the one element it sees (a
  reduction around it averages them); ``exx2_fused`` returns the pair as one fused value;
* ``layernormscale v`` -> ``1/sqrt(v)`` (the one-operand form: ``v`` is the variance, epsilon
  already added by its producer); ``layernormscale m squares s`` -> ``1/sqrt(s - m*m)``;
  ``layernormscale_fused p`` is the latter on the pair's halves;
* ``layernormnorm x squares m scale c weight w bias b`` -> ``(x - m) * c * w + b`` (the second
  operand is the subtracted mean: the frontend's lowering feeds it the pair's first half);
* ``compare <pred> a, b`` -> ``1.0`` where the IEEE comparison holds, else ``0.0`` (NaN compares
  unordered: only ``notequal`` holds); ``select c, t, f`` -> ``t`` where ``c != 0`` (NaN is
  non-zero), else ``f``.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import registry
from ...ir.nodes import Op
from ...verify.rules import Rule, fail
from ..arith import NP, stacked_elementwise
from ..math import erf_f64
from .types import (DF16, F16_DF16, F32_TYPE, FLOATS, FUSED_OF, SCALAR_OF, Typed, attr_value,
                    build_host, constraint, enum_attr, finish, narrow, pack, scalar_name,
                    unpack, widen)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (accepted element types, function of the float64 operands)
UNARY = {
    "spyreop.exp": (FLOATS, np.exp),
    "spyreop.sqrt": (FLOATS, np.sqrt),
    "spyreop.rsqrt": (FLOATS, lambda x: 1.0 / np.sqrt(x)),
    "spyreop.reciprocal": (FLOATS, lambda x: 1.0 / x),
    "spyreop.sigmoid": (FLOATS, _sigmoid),
    "spyreop.silu": (FLOATS, lambda x: x * _sigmoid(x)),
    "spyreop.gelu": (F16_DF16, lambda x: 0.5 * x * (1.0 + erf_f64(x / math.sqrt(2.0)))),
}
BINARY = {
    "spyreop.realdiv": (FLOATS, lambda a, b: a / b),
}
COMPARE_PREDICATES = {
    "equal": np.equal, "notequal": np.not_equal, "greaterthan": np.greater,
    "greaterequal": np.greater_equal, "lesserthan": np.less, "lesserequal": np.less_equal,
}


def softplus(x, beta: float, threshold: float):
    """PyTorch's Softplus in float64: ``log1p(exp(beta*x))/beta``, linear where
    ``beta*x > threshold``."""
    bx = beta * x
    with np.errstate(over="ignore"):
        soft = np.log1p(np.exp(bx)) / beta
    return np.where(bx > threshold, x, soft)


# -- verification ---------------------------------------------------------------------------------

def _check_kind(v, what: str, kinds: tuple[str, ...]) -> str:
    name = scalar_name(v.type)
    if name not in kinds:
        fail(f"{what} must be {constraint(kinds)}, but got '{v.type}'")
    return name


def check_operand(op: Op, k: int, kinds: tuple[str, ...]) -> str:
    """Operand ``k`` is a scalar of one of ``kinds`` (MLIR's ODS message otherwise); its name."""
    return _check_kind(op.operands[k], f"operand #{k}", kinds)


def check_result(op: Op, k: int, kinds: tuple[str, ...]) -> str:
    """Like :func:`check_operand` for result ``k``."""
    return _check_kind(op.results[k], f"result #{k}", kinds)


def check_same_types(op: Op) -> None:
    """SameOperandsAndResultType."""
    types = [v.type for v in op.operands] + [r.type for r in op.results]
    if any(t != types[0] for t in types[1:]):
        fail("requires the same type for all operands and results")


def _intrinsic_rule(kinds: tuple[str, ...], n_operands: int, n_results: int = 1, extra=None):
    def check(op: Op) -> None:
        for k in range(len(op.operands)):
            check_operand(op, k, kinds)
        for k in range(len(op.results)):
            check_result(op, k, kinds)
        check_same_types(op)
        if extra is not None:
            extra(op)
    return Rule((n_operands, n_operands), (n_results, n_results), check=check)


# -- syntax ---------------------------------------------------------------------------------------

def _typed_tail(p, op: Op, n_results: int = 1) -> list:
    """``[attr-dict] : T`` -> ``n_results`` results of type T."""
    if p.peek() == "{" and p.kind() == "punct":
        op.attrs.update(p.attr_dict())
    p.expect(":", f"before the type of '{op.name}'")
    t = p.parse_type()
    return [t] * n_results


def parse_operands_type(p, op: Op) -> list:
    """``%a[, %b ...] [attr-dict] : T`` (operand and result types equal)."""
    op.operands = p.operand_list()
    return _typed_tail(p, op)


def parse_keyword_operands(p, op: Op, keywords: tuple[str, ...]) -> None:
    """``%x kw1 %a kw2 %b ...``: the first operand, then one operand after each keyword."""
    op.operands = [p.operand()]
    for kw in keywords:
        i = p.pos
        if p.next() != kw:
            p.fail(f"expected '{kw}' in '{op.name}'", i)
        op.operands.append(p.operand())


def parse_float_attr(p, op: Op, key: str) -> None:
    i = p.pos
    if p.next() != key:
        p.fail(f"expected '{key}' in '{op.name}'", i)
    i = p.pos
    value = p.number()
    if isinstance(value, tuple):
        p.fail(f"'{key}' takes a float literal", i)
    op.attrs[key] = Typed(float(value), F32_TYPE)


# -- builders -------------------------------------------------------------------------------------

def build_elementwise(c, op: Op, fn64):
    """A step applying ``fn64`` (float64 in, float64 out) to the widened operands and rounding
    to the result type; folded when every operand is a compile-time constant."""
    elems = [scalar_name(v.type) for v in op.operands]
    out = scalar_name(op.result.type)

    def compute(*xs):
        with np.errstate(all="ignore"):
            return narrow(fn64(*[widen(x, e) for x, e in zip(xs, elems)]), out)
    return build_host(c, op, compute)


def _register(name: str, rule: Rule, syntax, cost: str = "transcendental") -> None:
    registry.set_part("syntax", name, syntax)
    registry.set_part("verify", name, rule)
    registry.set_part("stacked", name, stacked_elementwise)
    registry.set_part("cost", name, cost)


for _n, (_kinds, _fn) in UNARY.items():
    _register(_n, _intrinsic_rule(_kinds, 1), parse_operands_type)
for _n, (_kinds, _fn) in BINARY.items():
    _register(_n, _intrinsic_rule(_kinds, 2), parse_operands_type)


@registry.implements("build", *UNARY, *BINARY)
def build_intrinsic(c, op: Op):
    fn = (UNARY.get(op.name) or BINARY[op.name])[1]
    return build_elementwise(c, op, fn)


# -- softplus -------------------------------------------------------------------------------------

def parse_softplus(p, op: Op) -> list:
    op.operands = [p.operand()]
    parse_float_attr(p, op, "beta")
    parse_float_attr(p, op, "threshold")
    return _typed_tail(p, op)


def _softplus_attrs(op: Op) -> None:
    for key in ("beta", "threshold"):
        v = op.attrs.get(key)
        if not isinstance(v, Typed) or v.type != F32_TYPE or isinstance(v.value, bool) \
                or not isinstance(v.value, (int, float)):
            fail(f"attribute '{key}' failed to satisfy constraint: 32-bit float attribute")
    if float(attr_value(op.attrs["beta"])) == 0.0:
        fail("attribute 'beta' failed to satisfy constraint: 32-bit float attribute which is "
             "non-zero")


_register("spyreop.softplus", Rule((1, 1), (1, 1), ("beta", "threshold"),
                                   check=_intrinsic_rule(F16_DF16, 1, extra=_softplus_attrs).check),
          parse_softplus)


@registry.implements("build", "spyreop.softplus")
def build_softplus(c, op: Op):
    # F32Attr: the attributes are f32 values, whatever the literal's digits
    beta = float(np.float32(attr_value(op.attrs["beta"])))
    threshold = float(np.float32(attr_value(op.attrs["threshold"])))
    return build_elementwise(c, op, lambda x: softplus(x, beta, threshold))


# -- the LayerNorm stages -------------------------------------------------------------------------

def parse_layernormscale(p, op: Op) -> list:
    op.operands = [p.operand()]
    if p.peek() == "squares":
        p.pos += 1
        op.operands.append(p.operand())
    return _typed_tail(p, op)


def parse_layernormnorm(p, op: Op) -> list:
    parse_keyword_operands(p, op, ("squares", "scale", "weight", "bias"))
    return _typed_tail(p, op)


def _layernormscale(op: Op) -> None:
    if len(op.operands) not in (1, 2):
        fail(f"expected 1 or 2 operands (the variance; or the mean and the mean of squares), "
             f"found {len(op.operands)}")
    _intrinsic_rule(FLOATS, len(op.operands)).check(op)


_register("spyreop.layernormscale", Rule((1, 2), (1, 1), check=_layernormscale),
          parse_layernormscale)
_register("spyreop.layernormnorm", _intrinsic_rule(FLOATS, 5), parse_layernormnorm)


@registry.implements("build", "spyreop.layernormscale")
def build_layernormscale(c, op: Op):
    if len(op.operands) == 1:
        return build_elementwise(c, op, lambda v: 1.0 / np.sqrt(v))
    return build_elementwise(c, op, lambda m, s: 1.0 / np.sqrt(s - m * m))


@registry.implements("build", "spyreop.layernormnorm")
def build_layernormnorm(c, op: Op):
    return build_elementwise(c, op, lambda x, m, scale, w, b: (x - m) * scale * w + b)


# -- exx2: a mean and a mean of squares, apart or fused ------------------------------------------

def parse_exx2(p, op: Op) -> list:
    op.operands = [p.operand()]
    return _typed_tail(p, op, 2)


def parse_fused(p, op: Op) -> list:
    """``%x [attr-dict] : T -> R``."""
    op.operands = [p.operand()]
    if p.peek() == "{" and p.kind() == "punct":
        op.attrs.update(p.attr_dict())
    p.expect(":", f"before the type of '{op.name}'")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->", f"before the result type of '{op.name}'")
    return [p.parse_type()]


_FUSED_TYPES = tuple(FUSED_OF[k] for k in (DF16, "f16", "f32"))


def _exx2_fused(op: Op) -> None:
    elem = check_operand(op, 0, FLOATS)
    got = check_result(op, 0, _FUSED_TYPES)
    if got != FUSED_OF[elem]:
        fail(f"inferred type(s) '{FUSED_OF[elem]}' are incompatible with return type(s) of "
             f"operation '{got}'")


def _layernormscale_fused(op: Op) -> None:
    elem = check_operand(op, 0, _FUSED_TYPES)
    got = check_result(op, 0, FLOATS)
    if got != SCALAR_OF[elem]:
        fail(f"inferred type(s) '{SCALAR_OF[elem]}' are incompatible with return type(s) of "
             f"operation '{got}'")


_register("spyreop.exx2", _intrinsic_rule(FLOATS, 1, 2), parse_exx2, "vector")
_register("spyreop.exx2_fused", Rule((1, 1), (1, 1), check=_exx2_fused), parse_fused, "vector")
_register("spyreop.layernormscale_fused", Rule((1, 1), (1, 1), check=_layernormscale_fused),
          parse_fused)


@registry.implements("build", "spyreop.exx2")
def build_exx2(c, op: Op):
    (x,) = op.operands
    elem = scalar_name(x.type)
    t = x.type

    def compute(v):
        w = widen(v, elem)
        return narrow(w, elem), narrow(w * w, elem)

    if c.all_const(op.operands):
        mean, squares = compute(c.const(x))
        c.set_const(op.results[0], finish(mean, t))
        c.set_const(op.results[1], finish(squares, t))
        return None
    xp = c.xp
    ix, im, isq = c.slot(x), c.slot(op.results[0]), c.slot(op.results[1])
    on_host = not isinstance(xp, type(NP))

    def step(env):
        v = env[ix]
        moved = on_host and xp.is_array(v)
        mean, squares = compute(xp.to_host(v) if moved else v)
        if moved:
            mean, squares = xp.asarray(mean), xp.asarray(squares)
        env[im], env[isq] = finish(mean, t), finish(squares, t)
    return step


@registry.implements("build", "spyreop.exx2_fused")
def build_exx2_fused(c, op: Op):
    elem = scalar_name(op.operands[0].type)

    def compute(v):
        w = widen(v, elem)
        with np.errstate(all="ignore"):
            return pack(w, w * w, elem)
    return build_host(c, op, compute)


@registry.implements("build", "spyreop.layernormscale_fused")
def build_layernormscale_fused(c, op: Op):
    scalar = SCALAR_OF[op.operands[0].type.name]

    def compute(p):
        mean, squares = unpack(p, scalar)
        with np.errstate(all="ignore"):
            return narrow(1.0 / np.sqrt(squares - mean * mean), scalar)
    return build_host(c, op, compute)


# -- compare and select ---------------------------------------------------------------------------

def parse_compare(p, op: Op) -> list:
    p.expect("<", "before the comparison predicate")
    i = p.pos
    pred = p.expect_kind("ident", "a comparison predicate")
    if pred not in COMPARE_PREDICATES:
        p.fail(f"unknown spyreop.compare predicate '{pred}' (expected one of "
               f"{', '.join(COMPARE_PREDICATES)})", i)
    p.expect(">", "after the comparison predicate")
    op.attrs["predicate"] = enum_attr("compare_predicate", pred)
    op.operands = p.operand_list()
    return _typed_tail(p, op)


def _compare(op: Op) -> None:
    if attr_value(op.attrs.get("predicate")) not in COMPARE_PREDICATES:
        fail(f"predicate must be one of {', '.join(COMPARE_PREDICATES)}")


_register("spyreop.compare", Rule((2, 2), (1, 1), ("predicate",),
                                  check=_intrinsic_rule(FLOATS, 2, extra=_compare).check),
          parse_compare, "vector")
_register("spyreop.select", _intrinsic_rule(FLOATS, 3), parse_operands_type, "vector")


@registry.implements("build", "spyreop.compare")
def build_compare(c, op: Op):
    test = COMPARE_PREDICATES[attr_value(op.attrs["predicate"])]
    return build_elementwise(c, op, lambda a, b: test(a, b).astype(np.float64))


@registry.implements("build", "spyreop.select")
def build_select(c, op: Op):
    return build_elementwise(c, op, lambda cond, a, b: np.where(cond != 0, a, b))


__all__ = ["UNARY", "BINARY", "COMPARE_PREDICATES", "softplus"]
