"""ktdp: memory views, access tiles (direct and indirect), load/store, tile ids, inter-tile ops.

Run-time objects:

* :class:`View` -- a plain memory view: byte address in HBM or in one core's LX, element dtype,
  sizes/strides (elements), and its coordinate set (a box ``lo..hi`` or a general affine set).
  Coordinates used to access a view are *global* (in its coordinate set); the local coordinate is
  ``coord - lo`` (the set's lower corner), so a partition of a distributed view is addressed as the
  primer describes. A view whose box lies inside one HBM region keeps a strided numpy view of it.
* :class:`DistView` -- partitions glued into one logical tensor (``construct_distributed_memory_view``).
* :class:`Tile` -- either a *box* (lower corner, extents, traversal permutation: loads and stores are
  strided slices, transposed by the permutation) or explicit *points* (an int array [n, rank] in
  traversal order: gathers/scatters with one fancy index).

Masked access: points of an access tile outside its view's coordinate set (for a distributed
view: outside every partition's) are masked, as tensor-descriptor semantics and the Triton-emitted
kernels' comments have it: a load gives them the padding value (zero unless the load carries a
``padding`` attribute), a store skips them; nothing outside the set is read or written. Each masked
point is counted in ``machine.masked_points`` (the checking mode warns when it grows). Tables of
an indirect access are not masked: an index read outside its view is a fault.

Faults (raised as FaultSignal, located by the plan runner): an index-table read outside its view's
coordinate set, bytes outside every HBM region (or beyond the LX), reading never-written HBM.
"""

from __future__ import annotations

import time

import numpy as np

from .. import affine
from ..errors import FaultSignal
from ..ir import MemorySpace, TensorType, TileFutureType
from . import register
from .arith import coerce

_as_strided = np.lib.stride_tricks.as_strided  # host bookkeeping (written-byte masks) only
INDEX_DT = np.dtype(np.int64)
F32 = np.dtype(np.float32)


class View:
    __slots__ = ("space", "core", "byte_addr", "dtype", "sizes", "strides", "lo", "hi", "cset",
                 "syms", "region", "flat", "elem_off", "nd", "where", "hbm", "xp")

    def __init__(self, machine, space: MemorySpace, core: int, byte_addr: int, dtype,
                 sizes: tuple, strides: tuple, cset, syms: tuple):
        self.space = space.kind
        self.core = core
        self.byte_addr = byte_addr
        self.dtype = dtype
        self.sizes = sizes
        self.strides = strides
        self.syms = syms
        self.hbm = machine.hbm
        self.xp = xp = machine.backend  # flat / nd are this back end's arrays
        box = cset.box_bounds() if cset is not None else None
        if cset is None:
            self.lo = (0,) * len(sizes)
            self.hi = tuple(s - 1 for s in sizes)
            self.cset = None
        elif box is not None:
            self.lo = tuple(affine.eval_bound(b.lo, syms) for b in box)
            self.hi = tuple(affine.eval_bound(b.hi, syms) for b in box)
            self.cset = None
        else:
            bb = cset.bounding_box(syms)
            self.lo = tuple(b[0] for b in bb)
            self.hi = tuple(b[1] for b in bb)
            self.cset = cset
        item = dtype.itemsize
        self.region = None
        self.nd = None
        if space.kind == "hbm":
            region = machine.hbm.find(byte_addr)
            self.where = f"HBM byte {byte_addr}"
            if region is None:
                self.flat = None
                self.elem_off = 0
                return
            self.region = region
            rel = byte_addr - region.start
            self.where = f"HBM region {region.name!r} (bytes {region.start}..{region.end})"
        else:
            self.where = f"LX of core {core}"
            rel = byte_addr
            lx = machine.lx(core)
            if rel < 0 or rel >= lx.capacity:
                self.flat = None
                self.elem_off = 0
                return
            region = None
            self.flat = xp.typed(lx, dtype) if lx.capacity % item == 0 else None
        if rel % item:
            self.flat = None
            self.elem_off = 0
            self.where += f" (address not aligned to {item}-byte elements)"
            return
        if self.region is not None:
            self.flat = xp.typed(self.region, dtype)
        self.elem_off = rel // item
        if self.flat is not None and all(s > 0 for s in strides):
            extent = sum((n - 1) * s for n, s in zip(sizes, strides) if n > 0)
            if self.elem_off + extent < self.flat.shape[0] and all(n > 0 for n in sizes):
                self.nd = xp.strided(self.flat, self.elem_off, tuple(sizes), tuple(strides))


class DistView:
    __slots__ = ("parts", "rank", "dtype", "xp")

    def __init__(self, parts: list):
        self.parts = parts
        self.rank = len(parts[0].sizes)
        self.dtype = parts[0].dtype
        self.xp = parts[0].xp


