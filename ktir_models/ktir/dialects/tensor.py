"""tensor: empty, splat, extract, expand/collapse_shape, reshape, extract/insert_slice,
from_elements, generate (and its yield).

Each op kind's parts stand side by side (registry.py): custom syntax, verification rule,
builder, cost (a generic-rule category of latency/walker.py: "free" for what moves no data,
"layout" for what writes a new tensor) and, for splat, extract and the reshapes, the stacked
form. Reshapes and splats return
views where numpy allows (tensors are never mutated).
"""

from __future__ import annotations

import numpy as np

from ..ir import registry
from ..ir.errors import FaultSignal, KtirError
from ..exec.execute import run_steps
from ..ir.nodes import SIGNLESS_INT_TYPES, Op, ScalarType, TensorType, Value
from ..parse.ops_custom import bracket_ints_or_values, h_yield
from ..verify.rules import Rule, compatible, declared, fail
from .arith import coerce, to_scalar

_SMALL = 1 << 14  # elements up to which a stacked splat is filled, not made a broadcast view


def _static_shape(c, op, t: TensorType, dyn_slots: list[int]):
    """A function env -> concrete shape (dynamic dims read from the given slots in order)."""
    if t.is_static:
        shape = tuple(t.shape)
        return lambda env: shape
    dims = list(t.shape)

    def shape_of(env):
        it = iter(dyn_slots)
        return tuple(d if d is not None else int(env[next(it)]) for d in dims)

    return shape_of


# -- tensor.empty ---------------------------------------------------------------------------------

@registry.implements("syntax", "tensor.empty")
def h_empty(p, op: Op):
    p.expect("(")
    op.operands = p.operand_list(")")
    p.expect(")")
    p.expect(":")
    return [p.parse_type()]


def _empty(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, TensorType):
        fail(f"tensor.empty must produce a tensor, got {t}")
    if len(op.operands) != sum(1 for d in t.shape if d is None):
        fail(f"tensor.empty needs one size operand per dynamic dim of {t}")


registry.set_part("verify", "tensor.empty", Rule((0, None), (1, 1), check=_empty))
registry.set_part("cost", "tensor.empty", "free")


@registry.implements("build", "tensor.empty")
def build_empty(c, op):
    t = op.result.type
    if t.is_static:
        # contents are undefined by the spec; zeros make runs reproducible
        c.set_const(op.result, np.zeros(t.shape, dtype=t.dtype))
        return None
    shape_of = _static_shape(c, op, t, [c.slot(v) for v in op.operands])
    ir = c.slot(op.result)
    zeros = c.xp.zeros

    def step(env):
        env[ir] = zeros(shape_of(env), t.dtype)

    return step


# -- tensor.splat ---------------------------------------------------------------------------------

@registry.implements("syntax", "tensor.splat")
def h_splat(p, op: Op):
    op.operands = [p.operand()]
    if p.peek() == "[":  # dynamic sizes
        p.pos += 1
        op.operands += p.operand_list("]")
        p.expect("]")
    p.expect(":")
    return [p.parse_type()]


def _splat(op: Op) -> None:
    t = op.results[0].type
    s = op.operands[0]
    if not isinstance(t, TensorType) or not isinstance(s.type, ScalarType):
        fail("tensor.splat takes a scalar and produces a tensor")
    if s.type.name != t.elem:
        fail(f"splat of {s.type} cannot produce {t}")


registry.set_part("verify", "tensor.splat", Rule((1, None), (1, 1), check=_splat))
registry.set_part("cost", "tensor.splat", "layout")


@registry.implements("build", "tensor.splat")
def build_splat(c, op):
    s = op.operands[0]
    t = op.result.type
    shape_of = _static_shape(c, op, t, [c.slot(v) for v in op.operands[1:]])
    dt = t.dtype
    if c.is_const(s) and t.is_static:
        c.set_const(op.result, np.full(t.shape, c.const(s), dtype=dt))
        return None
    is_, ir = c.slot(s), c.slot(op.result)
    xp = c.xp
    full = xp.full
    if t.is_static and (t.num_elements or 0) <= 65536:
        shape = tuple(t.shape)

        def step(env):  # small: a filled array is cheaper than a broadcast view
            env[ir] = full(shape, env[is_], dt)
        return step

    def step(env):
        env[ir] = xp.broadcast_to(xp.asarray(env[is_], dt), shape_of(env))

    return step


