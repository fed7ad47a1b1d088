"""arith: constants, elementwise float/int ops, comparisons, select, casts.

Each op kind's parts stand side by side (registry.py): custom syntax, verification rule, builder,
cost (a generic-rule category of latency/walker.py, or the constant's handler) and, for the
elementwise kinds and select, the stacked form.

Numerics: an f16 op computes in f32 and rounds once to f16. numpy's float16 ufuncs do exactly that
for + - * / and sqrt (f32 has enough precision that the double rounding is innocuous), so they are
used directly. Integer ops follow MLIR's two's-complement rules on signless integers (sign lives
in the op: divsi/divui, cmpi slt/ult, extsi/extui, ...), wrapping modulo 2^N; index scalars are
exact. int_numerics.py holds those numerics; divsi/remsi truncate toward zero, floordivsi floors,
ceildivsi/ceildivui round up.

Every builder takes its run-time functions from the machine's array back end (``c.xp``, see
``backends/``) and folds compile-time constants with numpy (:data:`NP`).

Public names other dialect modules build on: :func:`coerce`, :func:`to_scalar`, :data:`NP`,
:func:`make_binary`, :func:`make_unary`, :data:`INT_BINARY` (integer ops by name),
:func:`h_simple` (the ``op %a, %b : T`` syntax, shared with math) and
:func:`stacked_elementwise` (the stacked form of elementwise ops, shared with math).
"""

from __future__ import annotations

import numpy as np

from ..ir import registry
from ..backends.capabilities import caps_of
from ..backends.f16_convert import MIN_ELEMENTS, binop, convert
from ..backends.numpy_backend import NumpyBackend
from ..ir.nodes import DenseConstant, INT_TYPES, Op, ScalarType, TensorType
from ..parse.numbers import hex_float
from ..verify.rules import (Rule, check_declared_operands, compatible, declared, elem,
                            elementwise, fail, same_shape)
from . import int_numerics as ints
from .arith_types import check_constant, check_operand_classes

F32 = np.dtype(np.float32)
NP = NumpyBackend()  # compile-time folding always runs on the host


def elem_of(t) -> str:
    return t.elem if isinstance(t, TensorType) else t.name


def dtype_of(t) -> np.dtype:
    return t.dtype


def is_int_type(t) -> bool:
    return elem_of(t) in INT_TYPES


def to_scalar(value, t):
    """A Python/numpy scalar of type ``t`` (index/int -> int, i1 -> bool, float -> np scalar)."""
    name = t.name
    if name == "i1":
        return bool(value)
    if name in INT_TYPES:
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
    """A literal as a value of element type ``elem``: integers wrap to the type's N bits (the
    verifier has checked the range, so this only reads ``255 : i8`` as -1); hexadecimal literals
    of float types are bit patterns."""
    if isinstance(v, tuple) and v[0] == "hex":
        if elem in ("f16", "f32", "f64"):
            return hex_float(v[1], elem)
        v = v[1]
    if elem in INT_TYPES and not isinstance(v, float):
        return ints.wrap(int(v), elem) if elem != "index" else int(v)
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
    step.io = ((ia, ib), ir)  # the slots it reads and writes (exec/tape_fusion.py)
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

    step.io = ((ia,), ir)  # the slots it reads and writes (exec/tape_fusion.py)
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
                   "arith.ceildivui", "arith.remui", "arith.remsi") and \
            not isinstance(op.result.type, TensorType):
        return not b.varies(op.operands[1])  # a varying divisor: check zero core by core
    return True


def stacked_elementwise(b, op, plain):
    """The plain step itself, run once on the stacked values, when :func:`_elementwise_ok`
    holds; else None (core by core)."""
    return plain if _elementwise_ok(b, op) else None


