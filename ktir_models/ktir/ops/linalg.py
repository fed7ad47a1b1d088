"""linalg: matmul family, reduce, broadcast, transpose, fill, named elementwise ops, generic.

Numerics:

* matmul / matmul_transpose_b / batch_matmul: the products are summed in f32, the ``outs``
  accumulator is added in f32, and the sum is rounded once to the result type. With the native
  kernel (``Machine.native_matmul``, f16 x f16 operands, numpy back end) each element's products
  are summed sequentially over k (:mod:`..backends.seqmm`), the same order however the grid is
  batched; otherwise f16 operands are widened to f32 and multiplied with f32 BLAS, in OpenBLAS's
  order. (numpy float16 matmul does not use BLAS and is never called.)
* reduce with a known combiner (addf, maximumf, ...): accumulated in f32 (f64 for f32/f64 inputs),
  combined with the init, rounded once. Bodies that are not a single known combiner are folded
  sequentially in the element type, exactly as written.
* ``outs`` of broadcast/transpose/add/max/fill only give the shape; of matmul it is the accumulator.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..backends.f16_convert import MIN_ELEMENTS
from ..ir import TensorType
from . import register
from .arith import _INT_BINARY, NP, coerce

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def _wide(arr: np.ndarray) -> np.ndarray:
    return arr if arr.dtype.itemsize >= 4 and arr.dtype.kind == "f" else arr.astype(F32)


def _wide_of(xp):
    """:func:`_wide` for back end ``xp``'s arrays."""
    if isinstance(xp, type(NP)):
        return _wide
    astype = xp.astype

    def wide(arr):
        return arr if arr.dtype.itemsize >= 4 and arr.dtype.is_floating_point else \
            astype(arr, F32)
    return wide


def _ins_outs(op):
    return op.groups.get("ins", []), op.groups.get("outs", [])


# -- matmul ---------------------------------------------------------------------------------------

def _is_zero_const(c, v) -> bool:
    if not c.is_const(v):
        return False
    val = c.const(v)
    return isinstance(val, np.ndarray) and not np.any(val)


MATMULS = ("linalg.matmul", "linalg.matmul_transpose_b", "linalg.batch_matmul")


def uses_native(c, op) -> bool:
    """Whether matmul ``op`` runs on the native kernel: decided once per op from its types, so
    every plan of a machine (plain, lock step, stacked, the batched K-loop) sums it in the same
    order and they stay bit-identical."""
    if not c.machine.native_matmul or op.name not in MATMULS:
        return False
    (a, b), (acc,) = _ins_outs(op)
    return a.type.elem == "f16" and b.type.elem == "f16" and acc.type.elem in ("f16", "f32")


def _as_batch3(x, lead: tuple) -> np.ndarray:
    """``x`` as a 3-D array whose leading dim is 1 or prod(``lead``) (a leading dim of 1 is
    shared by every batch entry: the kernel broadcasts it without a view being made)."""
    if x.ndim == 2:
        return x[None]
    if x.ndim == 3 and len(lead) == 1:
        return x
    x = np.broadcast_to(x, lead + x.shape[-2:])  # several batch dims (stacked batch_matmul)
    return x.reshape((-1,) + x.shape[-2:])


def _native_matmul_step(ia, ib, iacc, ir, dt, trans, zero_acc):
    from ..backends.seqmm import kloop

    f16 = np.dtype(np.float16)

    def step(env):
        A, B = env[ia], env[ib]
        if A.dtype != f16:  # an f32 copy of f16 values: exact
            A = A.astype(f16)
        if B.dtype != f16:
            B = B.astype(f16)
        lead = A.shape[:-2] if A.ndim >= B.ndim else B.shape[:-2]
        if A.ndim > 3 or B.ndim > 3 or (A.ndim == B.ndim == 3 and A.shape[0] != B.shape[0]):
            lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        M, K, N = A.shape[-2], A.shape[-1], B.shape[-2] if trans else B.shape[-1]
        if K == 0:  # an empty sum: the accumulator (or zero), rounded
            zeros = np.zeros(lead + (M, N), np.float32)
            env[ir] = (zeros if zero_acc else zeros + env[iacc]).astype(dt)
            return
        acc = None if zero_acc else _as_batch3(np.asarray(env[iacc]), lead)
        out = kloop(_as_batch3(A, lead), _as_batch3(B, lead), acc, trips=1, kb=K,
                    transpose_b=trans, part_dtype=np.float32, acc_dtype=dt)
        env[ir] = out.reshape(lead + (M, N))

    return step


