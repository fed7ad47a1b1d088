"""The run-time values of ktdp's memory ops: views (plain, distributed) and access tiles.

* :class:`View` -- a plain memory view: byte address in HBM or in one core's LX, element dtype,
  sizes/strides (elements), and its coordinate set (a box ``lo..hi`` or a general affine set).
  Coordinates used to access a view are *global* (in its coordinate set); the local coordinate is
  ``coord - lo`` (the set's lower corner), so a partition of a distributed view is addressed as the
  primer describes. A view whose box lies inside one HBM region keeps a strided array of it
  (``nd``); ``flat`` is the whole backing memory as a 1-D array of the element type (None when no
  memory backs the address).
* :class:`DistView` -- partitions glued into one logical tensor
  (``construct_distributed_memory_view``).
* :class:`Tile` -- either a *box* (lower corner, extents, traversal permutation: loads and stores
  are strided slices, transposed by the permutation) or explicit *points* (an int array [n, rank]
  in traversal order: gathers/scatters with one fancy index).

These are plain records: how they are read and written is dialects/ktdp/access.py. They sit in
this low layer because the stacked representation (stacked_values.py) makes per-core tiles too.
"""

from __future__ import annotations

from ..ir import affine
from ..ir.nodes import MemorySpace


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