registry.implements("stacked", *("arith." + n for n in (
    "addf", "subf", "mulf", "divf", "remf", "maximumf", "minimumf", "maxf", "minf", "maxnumf",
    "minnumf", "addi", "subi", "muli", "divui", "divsi", "floordivsi", "ceildivsi", "ceildivui",
    "remui", "remsi", "andi", "ori", "xori", "minsi", "maxsi", "minui", "maxui", "negf", "absf",
    "cmpf", "cmpi", "extf", "truncf", "sitofp", "uitofp", "fptosi", "fptoui", "extsi", "extui", "trunci",
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
    check_constant(t, v)


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

def _same(fn):
    """An op written for Python values and numpy arrays: the same for every back end."""
    return lambda xp: fn


def on_host(xp, fn):
    """``fn`` (written for Python values and numpy arrays) for back end ``xp``: arrays of
    another back end are computed on the host and handed back."""
    if isinstance(xp, NumpyBackend):
        return fn
    is_arr, to_host, asarray = xp.is_array, xp.to_host, xp.asarray

    def dev(*args):
        if any(is_arr(a) for a in args):
            return asarray(fn(*(to_host(a) if is_arr(a) else a for a in args)))
        return fn(*args)
    return dev


def _int_of(name: str):
    def of(xp, elem: str = "index"):
        return on_host(xp, ints.binary(name, elem))
    return of


#: name -> ``of(xp, elem="index")`` -> ``fn(a, b)``: the integer ops on values of type ``elem``
#: (int_numerics.py), run by back end ``xp``
INT_BINARY = {name: _int_of(name) for name in ints.INT_OPS}

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
                "addi subi muli divui divsi floordivsi ceildivsi ceildivui remui remsi andi ori "
                "xori shli shrsi shrui minsi maxsi minui maxui").split()


def _elementwise(op: Op) -> None:
    check_operand_classes(op)
    elementwise(op)


for _n in _ELEMENTWISE:
    registry.set_part("syntax", "arith." + _n, h_simple)
    registry.set_part("verify", "arith." + _n,
                      Rule((1 if _n in ("negf", "absf") else 2,) * 2, (1, 1), check=_elementwise))
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
    t = op.result.type
    elem, of = elem_of(t), INT_BINARY[op.name]

    def fn_of(xp):
        return of(xp, elem)
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
    check_operand_classes(op)


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


@registry.implements("build", "arith.cmpi", "arith.cmpf")
def build_cmp(c, op):
    pred = op.attrs["predicate"]
    if op.name == "arith.cmpi":
        cmpi = ints.compare(pred, elem_of(op.operands[0].type))

        def fn_of(xp):
            return on_host(xp, cmpi)
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
    if isinstance(c.type, TensorType) and not same_shape(c.type, op.results[0].type):
        fail(f"select condition {c.name} of type {c.type} does not have the result's shape")
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
    check_operand_classes(op)


def _cast_fn(name: str, src, dst):
    sdt, ddt = src.dtype, dst.dtype
    dst_scalar = not isinstance(dst, TensorType)

    if name == "arith.bitcast":
        def fn(x):
            arr = np.asarray(x, dtype=sdt)
            out = arr.view(ddt)
            return out if arr.ndim else to_scalar(out[()], dst) if dst_scalar else out

        return fn
    se, de = elem_of(src), elem_of(dst)
    if name in _INT_READS:
        signed_read = name in ("arith.fptosi", "arith.sitofp", "arith.extsi",
                               "arith.index_cast")

        def fn(x):
            with np.errstate(all="ignore"):
                return _int_cast(name, np.asarray(x, dtype=sdt), se, de, ddt, signed_read)
    else:  # extf truncf
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


_INT_READS = ("arith.fptosi", "arith.fptoui", "arith.sitofp", "arith.uitofp", "arith.extsi",
               "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui")


def _int_cast(name: str, x: np.ndarray, se: str, de: str, ddt, signed_read: bool):
    """A cast that reads or writes integer bits (MLIR's semantics, int_numerics.py): the
    source read signed or unsigned by the op, floats truncated toward zero, the result
    wrapped to the destination's width (a float out of the integer range is poison in MLIR;
    here it gives the wrap of numpy's conversion)."""
    if name in ("arith.fptosi", "arith.fptoui"):
        t = np.trunc(x.astype(np.float64))
        wide = t.astype(np.int64) if name == "arith.fptosi" or de == "i1" else \
            t.astype(np.uint64)
        return ints.narrow(wide, de)
    v = ints.signed(x, se) if signed_read else ints.unsigned(x, se)
    if name in ("arith.sitofp", "arith.uitofp"):
        return v.astype(ddt)
    return ints.narrow(v, de)


def _cast_of(name: str, src, dst):
    """back end -> cast function: float casts and bitcasts of a non-numpy back end's tensors
    are done there; integer casts (their bit-level rules are written for numpy) and everything
    else (scalars, numpy arrays) by the numpy function above."""
    host = _cast_fn(name, src, dst)
    ddt = dst.dtype

    def of(xp):
        if isinstance(xp, NumpyBackend):
            return host
        if name in _INT_READS:
            return on_host(xp, host)
        if name == "arith.bitcast":
            def dev(x):
                return xp.view_as(x, ddt)
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
            and src.name not in ("index", "i1") and op.name == "arith.index_cast":
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