class Tile:
    __slots__ = ("view", "lo", "ext", "perm", "points", "shape")

    def __init__(self, view, lo, ext, perm, points, shape):
        self.view = view
        self.lo = lo  # box: absolute lower corner
        self.ext = ext  # box: extents per view dim
        self.perm = perm  # box: traversal permutation (None = identity)
        self.points = points  # explicit: int64 [n, rank] in traversal order
        self.shape = shape  # data tile shape


# ---------------------------------------------------------------------------------------------
# address checks and element access

def _box_inside(view: View, lo, ext) -> bool:
    """Whether every point of the box lies in the view's coordinate set (an empty box does)."""
    if any(e <= 0 for e in ext):
        return True
    for d, (a, e) in enumerate(zip(lo, ext)):
        if a < view.lo[d] or a + e - 1 > view.hi[d]:
            return False
    return view.cset is None or bool(_inside(view, _box_points(lo, ext)).all())


def _clip(view: View, lo, ext):
    """The part of box (lo, ext) inside the box ``view.lo..view.hi``: (its lower corner, its
    extents, the slices selecting it within the tile's box), or None when they do not meet."""
    slo = tuple(max(a, v) for a, v in zip(lo, view.lo))
    shi = tuple(min(a + e - 1, v) for a, e, v in zip(lo, ext, view.hi))
    if any(h < l for l, h in zip(slo, shi)):
        return None
    sext = tuple(h - l + 1 for l, h in zip(slo, shi))
    within = tuple(slice(l - a, l - a + e) for l, a, e in zip(slo, lo, sext))
    return slo, sext, within


def _note_masked(view, n: int) -> None:
    """Count ``n`` masked points on the machine (the checking mode reports them)."""
    if n:
        hbm = view.hbm if isinstance(view, View) else view.parts[0].hbm
        hbm.machine.masked_points += int(n)


def _masked_box_load(tile: Tile, pad):
    """A box tile partly (or wholly) outside its plain view: the inside part is read as a box,
    the rest is ``pad``; a view with a general coordinate set goes point by point."""
    view = tile.view
    xp = view.xp
    if view.cset is not None:
        return _gather(view, _tile_points(tile), pad).reshape(tile.shape)
    out = xp.full(tuple(tile.ext), pad, view.dtype)
    sub = _clip(view, tile.lo, tile.ext)
    inside = 0
    if sub is not None:
        slo, sext, within = sub
        xp.assign(out[within], load_tile(Tile(view, slo, sext, None, None, sext)))
        inside = int(np.prod(sext))
    _note_masked(view, int(np.prod(tile.ext)) - inside)
    if tile.perm is not None:
        out = xp.copy(xp.transpose(out, tile.perm))
    return out


def _masked_box_store(tile: Tile, value) -> None:
    """Store the part of a box tile inside its plain view; the other points are skipped."""
    view = tile.view
    xp = view.xp
    if view.cset is not None:
        _scatter(view, _tile_points(tile), _flat_values(xp, value))
        return
    data = xp.broadcast_to(value if xp.is_array(value) else xp.asarray(value), tuple(tile.shape))
    if tile.perm is not None:  # back to the view's dimension order
        data = xp.transpose(data, tuple(int(p) for p in np.argsort(tile.perm)))
    sub = _clip(view, tile.lo, tile.ext)
    inside = 0
    if sub is not None:
        slo, sext, within = sub
        store_tile(Tile(view, slo, sext, None, None, sext), data[within])
        inside = int(np.prod(sext))
    _note_masked(view, int(np.prod(tile.ext)) - inside)


def _box_points(lo, ext) -> np.ndarray:
    grids = np.meshgrid(*[np.arange(a, a + e, dtype=np.int64) for a, e in zip(lo, ext)],
                        indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1)


def _points_check(view: View, pts: np.ndarray) -> None:
    if pts.shape[0] == 0:
        return
    lo = np.asarray(view.lo)
    hi = np.asarray(view.hi)
    bad = np.any((pts < lo) | (pts > hi), axis=1)
    if view.cset is not None:
        inside = view.cset.contains_fn()(*[pts[:, d] for d in range(pts.shape[1])], *view.syms)
        bad |= ~np.broadcast_to(np.asarray(inside, bool), bad.shape)
    if bad.any():
        k = int(np.argmax(bad))
        raise FaultSignal(f"access outside the view's coordinate set at coordinate "
                          f"{tuple(int(x) for x in pts[k])} (view box {view.lo}..{view.hi})")


def _mask_view(region, view: View, lo, ext):
    """Per-byte written-mask of the box, shape ext + (itemsize,)."""
    item = view.dtype.itemsize
    local = [a - l for a, l in zip(lo, view.lo)]
    first = view.byte_addr - region.start + sum(x * s for x, s in zip(local, view.strides)) * item
    return _as_strided(region.mask[first:], shape=tuple(ext) + (item,),
                       strides=tuple(s * item for s in view.strides) + (1,), writeable=True)


