"""Stacked steps, one maker per op kind (see stacked.py for the representation).

A maker ``(builder, op, plain) -> step | None`` returns a step over the stacked env, or None when
the op (with these operand kinds) has no stacked form and must run core by core. A step may raise
anything when its conditions do not hold (it must not have written memory by then): the builder
then runs the op core by core, which also reports faults exactly as the plain plan does.
"""

from __future__ import annotations

import numpy as np

from .ir import Op, TensorType
from .stacked_values import Builder as _Builder, Fallback as _Fallback, StackedTile, lift, native
from .tape import LoopShape

_as_strided = np.lib.stride_tricks.as_strided
_SMALL = 1 << 14  # elements up to which a splat is filled rather than made a broadcast view


def _plain_if(pred):
    def maker(b, op, plain):
        return plain if pred(b, op) else None
    return maker


def _elementwise_ok(b: _Builder, op: Op) -> bool:
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


_ELEMENTWISE = (
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf", "arith.maximumf",
    "arith.minimumf", "arith.maxf", "arith.minf", "arith.maxnumf", "arith.minnumf",
    "arith.addi", "arith.subi", "arith.muli", "arith.divui", "arith.divsi", "arith.floordivsi",
    "arith.ceildivsi", "arith.remui", "arith.remsi", "arith.andi", "arith.ori", "arith.xori",
    "arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui",
    "arith.negf", "arith.absf", "arith.cmpf", "arith.cmpi",
    "arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui",
    "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast", "arith.index_castui",
    "math.exp", "math.exp2", "math.log", "math.log2", "math.log10", "math.log1p", "math.sqrt",
    "math.rsqrt", "math.tanh", "math.sin", "math.cos", "math.erf", "math.absf", "math.absi",
    "math.ceil", "math.floor", "math.round", "math.fma", "math.powf",
)
native(*_ELEMENTWISE)(_plain_if(_elementwise_ok))


@native("arith.select")
def _select(b, op, plain):
    cond = op.operands[0]
    if isinstance(op.result.type, TensorType) and not isinstance(cond.type, TensorType) \
            and b.varies(cond):
        return None  # a per-core scalar condition choosing whole tensors
    return plain if isinstance(cond.type, TensorType) or not b.varies(cond) else None


@native("linalg.matmul", "linalg.matmul_transpose_b", "linalg.batch_matmul")
def _matmul(b, op, plain):
    return plain  # numpy matmul broadcasts over the leading core axis, one BLAS call per core


