"""``ktdp.load`` and ``ktdp.store``: tensors read from and written to memory through access tiles.

A load's result is a fresh array (never aliasing memory) except where nothing can write those
bytes while the result lives: a load feeding only native-kernel matmuls may hand out a read-only
view of a fully written HBM region (:func:`load_view`, checked by :func:`_read_before_writes`).
A load of f16/bf16 values feeding only matmuls on the f32 path gives their f32 widening, cached
per tile in ``machine.f32_cache`` while the region's write counter is unchanged
(:func:`load_f32`; exact, so every plan reads the same values).

Steps carry ``specialize(env)`` for tapes (tape.py): the checked placement resolved once into one
array view (:func:`~.access.fixed_block`), or None where the access must keep its checks. The
stacked forms (one step for every core of a grid) need host arrays and fall back to the per-core
steps for anything they cannot place (stacked_boxes.py).
"""

from __future__ import annotations

import numpy as np

from ...backends.capabilities import caps_of
from ...ir.errors import KtirError
from ...ir.nodes import AccessTileType, Op, TensorType
from ...latency.walker import CoreWalker
from ...exec.memory_views import Tile
from ...exec.native_matmul import feeds_native_matmuls, only_matmul_users, weight_n_axis
from ...exec.row_major import fast_weight
from ...ir.registry import implements, set_part
from ...exec.stacked_values import Fallback, StackedTile
from ...verify.rules import Rule, check_declared_operands, elem as _elem, fail, same_shape
from .access import box_inside, fixed_block, load_tile, store_tile
from .stacked_boxes import box_access, boxes_block, boxes_disjoint, gathered_boxes, read_boxes

F32 = np.dtype(np.float32)
_as_strided = np.lib.stride_tricks.as_strided


# -- syntax -----------------------------------------------------------------------------------

@implements("syntax", "ktdp.load")
def _h_load(p, op: Op):
    op.operands = [p.operand()]
    if p.peek() == "{":  # attr-dict (KtdpOps.td), e.g. {padding = -1.0} for masked points
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the access tile type")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    return [p.parse_type()]


@implements("syntax", "ktdp.store")
def _h_store(p, op: Op):
    op.operands = p.operand_list()
    p.expect(":", "before the operand types")
    op.attrs["types"] = p.type_list()
    return []


# -- verification -----------------------------------------------------------------------------

def view_elem_of_tile(v) -> str | None:
    """Element type of the view behind an access tile value (None when unknown)."""
    owner = v.owner
    if owner is None or owner.name not in ("ktdp.construct_access_tile",
                                           "ktdp.construct_indirect_access_tile"):
        return None
    return _elem(owner.groups["base"][0].type)


def _load(op: Op) -> None:
    (a,) = op.operands
    if not isinstance(a.type, AccessTileType):
        fail(f"load operand {a.name} must be an access tile, got {a.type}")
    check_declared_operands(op)
    t = op.results[0].type
    if not isinstance(t, TensorType):
        fail(f"load must produce a tensor, got {t}")
    if not same_shape(a.type, t):
        fail(f"load of {a.type} cannot produce {t}: the access tile shape and the result "
              "tensor shape differ")
    elem = view_elem_of_tile(a)
    if elem is not None and elem != t.elem:
        fail(f"load produces {t.elem} but the view holds {elem}")


def _store(op: Op) -> None:
    if len(op.operands) != 2:
        fail("store takes a tensor and an access tile")
    v, a = op.operands
    if not isinstance(v.type, TensorType):
        fail(f"stored value {v.name} must be a tensor, got {v.type}")
    if not isinstance(a.type, AccessTileType):
        fail(f"store destination {a.name} must be an access tile, got {a.type}")
    check_declared_operands(op)
    if not same_shape(v.type, a.type):
        fail(f"cannot store {v.type} through {a.type}: the data tile shape and the access tile "
              "shape differ")
    elem = view_elem_of_tile(a)
    if elem is not None and elem != v.type.elem:
        fail(f"stores {v.type.elem} into a view of {elem}")


set_part("verify", "ktdp.load", Rule((1, 1), (1, 1), check=_load))
set_part("verify", "ktdp.store", Rule((2, 2), (0, 0), check=_store))


# -- f32 copies of matmul inputs --------------------------------------------------------------

def f32_key(view, lo, ext, perm, tag=None) -> tuple:
    """The f32 cache key of a box tile of ``view``: everything the access check depends on (view
    box and set, tile box), so a hit was checked when it was stored."""
    return (id(view.region), view.byte_addr, view.strides, view.lo, view.hi, id(view.cset),
            view.syms, lo, ext, perm, tag)