def _no_memory(view: View) -> FaultSignal:
    return FaultSignal(f"view at {view.where} is not backed by memory (no HBM region at byte "
                       f"{view.byte_addr})" if view.region is None and view.space == "hbm"
                       else f"view at {view.where} is not addressable")


def _box_slices(view: View, lo, ext):
    return tuple(slice(a - l, a - l + e) for a, l, e in zip(lo, view.lo, ext))


def _strided_block(view: View, lo, ext) -> np.ndarray:
    """The box as a strided numpy view, checking it lies inside the backing memory."""
    if view.nd is not None:
        return view.nd[_box_slices(view, lo, ext)]
    if view.flat is None:
        if view.space == "hbm":
            raise _Spill()
        raise _no_memory(view)
    local = [a - l for a, l in zip(lo, view.lo)]
    start = view.elem_off + sum(x * s for x, s in zip(local, view.strides))
    span = [(e - 1) * s for e, s in zip(ext, view.strides) if e > 0]
    low = start + sum(x for x in span if x < 0)
    high = start + sum(x for x in span if x > 0)
    if low < 0 or high >= view.flat.shape[0]:
        if view.space == "hbm":
            raise _Spill()
        raise FaultSignal(f"access runs outside {view.where}: elements {low}..{high} of "
                          f"{view.flat.shape[0]}")
    if any(e == 0 for e in ext):
        return view.xp.zeros(ext, view.dtype)
    return view.xp.strided(view.flat, start, tuple(ext), tuple(view.strides))


def _offsets(view: View, pts: np.ndarray) -> np.ndarray:
    """Element offsets (into view.flat) of global points, checked against the memory bounds."""
    if view.flat is None:
        if view.space == "hbm":
            raise _Spill()
        raise _no_memory(view)
    local = pts - np.asarray(view.lo, dtype=np.int64)
    offs = local @ np.asarray(view.strides, dtype=np.int64) + view.elem_off
    if offs.size and (offs.min() < 0 or offs.max() >= view.flat.shape[0]):
        if view.space == "hbm":
            raise _Spill()
        raise FaultSignal(f"access runs outside {view.where}")
    return offs


def _check_written(view: View, offs: np.ndarray) -> None:
    region = view.region
    if region is None or region.mask is None or offs.size == 0:
        return
    item = view.dtype.itemsize
    base = (view.byte_addr - region.start) - view.elem_off * item
    byte = (offs * item + base)[:, None] + np.arange(item)
    if not region.mask[byte].all():
        raise FaultSignal(f"read of never-written HBM in region {region.name!r}")


def _mark_written(view: View, offs: np.ndarray) -> None:
    region = view.region
    if region is None:
        return
    region.version += 1
    if region.mask is None:
        return
    item = view.dtype.itemsize
    base = (view.byte_addr - region.start) - view.elem_off * item
    region.mask[(offs * item + base)[:, None] + np.arange(item)] = True
    _maybe_drop_mask(region)


def _maybe_drop_mask(region) -> None:
    if region.nbytes <= (4 << 20) and region.mask.all():
        region.mask = None


def _tile_points(tile: Tile) -> np.ndarray:
    if tile.points is not None:
        return tile.points
    pts = _box_points(tile.lo, tile.ext)
    if tile.perm is not None:
        pts = pts.reshape(tuple(tile.ext) + (len(tile.ext),)).transpose(
            tuple(tile.perm) + (len(tile.ext),)).reshape(-1, len(tile.ext))
    return pts


def load_tile(tile: Tile, copy: bool = True, pad=0) -> np.ndarray:
    """The tile's values; points outside the view's coordinate set read as ``pad``. ``copy=False``
    (numpy arrays only) may return a read-only view of the memory instead of a copy for a box
    tile; see :func:`load_view` for when that is safe."""
    view = tile.view
    if tile.points is None and isinstance(view, View):
        if not _box_inside(view, tile.lo, tile.ext):
            return _masked_box_load(tile, pad)
        try:
            block = _strided_block(view, tile.lo, tile.ext)
        except _Spill:
            return _gather_spill(view, _tile_points(tile)).reshape(tile.shape)
        region = view.region
        if region is not None and region.mask is not None:
            if not _mask_view(region, view, tile.lo, tile.ext).all():
                raise FaultSignal(f"read of never-written HBM in region {region.name!r}")
        if tile.perm is not None:
            block = view.xp.transpose(block, tile.perm)
        if copy:
            return view.xp.copy(block)
        block = block.view()
        block.flags.writeable = False
        return block
    pts = _tile_points(tile)
    return _gather(view, pts, pad).reshape(tile.shape)


