"""Cost handlers and cost categories of the op kinds whose dialect modules do not declare their
cost yet (registered into the registry's ``cost`` part on import).

A handler ``handler(walker, op, scale)`` charges ``op`` on one core (see walker.py); a category
name picks one of the walker's generic rules (:data:`~.walker.GENERIC_RULES`). Each entry here
moves to its dialect module (``dialects/<dialect>.py``) with the rest of that op kind; the
numbers must not change on the way.

Invariants: the evaluators (views, tiles, tile ids, constants) charge nothing and leave every
result they cannot evaluate as None; region handlers walk each region body with the scale of
its executions.
"""

from __future__ import annotations

import math

import numpy as np

from .. import registry
from ..ir import Op, ScalarType, TensorType
from .records import CoreCost
from .walker import (INT_BINARY, INT_CAST, CoreWalker, Tile, View, elements, itemsize,
                     static_or_dynamic, tile_points)

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


@registry.implements("cost", "arith.constant")
def _h_constant(w: CoreWalker, op: Op, scale: float) -> None:
    if op.results and isinstance(op.result.type, ScalarType):
        c = op.attrs.get("value")
        vals = getattr(c, "values", None)
        if vals and op.result.type.name in ("index", "i64", "i32", "i16", "i8", "i1"):
            v = vals[0]
            w.env[op.result] = int(v) if not isinstance(v, bool) else int(v)
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


@registry.implements("cost", "linalg.matmul", "linalg.matmul_transpose_b", "linalg.batch_matmul", "linalg.matvec")
def _h_matmul(w: CoreWalker, op: Op, scale: float) -> None:
    ins = op.groups.get("ins", [])
    if len(ins) < 2:
        w.charge(op, scale)
        return
    a, b = ins[0].type, ins[1].type
    out = op.result.type if op.results else op.groups["outs"][0].type
    if not (isinstance(a, TensorType) and isinstance(out, TensorType)) or not a.is_static:
        w.note(f"{op.loc}: {op.name} with dynamic shapes; counted as free")
        w.charge(op, scale)
        return
    k = a.shape[-1]
    n_out = out.num_elements or 0
    flops = 2.0 * n_out * k
    w.charge(op, scale, "matmul", flops / w.params.systolic_flops_per_cycle, flops=flops)
    w.cost.lx_bytes += (out.nbytes or 0) * scale
    for r in op.results:
        w.env[r] = None


@registry.implements("cost", "scf.for")
def _h_for(w: CoreWalker, op: Op, scale: float) -> None:
    lb, ub, step = (w.env.get(v) for v in op.groups["bounds"])
    body = op.regions[0].block
    iv = body.args[0] if body.args else None
    for r in op.results:
        w.env[r] = None
    for a in body.args[1:]:
        w.env[a] = None
    w.charge(op, scale)
    if not all(isinstance(v, int) for v in (lb, ub, step)) or step <= 0:
        w.note(f"{op.loc}: scf.for bounds unknown before running; one trip assumed")
        w.env[iv] = lb if isinstance(lb, int) else None
        w.block(body, scale)
        return
    trips = max(0, -(-(ub - lb) // step))
    if trips <= w.trip_limit:
        for t in range(trips):
            w.env[iv] = lb + t * step
            w.block(body, scale)
    else:
        w.env[iv] = lb
        w.block(body, scale * trips)


@registry.implements("cost", "scf.if")
def _h_if(w: CoreWalker, op: Op, scale: float) -> None:
    cond = w.env.get(op.operands[0]) if op.operands else None
    for r in op.results:
        w.env[r] = None
    w.charge(op, scale)
    regions = [r for r in op.regions if r.blocks]
    if isinstance(cond, int):
        chosen = regions[0] if cond else (regions[1] if len(regions) > 1 else None)
        if chosen is not None:
            w.block(chosen.block, scale)
        return
    w.note(f"{op.loc}: scf.if condition unknown before running; the costlier branch assumed")
    best, best_cost = None, -1.0
    for r in regions:
        probe = CoreWalker.__new__(CoreWalker)
        probe.__dict__.update(w.__dict__)
        probe.cost = CoreCost(w.cost.core)
        probe.env = dict(w.env)
        probe.block(r.block, scale)
        c = probe.cost.total(w.params.pipeline)
        if c > best_cost:
            best, best_cost = r, c
    if best is not None:
        w.block(best.block, scale)


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
    "free": (
        "tensor.empty", "tensor.expand_shape", "tensor.collapse_shape", "tensor.reshape",
        "tensor.extract", "tensor.dim", "tensor.cast", "scf.yield", "linalg.yield", "tensor.yield",
        "ktdp.yield_partial", "ktdp.yield_reduced", "return", "func.return", "linalg.index",
        "ktdp.region_terminator", "arith.bitcast"),
    "scalar": tuple(INT_BINARY) + tuple(sorted(INT_CAST)) + ("arith.cmpi", "arith.select"),
    "layout": (
        "linalg.transpose", "linalg.broadcast", "linalg.fill", "linalg.copy", "tensor.splat",
        "tensor.extract_slice", "tensor.insert_slice", "tensor.from_elements", "tensor.generate",
        "tensor.pad", "tensor.concat"),
    "vector": (
        "arith.absf", "arith.addf", "arith.cmpf", "arith.divf", "arith.extf", "arith.fptosi",
        "arith.fptoui", "arith.maxf", "arith.maximumf", "arith.maxnumf", "arith.minf",
        "arith.minimumf", "arith.minnumf", "arith.mulf", "arith.negf", "arith.remf",
        "arith.sitofp", "arith.subf", "arith.truncf", "arith.uitofp",
        "linalg.add", "linalg.div", "linalg.exp", "linalg.generic", "linalg.max", "linalg.min",
        "linalg.mul", "linalg.reduce", "linalg.sub",
        "math.absf", "math.absi", "math.ceil", "math.floor", "math.fma", "math.round"),
    "transcendental": (
        "math.cos", "math.erf", "math.exp", "math.exp2", "math.log", "math.log10", "math.log1p",
        "math.log2", "math.powf", "math.rsqrt", "math.sin", "math.sqrt", "math.tanh"),
}
for _category, _names in CATEGORY_TABLE.items():
    for _name in _names:
        registry.set_part("cost", _name, _category)