@registry.implements("stacked", "tensor.splat")
def stacked_splat(b, op, plain):
    t = op.result.type
    if len(op.operands) != 1 or not t.is_static or not b.varies(op.operands[0]):
        return None
    C = b.C
    shape = (C,) + tuple(t.shape)
    col = (C,) + (1,) * len(t.shape)
    dt = t.dtype
    is_, ir = b.c.slot(op.operands[0]), b.c.slot(op.result)

    if int(np.prod(shape)) <= _SMALL:
        def step(senv):  # filled: ~1 us against ~3.5 us for np.broadcast_to's view
            out = np.empty(shape, dt)
            out[...] = np.asarray(senv[is_], dt).reshape(col)
            senv[ir] = out
    else:
        def step(senv):
            senv[ir] = np.broadcast_to(np.asarray(senv[is_], dt).reshape(col), shape)

    return step


# -- tensor.extract -------------------------------------------------------------------------------

@registry.implements("syntax", "tensor.extract")
def h_extract(p, op: Op):
    op.operands = [p.operand()]
    p.expect("[")
    op.operands += p.operand_list("]")
    p.expect("]")
    p.expect(":")
    t = p.parse_type()
    op.attrs["types"] = [t]
    if not isinstance(t, TensorType):
        p.fail("tensor.extract needs a tensor type")
    return [ScalarType(t.elem)]


def _extract(op: Op) -> None:
    src = op.operands[0]
    t = declared(op)
    if not compatible(src.type, t):
        fail(f"operand {src.name} has type {src.type}, but the op says {t}")
    if len(op.operands) - 1 != len(t.shape):
        fail(f"tensor.extract needs {len(t.shape)} indices for {t}")


registry.set_part("verify", "tensor.extract", Rule((1, None), (1, 1), check=_extract))
registry.set_part("cost", "tensor.extract", "free")


@registry.implements("build", "tensor.extract")
def build_extract(c, op):
    src = op.operands[0]
    idx = op.operands[1:]
    r = op.result
    t = r.type
    isrc, ir = c.slot(src), c.slot(r)
    idx_slots = [c.slot(v) for v in idx]
    item = c.xp.item
    if all(c.is_const(v) for v in idx):
        pos = tuple(int(c.const(v)) for v in idx)

        def step(env):
            env[ir] = to_scalar(item(env[isrc][pos]), t)
        return step

    def step(env):
        env[ir] = to_scalar(item(env[isrc][tuple(int(env[s]) for s in idx_slots)]), t)

    return step


@registry.implements("stacked", "tensor.extract")
def stacked_extract(b, op, plain):
    src, idx = op.operands[0], op.operands[1:]
    c = b.c
    if not b.varies(src) or not all(c.is_const(v) for v in idx):
        return None
    pos = (slice(None),) + tuple(int(c.const(v)) for v in idx)
    t = op.result.type
    dt = np.dtype(np.int64) if t.name == "index" or (not t.is_float and t.name != "i1") \
        else np.dtype(np.bool_) if t.name == "i1" else t.dtype
    isrc, ir = c.slot(src), c.slot(op.result)

    def step(senv):
        senv[ir] = np.asarray(senv[isrc][pos]).astype(dt)

    return step


# -- tensor.expand_shape, tensor.collapse_shape ---------------------------------------------------

def _reassoc(p) -> list[list[int]]:
    i = p.pos
    v = p.parse_attr_value()
    if not isinstance(v, list) or not all(isinstance(g, list) for g in v):
        p.fail("expected a reassociation list like [[0, 1], [2]]", i)
    return v


@registry.implements("syntax", "tensor.expand_shape", "tensor.collapse_shape")
def h_reshape(p, op: Op):
    op.operands = [p.operand()]
    op.attrs["reassociation"] = _reassoc(p)
    if p.accept("output_shape"):
        static, dyn = bracket_ints_or_values(p, "output_shape")
        op.attrs["output_shape"] = static
        op.operands += dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("into")
    return [p.parse_type()]