def fixed_block(tile: Tile, write: bool = False):
    """The tile's memory as one numpy view that every later access through an equal tile may use
    without its checks (for tapes, tape.py), or None: a box tile of a memory-backed view whose
    region has no written-mask (a region drops its mask once fully written and never gets one
    back; LX has none) and, for a store, is writable, with every point inside the view's
    coordinate set (a masked access keeps its step). Raises the access's fault as
    :func:`load_tile` / :func:`store_tile` would."""
    view = tile.view
    if tile.points is not None or type(view) is not View or view.xp.name != "numpy":
        return None
    region = view.region
    if region is not None and (region.mask is not None or (write and not region.writable)):
        return None
    if not _box_inside(view, tile.lo, tile.ext):
        return None
    try:
        block = _strided_block(view, tile.lo, tile.ext)
    except _Spill:
        return None
    if tile.perm is not None:
        block = block.transpose(tile.perm)
    return block


class _Spill(Exception):
    """The access leaves the view's base region: resolve element by element across regions."""


def _byte_addresses(view: View, pts: np.ndarray) -> np.ndarray:
    local = pts - np.asarray(view.lo, dtype=np.int64)
    return view.byte_addr + (local @ np.asarray(view.strides, dtype=np.int64)) * view.dtype.itemsize


def _region_groups(view: View, pts: np.ndarray):
    """Yield (region, element offsets into region.typed, selector) for HBM accesses that span
    several regions (e.g. a paged view whose pages are separate allocations)."""
    hbm = view.hbm
    item = view.dtype.itemsize
    addrs = _byte_addresses(view, pts)
    starts = np.asarray(hbm._starts, dtype=np.int64)
    ends = np.asarray([r.end for r in hbm.regions], dtype=np.int64)
    k = np.searchsorted(starts, addrs, side="right") - 1
    bad = (k < 0) | (addrs + item > ends[np.maximum(k, 0)] if len(ends) else True)
    if np.any(bad):
        j = int(np.argmax(bad))
        raise FaultSignal(f"access to HBM byte {int(addrs[j])} (coordinate "
                          f"{tuple(int(x) for x in pts[j])}) that no allocated region covers")
    for kk in np.unique(k):
        sel = k == kk
        region = hbm.regions[int(kk)]
        rel = addrs[sel] - region.start
        if np.any(rel % item):
            raise FaultSignal(f"misaligned {item}-byte access in region {region.name!r}")
        yield region, rel // item, sel


def _gather_spill(view: View, pts: np.ndarray):
    xp = view.xp
    out = xp.empty((pts.shape[0],), view.dtype)
    for region, offs, sel in _region_groups(view, pts):
        if region.mask is not None:
            item = view.dtype.itemsize
            if not region.mask[(offs * item)[:, None] + np.arange(item)].all():
                raise FaultSignal(f"read of never-written HBM in region {region.name!r}")
        xp.put(out, np.flatnonzero(sel), xp.take(xp.typed(region, view.dtype), offs))
    return out


def _scatter_spill(view: View, pts: np.ndarray, vals) -> None:
    xp = view.xp
    for region, offs, sel in _region_groups(view, pts):
        if not region.writable:
            raise FaultSignal(f"store into read-only HBM region {region.name!r}")
        xp.put(xp.typed(region, view.dtype), offs, xp.take(vals, np.flatnonzero(sel)))
        region.version += 1
        if region.mask is not None:
            item = view.dtype.itemsize
            region.mask[(offs * item)[:, None] + np.arange(item)] = True
            _maybe_drop_mask(region)


def _gather(view, pts: np.ndarray, pad=None) -> np.ndarray:
    """The values at global points ``pts`` (traversal order). Points outside the view's set (or
    every partition's) read as ``pad``; with ``pad`` None (index tables) they are a fault."""
    if isinstance(view, View):
        if pad is None:
            _points_check(view, pts)
        else:
            inside = _inside(view, pts)
            if not inside.all():
                out = view.xp.full((pts.shape[0],), pad, view.dtype)
                if inside.any():
                    view.xp.put(out, np.flatnonzero(inside), _gather(view, pts[inside]))
                _note_masked(view, pts.shape[0] - int(np.count_nonzero(inside)))
                return out
        try:
            offs = _offsets(view, pts)
        except _Spill:
            return _gather_spill(view, pts)
        _check_written(view, offs)
        return view.xp.take(view.flat, offs)
    xp = view.xp
    out = xp.empty((pts.shape[0],), view.dtype)
    todo = np.ones(pts.shape[0], dtype=bool)
    for part in view.parts:
        sel = todo & _inside(part, pts)
        if sel.any():
            xp.put(out, np.flatnonzero(sel), _gather(part, pts[sel]))
            todo &= ~sel
    if todo.any():
        if pad is None:
            k = int(np.argmax(todo))
            raise FaultSignal(f"coordinate {tuple(int(x) for x in pts[k])} is in no partition of "
                              "the distributed view")
        rest = np.flatnonzero(todo)
        xp.put(out, rest, xp.full((rest.shape[0],), pad, view.dtype))
        _note_masked(view, rest.shape[0])
    return out


