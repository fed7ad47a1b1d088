"""arith: constants, elementwise float/int ops, comparisons, select, casts.

Each op kind's parts stand side by side (registry.py): custom syntax, verification rule, builder,
cost (a generic-rule category of latency/walker.py, or the constant's handler) and, for the
elementwise kinds and select, the stacked form.

Numerics: an f16 op computes in f32 and rounds once to f16. numpy's float16 ufuncs do exactly that
for + - * / and sqrt (f32 has enough precision that the double rounding is innocuous), so they are
used directly. Integer/index arithmetic is exact; divsi/remsi truncate toward zero, floordivsi
floors, ceildivsi rounds up.

Every builder takes its run-time functions from the machine's array back end (``c.xp``, see
``backends/``) and folds compile-time constants with numpy (:data:`NP`).

Public names other dialect modules build on: :func:`coerce`, :func:`to_scalar`, :data:`NP`,
:func:`make_binary`, :func:`make_unary`, :data:`INT_BINARY` (integer ops by name),
:func:`h_simple` (the ``op %a, %b : T`` syntax, shared with math) and
:func:`stacked_elementwise` (the stacked form of elementwise ops, shared with math).
"""

from __future__ import annotations

import numpy as np

from .. import registry
from ..backends.capabilities import caps_of
from ..backends.f16_convert import MIN_ELEMENTS, binop, convert
from ..backends.numpy_backend import NumpyBackend
from ..ir import DenseConstant, Op, ScalarType, TensorType
from ..parse.numbers import hex_float
from ..verify_rules import (Rule, check_declared_operands, compatible, declared, elem,
                            elementwise, fail, same_shape)

F32 = np.dtype(np.float32)
NP = NumpyBackend()  # compile-time folding always runs on the host


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


def coerce(value, t, xp=NP):
    """Bring a computed value to type ``t``: arrays (of back end ``xp``) get the dtype, scalars
    the scalar form."""
    if isinstance(t, TensorType):
        if not xp.is_array(value):
            value = xp.asarray(value)
        return xp.astype(value, t.dtype)
    if xp.is_array(value):
        if value.ndim > 0:  # inside linalg.generic bodies
            return xp.astype(value, t.dtype)
        value = xp.item(value)
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


def make_binary(c, op, fn_of):
    """Builder body shared by binary elementwise ops: fold constants with ``fn_of(NP)``, else a
    2-slot closure over ``fn_of(c.xp)``."""
    a, b = op.operands
    r = op.result
    t = r.type
    if c.all_const((a, b)):
        with np.errstate(all="ignore"):
            c.set_const(r, coerce(fn_of(NP)(c.const(a), c.const(b)), t))
        return None
    ia, ib, ir = c.slot(a), c.slot(b), c.slot(r)
    fn = fn_of(c.xp)

    def step(env):
        env[ir] = fn(env[ia], env[ib])
    return step


def make_unary(c, op, fn_of):
    """Like :func:`make_binary` for one operand."""
    (a,) = op.operands[:1]
    r = op.result
    t = r.type
    if c.all_const((a,)):
        with np.errstate(all="ignore"):
            c.set_const(r, coerce(fn_of(NP)(c.const(a)), t))
        return None
    ia, ir = c.slot(a), c.slot(r)
    fn = fn_of(c.xp)

    def step(env):
        env[ir] = fn(env[ia])

    return step


# -- syntax shared by every arith op but the constant (and by math) -------------------------------

def _shaped_like(t, elem: str):
    if isinstance(t, TensorType):
        return TensorType(t.shape, elem)
    return ScalarType(elem)


def h_simple(p, op: Op):
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


# -- the stacked form shared by elementwise ops (and math's) --------------------------------------

def _elementwise_ok(b, op: Op) -> bool:
    """Elementwise ops broadcast over the core axis when every operand is a tensor or every
    operand is a scalar (a stacked scalar [C] must never meet a tensor operand)."""
    kinds = {isinstance(v.type, TensorType) for v in op.operands} | \
        {isinstance(v.type, TensorType) for v in op.results}
    if len(kinds) != 1:
        return False
    if op.name in ("arith.divui", "arith.divsi", "arith.floordivsi", "arith.ceildivsi",
                   "arith.remui", "arith.remsi") and not isinstance(op.result.type, TensorType):
        return not b.varies(op.operands[1])  # a varying divisor: check zero core by core
    return True


