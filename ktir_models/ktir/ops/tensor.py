"""tensor: empty, splat, extract, expand/collapse_shape, extract/insert_slice, from_elements,
generate. Reshapes and splats return views where numpy allows (tensors are never mutated)."""

from __future__ import annotations

import numpy as np

from ..ir import TensorType
from . import register
from .arith import coerce, to_scalar


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


@register("tensor.empty")
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


@register("tensor.splat")
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


@register("tensor.extract")
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


@register("tensor.expand_shape", "tensor.collapse_shape")
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


@register("tensor.extract_slice")
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
                from ..errors import FaultSignal

                raise FaultSignal(f"extract_slice out of bounds on dim {o}: offset {s.start}, "
                                  f"size {sizes[o]}, stride {s.step}, dim size {n}")
        part = x[sl]
        env[ir] = part.reshape(t.shape) if t.is_static else part.reshape(
            [n for n in part.shape if n != 1] or part.shape)

    return step


@register("tensor.insert_slice")
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


@register("tensor.from_elements")
def build_from_elements(c, op):
    t = op.result.type
    slots = [c.slot(v) for v in op.operands]
    ir = c.slot(op.result)
    xp = c.xp

    def step(env):  # the elements are host scalars; the tensor goes to the back end
        env[ir] = xp.from_const(np.array([env[s] for s in slots], dtype=t.dtype).reshape(t.shape))

    return step


@register("tensor.generate")
def build_generate(c, op):
    t = op.result.type
    if not t.is_static:
        from ..errors import KtirError

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
    from ..compile import run_steps

    xp = c.xp
    env_aranges = [xp.from_const(a) for a in aranges]

    def step(env):
        for s, a in zip(arg_slots, env_aranges):
            env[s] = a
        run_steps(body, env)
        v = env[y]
        env[ir] = coerce(xp.broadcast_to(v if xp.is_array(v) else xp.asarray(v), t.shape), t, xp)

    return step