def _inside(view: View, pts: np.ndarray) -> np.ndarray:
    m = np.all((pts >= np.asarray(view.lo)) & (pts <= np.asarray(view.hi)), axis=1)
    if view.cset is not None:
        m &= np.broadcast_to(np.asarray(view.cset.contains_fn()(
            *[pts[:, d] for d in range(pts.shape[1])], *view.syms), bool), m.shape)
    return m


def _flat_values(xp, value):
    """A stored value as a flat array of the back end (a scalar is stored as one element)."""
    return (value if xp.is_array(value) else xp.asarray(value)).reshape(-1)


def store_tile(tile: Tile, value) -> None:
    view = tile.view
    xp = view.xp
    if tile.points is None and isinstance(view, View):
        if not _box_inside(view, tile.lo, tile.ext):
            _masked_box_store(tile, value)
            return
        try:
            block = _strided_block(view, tile.lo, tile.ext)
        except _Spill:
            _scatter_spill(view, _tile_points(tile), _flat_values(xp, value))
            return
        if view.region is not None and not view.region.writable:
            raise FaultSignal(f"store into read-only memory ({view.where})")
        if tile.perm is not None:
            block = xp.transpose(block, tile.perm)
        xp.assign(block, value)
        region = view.region
        if region is not None:
            region.version += 1
            if region.mask is not None:
                mv = _mask_view(region, view, tile.lo, tile.ext)
                mv[...] = True
                _maybe_drop_mask(region)
        return
    pts = _tile_points(tile)
    _scatter(view, pts, _flat_values(xp, value))


def _scatter(view, pts: np.ndarray, vals) -> None:
    """Store ``vals`` at global points ``pts``; points outside the view's set (or every
    partition's) are skipped."""
    if isinstance(view, View):
        inside = _inside(view, pts)
        if not inside.all():
            keep = np.flatnonzero(inside)
            _note_masked(view, pts.shape[0] - keep.shape[0])
            if keep.shape[0]:
                _scatter(view, pts[keep], view.xp.take(vals, keep))
            return
        try:
            offs = _offsets(view, pts)
        except _Spill:
            _scatter_spill(view, pts, vals)
            return
        if view.region is not None and not view.region.writable:
            raise FaultSignal(f"store into read-only memory ({view.where})")
        view.xp.put(view.flat, offs, vals)
        _mark_written(view, offs)
        return
    todo = np.ones(pts.shape[0], dtype=bool)
    for part in view.parts:
        sel = todo & _inside(part, pts)
        if sel.any():
            _scatter(part, pts[sel], view.xp.take(vals, np.flatnonzero(sel)))
            todo &= ~sel
    _note_masked(view, int(np.count_nonzero(todo)))


# ---------------------------------------------------------------------------------------------
# builders

@register("ktdp.get_compute_tile_id")
def build_tile_id(c, op):
    slots = [c.slot(r) for r in op.results]

    def step(env):
        coords = env[0].coords
        for k, s in enumerate(slots):
            env[s] = coords[k]

    return step


_FACTORIES: dict[str, object] = {}


def _generated(params: list[str], body: str, values: list):
    """``lambda env: body`` with ``params`` bound to ``values``; the code object is generated once
    per distinct body text (slots and constants are parameters, so bodies repeat a lot)."""
    text = f"lambda {', '.join(params) or '*_'}: lambda env: {body}"
    factory = _FACTORIES.get(text)
    if factory is None:
        factory = eval(text)
        _FACTORIES[text] = factory
    return factory(*values)


def _operand_refs(c, vals):
    """Source snippets reading each value, plus the parameters they need."""
    refs, params, values = [], [], []
    for j, v in enumerate(vals):
        if c.is_const(v):
            params.append(f"_k{j}")
            values.append(int(c.const(v)))
            refs.append(f"_k{j}")
        else:
            params.append(f"_s{j}")
            values.append(c.slot(v))
            refs.append(f"env[_s{j}]")
    return refs, params, values


def _values_fn(c, vals):
    """env -> tuple of the values' current ints (constants folded), as generated code."""
    if all(c.is_const(v) for v in vals):
        t = tuple(int(c.const(v)) for v in vals)
        return lambda env: t
    refs, params, values = _operand_refs(c, vals)
    return _generated(params, f"({''.join(r + ', ' for r in refs)})", values)


def _anchor_fn(c, bm: affine.AffineMap, indices, offsets):
    """env -> absolute lower corner: base_map(indices) + per-dim offsets, as generated code."""
    refs, params, values = _operand_refs(c, indices)
    parts = []
    for k, (e, off) in enumerate(zip(bm.results, offsets)):
        text = affine.to_python(e, refs, [])
        if off:
            params.append(f"_o{k}")
            values.append(off)
            text = f"{text} + _o{k}"
        parts.append(text)
    return _generated(params, f"({''.join(p + ', ' for p in parts)})", values)