@register(*MATMULS)
def build_matmul(c, op):
    (a, b), (acc,) = _ins_outs(op)
    r = op.result
    dt = r.type.dtype
    ia, ib, iacc, ir = c.slot(a), c.slot(b), c.slot(acc), c.slot(r)
    trans = op.name == "linalg.matmul_transpose_b"
    zero_acc = _is_zero_const(c, acc)
    if uses_native(c, op):
        return _native_matmul_step(ia, ib, iacc, ir, dt, trans, zero_acc)
    xp = c.xp
    wide, matmul, add, astype = _wide_of(xp), xp.matmul, xp.add, xp.astype

    def step(env):
        # operands loaded only for matmuls arrive as (cached) f32 already; see ktdp.load
        A = wide(env[ia])
        B = wide(env[ib])
        if trans:
            B = B.swapaxes(-1, -2)
        P = matmul(A, B)
        if not zero_acc:
            P = add(P, env[iacc])  # in P's (f32) precision: both back ends promote alike
        env[ir] = astype(P, dt)

    return step


# -- reduce ---------------------------------------------------------------------------------------

_REDUCERS = {
    "arith.addf": ("sum", np.add), "arith.addi": ("sum", np.add),
    "arith.mulf": ("prod", np.multiply), "arith.muli": ("prod", np.multiply),
    "arith.maximumf": ("max", np.maximum), "arith.maxf": ("max", np.maximum),
    "arith.minimumf": ("min", np.minimum), "arith.minf": ("min", np.minimum),
    "arith.maxnumf": ("nanmax", np.fmax), "arith.minnumf": ("nanmin", np.fmin),
    "arith.maxsi": ("max", np.maximum), "arith.minsi": ("min", np.minimum),
    "arith.andi": ("and", np.bitwise_and), "arith.ori": ("or", np.bitwise_or),
    "arith.xori": ("xor", np.bitwise_xor),
}


def _body_combiner(op) -> str | None:
    """The combiner name when the reduce body is ``%r = <binop> %in, %acc; yield %r``."""
    if "combiner" in op.attrs:
        return op.attrs["combiner"]
    block = op.regions[0].block
    if len(block.ops) != 2 or block.ops[1].name != "linalg.yield" or len(block.args) != 2:
        return None
    body = block.ops[0]
    if body.name not in _REDUCERS or block.ops[1].operands != [body.result]:
        return None
    if set(map(id, body.operands)) != set(map(id, block.args)):
        return None
    return body.name


def _accumulator(dt: np.dtype, xp) -> np.dtype:
    """The accumulator dtype of a sum/product of ``dt`` values: f32 for f16/bf16, the back end's
    wide float (f64, or f32 where the device has none) for f32/f64, int64 for ints."""
    if dt.kind == "f" or dt.name == "bfloat16":
        return xp.wide_float if dt.itemsize >= 4 else F32
    return dt if dt == np.bool_ else np.dtype(np.int64)


def _fast_reduce(kind: str, x, dims: tuple, init, t: TensorType, acc_t, xp=NP):
    """The reduction of ``x`` over ``dims`` combined with ``init``, as type ``t`` (arrays of back
    end ``xp``; ``acc_t`` from :func:`_accumulator`)."""
    if kind == "sum":
        v = xp.add(xp.reduce("sum", x, dims, acc_t), xp.astype(init, acc_t))
    elif kind == "prod":
        v = xp.multiply(xp.reduce("prod", x, dims, acc_t), xp.astype(init, acc_t))
    else:
        combine = {"max": xp.maximum, "min": xp.minimum, "nanmax": xp.fmax, "nanmin": xp.fmin,
                   "and": _and, "or": _or, "xor": _xor}[kind]
        if xp.name == "numpy" and getattr(x, "dtype", None) == F16 and x.size >= MIN_ELEMENTS \
                and kind in ("max", "min", "nanmax", "nanmin"):
            # numpy's float16 max/min loops run ~4x slower than widening (natively) and taking
            # the f32 max/min, which selects the same value (every f16 is exact in f32)
            x = xp.astype(x, F32)
        v = combine(xp.reduce(kind, x, dims), init)
    return coerce(v, t, xp)


def _and(a, b):
    return a & b


def _or(a, b):
    return a | b


def _xor(a, b):
    return a ^ b


