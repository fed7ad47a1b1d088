"""math: elementwise transcendental and rounding ops.

Each op computes in at least f32 and rounds once to the result type: an f16 input is widened to
f32, the function is evaluated in f32, and the result is rounded to f16 (numpy's float16 ufuncs do
the same internally; the explicit widening makes it true for rsqrt and fma as well).
"""

from __future__ import annotations

import math as _pymath

import numpy as np

from ..ir import TensorType
from . import register
from .arith import coerce, make_unary

_F32 = np.float32


def _wide(x):
    """Widen f16/bf16 values to f32 (f32/f64 stay as they are)."""
    arr = np.asarray(x)
    if arr.dtype.itemsize < 4 and arr.dtype.kind == "f" or arr.dtype.name == "bfloat16":
        return arr.astype(_F32)
    return arr


def _erf(x):
    try:
        from scipy.special import erf  # type: ignore

        return erf(x)
    except ImportError:
        return np.vectorize(_pymath.erf, otypes=[np.float64])(x)


_UNARY = {
    "math.exp": np.exp, "math.exp2": np.exp2, "math.log": np.log, "math.log2": np.log2,
    "math.log10": np.log10, "math.log1p": np.log1p, "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1.0 / np.sqrt(x), "math.tanh": np.tanh, "math.sin": np.sin,
    "math.cos": np.cos, "math.erf": _erf, "math.absf": np.abs, "math.absi": np.abs,
    "math.ceil": np.ceil, "math.floor": np.floor, "math.round": lambda x: np.where(
        x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5)),
}


@register(*_UNARY)
def build_unary(c, op):
    fn = _UNARY[op.name]
    t = op.result.type
    dt = t.dtype

    if op.name == "math.absi":
        return make_unary(c, op, np.abs)

    def apply(x):
        r = fn(_wide(x))
        return r.astype(dt, copy=False) if isinstance(r, np.ndarray) and r.ndim else \
            (coerce(r, t) if not isinstance(t, TensorType) else np.asarray(r, dt))

    return make_unary(c, op, apply)


@register("math.fma")
def build_fma(c, op):
    a, b, d = op.operands
    r = op.result
    t = r.type
    ia, ib, idd, ir = c.slot(a), c.slot(b), c.slot(d), c.slot(r)

    def step(env):
        # f64 holds the exact product of two f32 values, so a*b+c rounds (nearly) once
        v = np.asarray(env[ia], np.float64) * np.asarray(env[ib], np.float64) + np.asarray(
            env[idd], np.float64)
        env[ir] = coerce(v, t)

    return step


@register("math.powf")
def build_powf(c, op):
    a, b = op.operands
    r = op.result
    t = r.type
    ia, ib, ir = c.slot(a), c.slot(b), c.slot(r)

    def step(env):
        env[ir] = coerce(np.power(_wide(env[ia]), _wide(env[ib])), t)

    return step