def stacked_elementwise(b, op, plain):
    """The plain step itself, run once on the stacked values, when :func:`_elementwise_ok`
    holds; else None (core by core)."""
    return plain if _elementwise_ok(b, op) else None


registry.implements("stacked", *("arith." + n for n in (
    "addf", "subf", "mulf", "divf", "remf", "maximumf", "minimumf", "maxf", "minf", "maxnumf",
    "minnumf", "addi", "subi", "muli", "divui", "divsi", "floordivsi", "ceildivsi", "remui",
    "remsi", "andi", "ori", "xori", "minsi", "maxsi", "minui", "maxui", "negf", "absf", "cmpf",
    "cmpi", "extf", "truncf", "sitofp", "uitofp", "fptosi", "fptoui", "extsi", "extui", "trunci",
    "index_cast", "index_castui")))(stacked_elementwise)


# -- arith.constant -------------------------------------------------------------------------------

@registry.implements("syntax", "arith.constant")
def h_constant(p, op: Op):
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


def _constant(op: Op) -> None:
    t = op.results[0].type
    v: DenseConstant = op.attrs["value"]
    if isinstance(t, TensorType):
        n = t.num_elements
        if not v.splat and n is not None and len(v.values) != n:
            fail(f"dense constant has {len(v.values)} values but {t} has {n} elements")
    elif isinstance(t, ScalarType):
        if not v.splat:
            fail("a scalar constant cannot be a list")
    else:
        fail(f"constants of type {t} are not supported")
    width = _INT_WIDTHS.get(getattr(t, "elem", getattr(t, "name", None)))
    if width is not None:  # as MLIR's parser: an integer literal must fit the type's width
        for x in v.values:
            x = x[1] if isinstance(x, tuple) else x
            if type(x) is int and not -(1 << width - 1) <= x < 1 << width:
                fail(f"integer constant {x} does not fit in {width} bits ({t})")


_INT_WIDTHS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "index": 64}


registry.set_part("verify", "arith.constant", Rule((0, 0), (1, 1), ("value",), check=_constant))


@registry.implements("cost", "arith.constant")
def cost_constant(w, op: Op, scale: float) -> None:
    """Free; an integer scalar's value is recorded for the latency walker's index arithmetic."""
    if op.results and isinstance(op.result.type, ScalarType):
        c = op.attrs.get("value")
        vals = getattr(c, "values", None)
        if vals and op.result.type.name in ("index", "i64", "i32", "i16", "i8", "i1"):
            w.env[op.result] = int(literal_value(vals[0], op.result.type.name))
    w.free(op)


@registry.implements("build", "arith.constant")
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


# -- elementwise float and integer ops ------------------------------------------------------------

# integer helpers that work on Python ints and numpy integer arrays

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


def _minmax(name: str):
    """min/max of ints: the back end's elementwise function for arrays, Python's for ints."""
    def of(xp):
        arr_fn, py_fn = (xp.minimum, min) if name == "min" else (xp.maximum, max)
        is_arr = xp.is_array

        def fn(a, b):
            return arr_fn(a, b) if is_arr(a) or is_arr(b) else py_fn(a, b)
        return fn
    return of


def _same(fn):
    """An integer op written with Python operators: the same for every back end."""
    return lambda xp: fn