def _reshape(op: Op) -> None:
    src = op.operands[0]
    t_in, t_out = declared(op), op.results[0].type
    if not compatible(src.type, t_in):
        fail(f"operand {src.name} has type {src.type}, but the op says {t_in}")
    re_ = op.attrs["reassociation"]
    big, small = (t_out, t_in) if op.name == "tensor.expand_shape" else (t_in, t_out)
    flat = [d for g in re_ for d in g]
    if not small.shape and not re_:
        pass  # collapse to / expand from a rank-0 tensor
    elif len(re_) != len(small.shape) or flat != list(range(len(big.shape))):
        fail(f"reassociation {re_} does not fit {t_in} -> {t_out}")
    n_in, n_out = t_in.num_elements, t_out.num_elements
    if n_in is not None and n_out is not None and n_in != n_out:
        fail(f"{op.name} changes the element count: {t_in} -> {t_out}")
    if t_in.elem != t_out.elem:
        fail(f"{op.name} cannot change the element type")


registry.set_part("verify", "tensor.expand_shape",
                  Rule((1, None), (1, 1), ("reassociation",), check=_reshape))
registry.set_part("verify", "tensor.collapse_shape",
                  Rule((1, 1), (1, 1), ("reassociation",), check=_reshape))
registry.set_part("cost", "tensor.expand_shape", "free")
registry.set_part("cost", "tensor.collapse_shape", "free")


@registry.implements("build", "tensor.expand_shape", "tensor.collapse_shape")
def build_reshape(c, op):
    src = op.operands[0]
    t = op.result.type
    dyn = [c.slot(v) for v in op.operands[1:]]
    shape_of = _static_shape(c, op, t, dyn)
    isrc, ir = c.slot(src), c.slot(op.result)
    if c.is_const(src) and t.is_static:
        c.set_const(op.result, np.reshape(c.const(src), t.shape))
        return None

    reshape = c.xp.reshape

    def step(env):
        env[ir] = reshape(env[isrc], shape_of(env))

    return step


@registry.implements("stacked", "tensor.expand_shape", "tensor.collapse_shape")
def stacked_reshape(b, op, plain):
    t = op.result.type
    if len(op.operands) != 1 or not t.is_static or not b.varies(op.operands[0]):
        return None
    shape = (b.C,) + tuple(t.shape)
    isrc, ir = b.c.slot(op.operands[0]), b.c.slot(op.result)

    def step(senv):
        senv[ir] = senv[isrc].reshape(shape)

    return step


# -- tensor.reshape (shape operand) ---------------------------------------------------------------

@registry.implements("syntax", "tensor.reshape")
def h_shape_reshape(p, op: Op):
    """``tensor.reshape %src(%shape) : (T, tensor<Nxindex>) -> R``"""
    src = p.operand()
    p.expect("(", "before the shape operand of tensor.reshape")
    shape = p.operand()
    p.expect(")", "after the shape operand of tensor.reshape")
    op.operands = [src, shape]
    p.expect(":")
    p.expect("(", "opening tensor.reshape's operand types")
    op.attrs["types"] = p.type_list()
    p.expect(")", "closing tensor.reshape's operand types")
    p.expect("->")
    return [p.parse_type()]


def _shape_reshape(op: Op) -> None:
    """MLIR's rules: a 1-D shape of signless integers or index whose static length is the
    result's rank; the element type kept; equal element counts when both sides are static."""
    src, shape = op.operands
    t_in, t_shape = src.type, shape.type
    t_out = op.results[0].type
    types = op.attrs.get("types") or []
    if len(types) != 2:
        fail(f"tensor.reshape declares {len(types)} operand types, expected 2")
    for v, t in zip(op.operands, types):
        if not compatible(v.type, t):
            fail(f"operand {v.name} has type {v.type}, but the op says {t}")
    if not isinstance(t_in, TensorType) or not isinstance(t_out, TensorType):
        fail(f"tensor.reshape maps a tensor to a tensor, not {t_in} -> {t_out}")
    if not isinstance(t_shape, TensorType) or len(t_shape.shape) != 1 or \
            (t_shape.elem not in SIGNLESS_INT_TYPES and t_shape.elem != "index"):
        fail(f"the shape operand {shape.name} must be a 1-D tensor of signless integers or "
             f"index, got {t_shape}")
    if t_in.elem != t_out.elem:
        fail(f"element types of source and destination differ: {t_in} -> {t_out}")
    if t_shape.shape[0] is None:
        fail(f"the shape operand {shape.name} has a dynamic length; a ranked result needs a "
             "static one")
    if t_shape.shape[0] != len(t_out.shape):
        fail(f"the shape operand {shape.name} has {t_shape.shape[0]} entries but the result "
             f"{t_out} has rank {len(t_out.shape)}")
    n_in, n_out = t_in.num_elements, t_out.num_elements
    if n_in is not None and n_out is not None and n_in != n_out:
        fail(f"tensor.reshape changes the element count: {t_in} -> {t_out}")


