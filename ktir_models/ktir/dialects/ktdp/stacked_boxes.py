"""Where the stacked box tiles of every core lie in their view's array (the stacked loads and
stores of transfer.py, and ragged_steps' loads shared by groups).

A stacked tile (stacked_values.StackedTile) holds one box per core. :func:`box_access` checks once
per (view, corners) that every box lies inside the view's box and its strided array, and finds
the one strided [C, *ext] view of all boxes when the corners are in arithmetic progression (or
the [C/g, g, *ext] one of a progression of progressions). Anything the per-core path must decide
or report (a general coordinate set, a box outside the set or the memory, a region with a
written-mask) raises stacked_values.Fallback: the op then runs core by core, with its faults.
"""

from __future__ import annotations

import numpy as np

from ...exec.memory_views import View
from ...exec.stacked_values import Fallback, StackedTile

_as_strided = np.lib.stride_tricks.as_strided


class BoxAccess:
    """Where a stacked tile's boxes lie in its view's array, checked once per (view, corners):
    ``slices`` (one box of ``view.nd`` per core) and, when the corners are in arithmetic
    progression, ``start``/``core_stride`` for one strided [C, *ext] view of all of them; else,
    when they form a progression of progressions (core c = i*g + j at corner base + i*d1 + j*d2,
    e.g. grouped-query heads sharing a KV head), ``grouped``: a read-only strided [C/g, g, *ext]
    view; ``disjoint``: no two cores' boxes share memory (computed by the first store)."""

    __slots__ = ("view", "generation", "slices", "start", "core_stride", "disjoint", "local",
                 "ext", "grouped")


def boxes_disjoint(a: "BoxAccess") -> bool:
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


def box_access(cache: dict, st: StackedTile, hbm) -> BoxAccess:
    """The checked placement of ``st`` (raises Fallback for anything the per-core path must
    decide or report: a general coordinate set, a box outside the set or the memory)."""
    key = st.key
    hit = cache.get(key)
    view = st.view
    if hit is not None and hit.view is view and hit.generation == hbm.generation:
        return hit
    if type(view) is not View or view.cset is not None or view.nd is None:
        raise Fallback
    los = st.los
    lo = np.asarray(view.lo, np.int64)
    hi = np.asarray(view.hi, np.int64)
    ext = np.asarray(st.ext, np.int64)
    if (ext <= 0).any() or (los < lo).any() or (los + ext - 1 > hi).any():
        raise Fallback  # outside the coordinate set: the per-core run masks those points
    local = los - lo
    nd = view.nd
    if (local + ext > np.asarray(nd.shape, np.int64)).any():
        raise Fallback
    a = BoxAccess()
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


def _grouped(a: BoxAccess, local: np.ndarray, nd):
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


def gathered_boxes(a: BoxAccess) -> np.ndarray:
    """A fresh C-contiguous [C, *ext] copy of the cores' boxes (corners not in progression)."""
    if a.grouped is not None:
        g = a.grouped
        return np.ascontiguousarray(g).reshape((g.shape[0] * g.shape[1],) + g.shape[2:])
    nd = a.view.nd
    return np.stack([nd[s] for s in a.slices])


def boxes_block(a: BoxAccess, C: int, ext: tuple, writeable: bool):
    """All cores' boxes as one strided [C, *ext] view, or None (corners not in progression)."""
    if a.start is None:
        return None
    first = a.view.nd[a.start]
    return _as_strided(first, shape=(C,) + tuple(ext), strides=(a.core_stride,) + first.strides,
                       writeable=writeable)


def read_boxes(cache: dict, st: StackedTile, hbm, C: int):
    """(the [C, ...] data of ``st``'s boxes in tile order: a read-only view of memory where the
    boxes lie in progression, else a fresh copy; their region). Raises Fallback for what the
    per-core path must decide or report (:func:`box_access`), and for regions with a written-mask."""
    region = st.view.region
    if region is None or region.mask is not None:
        raise Fallback
    a = box_access(cache, st, hbm)
    data = boxes_block(a, C, st.ext, False)
    if data is None:
        data = gathered_boxes(a)
    if st.perm is not None:
        data = data.transpose((0,) + tuple(p + 1 for p in st.perm))
    return data, region
