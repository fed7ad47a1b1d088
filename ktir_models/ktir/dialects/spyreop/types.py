"""spyreop's element types and the numerics every float intrinsic shares.

Types (SpyreOpTypes.td), held as bit patterns (ir.ELEMENT_DTYPES):

* ``!spyreop.df16`` -- IBM's 16-bit DLFloat, as ``uint16`` patterns (backends/df16.py);
* ``!spyreop.fp16_fused`` / ``!spyreop.df16_fused`` / ``!spyreop.fp32_fused`` -- a pair (a mean
  and a mean of squares) held as one value: the two halves' bit patterns packed into one
  unsigned integer twice as wide, the mean in the low half, the mean of squares in the high half.

Numerics: an intrinsic widens each float operand to float64 (exact for f16, df16 and f32),
evaluates its function in float64 and rounds the result once to the result type (round to
nearest even; df16 by :func:`backends.df16.encode`). :func:`host_fn` runs such a numpy function
on any array back end (arrays of another back end visit the host).
"""

from __future__ import annotations

import numpy as np

from ...backends import df16
from ...ir.nodes import ScalarType, TensorType
from ...parse.generic_form import Opaque, Typed
from ..arith import NP, to_scalar

DF16 = "!spyreop.df16"
FLOATS = ("f16", DF16, "f32")
F16_DF16 = ("f16", DF16)
FUSED_OF = {"f16": "!spyreop.fp16_fused", DF16: "!spyreop.df16_fused",
            "f32": "!spyreop.fp32_fused"}
SCALAR_OF = {v: k for k, v in FUSED_OF.items()}

# how MLIR's ODS names each type in an operand / result constraint message
DESCRIPTION = {"f16": "16-bit float", DF16: "IBM df16 float", "f32": "32-bit float",
               "!spyreop.df16_fused": "A pair of df16 floats held as one value",
               "!spyreop.fp16_fused": "A pair of 16-bit floats held as one value",
               "!spyreop.fp32_fused": "A pair of 32-bit floats held as one value",
               "i32": "32-bit signless integer", "i64": "64-bit signless integer"}

_F64 = np.dtype(np.float64)
_HALF_BITS = {"f16": (np.uint16, 16), DF16: (np.uint16, 16), "f32": (np.uint32, 32)}
_PACKED = {"f16": np.uint32, DF16: np.uint32, "f32": np.uint64}


I32 = ScalarType("i32")
F32_TYPE = ScalarType("f32")


def attr_value(v):
    """An attribute as the op reads it: ``V : T`` -> V, ``#spyreop.kind<case>`` -> "case".
    The ops store attributes in MLIR's spelling (Typed / Opaque) so that the generic printer
    writes what the frontend reads."""
    if isinstance(v, Typed):
        return v.value
    if isinstance(v, Opaque) and v.text.endswith(">"):
        return v.text.partition("<")[2][:-1].strip()
    return v


def enum_attr(kind: str, case: str) -> Opaque:
    """``#spyreop.<kind><case>``."""
    return Opaque(f"#spyreop.{kind}<{case}>")


def scalar_name(t) -> str | None:
    """The element type name of a scalar type, else None (tensors are not intrinsic operands)."""
    return t.name if isinstance(t, ScalarType) else None


def constraint(kinds: tuple[str, ...]) -> str:
    """``16-bit float or IBM df16 float or 32-bit float`` for ``kinds``."""
    return " or ".join(DESCRIPTION[k] for k in kinds)


def widen(x, elem: str) -> np.ndarray:
    """Values of element type ``elem`` (df16 as patterns) -> float64 (exact)."""
    if elem == DF16:
        return df16.decode(x).astype(_F64)
    return np.asarray(x).astype(_F64)


def narrow(v, elem: str) -> np.ndarray:
    """float64 values -> element type ``elem``, one rounding (df16 as patterns)."""
    if elem == DF16:
        return df16.encode(v)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(v, _F64).astype(np.dtype(elem_dtype(elem)))


def elem_dtype(elem: str):
    return {"f16": np.float16, "f32": np.float32}.get(elem) or ScalarType(elem).dtype


def pack(mean, squares, scalar: str) -> np.ndarray:
    """Two float64 values -> the fused pair of ``scalar`` halves (mean low, squares high)."""
    half, width = _HALF_BITS[scalar]
    lo = narrow(mean, scalar).view(half).astype(_PACKED[scalar])
    hi = narrow(squares, scalar).view(half).astype(_PACKED[scalar])
    return lo | (hi << _PACKED[scalar](width))


def unpack(pair, scalar: str) -> tuple[np.ndarray, np.ndarray]:
    """A fused pair of ``scalar`` halves -> (mean, mean of squares) as float64."""
    half, width = _HALF_BITS[scalar]
    p = np.asarray(pair).astype(_PACKED[scalar])
    mask = _PACKED[scalar]((1 << width) - 1)
    lo = (p & mask).astype(half)
    hi = ((p >> _PACKED[scalar](width)) & mask).astype(half)
    if scalar == DF16:
        return widen(lo, DF16), widen(hi, DF16)
    as_float = np.float16 if scalar == "f16" else np.float32
    return lo.view(as_float).astype(_F64), hi.view(as_float).astype(_F64)


def finish(value, t):
    """A computed array of the result's dtype -> the slot value of type ``t`` (arrays inside
    linalg.generic bodies stay arrays; a 0-d numpy result becomes the scalar form)."""
    if not isinstance(value, (np.ndarray, np.generic)):
        return value  # another back end's array
    arr = np.asarray(value)
    if isinstance(t, TensorType) or arr.ndim:
        return arr
    return to_scalar(arr[()], t)


def build_host(c, op, compute):
    """The builder of a one-result op computed by ``compute(*operand values)`` (numpy in, an
    array of the result's dtype out): folded when every operand is a compile-time constant,
    else a step that runs it on the host for any back end."""
    t = op.result.type
    if c.all_const(op.operands):
        c.set_const(op.result, finish(compute(*[c.const(v) for v in op.operands]), t))
        return None
    run = host_fn(c.xp, compute)
    ins = [c.slot(v) for v in op.operands]
    ir = c.slot(op.result)

    def step(env):
        env[ir] = finish(run(*[env[s] for s in ins]), t)
    return step


def host_fn(xp, fn):
    """``fn`` (numpy in, numpy out) for back end ``xp``: its arrays go to the host and back."""
    if isinstance(xp, type(NP)):
        return fn
    is_arr, to_host, asarray = xp.is_array, xp.to_host, xp.asarray

    def on_host(*args):
        moved = any(is_arr(a) for a in args)
        out = fn(*[to_host(a) if is_arr(a) else a for a in args])
        if moved and isinstance(out, np.ndarray) and out.ndim:
            return asarray(out)
        return out
    return on_host
