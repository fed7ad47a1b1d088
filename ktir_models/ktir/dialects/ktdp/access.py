"""Element access through views and tiles: loads, stores, gathers, scatters, and their checks.

Masked access: points of an access tile outside its view's coordinate set (for a distributed
view: outside every partition's) are masked, as tensor-descriptor semantics and the Triton-emitted
kernels' comments have it: a load gives them the padding value (zero unless the load carries a
``padding`` attribute), a store skips them; nothing outside the set is read or written. Each masked
point is counted in ``machine.masked_points`` (the checking mode warns when it grows). Tables of
an indirect access are not masked: an index read outside its view is a fault.

Faults (raised as FaultSignal, located by the plan runner): an index-table read outside its view's
coordinate set, bytes outside every HBM region (or beyond the LX), reading never-written HBM.

Written masks: a region of HBM allocated uninitialised keeps a per-byte written mask until every
byte has been written (small regions drop it then and never get one back); reads check it, stores
set it. Every store bumps its region's ``version`` (the f32 caches key on it).
"""

from __future__ import annotations

import numpy as np

from ...backends.capabilities import caps_of
from ...ir.errors import FaultSignal
from ...exec.memory_views import View, Tile

_as_strided = np.lib.stride_tricks.as_strided  # host bookkeeping (written-byte masks) only


def box_inside(view: View, lo, ext) -> bool:
    """Whether every point of the box lies in the view's coordinate set (an empty box does)."""
    if any(e <= 0 for e in ext):
        return True
    for d, (a, e) in enumerate(zip(lo, ext)):
        if a < view.lo[d] or a + e - 1 > view.hi[d]:
            return False
    return view.cset is None or bool(points_inside(view, _box_points(lo, ext)).all())


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
        return gather(view, tile_points(tile), pad).reshape(tile.shape)
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
        _scatter(view, tile_points(tile), _flat_values(xp, value))
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


def element_offsets(view: View, pts: np.ndarray) -> np.ndarray:
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


def tile_points(tile: Tile) -> np.ndarray:
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
        if not box_inside(view, tile.lo, tile.ext):
            return _masked_box_load(tile, pad)
        try:
            block = _strided_block(view, tile.lo, tile.ext)
        except _Spill:
            return _gather_spill(view, tile_points(tile)).reshape(tile.shape)
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
    pts = tile_points(tile)
    return gather(view, pts, pad).reshape(tile.shape)


def fixed_block(tile: Tile, write: bool = False):
    """The tile's memory as one numpy view that every later access through an equal tile may use
    without its checks (for tapes, tape.py), or None: a box tile of a memory-backed view whose
    region has no written-mask (a region drops its mask once fully written and never gets one
    back; LX has none) and, for a store, is writable, with every point inside the view's
    coordinate set (a masked access keeps its step). Raises the access's fault as
    :func:`load_tile` / :func:`store_tile` would."""
    view = tile.view
    if tile.points is not None or type(view) is not View or \
            not caps_of(view.xp).host_arrays:
        return None
    region = view.region
    if region is not None and (region.mask is not None or (write and not region.writable)):
        return None
    if not box_inside(view, tile.lo, tile.ext):
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
    if view.hbm.lenient and pts.shape[0]:  # the reference's model: a store maps its bytes
        view.hbm.map_stores(_byte_addresses(view, pts), view.dtype.itemsize)
    for region, offs, sel in _region_groups(view, pts):
        if not region.writable:
            raise FaultSignal(f"store into read-only HBM region {region.name!r}")
        xp.put(xp.typed(region, view.dtype), offs, xp.take(vals, np.flatnonzero(sel)))
        region.version += 1
        if region.mask is not None:
            item = view.dtype.itemsize
            region.mask[(offs * item)[:, None] + np.arange(item)] = True
            _maybe_drop_mask(region)


def gather(view, pts: np.ndarray, pad=None) -> np.ndarray:
    """The values at global points ``pts`` (traversal order). Points outside the view's set (or
    every partition's) read as ``pad``; with ``pad`` None (index tables) they are a fault."""
    if isinstance(view, View):
        if pad is None:
            _points_check(view, pts)
        else:
            inside = points_inside(view, pts)
            if not inside.all():
                out = view.xp.full((pts.shape[0],), pad, view.dtype)
                if inside.any():
                    view.xp.put(out, np.flatnonzero(inside), gather(view, pts[inside]))
                _note_masked(view, pts.shape[0] - int(np.count_nonzero(inside)))
                return out
        try:
            offs = element_offsets(view, pts)
        except _Spill:
            return _gather_spill(view, pts)
        _check_written(view, offs)
        return view.xp.take(view.flat, offs)
    xp = view.xp
    out = xp.empty((pts.shape[0],), view.dtype)
    todo = np.ones(pts.shape[0], dtype=bool)
    for part in view.parts:
        sel = todo & points_inside(part, pts)
        if sel.any():
            xp.put(out, np.flatnonzero(sel), gather(part, pts[sel]))
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


def points_inside(view: View, pts: np.ndarray) -> np.ndarray:
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
        if not box_inside(view, tile.lo, tile.ext):
            _masked_box_store(tile, value)
            return
        try:
            block = _strided_block(view, tile.lo, tile.ext)
        except _Spill:
            _scatter_spill(view, tile_points(tile), _flat_values(xp, value))
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
    pts = tile_points(tile)
    _scatter(view, pts, _flat_values(xp, value))


def _scatter(view, pts: np.ndarray, vals) -> None:
    """Store ``vals`` at global points ``pts``; points outside the view's set (or every
    partition's) are skipped."""
    if isinstance(view, View):
        inside = points_inside(view, pts)
        if not inside.all():
            keep = np.flatnonzero(inside)
            _note_masked(view, pts.shape[0] - keep.shape[0])
            if keep.shape[0]:
                _scatter(view, pts[keep], view.xp.take(vals, keep))
            return
        try:
            offs = element_offsets(view, pts)
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
        sel = todo & points_inside(part, pts)
        if sel.any():
            _scatter(part, pts[sel], view.xp.take(vals, np.flatnonzero(sel)))
            todo &= ~sel
    _note_masked(view, int(np.count_nonzero(todo)))