def load_f32(machine, tile: Tile, layout=None, pad=0) -> np.ndarray:
    """The tile's values widened to f32 (exact). Box tiles of fully written HBM regions are cached
    in ``machine.f32_cache`` (key: region + tile; valid while the region's write counter is
    unchanged), so weights feeding matmuls are converted once, not per core and pass.
    ``layout`` (tag, fn) caches ``fn(values)`` instead (e.g. a batched-GEMM friendly copy)."""
    view = tile.view
    xp = view.xp
    region = getattr(view, "region", None)
    if tile.points is not None or region is None or region.mask is not None:
        arr = xp.astype(load_tile(tile, pad=pad), F32)
        return arr if layout is None else layout[1](arr)
    cache = machine.f32_cache
    key = f32_key(view, tile.lo, tile.ext, tile.perm, None if layout is None else layout[0])
    hit = cache.get(key)
    if hit is not None and hit[0] == region.version and hit[1] is region:
        return hit[2]  # only tiles wholly inside their view are cached (the key holds both)
    if not box_inside(view, tile.lo, tile.ext):  # masked: never cached
        arr = xp.astype(load_tile(tile, pad=pad), F32)
        return arr if layout is None else layout[1](arr)
    arr = xp.astype(load_tile(tile), F32)
    if layout is not None:
        arr = layout[1](arr)
    if isinstance(arr, np.ndarray):
        arr.flags.writeable = False  # shared by every core and pass
    nbytes = arr.nbytes if isinstance(arr, np.ndarray) else arr.nelement() * arr.element_size()
    if machine.f32_cache_used + nbytes <= machine.f32_cache_bytes:
        if hit is None:
            machine.f32_cache_used += nbytes
        cache[key] = (region.version, region, arr)
    return arr


# -- steps ------------------------------------------------------------------------------------

_MAY_WRITE = ("ktdp.store", "func.call")


def _may_write(op) -> bool:
    return op.name in _MAY_WRITE or op.name.startswith("ktdp.inter_tile") or \
        any(_may_write(o) for r in op.regions for b in r.blocks for o in b.ops)


def _read_before_writes(c, op) -> bool:
    """True when every user of ``op``'s result is in ``op``'s block and nothing between ``op`` and
    its last user may write memory: a view of HBM then holds exactly the values the load read,
    also when a grid runs in lock step or stacked (every core's steps run in program order)."""
    block, i = c.where
    users = c.users.get(id(op.result), [])
    pos = c.positions(block)
    if not users or any(id(u) not in pos for u in users):
        return False
    last = max(pos[id(u)] for u in users)
    return not any(_may_write(o) for o in block.ops[i + 1:last])


def load_view(tile: Tile) -> np.ndarray:
    """:func:`load_tile`'s values without the copy where that is possible: a read-only view of a
    box of a fully written HBM region (the same checks), else :func:`load_tile`. Callers make sure
    nothing writes those bytes while the view is used (:func:`_read_before_writes`)."""
    region = getattr(tile.view, "region", None)
    return load_tile(tile, copy=region is None or region.mask is not None)


def padding_of(op) -> object:
    """The value a load gives masked points: its ``padding`` attribute (a number, in the loaded
    element type), else 0. The dialect defines no padding; zero is tensor-descriptor semantics."""
    pad = op.attrs.get("padding", 0)
    if isinstance(pad, bool) or not isinstance(pad, (int, float)):
        raise KtirError.at(op.loc, f"ktdp.load: padding must be a number, got {pad!r}")
    return op.result.type.dtype.type(pad)