@register("ktdp.construct_memory_view")
def build_memory_view(c, op):
    t = op.result.type
    dtype = t.dtype
    space: MemorySpace = op.attrs["memory_space"]
    cset = op.attrs.get("coordinate_set")
    machine = c.machine
    off_v = op.operands[0]
    ioff = c.slot(off_v)
    sizes_fn = _merge(op.attrs["static_sizes"], _values_fn(c, op.groups["sizes"]))
    strides_fn = _merge(op.attrs["static_strides"], _values_fn(c, op.groups["strides"]))
    dyn_sizes_fn = _values_fn(c, op.groups["sizes"])
    if cset is not None and cset.num_syms > len(op.groups["sizes"]):
        from ..errors import KtirError

        raise KtirError.at(op.loc, f"coordinate_set has {cset.num_syms} symbols but only "
                                   f"{len(op.groups['sizes'])} dynamic sizes bind them")
    unit = machine.unit_bytes(dtype)
    ir = c.slot(op.result)
    # Views are rebuilt for every core and pass; cache them by everything they depend on. A cached
    # view stays valid while HBM's set of regions is unchanged (its generation counter).
    cache: dict = {}
    hbm = machine.hbm

    def step(env):
        core = space.core if space.core is not None else env[0].core
        addr = int(env[ioff]) * unit
        key = (addr, core, sizes_fn(env), strides_fn(env), dyn_sizes_fn(env))
        hit = cache.get(key)
        # valid while no allocation or free changed HBM's regions since the view was built
        if hit is not None and hit[0] == hbm.generation:
            env[ir] = hit[1]
            return
        v = View(machine, space, core, addr, dtype, key[2], key[3], cset, key[4])
        if len(cache) > 256:
            cache.clear()
        if v.region is not None:
            cache[key] = (hbm.generation, v)
        env[ir] = v

    return step


def _merge(static: list, dyn_fn):
    if all(s is not None for s in static):
        t = tuple(static)
        return lambda env: t

    def fn(env):
        it = iter(dyn_fn(env))
        return tuple(s if s is not None else next(it) for s in static)

    return fn


@register("ktdp.construct_distributed_memory_view")
def build_dist_view(c, op):
    slots = [c.slot(v) for v in op.operands]
    ir = c.slot(op.result)

    def step(env):
        parts = [env[s] for s in slots]
        flat = []
        for p in parts:
            flat.extend(p.parts if isinstance(p, DistView) else [p])
        env[ir] = DistView(flat)

    return step


def static_box(box) -> tuple[tuple, tuple]:
    """(lower corner, extents) of a box without symbols (``AffineSet.box_bounds``)."""
    los = tuple(b.lo[1] if b.lo[0] == "c" else affine.eval_bound(b.lo, ()) for b in box)
    return los, tuple(affine.eval_bound(b.hi, ()) - lo + 1 for b, lo in zip(box, los))


def _tile_geometry(s: affine.AffineSet, order: affine.AffineMap):
    """(box bounds or None, permutation or None) of an access tile set + order."""
    box = s.box_bounds()
    perm = order.permutation()
    if perm is not None and perm == tuple(range(len(perm))):
        perm = None
        identity = True
    else:
        identity = False
    return box, perm, identity, order.permutation() is not None


def _unfilled_step(c, op, set_key: str, order_key: str):
    """A fault step for a used tile whose set leaves positions of its type unfilled
    (parse/tile_types.py); None otherwise (an unused such tile is harmless)."""
    from ..parse.tile_types import unfilled_fault

    message = unfilled_fault(op, set_key, order_key)
    if message is None or not c.users.get(id(op.result)):
        return None

    def step(env):
        raise FaultSignal(message)

    return step


