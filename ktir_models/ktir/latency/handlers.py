"""Cost handlers and cost categories of the op kinds whose dialect modules do not declare their
cost yet (registered into the registry's ``cost`` part on import).

A handler ``handler(walker, op, scale)`` charges ``op`` on one core (see walker.py); a category
name picks one of the walker's generic rules (:data:`~.walker.GENERIC_RULES`). Each entry here
moves to its dialect module (``dialects/<dialect>.py``) with the rest of that op kind; the
numbers must not change on the way.

Invariants: the evaluators (views, tiles, tile ids; constants: dialects/arith.py) charge
nothing and leave every result they cannot evaluate as None; region handlers walk each region
body with the scale of its executions.
"""

from __future__ import annotations

import math

import numpy as np

from .. import registry
from ..ir import Op, TensorType
from .walker import CoreWalker, Tile, View, elements, itemsize, static_or_dynamic, tile_points

# ------------------------------------------------------------------------------------ ktdp
# views, tiles, tile ids: evaluated into walker.env, free


@registry.implements("cost", "ktdp.get_compute_tile_id")
def _h_tile_id(w: CoreWalker, op: Op, scale: float) -> None:
    for k, r in enumerate(op.results):
        w.env[r] = w.coords[k] if k < len(w.coords) else 0
    w.free(op)


@registry.implements("cost", "ktdp.construct_memory_view")
def _h_memory_view(w: CoreWalker, op: Op, scale: float) -> None:
    t = op.result.type
    off = w.env.get(op.groups.get("offset", [None])[0]) if op.groups.get("offset") else None
    sizes = static_or_dynamic(op.attrs.get("static_sizes"), op.groups.get("sizes", []), w.env)
    strides = static_or_dynamic(op.attrs.get("static_strides"), op.groups.get("strides", []), w.env)
    space = getattr(op.attrs.get("memory_space"), "kind", "hbm")
    offset_value = op.groups["offset"][0] if op.groups.get("offset") else None
    base_arg = offset_value.name.lstrip("%") if offset_value in w.fn.args else None
    w.env[op.result] = View(off if isinstance(off, int) else None, tuple(sizes),
                                tuple(strides), itemsize(t), "lx" if space == "lx" else "hbm",
                                base_arg)
    w.free(op)


@registry.implements("cost", "ktdp.construct_access_tile")
def _h_access_tile(w: CoreWalker, op: Op, scale: float) -> None:
    base = w.env.get(op.groups["base"][0]) if op.groups.get("base") else None
    idx = [w.env.get(v) for v in op.groups.get("indices", [])]
    syms = [w.env.get(v) for v in op.groups.get("symbols", [])]
    bmap = op.attrs.get("base_map")
    tset = op.attrs.get("access_tile_set")
    anchor = None
    if bmap is not None and all(isinstance(v, int) for v in idx):
        anchor = tuple(int(x) for x in bmap(idx))
    extents, npoints = None, 1
    if tset is not None and all(isinstance(s, int) for s in syms):
        try:
            box = tset.bounding_box(syms)
            if tset.box_bounds() is not None:
                extents = tuple(hi - lo + 1 for lo, hi in box)
                if anchor is not None:
                    anchor = tuple(a + lo for a, (lo, _) in zip(anchor, box))
                npoints = int(np.prod(extents)) if extents else 1
            else:
                npoints = len(tset.points(syms))
        except ValueError:
            npoints = tile_points(op.result.type)
    else:
        npoints = tile_points(op.result.type)
    base_type = op.attrs.get("base_type")
    if isinstance(base, View):
        w.env[op.result] = Tile(base, base.space, base.itemsize, anchor, extents, npoints)
    elif isinstance(base, tuple) and base and base[0] == "distributed":
        w.env[op.result] = Tile(None, base[1], base[2], None, None, npoints)
    else:
        size = itemsize(base_type) if base_type is not None else 2
        w.env[op.result] = Tile(None, "lx", size, None, None, npoints)
    w.free(op)


@registry.implements("cost", "ktdp.construct_indirect_access_tile")
def _h_indirect_tile(w: CoreWalker, op: Op, scale: float) -> None:
    base = w.env.get(op.groups["base"][0])
    space = base.space if isinstance(base, View) else "hbm"
    size = base.itemsize if isinstance(base, View) else 2
    n = tile_points(op.result.type)
    reads = n * len(op.groups.get("indirect", []))
    w.env[op.result] = Tile(None, space, size, None, None, n, indirect_reads=reads)
    w.free(op)

@registry.implements("cost", "ktdp.construct_distributed_memory_view")
def _h_distributed_view(w: CoreWalker, op: Op, scale: float) -> None:
    parts = [w.env.get(v) for v in op.operands]
    space = "hbm" if any(isinstance(p, View) and p.space == "hbm" for p in parts) else "lx"
    w.env[op.result] = ("distributed", space, itemsize(op.result.type))
    w.free(op)


# ------------------------------------------------------------------------------------ handlers


@registry.implements("cost", "ktdp.load")
def _h_load(w: CoreWalker, op: Op, scale: float) -> None:
    w.move(op, op.operands[0], scale, write=False)
    w.env[op.result] = None


@registry.implements("cost", "ktdp.store")
def _h_store(w: CoreWalker, op: Op, scale: float) -> None:
    if w.footprints is not None:
        w.footprints.append((op, w.env.get(op.operands[1])))
    w.move(op, op.operands[1], scale, write=True)


@registry.implements("cost", "ktdp.inter_tile_produce")
def _h_produce(w: CoreWalker, op: Op, scale: float) -> None:
    w.charge(op, scale)
    for r in op.regions:
        for b in r.blocks:
            for a in b.args:
                w.env[a] = None
            w.block(b, scale)
    for r in op.results:
        w.env[r] = None


@registry.implements("cost", "ktdp.inter_tile_reduce")
def _h_reduce_comm(w: CoreWalker, op: Op, scale: float) -> None:
    out = op.result.type if op.results else None
    nbytes = (out.nbytes or 0) if isinstance(out, TensorType) else 0
    hops = max(0, min(w.fn.num_cores, w.params.num_cores) - 1)
    moved = nbytes * hops
    w.charge(op, scale, "comm", moved / w.params.ring_bytes_per_cycle)
    # the combiner runs once per received partial
    n = elements(out) if out is not None else 1
    w.charge(op, scale * hops, "vector", math.ceil(n / w.params.simd_elems_per_cycle))
    for r in op.results:
        w.env[r] = None


# ------------------------------------------------------------------------------------ categories
# Op kinds charged by a generic rule, by category: waiting for their dialect modules, which take
# their entries with them. Op kinds in none of these (and with no handler) keep the walker's
# name-based rule.
CATEGORY_TABLE: dict[str, tuple[str, ...]] = {
    # (arith, math, tensor, linalg, scf and return declare theirs in their dialect modules; the
    # tensor and arith names here are kinds no dialect module defines, costed should a program
    # name them)
    "free": (
        "tensor.reshape", "tensor.dim", "tensor.cast", "ktdp.yield_partial", "ktdp.yield_reduced",
        "func.return", "ktdp.region_terminator"),
    "scalar": ("arith.ceildivui",),
    "layout": ("tensor.pad", "tensor.concat"),
}
for _category, _names in CATEGORY_TABLE.items():
    for _name in _names:
        registry.set_part("cost", _name, _category)