@implements("build", "ktdp.load")
def build_load(c, op):
    it = c.slot(op.operands[0])
    ir = c.slot(op.result)
    rt = op.result.type
    as_view = False
    pad = padding_of(op)
    if pad != 0:  # the fast paths below pad with zero
        def step(env):
            env[ir] = load_tile(env[it], pad=pad)

        return step
    if feeds_native_matmuls(c, op.result):
        load = load_tile
        if _read_before_writes(c, op):
            c.view_loads.add(id(op))
            load = load_view
            as_view = True

        def step(env):
            env[ir] = load(env[it])

    elif only_matmul_users(c, op.result) and rt.elem in ("f16", "bf16"):
        machine = c.machine

        def step(env):
            env[ir] = load_f32(machine, env[it])

        return step  # its f32 copies are cached per tile already
    else:
        def step(env):
            env[ir] = load_tile(env[it])

    n_axis = weight_n_axis(c, op.result) if as_view else None

    def specialize(env):
        tile = env[it]
        block = fixed_block(tile)
        if block is None:
            return None
        if as_view and tile.view.region is not None:  # as load_view: LX boxes are copied
            block = block.view()
            block.flags.writeable = False
            if n_axis is not None:  # a weight: the kernel reads it faster N-contiguous
                block = fast_weight(c.machine, tile.view.region, block, n_axis)
            return lambda env: env.__setitem__(ir, block)
        return lambda env: env.__setitem__(ir, block.copy())

    step.specialize = specialize
    return step


@implements("build", "ktdp.store")
def build_store(c, op):
    iv, it = c.slot(op.operands[0]), c.slot(op.operands[1])

    def step(env):
        store_tile(env[it], env[iv])

    def specialize(env):
        tile = env[it]
        block = fixed_block(tile, write=True)
        if block is None:
            return None
        region = tile.view.region

        def fast(env):
            block[...] = env[iv]
            if region is not None:
                region.version += 1
        return fast

    step.specialize = specialize
    return step


# -- stacked steps ----------------------------------------------------------------------------

@implements("stacked", "ktdp.load")
def stacked_load(b, op, plain):
    c = b.c
    if not caps_of(c.xp).host_arrays:
        return None
    it, ir = c.slot(op.operands[0]), c.slot(op.result)
    C = b.C
    hbm = c.machine.hbm
    cache: dict = {}
    f32 = not feeds_native_matmuls(c, op.result) and only_matmul_users(c, op.result) and \
        op.result.type.elem in ("f16", "bf16")
    view = id(op) in c.view_loads  # the native kernel reads the f16 where it lies
    n_axis = weight_n_axis(c, op.result) if view else None
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
        a = box_access(cache, st, hbm)
        perm = None if st.perm is None else (0,) + tuple(p + 1 for p in st.perm)
        return st, a, boxes_block(a, C, st.ext, False), perm

    if f32:
        # weights feeding matmuls: the stacked f32 copy is cached like load_f32's per-core tiles
        def step(senv):
            st = senv[it]
            if type(st) is not StackedTile:
                raise Fallback
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
                data = block if block is not None else gathered_boxes(a)
                if perm is not None:
                    data = data.transpose(perm)
                senv[ir] = remember(key, data.astype(F32), region, view_, hit)
            return fast

        step.specialize = specialize_f32
        return step

    def step(senv):
        st = senv[it]
        if type(st) is not StackedTile:
            raise Fallback
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
                return lambda senv: senv.__setitem__(ir, gathered_boxes(a))

            def fast(senv):
                data = gathered_boxes(a).transpose(perm)
                senv[ir] = data if view else np.array(data, copy=True)
            return fast
        if perm is not None:
            block = block.transpose(perm)
        if view:
            if n_axis is not None:  # a weight: the kernel reads it faster N-contiguous
                block = fast_weight(machine, where[0].view.region, block, n_axis)
            return lambda senv: senv.__setitem__(ir, block)
        return lambda senv: senv.__setitem__(ir, np.array(block, copy=True))

    step.specialize = specialize
    return step


@implements("stacked", "ktdp.store")
def stacked_store(b, op, plain):
    c = b.c
    if not caps_of(c.xp).host_arrays:
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
            raise Fallback
        region = st.view.region
        if region is None or region.mask is not None or not region.writable:
            raise Fallback
        a = box_access(cache, st, hbm)
        if a.disjoint is None:
            a.disjoint = boxes_disjoint(a)
        block = None
        if a.disjoint:
            block = boxes_block(a, C, st.ext, True)
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
        except Fallback:
            return None
        return lambda senv: write(senv, *where)

    step.specialize = specialize
    return step


# -- cost -------------------------------------------------------------------------------------

# bytes moved through the tile's memory (walker.move)

@implements("cost", "ktdp.load")
def cost_load(w: CoreWalker, op: Op, scale: float) -> None:
    w.move(op, op.operands[0], scale, write=False)
    w.env[op.result] = None


@implements("cost", "ktdp.store")
def cost_store(w: CoreWalker, op: Op, scale: float) -> None:
    if w.footprints is not None:
        w.footprints.append((op, w.env.get(op.operands[1])))
    w.move(op, op.operands[1], scale, write=True)