@register("ktdp.construct_access_tile")
def build_access_tile(c, op):
    unfilled = _unfilled_step(c, op, "access_tile_set", "access_tile_order")
    if unfilled is not None:
        return unfilled
    s: affine.AffineSet = op.attrs["access_tile_set"]
    order: affine.AffineMap = op.attrs["access_tile_order"]
    bm: affine.AffineMap = op.attrs["base_map"]
    ibase = c.slot(op.groups["base"][0])
    idx_fn = _values_fn(c, op.groups["indices"])
    sym_fn = _values_fn(c, op.groups["symbols"])
    ir = c.slot(op.result)
    box, perm, identity, is_perm = _tile_geometry(s, order)
    simple = all(e[0] in ("d", "c") for e in bm.results)
    if simple:
        picks = tuple((e[0] == "d", e[1]) for e in bm.results)

        def anchor_of(idx):
            return tuple(idx[k] if is_dim else k for is_dim, k in picks)
    else:
        ev = bm.evaluator()

        def anchor_of(idx):
            return tuple(int(x) for x in ev(*idx))

    if box is not None and is_perm:
        static_syms = not s.num_syms
        if static_syms:
            los, ext = static_box(box)
            shape = tuple(ext[p] for p in perm) if perm is not None else ext
            if not op.groups["indices"] or c.all_const(op.groups["indices"]):
                anchor = anchor_of(idx_fn(None))
                lo_abs = tuple(a + lo for a, lo in zip(anchor, los))

                def step(env):
                    env[ir] = Tile(env[ibase], lo_abs, ext, perm, None, shape)
                return step

            lo_fn = _anchor_fn(c, bm, op.groups["indices"], los)

            def step(env):
                env[ir] = Tile(env[ibase], lo_fn(env), ext, perm, None, shape)
            return step

        def step(env):
            syms = sym_fn(env)
            los = tuple(affine.eval_bound(b.lo, syms) for b in box)
            ext = tuple(affine.eval_bound(b.hi, syms) - lo + 1 for b, lo in zip(box, los))
            shape = tuple(ext[p] for p in perm) if perm is not None else ext
            anchor = anchor_of(idx_fn(env))
            env[ir] = Tile(env[ibase], tuple(a + lo for a, lo in zip(anchor, los)), ext, perm,
                           None, shape)
        return step

    # general set / order: explicit points in traversal order
    tshape = op.result.type.shape
    points_for = _ordered_points(s, order)

    def step(env):
        rel = points_for(sym_fn(env))
        anchor = np.asarray(anchor_of(idx_fn(env)), dtype=np.int64)
        shape = tshape if all(d is not None for d in tshape) else (rel.shape[0],)
        if int(np.prod(shape)) != rel.shape[0]:
            raise FaultSignal(f"access tile set has {rel.shape[0]} points but the tile type "
                              f"has {int(np.prod(shape))} elements")
        env[ir] = Tile(env[ibase], None, None, None, rel + anchor, tuple(shape))

    return step


def _ordered_points(s: affine.AffineSet, order: affine.AffineMap):
    """A function of the symbol values returning the set's points in traversal order, computed
    once per distinct symbol tuple (symbols rarely change between runs of a plan)."""
    cache: dict = {}

    def points_for(syms):
        pts = cache.get(syms)
        if pts is None:
            pts = cache[syms] = affine.order_points(s.points(syms), order, syms)
        return pts

    return points_for


@register("ktdp.construct_indirect_access_tile")
def build_indirect_tile(c, op):
    unfilled = _unfilled_step(c, op, "variables_space_set", "variables_space_order")
    if unfilled is not None:
        return unfilled
    s: affine.AffineSet = op.attrs["variables_space_set"]
    order: affine.AffineMap = op.attrs["variables_space_order"]
    kinds = op.attrs["subscript_kinds"]
    maps = op.attrs["subscript_maps"]
    ibase = c.slot(op.groups["base"][0])
    iviews = [c.slot(v) for v in op.groups["indirect"]]
    cap_fn = _values_fn(c, op.groups["captured"])
    sym_fn = _values_fn(c, op.groups["symbols"])
    ir = c.slot(op.result)
    tshape = op.result.type.shape
    points_for = _ordered_points(s, order)
    to_host = c.xp.to_host

    def step(env):
        syms = sym_fn(env)
        vpts = points_for(syms)
        cap = cap_fn(env)
        n = vpts.shape[0]
        args = list(cap) + [vpts[:, k] for k in range(vpts.shape[1])]
        coords = []
        vi = 0
        for kind, m in zip(kinds, maps):
            vals = [np.broadcast_to(np.asarray(x, dtype=np.int64), (n,)) for x in m(args)]
            if kind == "direct":
                coords.append(vals[0])
            else:
                iview = env[iviews[vi]]
                vi += 1
                # index tables steer addressing, which is host work: bring them to the host
                idx = to_host(_gather(iview, np.stack(vals, axis=1))).astype(np.int64)
                if idx.size and idx.min() < 0:
                    raise FaultSignal("indirect index value is negative")
                coords.append(idx)
        pts = np.stack(coords, axis=1) if coords else np.zeros((n, 0), np.int64)
        shape = tshape if all(d is not None for d in tshape) else (n,)
        env[ir] = Tile(env[ibase], None, None, None, pts, tuple(shape))

    return step


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
    if not _box_inside(view, tile.lo, tile.ext):  # masked: never cached
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


def _only_matmul_users(c, v) -> bool:
    users = c.users.get(id(v), [])
    return bool(users) and all(u.name in ("linalg.matmul", "linalg.matmul_transpose_b",
                                          "linalg.batch_matmul") and
                               v in u.groups.get("ins", []) for u in users)


def feeds_native_matmuls(c, v) -> bool:
    """Whether every user of ``v`` is a matmul on the native kernel, reading ``v`` as an input
    (it then wants the f16 values where they lie, not an f32 copy)."""
    from .linalg import uses_native

    users = c.users.get(id(v), [])
    return bool(users) and c.machine.native_matmul and _only_matmul_users(c, v) and \
        all(uses_native(c, u) for u in users)


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
        from ..errors import KtirError

        raise KtirError.at(op.loc, f"ktdp.load: padding must be a number, got {pad!r}")
    return op.result.type.dtype.type(pad)