registry.set_part("verify", "tensor.reshape", Rule((2, 2), (1, 1), ("types",),
                                                  check=_shape_reshape))
registry.set_part("cost", "tensor.reshape", "free")


def _reshape_fault(dims: tuple, t: TensorType, n_src: int) -> str | None:
    """Why the run-time shape ``dims`` cannot reshape ``n_src`` elements into ``t``, or None."""
    if any(d < 0 for d in dims) or any(s is not None and s != d for s, d in zip(t.shape, dims)):
        return f"tensor.reshape: the shape operand holds {list(dims)}, not a shape of {t}"
    n = 1
    for d in dims:
        n *= d
    if n != n_src:
        return (f"tensor.reshape: the shape operand holds {list(dims)} ({n} elements) for a "
                f"source of {n_src} elements")
    return None


@registry.implements("build", "tensor.reshape")
def build_shape_reshape(c, op):
    """Row-major reshape to the shape the operand holds; a shape that does not fit the result
    type or the source's element count faults when the op runs."""
    src, shape = op.operands
    t = op.result.type
    isrc, ishape, ir = c.slot(src), c.slot(shape), c.slot(op.result)
    xp = c.xp
    if c.all_const((src, shape)):
        dims = tuple(int(d) for d in np.asarray(c.const(shape)).reshape(-1))
        x = c.const(src)
        if _reshape_fault(dims, t, int(np.size(x))) is None:
            c.set_const(op.result, np.reshape(x, dims))
            return None

    def step(env):
        x = env[isrc]
        dims = tuple(int(d) for d in np.asarray(xp.to_host(env[ishape])).reshape(-1))
        bad = _reshape_fault(dims, t, int(np.prod(x.shape)))
        if bad is not None:
            raise FaultSignal(bad)
        env[ir] = xp.reshape(x, dims)
    return step


# -- tensor.extract_slice, tensor.insert_slice ----------------------------------------------------

def _slice_lists(p, op: Op):
    dyn_all: list[Value] = []
    for key in ("offsets", "sizes", "strides"):
        static, dyn = bracket_ints_or_values(p, key)
        op.attrs["static_" + key] = static
        op.groups[key] = dyn
        dyn_all += dyn
    return dyn_all


@registry.implements("syntax", "tensor.extract_slice")
def h_extract_slice(p, op: Op):
    src = p.operand()
    dyn = _slice_lists(p, op)
    op.operands = [src] + dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("to")
    return [p.parse_type()]


@registry.implements("syntax", "tensor.insert_slice")
def h_insert_slice(p, op: Op):
    src = p.operand()
    p.expect("into")
    dst = p.operand()
    dyn = _slice_lists(p, op)
    op.operands = [src, dst] + dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("into")
    return [p.parse_type()]


def _slice(op: Op) -> None:
    t = op.results[0].type
    if op.name == "tensor.extract_slice":
        src = declared(op)
        if not compatible(op.operands[0].type, src):
            fail(f"operand {op.operands[0].name} has type {op.operands[0].type}, but the op "
                 f"says {src}")
    else:
        src = op.operands[1].type
        if not compatible(t, src):
            fail(f"insert_slice result {t} must equal the destination type {src}")
    rank = len(src.shape)
    for key in ("static_offsets", "static_sizes", "static_strides"):
        if len(op.attrs[key]) != rank:
            fail(f"{key[7:]} has {len(op.attrs[key])} entries for a rank-{rank} tensor")


registry.set_part("verify", "tensor.extract_slice", Rule((1, None), (1, 1), check=_slice))
registry.set_part("verify", "tensor.insert_slice", Rule((2, None), (1, 1), check=_slice))
registry.set_part("cost", "tensor.extract_slice", "layout")
registry.set_part("cost", "tensor.insert_slice", "layout")


def _slice_spec(c, op):
    """env -> (tuple of slices, sizes) for extract/insert_slice."""
    keys = ("offsets", "sizes", "strides")
    static = [op.attrs["static_" + k] for k in keys]
    dyn = [[c.slot(v) for v in op.groups.get(k, [])] for k in keys]

    def resolve(env):
        out = []
        for st, ds in zip(static, dyn):
            it = iter(ds)
            out.append([s if s is not None else int(env[next(it)]) for s in st])
        offs, sizes, strides = out
        sl = tuple(slice(o, o + s * k, k) for o, s, k in zip(offs, sizes, strides))
        return sl, sizes

    return resolve


