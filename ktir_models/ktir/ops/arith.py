"""arith: constants, elementwise float/int ops, comparisons, select, casts.

Numerics: an f16 op computes in f32 and rounds once to f16. numpy's float16 ufuncs do exactly that
for + - * / and sqrt (f32 has enough precision that the double rounding is innocuous), so they are
used directly. Integer/index arithmetic is exact; divsi/remsi truncate toward zero, floordivsi
floors, ceildivsi rounds up.
"""

from __future__ import annotations

import numpy as np

from ..ir import DenseConstant, ScalarType, TensorType
from ..parser import hex_float
from . import register

F32 = np.dtype(np.float32)


def elem_of(t) -> str:
    return t.elem if isinstance(t, TensorType) else t.name


def dtype_of(t) -> np.dtype:
    return t.dtype


def is_int_type(t) -> bool:
    return elem_of(t) in ("index", "i1", "i8", "i16", "i32", "i64")


def to_scalar(value, t):
    """A Python/numpy scalar of type ``t`` (index/int -> int, i1 -> bool, float -> np scalar)."""
    name = t.name
    if name == "i1":
        return bool(value)
    if name in ("index", "i8", "i16", "i32", "i64"):
        return int(value)
    return t.dtype.type(value)


def coerce(value, t):
    """Bring a computed value to type ``t``: arrays get the dtype, scalars the scalar form."""
    if isinstance(t, TensorType):
        arr = np.asarray(value)
        if arr.dtype != t.dtype:
            arr = arr.astype(t.dtype)
        return arr
    if isinstance(value, np.ndarray) and value.ndim > 0:  # inside linalg.generic bodies
        return value.astype(t.dtype) if value.dtype != t.dtype else value
    return to_scalar(value, t)


def literal_value(v, elem: str):
    if isinstance(v, tuple) and v[0] == "hex":
        if elem in ("f16", "f32", "f64"):
            return hex_float(v[1], elem)
        bits = v[1]
        if elem in ("i32",) and bits >= 1 << 31:
            bits -= 1 << 32
        return bits
    return v


@register("arith.constant")
def build_constant(c, op):
    t = op.result.type
    v: DenseConstant = op.attrs["value"]
    elem = elem_of(t)
    vals = [literal_value(x, elem) for x in v.values]
    if isinstance(t, TensorType):
        if v.splat:
            arr = np.full(t.shape, vals[0], dtype=t.dtype)
        else:
            arr = np.array(vals, dtype=t.dtype).reshape(t.shape)
        c.set_const(op.result, arr)
    else:
        with np.errstate(all="ignore"):
            c.set_const(op.result, to_scalar(vals[0], t))
    return None


# -- integer helpers that work on Python ints and numpy integer arrays -------------------------

def _divsi(a, b):
    q = a // b
    r = a - q * b
    # floor -> trunc: bump the quotient when the remainder is non-zero and signs differ
    adj = (r != 0) & ((a < 0) != (b < 0))
    return q + adj if not isinstance(adj, bool) else (q + 1 if adj else q)


def _remsi(a, b):
    return a - _divsi(a, b) * b


def _ceildiv(a, b):
    return -((-a) // b)


def _check_div(b):
    if isinstance(b, int) and b == 0:
        raise ZeroDivisionError("integer division by zero")
    return b


_INT_BINARY = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divui": lambda a, b: a // _check_div(b),
    "arith.divsi": lambda a, b: _divsi(a, _check_div(b)),
    "arith.floordivsi": lambda a, b: a // _check_div(b),
    "arith.ceildivsi": lambda a, b: _ceildiv(a, _check_div(b)),
    "arith.remui": lambda a, b: a % _check_div(b),
    "arith.remsi": lambda a, b: _remsi(a, _check_div(b)),
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
    "arith.shli": lambda a, b: a << b,
    "arith.shrsi": lambda a, b: a >> b,
    "arith.shrui": lambda a, b: a >> b,
    "arith.minsi": lambda a, b: np.minimum(a, b) if isinstance(a, np.ndarray) or isinstance(
        b, np.ndarray) else min(a, b),
    "arith.maxsi": lambda a, b: np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(
        b, np.ndarray) else max(a, b),
}
_INT_BINARY["arith.minui"] = _INT_BINARY["arith.minsi"]
_INT_BINARY["arith.maxui"] = _INT_BINARY["arith.maxsi"]

_FLOAT_BINARY = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    "arith.remf": np.fmod,
    "arith.maximumf": np.maximum,
    "arith.minimumf": np.minimum,
    "arith.maxf": np.maximum,
    "arith.minf": np.minimum,
    "arith.maxnumf": np.fmax,
    "arith.minnumf": np.fmin,
}


def make_binary(c, op, fn, post=None):
    """Builder body shared by binary elementwise ops: fold constants, else a 2-slot closure."""
    a, b = op.operands
    r = op.result
    t = r.type
    if c.all_const((a, b)):
        with np.errstate(all="ignore"):
            c.set_const(r, coerce(fn(c.const(a), c.const(b)), t))
        return None
    ia, ib, ir = c.slot(a), c.slot(b), c.slot(r)
    if isinstance(t, TensorType) or not is_int_type(t):
        # numpy keeps the operand dtype for float ops (f16 op f16 -> f16, rounded once)
        def step(env):
            env[ir] = fn(env[ia], env[ib])
    else:
        def step(env):
            env[ir] = fn(env[ia], env[ib])
    return step


# + - * / on f16 tensors: numpy's float16 loops are slow; computing in f32 and rounding once gives
# the identical, correctly rounded f16 result (f32 carries 24 >= 2*11 + 2 bits, so the double
# rounding is innocuous for these four operations) several times faster.
_VIA_F32 = {"arith.addf", "arith.subf", "arith.mulf", "arith.divf"}