@register("linalg.reduce")
def build_reduce(c, op):
    ins, outs = _ins_outs(op)
    dims = tuple(op.attrs["dimensions"])
    r = op.result
    combiner = _body_combiner(op)
    if combiner is not None and len(ins) == 1:
        kind = _REDUCERS[combiner][0]
        ix, iinit, ir = c.slot(ins[0]), c.slot(outs[0]), c.slot(r)
        xp = c.xp
        acc_t = _accumulator(ins[0].type.dtype, xp)
        t = r.type

        def step(env):
            env[ir] = _fast_reduce(kind, env[ix], dims, env[iinit], t, acc_t, xp)

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
    from ..compile import run_steps

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


# -- broadcast / transpose / fill / named elementwise ------------------------------------------

@register("linalg.broadcast")
def build_broadcast(c, op):
    (x,), (init,) = _ins_outs(op)
    r = op.result
    dims = tuple(op.attrs["dimensions"])
    shape = r.type.shape
    ix, ir = c.slot(x), c.slot(r)
    if c.is_const(x):
        c.set_const(r, np.broadcast_to(np.expand_dims(c.const(x), dims), shape))
        return None

    expanded = list(shape)
    for d in dims:
        expanded[d] = 1
    expanded = tuple(expanded)
    dt = r.type.dtype
    xp = c.xp
    empty, assign = xp.empty, xp.assign

    def step(env):
        out = empty(shape, dt)
        assign(out, env[ix].reshape(expanded))
        env[ir] = out

    return step


@register("linalg.transpose")
def build_transpose(c, op):
    (x,), (init,) = _ins_outs(op)
    r = op.result
    perm = tuple(op.attrs["permutation"])
    ix, ir = c.slot(x), c.slot(r)
    transpose = c.xp.transpose

    def step(env):
        env[ir] = transpose(env[ix], perm)

    return step


@register("linalg.fill")
def build_fill(c, op):
    (s,), (init,) = _ins_outs(op)
    r = op.result
    t = r.type
    if c.is_const(s):
        c.set_const(r, np.full(t.shape, c.const(s), dtype=t.dtype))
        return None
    is_, ir, iinit = c.slot(s), c.slot(r), c.slot(init)
    full = c.xp.full

    def step(env):
        env[ir] = full(env[iinit].shape, env[is_], t.dtype)

    return step


_NAMED = {
    "linalg.add": "add", "linalg.sub": "subtract", "linalg.mul": "multiply",
    "linalg.div": "divide", "linalg.max": "maximum", "linalg.min": "minimum",
}


@register(*_NAMED, "linalg.exp", "linalg.copy")
def build_named(c, op):
    ins, (init,) = _ins_outs(op)
    r = op.result
    t = r.type
    dt = t.dtype
    slots = [c.slot(v) for v in ins]
    ir = c.slot(r)
    xp = c.xp
    astype = xp.astype
    if op.name == "linalg.copy":
        (i0,) = slots

        def step(env):
            env[ir] = coerce(env[i0], t, xp)
        return step
    if op.name == "linalg.exp":
        (i0,) = slots
        exp, wide = xp.exp, _wide_of(xp)

        def step(env):
            env[ir] = astype(exp(wide(env[i0])), dt)
        return step
    fn = getattr(xp, _NAMED[op.name])
    i0, i1 = slots
    if dt == np.float16 and op.name in ("linalg.add", "linalg.sub", "linalg.mul", "linalg.div"):
        base = fn

        def fn(a, b):  # f32 then one rounding: the exact f16 result (see ops/arith.py)
            return base(a, b, dtype=F32)
    if dt.kind in "iu":
        fn = {"linalg.div": _INT_BINARY["arith.divsi"](xp)}.get(op.name, fn)

    def step(env):
        env[ir] = astype(fn(env[i0], env[i1]), dt)

    return step


# -- generic ----------------------------------------------------------------------------------

def _operand_view(arr, amap, n_loops: int, xp=NP):
    """``arr`` re-indexed by loop coordinates: an array broadcastable to the loop space."""
    perm = []
    ok = True
    for e in amap.results:
        if e[0] != "d":
            ok = False
            break
        perm.append(e[1])
    if ok and len(set(perm)) == len(perm):
        order = np.argsort(perm)
        v = xp.transpose(arr, tuple(int(o) for o in order)) \
            if list(order) != list(range(len(order))) else arr
        shape = [1] * n_loops
        for k, d in enumerate(sorted(perm)):
            shape[d] = v.shape[k]
        return v.reshape(shape)
    return None


