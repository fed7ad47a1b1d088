"""math: elementwise transcendental and rounding ops.

Each op kind's parts stand side by side (registry.py): the custom syntax and the stacked form are
arith's elementwise ones (:func:`.arith.h_simple`, :func:`.arith.stacked_elementwise`); the
verification rule is MLIR's operand class and the shared elementwise check; the cost is the latency walker's
"transcendental" rule for the functions that pay its penalty, "vector" for the others; the
builders are below.

Each op computes in at least f32 and rounds once to the result type: an f16 input is widened to
f32, the function is evaluated in f32, and the result is rounded to f16 (numpy's float16 ufuncs do
the same internally; the explicit widening makes it true for rsqrt and fma as well).
"""

from __future__ import annotations

import math as _pymath

import numpy as np

from ..backends.f16_convert import TABLE_ENTRIES, convert, lookup
from ..ir import registry
from ..ir.nodes import Op, TensorType
from ..verify.rules import Rule, elementwise
from .arith import NP, coerce, h_simple, make_unary, stacked_elementwise
from .arith_types import check_operand_classes

_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)


def _narrow_float(dt) -> bool:
    # itemsize first: numpy computes dtype.name in Python (~3-5 us a call)
    return dt.itemsize < 4 and (dt.kind == "f" or dt.name == "bfloat16")


def _wide(x):
    """Widen f16/bf16 values to f32 (f32/f64 stay as they are); a large f16 array through the
    native conversion (numpy's exact bits, several times faster than numpy's own)."""
    arr = np.asarray(x)
    if _narrow_float(arr.dtype):
        fast = convert(arr, _F32)
        return fast if fast is not None else arr.astype(_F32)
    return arr


def _wide_of(xp):
    """:func:`_wide` for back end ``xp`` (its tensors are widened there, other values on the
    host)."""
    if isinstance(xp, type(NP)):
        return _wide
    is_arr, astype = xp.is_array, xp.astype

    def wide(x):
        if not is_arr(x):
            return _wide(x)
        return astype(x, _F32) if x.dtype.itemsize < 4 and x.dtype.is_floating_point else x
    return wide


def erf_f64(x):
    """erf in float64, elementwise: scipy's where it is installed, else the C library's (both
    within about an ulp of float64, far below the precision of any KTIR result type)."""
    try:
        from scipy.special import erf  # type: ignore

        return erf(x)
    except ImportError:
        return np.vectorize(_pymath.erf, otypes=[np.float64])(x)


def _erf_of(xp):
    if isinstance(xp, type(NP)):
        return erf_f64
    return lambda x: xp.asarray(erf_f64(xp.to_host(x))) if xp.is_array(x) else erf_f64(x)


# -- the unary ops --------------------------------------------------------------------------------

# name -> (back end -> function of widened values)
_UNARY = {
    "math.exp": lambda xp: xp.exp, "math.exp2": lambda xp: xp.exp2,
    "math.log": lambda xp: xp.log, "math.log2": lambda xp: xp.log2,
    "math.log10": lambda xp: xp.log10, "math.log1p": lambda xp: xp.log1p,
    "math.sqrt": lambda xp: xp.sqrt,
    "math.rsqrt": lambda xp: (lambda x, sqrt=xp.sqrt, div=xp.divide: div(1.0, sqrt(x))),
    "math.tanh": lambda xp: xp.tanh, "math.sin": lambda xp: xp.sin, "math.cos": lambda xp: xp.cos,
    "math.erf": _erf_of, "math.absf": lambda xp: xp.abs, "math.absi": lambda xp: xp.abs,
    "math.ceil": lambda xp: xp.ceil, "math.floor": lambda xp: xp.floor,
    "math.round": lambda xp: (lambda x: xp.where(x >= 0, xp.floor(x + 0.5), xp.ceil(x - 0.5))),
}

_VECTOR_COST = {"math.absf", "math.absi", "math.ceil", "math.floor", "math.round"}

def _elementwise(op: Op) -> None:
    """Floats for the functions, signless integers for absi (MLIR's MathOps.td), then the
    shared elementwise check."""
    check_operand_classes(op)
    elementwise(op)