@register(*_FLOAT_BINARY)
def build_float_binary(c, op):
    fn = _FLOAT_BINARY[op.name]
    t = op.result.type
    if op.name in _VIA_F32 and isinstance(t, TensorType) and t.elem == "f16":
        def via_f32(a, b, fn=fn):
            return fn(a, b, dtype=F32).astype(np.float16)

        return make_binary(c, op, via_f32)
    return make_binary(c, op, fn)


@register(*_INT_BINARY)
def build_int_binary(c, op):
    fn = _INT_BINARY[op.name]
    t = op.result.type
    if isinstance(t, TensorType):
        dt = t.dtype

        def tfn(a, b, fn=fn):
            return np.asarray(fn(a, b)).astype(dt, copy=False)

        return make_binary(c, op, tfn)
    return make_binary(c, op, fn)


def make_unary(c, op, fn):
    (a,) = op.operands[:1]
    r = op.result
    t = r.type
    if c.all_const((a,)):
        with np.errstate(all="ignore"):
            c.set_const(r, coerce(fn(c.const(a)), t))
        return None
    ia, ir = c.slot(a), c.slot(r)

    def step(env):
        env[ir] = fn(env[ia])

    return step


@register("arith.negf")
def build_negf(c, op):
    return make_unary(c, op, np.negative)


@register("arith.absf")
def build_absf(c, op):
    return make_unary(c, op, np.abs)


# -- comparisons and select --------------------------------------------------------------------

def _cmpf(pred: str):
    base = {"eq": np.equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
            "le": np.less_equal, "ne": np.not_equal}
    if pred == "true":
        return lambda a, b: np.ones(np.broadcast(a, b).shape, bool) if np.ndim(a) else True
    if pred == "false":
        return lambda a, b: np.zeros(np.broadcast(a, b).shape, bool) if np.ndim(a) else False
    if pred == "ord":
        return lambda a, b: ~(np.isnan(a) | np.isnan(b))
    if pred == "uno":
        return lambda a, b: np.isnan(a) | np.isnan(b)
    cmp = base[pred[1:]]
    if pred[0] == "o":
        if pred == "one":
            return lambda a, b: np.not_equal(a, b) & ~(np.isnan(a) | np.isnan(b))
        return cmp  # numpy comparisons with NaN are False, as ordered predicates require
    return lambda a, b: cmp(a, b) | np.isnan(a) | np.isnan(b)


_CMPI = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
         "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
         "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
         "uge": lambda a, b: a >= b}


@register("arith.cmpi", "arith.cmpf")
def build_cmp(c, op):
    pred = op.attrs["predicate"]
    fn = _CMPI[pred] if op.name == "arith.cmpi" else _cmpf(pred)
    if isinstance(op.result.type, TensorType) or op.name == "arith.cmpf":
        def wrapped(a, b, fn=fn):
            r = fn(a, b)
            return r if isinstance(r, np.ndarray) else bool(r)

        return make_binary(c, op, wrapped)
    return make_binary(c, op, fn)


@register("arith.select")
def build_select(c, op):
    cond, a, b = op.operands
    r = op.result
    t = r.type
    if c.all_const((cond, a, b)):
        cv = c.const(cond)
        c.set_const(r, coerce(np.where(cv, c.const(a), c.const(b)) if isinstance(cv, np.ndarray)
                              else (c.const(a) if cv else c.const(b)), t))
        return None
    ic, ia, ib, ir = c.slot(cond), c.slot(a), c.slot(b), c.slot(r)
    dt = t.dtype

    def step(env):
        cv = env[ic]
        if isinstance(cv, (bool, np.bool_)):
            env[ir] = env[ia] if cv else env[ib]
        else:
            env[ir] = np.where(cv, env[ia], env[ib]).astype(dt, copy=False)

    return step


# -- casts ---------------------------------------------------------------------------------------

def _cast_fn(name: str, src, dst):
    sdt, ddt = src.dtype, dst.dtype
    dst_scalar = not isinstance(dst, TensorType)

    if name == "arith.bitcast":
        def fn(x):
            arr = np.asarray(x, dtype=sdt)
            out = arr.view(ddt)
            return out if arr.ndim else to_scalar(out[()], dst) if dst_scalar else out

        return fn
    if name in ("arith.fptosi", "arith.fptoui"):
        def fn(x):
            return np.trunc(np.asarray(x, dtype=np.float64)).astype(ddt)
    elif name == "arith.trunci":
        def fn(x):
            return np.asarray(x).astype(np.int64).astype(ddt)
    else:  # extf truncf sitofp uitofp index_cast(ui) extsi extui
        def fn(x):
            return np.asarray(x).astype(ddt)

    if dst_scalar:
        def sfn(x, fn=fn):
            v = fn(x)
            if isinstance(v, np.ndarray) and v.ndim:
                return v
            return to_scalar(v[()] if isinstance(v, np.ndarray) else v, dst)

        return sfn
    return fn


@register("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
          "arith.fptoui", "arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
          "arith.trunci", "arith.bitcast")
def build_cast(c, op):
    src = op.operands[0].type
    dst = op.attrs["to"]
    if isinstance(dst, ScalarType) and dst.name == "index" and isinstance(src, ScalarType) \
            and src.name != "index" and op.name.startswith("arith.index_cast"):
        return make_unary(c, op, lambda x: x.astype(np.int64) if isinstance(x, np.ndarray)
                          else int(x))
    if isinstance(dst, ScalarType) and src == dst:
        return make_unary(c, op, lambda x: x)
    return make_unary(c, op, _cast_fn(op.name, src, dst))