@register("linalg.generic")
def build_generic(c, op):
    ins, outs = _ins_outs(op)
    maps = op.attrs["indexing_maps"]
    its = op.attrs["iterator_types"]
    n = len(its)
    block = op.regions[0].block
    # loop extents from the static operand shapes
    extents: list = [None] * n
    for v, m in zip(ins + outs, maps):
        if isinstance(v.type, TensorType):
            for e, size in zip(m.results, v.type.shape):
                if e[0] == "d" and size is not None:
                    extents[e[1]] = size
    if any(e is None for e in extents):
        from ..errors import KtirError

        raise KtirError.at(op.loc, "linalg.generic: cannot infer every loop extent statically")
    index_slots = [c.new_slot() for _ in range(n)]
    c.index_slots.append(index_slots)
    body = c.compile_block(block)
    c.index_slots.pop()
    arg_slots = [c.slot(a) for a in block.args]
    yield_slots = [c.slot(v) for v in block.ops[-1].operands]
    in_slots = [c.slot(v) for v in ins]
    out_slots = [c.slot(v) for v in outs]
    res_slots = [c.slot(v) for v in op.results]
    res_types = [v.type for v in op.results]
    red = [k for k in range(n) if its[k] == "reduction"]
    n_in = len(ins)
    aranges = []
    for k in range(n):
        shape = [1] * n
        shape[k] = extents[k]
        aranges.append(np.arange(extents[k], dtype=np.int64).reshape(shape))
    full = tuple(extents)
    out_maps = maps[n_in:]
    from ..compile import run_steps

    xp = c.xp
    env_aranges = [xp.from_const(a) for a in aranges]  # loop indices as the back end's arrays
    gathers: dict = {}

    def as_array(v):
        return v if xp.is_array(v) else xp.asarray(v)

    def gather(arr, m):
        arr = as_array(arr)
        v = _operand_view(arr, m, n, xp)
        if v is not None:
            return v
        coords = gathers.get(id(m))
        if coords is None:  # the map's coordinates depend on the static extents only
            coords = gathers[id(m)] = tuple(
                xp.from_const(np.ascontiguousarray(np.broadcast_to(x, full)))
                for x in m.evaluator()(*[aranges[k] for k in range(n)]))
        return arr[coords]

    def scatter_back(val, m, t):
        """A loop-space value (reduction axes of size 1) -> the output tensor."""
        val = xp.broadcast_to(as_array(val), tuple(1 if k in red else extents[k]
                                                   for k in range(n)))
        perm = [e[1] for e in m.results]
        val = val.reshape([extents[k] for k in range(n) if k not in red]) if red else val
        kept = [k for k in range(n) if k not in red]
        order = [kept.index(d) for d in perm]
        return coerce(xp.transpose(val, order), t, xp)

    def step(env):
        views = [gather(env[s], m) for s, m in zip(in_slots, maps)]
        if not red:
            for s, v in zip(arg_slots[:n_in], views):
                env[s] = v
            for s, o, m in zip(arg_slots[n_in:], out_slots, out_maps):
                env[s] = gather(env[o], m)
            for s, a in zip(index_slots, env_aranges):
                env[s] = a
            run_steps(body, env)
            for s, y, m, t in zip(res_slots, yield_slots, out_maps, res_types):
                env[s] = scatter_back(env[y], m, t)
            return
        views = [xp.broadcast_to(v, full) for v in views]
        accs = [gather(env[o], m) for o, m in zip(out_slots, out_maps)]
        for k in range(n):
            if k not in red:
                env[index_slots[k]] = env_aranges[k]
        for pos in itertools.product(*[range(extents[k]) for k in red]):
            idx = [slice(None)] * n
            for k, p in zip(red, pos):
                idx[k] = slice(p, p + 1)
                env[index_slots[k]] = p
            idx = tuple(idx)
            for s, v in zip(arg_slots[:n_in], views):
                env[s] = v[idx]
            for s, a in zip(arg_slots[n_in:], accs):
                env[s] = a
            run_steps(body, env)
            accs = [env[y] for y in yield_slots]
        for s, a, m, t in zip(res_slots, accs, out_maps, res_types):
            env[s] = scatter_back(a, m, t)

    return step


@register("linalg.index")
def build_index(c, op):
    if not c.index_slots:
        from ..errors import KtirError

        raise KtirError.at(op.loc, "linalg.index outside a linalg.generic body")
    slots = c.index_slots[-1]
    dim = op.attrs["dim"]
    if dim >= len(slots):
        from ..errors import KtirError

        raise KtirError.at(op.loc, f"linalg.index {dim}: the generic has {len(slots)} loops")
    c.alias(op.result, slots[dim])
    return None


@register("linalg.yield", "scf.yield", "tensor.yield", "ktdp.yield_partial",
          "ktdp.yield_reduced", "return")
def build_terminator(c, op):
    return None  # parents read the yielded slots directly