for _n in _UNARY:
    registry.set_part("syntax", _n, h_simple)
    registry.set_part("verify", _n, Rule((1, 1), (1, 1), check=_elementwise))
    registry.set_part("stacked", _n, stacked_elementwise)
    registry.set_part("cost", _n, "vector" if _n in _VECTOR_COST else "transcendental")


# op name -> its f16 results at every f16 bit pattern (read-only), filled on first use
_TABLES: dict = {}


def f16_table(name: str, apply) -> np.ndarray:
    """The unary op ``name``'s result for each of the 65536 f16 values, computed once by its own
    numpy evaluation ``apply`` on all of them at once. An op evaluates each element on its own
    (widen, the f32 function, one rounding), so looking an element up in this table gives the
    bits that evaluating it in any array would (tests/ktir/test_f16_tables.py compares the two
    over every f16 value, in arrays of many lengths)."""
    table = _TABLES.get(name)
    if table is None:
        every = np.arange(TABLE_ENTRIES, dtype=np.uint16).view(np.float16)
        with np.errstate(all="ignore"):
            table = np.ascontiguousarray(apply(every))
        if table.dtype != _F16 or table.shape != (TABLE_ENTRIES,):
            raise AssertionError(f"{name}'s f16 table came out {table.dtype} {table.shape}")
        table.flags.writeable = False
        _TABLES[name] = table
    return table


@registry.implements("build", *_UNARY)
def build_unary(c, op):
    fn_of = _UNARY[op.name]
    t = op.result.type
    dt = t.dtype
    name = op.name

    if name == "math.absi":
        return make_unary(c, op, fn_of)

    def apply_of(xp):
        fn, wide, is_arr, astype = fn_of(xp), _wide_of(xp), xp.is_array, xp.astype

        def apply(x):
            r = fn(wide(x))
            if is_arr(r) and r.ndim:
                return astype(r, dt)
            if isinstance(t, TensorType):
                return coerce(r, t, xp)
            return coerce(r, t)

        if not isinstance(xp, type(NP)) or dt != _F16:
            return apply

        def apply_f16(x):
            # an f16 array through the op's table: one native gather instead of the widening,
            # numpy's f32 function and the rounding (exp of 49152 values ~71 -> ~15 us)
            if type(x) is np.ndarray and x.dtype == _F16 and x.ndim:
                out = lookup(f16_table(name, apply), x)
                if out is not None:
                    return out
            return apply(x)
        return apply_f16

    return make_unary(c, op, apply_of)


# -- math.fma -------------------------------------------------------------------------------------

registry.set_part("syntax", "math.fma", h_simple)
registry.set_part("verify", "math.fma", Rule((3, 3), (1, 1), check=_elementwise))
registry.set_part("stacked", "math.fma", stacked_elementwise)
registry.set_part("cost", "math.fma", "vector")


@registry.implements("build", "math.fma")
def build_fma(c, op):
    a, b, d = op.operands
    r = op.result
    t = r.type
    ia, ib, idd, ir = c.slot(a), c.slot(b), c.slot(d), c.slot(r)
    xp = c.xp
    wide = xp.wide_float  # f64 (f32 on a device without f64)

    def step(env):
        # f64 holds the exact product of two f32 values, so a*b+c rounds (nearly) once
        x, y, z = env[ia], env[ib], env[idd]
        if not (xp.is_array(x) or xp.is_array(y) or xp.is_array(z)):
            v = np.asarray(x, np.float64) * np.asarray(y, np.float64) + np.asarray(z, np.float64)
            env[ir] = coerce(v, t)
            return
        v = xp.add(xp.multiply(x, y, dtype=wide), z, dtype=wide)
        env[ir] = coerce(v, t, xp)

    return step


# -- math.powf ------------------------------------------------------------------------------------

registry.set_part("syntax", "math.powf", h_simple)
registry.set_part("verify", "math.powf", Rule((2, 2), (1, 1), check=_elementwise))
registry.set_part("stacked", "math.powf", stacked_elementwise)
registry.set_part("cost", "math.powf", "transcendental")


@registry.implements("build", "math.powf")
def build_powf(c, op):
    a, b = op.operands
    r = op.result
    t = r.type
    ia, ib, ir = c.slot(a), c.slot(b), c.slot(r)
    xp = c.xp
    wide = _wide_of(xp)

    def step(env):
        env[ir] = coerce(xp.power(wide(env[ia]), wide(env[ib])), t, xp)

    return step