@native("ktdp.get_compute_tile_id")
def _tile_id(b, op, plain):
    X, Y, _ = b.grid
    cores = b.core_of
    coords = [cores % X, (cores // X) % Y, cores // (X * Y)]
    slots = [b.c.slot(r) for r in op.results]
    for a in coords:
        a.flags.writeable = False

    def step(senv):
        for k, s in enumerate(slots):
            senv[s] = coords[k]

    return step


@native("linalg.transpose")
def _transpose(b, op, plain):
    (x,), _ = op.groups["ins"], op.groups["outs"]
    if not b.varies(x):
        return None
    perm = (0,) + tuple(p + 1 for p in op.attrs["permutation"])
    ix, ir = b.c.slot(x), b.c.slot(op.result)
    transpose = b.c.xp.transpose

    def step(senv):
        senv[ir] = transpose(senv[ix], perm)

    return step


@native("linalg.reduce")
def _reduce(b, op, plain):
    from .ops.linalg import _REDUCERS, _accumulator, _body_combiner, _fast_reduce

    ins, outs = op.groups["ins"], op.groups["outs"]
    combiner = _body_combiner(op)
    if combiner is None or len(ins) != 1:
        return None
    kind = _REDUCERS[combiner][0]
    dims = tuple(op.attrs["dimensions"])
    if b.varies(ins[0]):
        dims = tuple(d + 1 for d in dims)
    ix, iinit, ir = b.c.slot(ins[0]), b.c.slot(outs[0]), b.c.slot(op.result)
    xp = b.c.xp
    acc_t = _accumulator(ins[0].type.dtype, xp)
    t = op.result.type

    def step(senv):
        senv[ir] = _fast_reduce(kind, senv[ix], dims, senv[iinit], t, acc_t, xp)

    return step


@native("linalg.broadcast")
def _broadcast(b, op, plain):
    (x,) = op.groups["ins"]
    if not b.varies(x):
        return None
    t = op.result.type
    expanded = list(t.shape)
    for d in op.attrs["dimensions"]:
        expanded[d] = 1
    C = b.C
    shape, expanded = (C,) + tuple(t.shape), (C,) + tuple(expanded)
    dt = t.dtype
    ix, ir = b.c.slot(x), b.c.slot(op.result)

    def step(senv):
        out = np.empty(shape, dt)
        out[...] = senv[ix].reshape(expanded)
        senv[ir] = out

    return step


@native("tensor.splat")
def _splat(b, op, plain):
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


@native("tensor.extract")
def _extract(b, op, plain):
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


@native("tensor.expand_shape", "tensor.collapse_shape")
def _reshape(b, op, plain):
    t = op.result.type
    if len(op.operands) != 1 or not t.is_static or not b.varies(op.operands[0]):
        return None
    shape = (b.C,) + tuple(t.shape)
    isrc, ir = b.c.slot(op.operands[0]), b.c.slot(op.result)

    def step(senv):
        senv[ir] = senv[isrc].reshape(shape)

    return step


# -- access tiles, loads, stores ---------------------------------------------------------------

@native("ktdp.construct_access_tile")
def _access_tile(b, op, plain):
    from .ops.ktdp import _anchor_fn, _tile_geometry, static_box

    from .parse.tile_types import unfilled_fault

    c = b.c
    base = op.groups["base"][0]
    if b.varies(base) or op.groups["symbols"]:
        return None
    if unfilled_fault(op, "access_tile_set", "access_tile_order") is not None:
        return None  # the plain step (its fault, or nothing for an unused tile)
    s, order = op.attrs["access_tile_set"], op.attrs["access_tile_order"]
    box, perm, _, is_perm = _tile_geometry(s, order)
    if box is None or not is_perm or s.num_syms:
        return None
    los, ext = static_box(box)
    shape = tuple(ext[p] for p in perm) if perm is not None else ext
    lo_fn = _anchor_fn(c, op.attrs["base_map"], op.groups["indices"], los)
    ibase, ir = c.slot(base), c.slot(op.result)
    C = b.C
    rank = len(ext)

    def step(senv):
        corner = lo_fn(senv)  # ints and [C] arrays: the anchor code is + - * // % on them
        los_ = np.empty((C, rank), np.int64)
        for d in range(rank):
            los_[:, d] = corner[d]
        senv[ir] = StackedTile(senv[ibase], los_, ext, perm, shape)

    return step


class _Access:
    """Where a stacked tile's boxes lie in its view's array, checked once per (view, corners):
    ``slices`` (one box of ``view.nd`` per core) and, when the corners are in arithmetic
    progression, ``start``/``core_stride`` for one strided [C, *ext] view of all of them; else,
    when they form a progression of progressions (core c = i*g + j at corner base + i*d1 + j*d2,
    e.g. grouped-query heads sharing a KV head), ``grouped``: a read-only strided [C/g, g, *ext]
    view; ``disjoint``: no two cores' boxes share memory (computed by the first store)."""

    __slots__ = ("view", "generation", "slices", "start", "core_stride", "disjoint", "local",
                 "ext", "grouped")


def _disjoint(a: "_Access") -> bool:
    """No two cores' boxes share an element of memory (then the cores' stores commute)."""
    local, ext = a.local, a.ext
    C = local.shape[0]
    if C == 1:
        return True
    nd = a.view.nd
    if a.start is not None and _non_overlapping_layout(nd):
        # boxes in arithmetic progression: adjacent cores are the closest pair
        step = np.abs(local[1] - local[0])
        return bool((step >= ext).any())
    elem = np.asarray(nd.strides, np.int64) // nd.itemsize
    rank = len(ext)
    offs = 0
    for d in range(rank):
        shape = [1] * (rank + 1)
        shape[d + 1] = int(ext[d])
        offs = offs + (local[:, d].reshape([C] + [1] * rank) +
                       np.arange(int(ext[d]), dtype=np.int64).reshape(shape)) * elem[d]
    flat = np.asarray(offs).reshape(-1)
    return np.unique(flat).size == flat.size


def _non_overlapping_layout(nd) -> bool:
    """Distinct indices of ``nd`` address distinct elements (each positive stride at least the
    span of the smaller ones, as in any C- or F-ordered box)."""
    dims = sorted((s, n) for s, n in zip(nd.strides, nd.shape) if n > 1)
    span = nd.itemsize
    for s, n in dims:
        if s < span:
            return False
        span = s * n
    return True


def _access(cache: dict, st: StackedTile, hbm) -> _Access:
    """The checked placement of ``st`` (raises _Fallback for anything the per-core path must
    decide or report: a general coordinate set, a box outside the set or the memory)."""
    from .ops.ktdp import View

    key = st.key
    hit = cache.get(key)
    view = st.view
    if hit is not None and hit.view is view and hit.generation == hbm.generation:
        return hit
    if type(view) is not View or view.cset is not None or view.nd is None:
        raise _Fallback
    los = st.los
    lo = np.asarray(view.lo, np.int64)
    hi = np.asarray(view.hi, np.int64)
    ext = np.asarray(st.ext, np.int64)
    if (ext <= 0).any() or (los < lo).any() or (los + ext - 1 > hi).any():
        raise _Fallback  # outside the coordinate set: the per-core run masks those points
    local = los - lo
    nd = view.nd
    if (local + ext > np.asarray(nd.shape, np.int64)).any():
        raise _Fallback
    a = _Access()
    a.view = view
    a.generation = hbm.generation
    a.local = local
    a.ext = ext
    a.slices = [tuple(slice(int(x), int(x) + int(e)) for x, e in zip(row, ext)) for row in local]
    C = los.shape[0]
    diffs = np.diff(local, axis=0)
    a.start = a.core_stride = None
    if C == 1 or (diffs == diffs[0]).all():
        delta = diffs[0] if C > 1 else np.zeros(len(ext), np.int64)
        a.start = a.slices[0]
        a.core_stride = int(sum(int(d) * s for d, s in zip(delta, nd.strides)))
    a.grouped = None if a.start is not None else _grouped(a, local, nd)
    a.disjoint = None
    if len(cache) > 64:
        cache.clear()
    cache[key] = a
    return a


def _grouped(a: _Access, local: np.ndarray, nd):
    """The boxes as one read-only [C/g, g, *ext] view when the corners are a progression of
    progressions (class docstring), else None."""
    C = local.shape[0]
    byte_strides = np.asarray(nd.strides, np.int64)
    for g in range(2, C):
        if C % g:
            continue
        grid = local.reshape(C // g, g, -1)
        inner = grid[:, 1:] - grid[:, :-1]
        outer = grid[1:, 0] - grid[:-1, 0]
        if (inner == inner[0, 0]).all() and (outer == outer[0]).all():
            first = nd[a.slices[0]]
            return _as_strided(first, shape=(C // g, g) + tuple(int(e) for e in a.ext),
                               strides=(int(outer[0] @ byte_strides), int(inner[0, 0] @ byte_strides))
                               + first.strides, writeable=False)
    return None


def _gathered(a: _Access) -> np.ndarray:
    """A fresh C-contiguous [C, *ext] copy of the cores' boxes (corners not in progression)."""
    if a.grouped is not None:
        g = a.grouped
        return np.ascontiguousarray(g).reshape((g.shape[0] * g.shape[1],) + g.shape[2:])
    nd = a.view.nd
    return np.stack([nd[s] for s in a.slices])


def _block(a: _Access, C: int, ext: tuple, writeable: bool):
    """All cores' boxes as one strided [C, *ext] view, or None (corners not in progression)."""
    if a.start is None:
        return None
    first = a.view.nd[a.start]
    return _as_strided(first, shape=(C,) + tuple(ext), strides=(a.core_stride,) + first.strides,
                       writeable=writeable)


def read_boxes(cache: dict, st: StackedTile, hbm, C: int):
    """(the [C, ...] data of ``st``'s boxes in tile order: a read-only view of memory where the
    boxes lie in progression, else a fresh copy; their region). Raises _Fallback for what the
    per-core path must decide or report (:func:`_access`), and for regions with a written-mask."""
    region = st.view.region
    if region is None or region.mask is not None:
        raise _Fallback
    a = _access(cache, st, hbm)
    data = _block(a, C, st.ext, False)
    if data is None:
        data = _gathered(a)
    if st.perm is not None:
        data = data.transpose((0,) + tuple(p + 1 for p in st.perm))
    return data, region


@native("ktdp.load")
def _load(b, op, plain):
    from .ops.ktdp import _only_matmul_users, f32_key, feeds_native_matmuls

    c = b.c
    if c.xp.name != "numpy":
        return None
    it, ir = c.slot(op.operands[0]), c.slot(op.result)
    C = b.C
    hbm = c.machine.hbm
    cache: dict = {}
    f32 = not feeds_native_matmuls(c, op.result) and _only_matmul_users(c, op.result) and \
        op.result.type.elem in ("f16", "bf16")
    view = id(op) in c.view_loads  # the native kernel reads the f16 where it lies
    machine = c.machine
    F32 = np.dtype(np.float32)

    def values(st):
        return read_boxes(cache, st, hbm, C)

    def placed(senv):
        """For tapes: (tile, access, one strided block of all boxes or None, the permutation
        over [C, ...] or None) of a stacked box tile over a region without a written-mask (it
        never gets one back), else None."""
        st = senv[it]
        if type(st) is not StackedTile:
            return None
        region = st.view.region
        if region is None or region.mask is not None:
            return None
        a = _access(cache, st, hbm)
        perm = None if st.perm is None else (0,) + tuple(p + 1 for p in st.perm)
        return st, a, _block(a, C, st.ext, False), perm

    if f32:
        # weights feeding matmuls: the stacked f32 copy is cached like load_f32's per-core tiles
        def step(senv):
            st = senv[it]
            if type(st) is not StackedTile:
                raise _Fallback
            region = st.view.region
            fcache = machine.f32_cache
            key = ("stacked", id(region), id(st.view), st.key, st.ext, st.perm)
            hit = fcache.get(key)
            if hit is not None and hit[0] == region.version and hit[1] is region and \
                    hit[3] is st.view and hit[4] == hbm.generation:
                senv[ir] = hit[2]
                return
            # the cores' own f32 copies (from core-by-core runs before this plan was stacked)
            # give the same values, checked when they were cached, without widening again; they
            # are dropped, so the cache holds each tile once
            cores = [f32_key(st.view, tuple(int(x) for x in lo), st.ext, st.perm)
                     for lo in st.los]
            own = [fcache.get(k) for k in cores]
            if region is not None and all(h is not None and h[0] == region.version and
                                          h[1] is region for h in own):
                arr = np.stack([h[2] for h in own])
            else:
                data, region = values(st)
                arr = data.astype(F32)
            for k, h in zip(cores, own):
                if h is not None:
                    del fcache[k]
                    machine.f32_cache_used -= h[2].nbytes
            senv[ir] = remember(key, arr, region, st.view, hit)

        def remember(key, arr, region, view_, hit):
            arr.flags.writeable = False
            if machine.f32_cache_used + arr.nbytes <= machine.f32_cache_bytes:
                if hit is None:
                    machine.f32_cache_used += arr.nbytes
                machine.f32_cache[key] = (region.version, region, arr, view_, hbm.generation)
            return arr

        def specialize_f32(senv):
            """For a tape: the placement and cache key resolved once; the f32 copy is reused
            while the region is unchanged, widened again after a write."""
            where = placed(senv)
            if where is None:
                return None
            st, a, block, perm = where
            region, view_ = st.view.region, st.view
            key = ("stacked", id(region), id(view_), st.key, st.ext, st.perm)
            fcache = machine.f32_cache

            def fast(senv):
                hit = fcache.get(key)
                if hit is not None and hit[0] == region.version and hit[1] is region and \
                        hit[3] is view_ and hit[4] == hbm.generation:
                    senv[ir] = hit[2]
                    return
                data = block if block is not None else _gathered(a)
                if perm is not None:
                    data = data.transpose(perm)
                senv[ir] = remember(key, data.astype(F32), region, view_, hit)
            return fast

        step.specialize = specialize_f32
        return step

    def step(senv):
        st = senv[it]
        if type(st) is not StackedTile:
            raise _Fallback
        data, _ = values(st)
        senv[ir] = data if view else np.array(data, copy=True)

    def specialize(senv):
        """For a tape: the placement resolved once (a region without a written-mask never gets
        one back); the values are still read on every replay."""
        where = placed(senv)
        if where is None:
            return None
        _, a, block, perm = where
        if block is None:
            if perm is None:  # the gathered copy is fresh and C-contiguous already
                return lambda senv: senv.__setitem__(ir, _gathered(a))

            def fast(senv):
                data = _gathered(a).transpose(perm)
                senv[ir] = data if view else np.array(data, copy=True)
            return fast
        if perm is not None:
            block = block.transpose(perm)
        if view:
            return lambda senv: senv.__setitem__(ir, block)
        return lambda senv: senv.__setitem__(ir, np.array(block, copy=True))

    step.specialize = specialize
    return step


@native("ktdp.store")
def _store(b, op, plain):
    c = b.c
    if c.xp.name != "numpy":
        return None
    value, tile = op.operands[0], op.operands[1]
    if not b.varies(tile):
        return None
    iv, it = c.slot(value), c.slot(tile)
    C = b.C
    hbm = c.machine.hbm
    cache: dict = {}
    value_varies = b.varies(value)

    def placement(senv):
        """(tile, region, access, one strided block of all boxes or None)"""
        st = senv[it]
        if type(st) is not StackedTile:
            raise _Fallback
        region = st.view.region
        if region is None or region.mask is not None or not region.writable:
            raise _Fallback
        a = _access(cache, st, hbm)
        if a.disjoint is None:
            a.disjoint = _disjoint(a)
        block = None
        if a.disjoint:
            block = _block(a, C, st.ext, True)
            if block is None and a.grouped is not None:  # [C/g, g, *ext], written in one go
                first = a.view.nd[a.slices[0]]
                block = _as_strided(first, shape=a.grouped.shape, strides=a.grouped.strides)
        return st, region, a, block

    def write(senv, st, region, a, block):
        v = senv[iv]
        if not value_varies:
            v = np.broadcast_to(np.asarray(v), (C,) + tuple(np.shape(v)))
        if st.perm is not None:
            inv = np.argsort(st.perm)
            v = np.asarray(v).transpose((0,) + tuple(int(p) + 1 for p in inv))
        v = np.asarray(v).reshape((C,) + tuple(st.ext))
        if block is None:  # core after core: where boxes overlap, the last core's bytes stay
            nd = st.view.nd
            for k, s in enumerate(a.slices):
                nd[s] = v[k]
        else:
            block[...] = v.reshape(block.shape)
        region.version += 1

    def step(senv):
        write(senv, *placement(senv))

    def specialize(senv):
        """For a tape: the placement resolved once (a region without a written-mask never gets
        one back, and writability does not change)."""
        try:
            where = placement(senv)
        except _Fallback:
            return None
        return lambda senv: write(senv, *where)

    step.specialize = specialize
    return step


@native("scf.for")
def _for(b, op, plain):
    c = b.c
    lb, ub, st = op.groups["bounds"]
    block = op.regions[0].block
    body = b.block(block)
    C = b.C
    ilb, iub, ist = c.slot(lb), c.slot(ub), c.slot(st)
    iv = c.slot(block.args[0])
    carried = [(c.slot(a), a.type, b.varies(a)) for a in block.args[1:]]
    inits = [(c.slot(v), b.varies(v)) for v in op.groups["inits"]]
    last = block.ops[-1] if block.ops else None
    ys = [(c.slot(v), b.varies(v)) for v in last.operands] \
        if last is not None and last.name == "scf.yield" else []
    results = [c.slot(v) for v in op.results]
    bounds_vary = b.varies(lb) or b.varies(ub) or b.varies(st)

    def trips(senv):
        """The induction variable's values (ints, or [C] arrays when the bounds vary)."""
        lo, hi, s = senv[ilb], senv[iub], senv[ist]
        if not bounds_vary:
            if s <= 0:
                raise _Fallback
            return [lo + k * s for k in range(len(range(lo, hi, s)))]
        # per-core arrays and scalars mix by broadcasting (no broadcast_arrays: ~30 us a call)
        if (np.asarray(s) <= 0).any():
            raise _Fallback
        counts = np.maximum(0, -((np.asarray(lo, np.int64) - hi) // s)).reshape(-1)
        if (counts != counts[0]).any():
            raise _Fallback  # cores run different trip counts
        return [lo + k * s for k in range(int(counts[0]))]

    lifted: dict = {}  # position -> (uniform tensor, its broadcast): loop inits are constants

    def lift_at(k, v, t):
        hit = lifted.get(k)
        if hit is not None and hit[0] is v:
            return hit[1]
        out = lift(v, t, C)
        if isinstance(t, TensorType):  # a read-only broadcast view of v (values are immutable)
            lifted[k] = (v, out)
        return out

    def carry(senv, dst, src):
        """Carried values from ``src`` ((slot, varies) pairs) into slots ``dst``, uniform ones
        broadcast where the carried value varies."""
        accs = [senv[k] if vk or not va else lift_at(j, senv[k], t)
                for j, ((k, vk), (_, t, va)) in enumerate(zip(src, carried))]
        for d, a in zip(dst, accs):
            senv[d] = a

    slots = [k for k, _, _ in carried]

    def step(senv):
        src = inits
        for i in trips(senv):
            carry(senv, slots, src)
            senv[iv] = i
            for step_ in body:
                step_(senv)
            src = ys
        carry(senv, results, src)

    # a fault inside the body is raised, located, by the body's own steps; only the trip check
    # sends the whole loop core by core, before anything ran
    step.loop = LoopShape(iv, body, slots, inits, ys, results, carry, trips)
    return step