@registry.implements("build", "tensor.extract_slice")
def build_extract_slice(c, op):
    src = op.operands[0]
    t = op.result.type
    spec = _slice_spec(c, op)
    isrc, ir = c.slot(src), c.slot(op.result)

    def step(env):
        x = env[isrc]
        sl, sizes = spec(env)
        for o, (s, n) in enumerate(zip(sl, x.shape)):
            if s.start < 0 or s.start + (sizes[o] - 1) * s.step >= n and sizes[o] > 0:
                raise FaultSignal(f"extract_slice out of bounds on dim {o}: offset {s.start}, "
                                  f"size {sizes[o]}, stride {s.step}, dim size {n}")
        part = x[sl]
        env[ir] = part.reshape(t.shape) if t.is_static else part.reshape(
            [n for n in part.shape if n != 1] or part.shape)

    return step


@registry.implements("build", "tensor.insert_slice")
def build_insert_slice(c, op):
    src, dst = op.operands[:2]
    spec = _slice_spec(c, op)
    isrc, idst, ir = c.slot(src), c.slot(dst), c.slot(op.result)
    xp = c.xp

    def step(env):
        d = xp.copy(env[idst])  # a fresh copy: tensors are immutable values
        sl, sizes = spec(env)
        xp.assign(d[sl], xp.reshape(env[isrc], sizes))
        env[ir] = d

    return step


# -- tensor.from_elements -------------------------------------------------------------------------

@registry.implements("syntax", "tensor.from_elements")
def h_from_elements(p, op: Op):
    op.operands = p.operand_list()
    p.expect(":")
    return [p.parse_type()]


def _from_elements(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, TensorType) or t.num_elements != len(op.operands):
        fail(f"tensor.from_elements needs {t.num_elements} scalars for {t}")


registry.set_part("verify", "tensor.from_elements",
                  Rule((1, None), (1, 1), check=_from_elements))
registry.set_part("cost", "tensor.from_elements", "layout")


@registry.implements("build", "tensor.from_elements")
def build_from_elements(c, op):
    t = op.result.type
    slots = [c.slot(v) for v in op.operands]
    ir = c.slot(op.result)
    xp = c.xp

    def step(env):  # the elements are host scalars; the tensor goes to the back end
        env[ir] = xp.from_const(np.array([env[s] for s in slots], dtype=t.dtype).reshape(t.shape))

    return step


# -- tensor.generate and its tensor.yield ---------------------------------------------------------

@registry.implements("syntax", "tensor.generate")
def h_generate(p, op: Op):
    op.operands = p.operand_list() if p.kind() == "ssa" else []
    op.regions = [p.parse_region()]
    p.expect(":")
    return [p.parse_type()]


registry.set_part("verify", "tensor.generate", Rule((0, None), (1, 1), (), (1, 1)))
registry.set_part("cost", "tensor.generate", "layout")


@registry.implements("build", "tensor.generate")
def build_generate(c, op):
    t = op.result.type
    if not t.is_static:
        raise KtirError.at(op.loc, "tensor.generate with dynamic sizes is not supported")
    block = op.regions[0].block
    n = len(t.shape)
    aranges = []
    for k in range(n):
        shape = [1] * n
        shape[k] = t.shape[k]
        aranges.append(np.arange(t.shape[k], dtype=np.int64).reshape(shape))
    body = c.compile_block(block)
    arg_slots = [c.slot(a) for a in block.args]
    y = c.slot(block.ops[-1].operands[0])
    ir = c.slot(op.result)

    xp = c.xp
    env_aranges = [xp.from_const(a) for a in aranges]

    def step(env):
        for s, a in zip(arg_slots, env_aranges):
            env[s] = a
        run_steps(body, env)
        v = env[y]
        env[ir] = coerce(xp.broadcast_to(v if xp.is_array(v) else xp.asarray(v), t.shape), t, xp)

    return step


# -- tensor.yield: closes tensor.generate's body, whose builder reads the yielded slot ----------

registry.set_part("syntax", "tensor.yield", h_yield)
registry.set_part("verify", "tensor.yield", Rule((1, 1), (0, 0)))
registry.set_part("cost", "tensor.yield", "free")


@registry.implements("build", "tensor.yield")
def build_yield(c, op):
    return None  # tensor.generate reads the yielded slot directly