@register("ktdp.load")
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

    elif _only_matmul_users(c, op.result) and rt.elem in ("f16", "bf16"):
        machine = c.machine

        def step(env):
            env[ir] = load_f32(machine, env[it])

        return step  # its f32 copies are cached per tile already
    else:
        def step(env):
            env[ir] = load_tile(env[it])

    def specialize(env):
        tile = env[it]
        block = fixed_block(tile)
        if block is None:
            return None
        if as_view and tile.view.region is not None:  # as load_view: LX boxes are copied
            block = block.view()
            block.flags.writeable = False
            return lambda env: env.__setitem__(ir, block)
        return lambda env: env.__setitem__(ir, block.copy())

    step.specialize = specialize
    return step


@register("ktdp.store")
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


# ---------------------------------------------------------------------------------------------
# inter-tile produce / reduce (cores run as threads; see compile._Exchange)

class Future:
    __slots__ = ("key", "group", "producers")

    def __init__(self, key, group, producers):
        self.key = key
        self.group = group
        self.producers = producers


def _group_ids(groups: affine.AffineSet) -> list[int]:
    return [int(p[0]) for p in groups.points(())]


@register("ktdp.inter_tile_produce")
def build_produce(c, op):
    from ..compile import run_steps

    c.uses_inter_tile = True
    ftype: TileFutureType = op.result.type
    groups = _group_ids(ftype.groups)
    who: affine.AffineSet = op.attrs["producer_tiles_per_group"]
    contains = who.contains_fn()
    block = op.regions[0].block
    body = c.compile_block(block)
    gid_slot = c.slot(block.args[0])
    y = c.slot(block.ops[-1].operands[0])
    ir = c.slot(op.result)
    n = c.fn.num_cores
    producers = {g: [t for t in range(n) if contains(t, g)] for g in groups}
    my_group = {t: next((g for g in groups if contains(t, g)), None) for t in range(n)}
    op_key = id(op)

    def step(env):
        ctx = env[0]
        ex = ctx.exchange
        g = my_group[ctx.core]
        count_key = (op_key, ctx.core)
        with ex.cond:
            occ = ex.boxes.get(count_key, 0)
            ex.boxes[count_key] = occ + 1
        key = (op_key, occ)
        if g is not None:
            env[gid_slot] = g
            run_steps(body, env)
            part = env[y]
            with ex.cond:
                ex.boxes.setdefault((key, g), {})[ctx.core] = part
                ex.cond.notify_all()
        env[ir] = Future(key, g, producers)

    return step


@register("ktdp.inter_tile_reduce")
def build_reduce_tiles(c, op):
    from ..compile import run_steps

    c.uses_inter_tile = True
    fu, ident = op.operands
    ifu, iid, ir = c.slot(fu), c.slot(ident), c.slot(op.result)
    who: affine.AffineSet = op.attrs["consumer_tiles_per_group"]
    contains = who.contains_fn()
    ftype: TileFutureType = fu.type
    groups = _group_ids(ftype.groups)
    n = c.fn.num_cores
    my_group = {t: next((g for g in groups if contains(t, g)), None) for t in range(n)}
    block = op.regions[0].block
    body = c.compile_block(block)
    a_slot, b_slot = (c.slot(a) for a in block.args)
    y = c.slot(block.ops[-1].operands[0])
    rt: TensorType = op.result.type
    xp = c.xp

    def step(env):
        ctx = env[0]
        fut: Future = env[ifu]
        g = my_group[ctx.core]
        if g is None:
            env[ir] = coerce(xp.reshape(env[iid], rt.shape), rt, xp)
            return
        need = fut.producers.get(g, [])
        ex = ctx.exchange
        box_key = (fut.key, g)
        deadline = time.monotonic() + 60.0
        stuck_since = None
        with ex.cond:
            ex.blocked += 1
            try:
                while True:
                    box = ex.boxes.get(box_key, {})
                    if all(t in box for t in need):
                        parts = [box[t] for t in need]
                        break
                    if ex.failed is not None:
                        raise FaultSignal("another core failed while this core waited in "
                                          "inter_tile_reduce")
                    now = time.monotonic()
                    # every core waiting or finished for a whole second: nobody can produce
                    if ex.blocked + ex.finished >= ex.n:
                        stuck_since = stuck_since or now
                    else:
                        stuck_since = None
                    if (stuck_since is not None and now - stuck_since > 1.0) or now > deadline:
                        missing = [t for t in need if t not in box]
                        raise FaultSignal(f"deadlock: waiting for partials of group {g} from "
                                          f"core(s) {missing} that never produce them")
                    ex.cond.wait(0.05)
            finally:
                ex.blocked -= 1
        if not parts:
            acc = env[iid]
        else:
            acc = parts[0]
            for p in parts[1:]:
                env[a_slot] = acc
                env[b_slot] = p
                run_steps(body, env)
                acc = env[y]
        env[ir] = coerce(xp.reshape(acc, rt.shape), rt, xp)

    return step