# name -> (back end -> function). Python's operators mean the same on ints, numpy arrays and
# torch tensors (// floors, % takes the divisor's sign), so most entries ignore the back end.
INT_BINARY = {
    "arith.addi": _same(lambda a, b: a + b),
    "arith.subi": _same(lambda a, b: a - b),
    "arith.muli": _same(lambda a, b: a * b),
    "arith.divui": _same(lambda a, b: a // _check_div(b)),
    "arith.divsi": _same(lambda a, b: _divsi(a, _check_div(b))),
    "arith.floordivsi": _same(lambda a, b: a // _check_div(b)),
    "arith.ceildivsi": _same(lambda a, b: _ceildiv(a, _check_div(b))),
    "arith.remui": _same(lambda a, b: a % _check_div(b)),
    "arith.remsi": _same(lambda a, b: _remsi(a, _check_div(b))),
    "arith.andi": _same(lambda a, b: a & b),
    "arith.ori": _same(lambda a, b: a | b),
    "arith.xori": _same(lambda a, b: a ^ b),
    "arith.shli": _same(lambda a, b: a << b),
    "arith.shrsi": _same(lambda a, b: a >> b),
    "arith.shrui": _same(lambda a, b: a >> b),
    "arith.minsi": _minmax("min"),
    "arith.maxsi": _minmax("max"),
}
INT_BINARY["arith.minui"] = INT_BINARY["arith.minsi"]
INT_BINARY["arith.maxui"] = INT_BINARY["arith.maxsi"]

# name -> back-end function name (numpy's)
_FLOAT_BINARY = {
    "arith.addf": "add",
    "arith.subf": "subtract",
    "arith.mulf": "multiply",
    "arith.divf": "divide",
    "arith.remf": "fmod",
    "arith.maximumf": "maximum",
    "arith.minimumf": "minimum",
    "arith.maxf": "maximum",
    "arith.minf": "minimum",
    "arith.maxnumf": "fmax",
    "arith.minnumf": "fmin",
}

_ELEMENTWISE = ("addf subf mulf divf remf negf absf maximumf minimumf maxf minf maxnumf minnumf "
                "addi subi muli divui divsi floordivsi ceildivsi remui remsi andi ori xori shli "
                "shrsi shrui minsi maxsi minui maxui").split()
for _n in _ELEMENTWISE:
    registry.set_part("syntax", "arith." + _n, h_simple)
    registry.set_part("verify", "arith." + _n,
                      Rule((1 if _n in ("negf", "absf") else 2,) * 2, (1, 1), check=elementwise))
    # integer ops: evaluated (and free) on scalars by the latency walker, vector work on tensors
    registry.set_part("cost", "arith." + _n, "scalar" if "arith." + _n in INT_BINARY else "vector")

# + - * / on f16 tensors: numpy's float16 loops are slow; computing in f32 and rounding once gives
# the identical, correctly rounded f16 result (f32 carries 24 >= 2*11 + 2 bits, so the double
# rounding is innocuous for these four operations) several times faster.
_VIA_F32 = {"arith.addf", "arith.subf", "arith.mulf", "arith.divf"}


@registry.implements("build", *_FLOAT_BINARY)
def build_float_binary(c, op):
    name = _FLOAT_BINARY[op.name]
    t = op.result.type
    if op.name in _VIA_F32 and isinstance(t, TensorType) and t.elem == "f16":
        def via_f32_of(xp):
            fn, astype = getattr(xp, name), xp.astype
            f16 = np.dtype(np.float16)

            def via_f32(a, b):
                return astype(fn(a, b, dtype=F32), f16)

            if not caps_of(xp).native_f16:  # the native kernels read host f16 arrays
                return via_f32

            def via_f32_widened(a, b):
                fused = binop(name, a, b)  # same-shaped f16 arrays: one native call
                if fused is not None:
                    return fused
                # large f16 operands widened by the native conversion first (numpy widens them
                # element by element inside the ufunc); the f32 values are the same
                if getattr(a, "size", 0) >= MIN_ELEMENTS:
                    a = astype(a, F32)
                if getattr(b, "size", 0) >= MIN_ELEMENTS:
                    b = astype(b, F32)
                return astype(fn(a, b, dtype=F32), f16)
            return via_f32_widened

        return make_binary(c, op, via_f32_of)
    return make_binary(c, op, lambda xp: getattr(xp, name))


@registry.implements("build", *INT_BINARY)
def build_int_binary(c, op):
    fn_of = INT_BINARY[op.name]
    t = op.result.type
    if isinstance(t, TensorType):
        dt = t.dtype

        def tensor_of(xp):
            fn, asarray, astype = fn_of(xp), xp.asarray, xp.astype

            def tfn(a, b):
                r = fn(a, b)
                return astype(r if xp.is_array(r) else asarray(r), dt)
            return tfn

        return make_binary(c, op, tensor_of)
    return make_binary(c, op, fn_of)


@registry.implements("build", "arith.negf")
def build_negf(c, op):
    return make_unary(c, op, lambda xp: xp.negative)


@registry.implements("build", "arith.absf")
def build_absf(c, op):
    return make_unary(c, op, lambda xp: xp.abs)


# -- comparisons ----------------------------------------------------------------------------------

_CMPI_PREDICATES = {"eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"}
_CMPF_PREDICATES = {"false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
                    "ult", "ule", "une", "uno", "true"}


def _cmp(op: Op) -> None:
    preds = _CMPI_PREDICATES if op.name == "arith.cmpi" else _CMPF_PREDICATES
    if op.attrs["predicate"] not in preds:
        fail(f"unknown predicate '{op.attrs['predicate']}' for {op.name}")
    a, b = op.operands
    if not compatible(a.type, b.type):
        fail(f"operands {a.name} ({a.type}) and {b.name} ({b.type}) differ in type")
    check_declared_operands(op)


for _n in ("arith.cmpi", "arith.cmpf"):
    registry.set_part("syntax", _n, h_simple)
    registry.set_part("verify", _n, Rule((2, 2), (1, 1), ("predicate",), check=_cmp))
registry.set_part("cost", "arith.cmpi", "scalar")
registry.set_part("cost", "arith.cmpf", "vector")


def _cmpf(pred: str, xp):
    base = {"eq": xp.equal, "gt": xp.greater, "ge": xp.greater_equal, "lt": xp.less,
            "le": xp.less_equal, "ne": xp.not_equal}
    isnan = xp.isnan
    if pred in ("true", "false"):
        def const(a, b):
            r = xp.equal(a, b)
            return xp.full(r.shape, pred == "true", np.bool_) if xp.is_array(r) else \
                pred == "true"
        return const
    if pred == "ord":
        return lambda a, b: ~(isnan(a) | isnan(b))
    if pred == "uno":
        return lambda a, b: isnan(a) | isnan(b)
    cmp = base[pred[1:]]
    if pred[0] == "o":
        if pred == "one":
            return lambda a, b: xp.not_equal(a, b) & ~(isnan(a) | isnan(b))
        return cmp  # comparisons with NaN are False, as ordered predicates require
    return lambda a, b: cmp(a, b) | isnan(a) | isnan(b)


_CMPI = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
         "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
         "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
         "uge": lambda a, b: a >= b}


@registry.implements("build", "arith.cmpi", "arith.cmpf")
def build_cmp(c, op):
    pred = op.attrs["predicate"]
    if op.name == "arith.cmpi":
        fn_of = _same(_CMPI[pred])
    else:
        def fn_of(xp):
            return _cmpf(pred, xp)
    if isinstance(op.result.type, TensorType) or op.name == "arith.cmpf":
        def wrapped_of(xp):
            fn, is_arr = fn_of(xp), xp.is_array

            def wrapped(a, b):
                r = fn(a, b)
                return r if is_arr(r) else bool(r)
            return wrapped

        return make_binary(c, op, wrapped_of)
    return make_binary(c, op, fn_of)


# -- arith.select ---------------------------------------------------------------------------------

def _select(op: Op) -> None:
    c, a, b = op.operands
    if elem(c.type) != "i1":
        fail(f"select condition {c.name} must be i1, got {c.type}")
    rt = op.results[0].type
    for v in (a, b):
        if not compatible(v.type, rt):
            fail(f"operand {v.name} of type {v.type} does not match the result type {rt}")


registry.set_part("syntax", "arith.select", h_simple)
registry.set_part("verify", "arith.select", Rule((3, 3), (1, 1), check=_select))
registry.set_part("cost", "arith.select", "scalar")


@registry.implements("build", "arith.select")
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
    where, astype = c.xp.where, c.xp.astype

    def step(env):
        cv = env[ic]
        if isinstance(cv, (bool, np.bool_)):
            env[ir] = env[ia] if cv else env[ib]
        else:
            env[ir] = astype(where(cv, env[ia], env[ib]), dt)

    return step


@registry.implements("stacked", "arith.select")
def stacked_select(b, op, plain):
    cond = op.operands[0]
    if isinstance(op.result.type, TensorType) and not isinstance(cond.type, TensorType) \
            and b.varies(cond):
        return None  # a per-core scalar condition choosing whole tensors
    return plain if isinstance(cond.type, TensorType) or not b.varies(cond) else None


# -- casts ----------------------------------------------------------------------------------------

_CASTS = "extf truncf sitofp uitofp fptosi fptoui index_cast index_castui extsi extui trunci " \
         "bitcast".split()


def _cast(op: Op) -> None:
    (a,) = op.operands
    src = declared(op)
    dst = op.attrs.get("to")
    if dst is None:
        fail(f"'{op.name}' needs 'to <type>'")
    if src is not None and not compatible(a.type, src):
        fail(f"operand {a.name} has type {a.type}, but the op says {src}")
    if not same_shape(a.type, dst) or isinstance(a.type, TensorType) != isinstance(dst,
                                                                                   TensorType):
        fail(f"cast changes the shape: {a.type} to {dst}")


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
            arr = np.asarray(x)
            fast = convert(arr, ddt)  # large f16 <-> f32: the native conversion, same bits
            return fast if fast is not None else arr.astype(ddt)

    if dst_scalar:
        def sfn(x, fn=fn):
            v = fn(x)
            if isinstance(v, np.ndarray) and v.ndim:
                return v
            return to_scalar(v[()] if isinstance(v, np.ndarray) else v, dst)

        return sfn
    return fn


def _cast_of(name: str, src, dst):
    """back end -> cast function: tensors of a non-numpy back end are cast there, everything
    else (scalars, numpy arrays) by the numpy function above."""
    host = _cast_fn(name, src, dst)
    ddt = dst.dtype

    def of(xp):
        if isinstance(xp, NumpyBackend):
            return host
        if name == "arith.bitcast":
            def dev(x):
                return xp.view_as(x, ddt)
        elif name in ("arith.fptosi", "arith.fptoui"):
            def dev(x):  # trunc is exact in the source format
                return xp.astype(xp.trunc(x), ddt)
        elif name == "arith.trunci":
            def dev(x):
                return xp.astype(xp.astype(x, np.int64), ddt)
        else:
            def dev(x):
                return xp.astype(x, ddt)
        is_arr = xp.is_array

        def fn(x):
            return dev(x) if is_arr(x) else host(x)
        return fn
    return of


@registry.implements("build", "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp",
                     "arith.fptosi", "arith.fptoui", "arith.index_cast", "arith.index_castui",
                     "arith.extsi", "arith.extui", "arith.trunci", "arith.bitcast")
def build_cast(c, op):
    src = op.operands[0].type
    dst = op.attrs["to"]
    if isinstance(dst, ScalarType) and dst.name == "index" and isinstance(src, ScalarType) \
            and src.name != "index" and op.name.startswith("arith.index_cast"):
        def to_index_of(xp):
            return lambda x: xp.astype(x, np.int64) if xp.is_array(x) else int(x)
        return make_unary(c, op, to_index_of)
    if isinstance(dst, ScalarType) and src == dst:
        return make_unary(c, op, _same(lambda x: x))
    return make_unary(c, op, _cast_of(op.name, src, dst))


# integer casts are evaluated (and free) on scalars by the latency walker; bitcast moves no data
_INT_CASTS = {"index_cast", "index_castui", "extsi", "extui", "trunci"}

for _n in _CASTS:
    registry.set_part("syntax", "arith." + _n, h_simple)
    registry.set_part("verify", "arith." + _n, Rule((1, 1), (1, 1), check=_cast))
    registry.set_part("cost", "arith." + _n,
                      "scalar" if _n in _INT_CASTS else "free" if _n == "bitcast" else "vector")
