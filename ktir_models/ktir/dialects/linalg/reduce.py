"""linalg.reduce: its parts side by side (syntax, verification rule, builder, stacked form), and
the reduction helpers other modules build on (:data:`REDUCERS`, :func:`body_combiner`,
:func:`accumulator`, :func:`fast_reduce`: the ragged steps of reroll use them too).

Numerics: a reduce with a known combiner (addf, maximumf, ...) is accumulated in f32 (f64 for
f32/f64 inputs), combined with the init and rounded once. Bodies that are not a single known
combiner are folded sequentially in the element type, exactly as written.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...ir import registry
from ...backends.capabilities import caps_of
from ...backends.f16_convert import MIN_ELEMENTS, convert, native_from
from ...backends.row_reduce import row_max, row_sums
from ...exec.execute import run_steps
from ...ir.nodes import Op, TensorType
from ...verify.rules import Rule, check_declared_ins_outs, fail, ins_outs, same_shape
from ..arith import NP, coerce
from .numerics import F16, F32
from .syntax import parse_structured

COMBINERS = {"arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf", "arith.maxnumf",
             "arith.minnumf", "arith.maxf", "arith.minf", "arith.addi", "arith.muli",
             "arith.maxsi", "arith.minsi", "arith.andi", "arith.ori", "arith.xori"}


REDUCERS = {
    "arith.addf": ("sum", np.add), "arith.addi": ("sum", np.add),
    "arith.mulf": ("prod", np.multiply), "arith.muli": ("prod", np.multiply),
    "arith.maximumf": ("max", np.maximum), "arith.maxf": ("max", np.maximum),
    "arith.minimumf": ("min", np.minimum), "arith.minf": ("min", np.minimum),
    "arith.maxnumf": ("nanmax", np.fmax), "arith.minnumf": ("nanmin", np.fmin),
    "arith.maxsi": ("max", np.maximum), "arith.minsi": ("min", np.minimum),
    "arith.andi": ("and", np.bitwise_and), "arith.ori": ("or", np.bitwise_or),
    "arith.xori": ("xor", np.bitwise_xor),
}


def body_combiner(op) -> str | None:
    """The combiner name when the reduce body is ``%r = <binop> %in, %acc; yield %r``."""
    if "combiner" in op.attrs:
        return op.attrs["combiner"]
    block = op.regions[0].block
    if len(block.ops) != 2 or block.ops[1].name != "linalg.yield" or len(block.args) != 2:
        return None
    body = block.ops[0]
    if body.name not in REDUCERS or block.ops[1].operands != [body.result]:
        return None
    if set(map(id, body.operands)) != set(map(id, block.args)):
        return None
    return body.name


def accumulator(dt: np.dtype, xp) -> np.dtype:
    """The accumulator dtype of a sum/product of ``dt`` values: f32 for f16/bf16, the back end's
    wide float (f64, or f32 where the device has none) for f32/f64, int64 for ints."""
    if dt.kind == "f" or dt.name == "bfloat16":
        return xp.wide_float if dt.itemsize >= 4 else F32
    return dt if dt == np.bool_ else np.dtype(np.int64)


def widened_rows(x, dims: tuple, acc_t):
    """``x`` widened to f32 (natively) where numpy's f32 sum of it over ``dims`` has exactly the
    bits of ``np.add.reduce(x, dims, dtype=float32)``, else None.

    numpy sums an f16 array into f32 by casting runs of the reduced axis into a buffer and
    summing each run pairwise; an f32 array's contiguous runs are summed by the same pairwise
    loop. The two agree when the reduced dimension is only the last one, contiguous in memory
    (so it is the iterator's inner loop in both), and no longer than numpy's buffer (a longer
    run is cut into buffer-sized pieces: tests/ktir/test_reduce_sums.py shows both sides of the
    limit). numpy casts f16 element by element (~3 ns each); the native widening is ~10x
    faster."""
    if type(x) is not np.ndarray or x.dtype != F16 or acc_t != F32 or x.ndim == 0 or \
            tuple(dims) != (x.ndim - 1,) or x.shape[-1] > np.getbufsize() or \
            not x.flags.c_contiguous:
        return None
    return convert(x, F32)


def last_axis_sums(x, dims: tuple, acc_t):
    """``np.add.reduce(x, dims, dtype=acc_t)`` natively (backends/row_reduce.py: numpy's pairwise
    order, the same bits) where ``x`` is a host f32 array of at least two axes summed over its
    last one into f32; else None."""
    if acc_t != F32 or getattr(x, "ndim", 0) < 2 or tuple(dims) != (x.ndim - 1,):
        return None
    return row_sums(x)


def last_axis_max(x, dims: tuple, lengths=None):
    """``np.maximum.reduce(x, dims)`` as :func:`fast_reduce` takes it (an f16 ``x`` widened to
    f32 from the size it widens at), natively (backends/row_reduce.py: the same bits), where
    ``x`` is a host f16 or f32 array of at least two axes reduced over its last one; with
    ``lengths``, each row over its leading values (the rest counts as -inf). None where numpy
    must decide (a NaN, zeros of both signs as the maximum) or the layout does not allow it."""
    if getattr(x, "ndim", 0) < 2 or tuple(dims) != (x.ndim - 1,):
        return None
    m = row_max(x, lengths)
    if m is None or x.dtype != F16:
        return m
    start = native_from()
    return m if x.size >= (MIN_ELEMENTS if start is None else start) else m.astype(F16)


def fast_reduce(kind: str, x, dims: tuple, init, t: TensorType, acc_t, xp=NP):
    """The reduction of ``x`` over ``dims`` combined with ``init``, as type ``t`` (arrays of back
    end ``xp``; ``acc_t`` from :func:`accumulator`)."""
    if kind == "sum":
        sums = None
        if caps_of(xp).host_arrays:
            wide = widened_rows(x, dims, acc_t)
            x = x if wide is None else wide
            sums = last_axis_sums(x, dims, acc_t)
        if sums is None:
            sums = xp.reduce("sum", x, dims, acc_t)
        v = xp.add(sums, xp.astype(init, acc_t))
    elif kind == "prod":
        v = xp.multiply(xp.reduce("prod", x, dims, acc_t), xp.astype(init, acc_t))
    else:
        combine = {"max": xp.maximum, "min": xp.minimum, "nanmax": xp.fmax, "nanmin": xp.fmin,
                   "and": _and, "or": _or, "xor": _xor}[kind]
        if kind == "max" and caps_of(xp).host_arrays:
            m = last_axis_max(x, dims)
            if m is not None:
                return coerce(combine(m, init), t, xp)
        if caps_of(xp).host_arrays and getattr(x, "dtype", None) == F16 and \
                kind in ("max", "min", "nanmax", "nanmin"):
            # numpy's float16 max/min loops run ~4x slower than widening (natively) and taking
            # the f32 max/min, which selects the same value (every f16 is exact in f32)
            start = native_from()
            if x.size >= (MIN_ELEMENTS if start is None else start):
                x = xp.astype(x, F32)
        v = combine(xp.reduce(kind, x, dims), init)
    return coerce(v, t, xp)


def _and(a, b):
    return a & b


def _or(a, b):
    return a | b


def _xor(a, b):
    return a ^ b


@registry.implements("build", "linalg.reduce")
def build_reduce(c, op):
    ins, outs = ins_outs(op)
    dims = tuple(op.attrs["dimensions"])
    r = op.result
    combiner = body_combiner(op)
    if combiner is not None and len(ins) == 1:
        kind = REDUCERS[combiner][0]
        ix, iinit, ir = c.slot(ins[0]), c.slot(outs[0]), c.slot(r)
        xp = c.xp
        acc_t = accumulator(ins[0].type.dtype, xp)
        t = r.type

        def step(env):
            env[ir] = fast_reduce(kind, env[ix], dims, env[iinit], t, acc_t, xp)

        return step
    # general body: sequential fold over the reduced positions, vectorised over the kept ones
    block = op.regions[0].block
    body = c.compile_block(block)
    n_in = len(ins)
    arg_slots = [c.slot(a) for a in block.args]
    yield_slots = [c.slot(v) for v in block.ops[-1].operands]
    in_slots = [c.slot(v) for v in ins]
    out_slots = [c.slot(v) for v in outs]
    res_slots = [c.slot(v) for v in op.results]
    res_types = [v.type for v in op.results]
    xp = c.xp

    def as_array(v):
        return v if xp.is_array(v) else xp.asarray(v)

    def step(env):
        xs = [env[s] for s in in_slots]
        accs = [as_array(env[s]) for s in out_slots]
        shape = xs[0].shape
        moved = [xp.moveaxis(x, list(dims), list(range(len(dims)))) for x in xs]
        for pos in itertools.product(*[range(shape[d]) for d in dims]):
            for s, m in zip(arg_slots[:n_in], moved):
                env[s] = m[pos]
            for s, a in zip(arg_slots[n_in:], accs):
                env[s] = a
            run_steps(body, env)
            accs = [as_array(env[s]) for s in yield_slots]
        for s, a, t in zip(res_slots, accs, res_types):
            env[s] = coerce(xp.broadcast_to(a, t.shape) if tuple(a.shape) != tuple(t.shape)
                            else a, t, xp)

    return step


def _reduce(op: Op) -> None:
    ins, outs = ins_outs(op)
    if len(ins) != len(outs) or not ins:
        fail("linalg.reduce needs as many inits as inputs")
    check_declared_ins_outs(op)
    dims = op.attrs.get("dimensions")
    if not isinstance(dims, list):
        fail("linalg.reduce needs dimensions = [...]")
    x, init = ins[0].type, outs[0].type
    if any(d < 0 or d >= len(x.shape) for d in dims) or len(set(dims)) != len(dims):
        fail(f"bad reduction dimensions {dims} for {x}")
    kept = tuple(s for k, s in enumerate(x.shape) if k not in dims)
    if not same_shape(TensorType(kept, x.elem), init):
        fail(f"reducing {x} over {dims} gives {'x'.join(map(str, kept))}, not {init}")
    if "combiner" not in op.attrs and not op.regions:
        fail("linalg.reduce needs a combiner ({ arith.addf }) or a body region")
    if "combiner" in op.attrs and op.attrs["combiner"] not in COMBINERS:
        fail(f"unsupported reduction combiner '{op.attrs['combiner']}'")


COMBINERS = {"arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf", "arith.maxnumf",
              "arith.minnumf", "arith.maxf", "arith.minf", "arith.addi", "arith.muli",
              "arith.maxsi", "arith.minsi", "arith.andi", "arith.ori", "arith.xori"}


registry.set_part("syntax", "linalg.reduce", parse_structured)
registry.set_part("verify", "linalg.reduce", Rule((2, None), (1, None), (), (0, 1), check=_reduce))
registry.set_part("cost", "linalg.reduce", "vector")


@registry.implements("stacked", "linalg.reduce")
def stacked_reduce(b, op, plain):
    ins, outs = op.groups["ins"], op.groups["outs"]
    combiner = body_combiner(op)
    if combiner is None or len(ins) != 1:
        return None
    kind = REDUCERS[combiner][0]
    dims = tuple(op.attrs["dimensions"])
    if b.varies(ins[0]):
        dims = tuple(d + 1 for d in dims)
    ix, iinit, ir = b.c.slot(ins[0]), b.c.slot(outs[0]), b.c.slot(op.result)
    xp = b.c.xp
    acc_t = accumulator(ins[0].type.dtype, xp)
    t = op.result.type

    def step(senv):
        senv[ir] = fast_reduce(kind, senv[ix], dims, senv[iinit], t, acc_t, xp)

    return step
