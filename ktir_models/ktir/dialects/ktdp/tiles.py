"""``ktdp.construct_access_tile`` and ``ktdp.construct_indirect_access_tile``: access tiles.

An access tile (memory_views.Tile) names the points of a view one load or store touches, in
traversal order. A direct tile whose set is a box in a permutation order is a *box* (lower corner
= base_map(indices) + the set's lower corner, extents, permutation): its static geometry is read
once at build time (:func:`tile_geometry`, :func:`static_box`). Any other set, and every indirect
tile (subscripts read from index views), is a list of explicit points.

A tile whose set leaves positions of its type unfilled (parse/tile_types.py) faults when used.
The stacked form of a box tile with per-core corners is a stacked_values.StackedTile.
"""

from __future__ import annotations

import numpy as np

from ...ir import affine
from ...ir.affine import AffineMap, AffineSet
from ...ir.errors import FaultSignal, Location
from ...ir.nodes import AccessTileType, INT_TYPES, MemRefType, Op, TensorType, Value
from ...latency.walker import (CoreWalker, Tile as CostTile, View as CostView, itemsize,
                               tile_points as type_points)
from ...exec.memory_views import Tile
from ...parse import generic_form, tile_types
from ...parse.tile_types import unfilled_fault
from ...ir.registry import implements, set_part
from ...exec.stacked_values import StackedTile
from ...verify.rules import Rule, compatible, elem, fail
from .access import gather
from .index_code import anchor_fn, values_fn


# -- syntax -----------------------------------------------------------------------------------

def _subscript_expr(p, captured: list[Value], table: dict[str, tuple],
                    stop: tuple[str, ...]) -> affine.Expr:
    """Parse an affine expression over SSA names; new outer names are appended to ``captured``."""
    start = p.pos
    # fast path: a lone SSA name or integer (the common `%c0`, `%k7`, `3`)
    if p.texts[start + 1] in stop:
        kind, text = p.kinds[start], p.texts[start]
        if kind == "int":
            p.pos += 1
            return ("c", int(text))
        if kind == "ssa":
            p.pos += 1
            ref = table.get(text)
            if ref is None:
                captured.append(p.lookup(text, start))
                ref = ("d", len(captured) - 1)
                table[text] = ref
            return ref
    depth = 0
    while True:
        t = p.peek()
        if p.kind() == "eof":
            p.fail("unexpected end of file inside a subscript")
        if depth == 0 and t in stop:
            break
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        p.pos += 1
    toks = [(p.kinds[j] if p.kinds[j] != "int" else "num", p.texts[j], j)
            for j in range(start, p.pos)]
    if not toks:
        p.fail("empty subscript", start)

    def resolve(name: str):
        if not name.startswith("%"):
            return ("d", -1) if name in ("floordiv", "ceildiv", "mod") else None
        if name in table:
            return table[name]
        v = p.lookup(name, start)
        captured.append(v)
        ref = ("d", len(captured) - 1)
        table[name] = ref
        return ref

    ep = affine.ExprParser([(k if k != "ssa" else "ssa", t, j) for k, t, j in toks], resolve)
    try:
        e = ep.parse_expr()
        if ep.pos != len(toks):
            raise affine.AffineSyntaxError(f"unexpected {toks[ep.pos][1]!r} in subscript",
                                           toks[ep.pos][2])
    except affine.AffineSyntaxError as exc:
        p.fail(str(exc), exc.offset if isinstance(exc.offset, int) and exc.offset >= start
               else start)
    return e


def _symbols_clause(p) -> list[Value]:
    if p.peek() == "[" and p.peek(1) == "symbols":
        p.pos += 2
        p.expect("(")
        vals = p.operand_list(")")
        p.expect(")")
        p.expect("]")
        return vals
    if p.peek() == "symbols":
        p.pos += 1
        p.expect("(")
        vals = p.operand_list(")")
        p.expect(")")
        return vals
    return []


@implements("syntax", "ktdp.construct_access_tile")
def _h_access_tile(p, op: Op):
    base = p.operand()
    p.expect("[", "opening the subscripts")
    captured: list[Value] = []
    table: dict[str, tuple] = {}
    exprs: list = []
    if not p.accept("]"):
        while True:
            exprs.append(_subscript_expr(p, captured, table, (",", "]")))
            if p.accept(","):
                continue
            p.expect("]", "closing the subscripts")
            break
    syms = _symbols_clause(p)
    op.attrs.update(p.attr_dict())
    generic_form.default_order(op, "access_tile_set", "access_tile_order")
    p.expect(":", "before the base type")
    base_t = p.parse_type()
    p.expect("->")
    result = p.parse_type()
    if isinstance(result, AccessTileType):
        op.attrs["access_tile_set"] = tile_types.clip_set_to_type(
            op.attrs.get("access_tile_set"), op.attrs.get("access_tile_order"), result.shape)
    op.attrs["base_map"] = affine.AffineMap(len(captured), 0, tuple(exprs))
    op.attrs["base_type"] = base_t
    op.groups = {"base": [base], "indices": captured, "symbols": syms}
    op.operands = [base] + captured + syms
    return [result]


@implements("syntax", "ktdp.construct_indirect_access_tile")
def _h_indirect_tile(p, op: Op):
    p.expect("intermediate_variables", "after construct_indirect_access_tile")
    p.expect("(")
    var_names: list[tuple[str, Location]] = []
    while not p.accept(")"):
        vi = p.pos
        var_names.append((p.expect_kind("ssa", "an intermediate variable"), p.loc(vi)))
        if not p.accept(","):
            p.expect(")")
            break
    base = p.operand()
    p.expect("[", "opening the subscripts")
    captured: list[Value] = []
    nvars = len(var_names)
    # variables come after captured values in the domain; give them provisional refs
    table: dict[str, tuple] = {n: ("v", k) for k, (n, _) in enumerate(var_names)}
    # A variable named like a value of an enclosing scope (`intermediate_variables(%c2, %k)`)
    # stands for that value plus its iterator: only sound when the iterator is pinned to 0,
    # which verify.py requires (outer_variables records them).
    outer: list[tuple[int, str]] = []
    for k, (n, _) in enumerate(var_names):
        if any(n in scope for scope in p.scopes):
            captured.append(p.lookup(n, p.pos))
            table[n] = ("+", ("v", k), ("d", len(captured) - 1))
            outer.append((k, n))
    subs: list[tuple] = []  # ("direct", expr) | ("indirect", index_view, [exprs])
    while True:
        if p.peek() == "ind":
            p.pos += 1
            p.expect("(")
            iv = p.operand()
            p.expect("[")
            exprs = []
            while True:
                exprs.append(_subscript_expr(p, captured, table, (",", "]")))
                if p.accept(","):
                    continue
                p.expect("]")
                break
            p.expect(")", "closing ind(...)")
            subs.append(("indirect", iv, exprs))
        else:
            subs.append(("direct", _subscript_expr(p, captured, table, (",", "]"))))
        if p.accept(","):
            continue
        p.expect("]", "closing the subscripts")
        break
    syms = _symbols_clause(p)
    op.attrs.update(p.attr_dict())
    p.expect(":", "before the operand types")
    types = p.type_list()
    p.expect("->")
    result = p.parse_type()
    ncap = len(captured)

    def fix(e):  # ("v", k) -> ("d", ncap + k)
        if e[0] == "v":
            return ("d", ncap + e[1])
        if e[0] in ("c", "d", "s"):
            return e
        return (e[0], fix(e[1]), fix(e[2]))

    kinds, maps, index_views = [], [], []
    for s in subs:
        if s[0] == "direct":
            kinds.append("direct")
            maps.append(affine.AffineMap(ncap + nvars, 0, (fix(s[1]),)))
        else:
            kinds.append("indirect")
            maps.append(affine.AffineMap(ncap + nvars, 0, tuple(fix(e) for e in s[2])))
            index_views.append(s[1])
    op.attrs["subscript_kinds"] = kinds
    op.attrs["subscript_maps"] = maps
    if isinstance(result, AccessTileType):
        generic_form.default_order(op, "variables_space_set", "variables_space_order")
        op.attrs["variables_space_set"] = tile_types.clip_set_to_type(
            op.attrs.get("variables_space_set"), op.attrs.get("variables_space_order"),
            result.shape)
    op.attrs["types"] = types
    op.attrs["num_variables"] = nvars
    op.attrs["variable_names"] = [n for n, _ in var_names]
    if outer:
        op.attrs["outer_variables"] = [k for k, _ in outer]
    op.groups = {"base": [base], "indirect": index_views, "captured": captured, "symbols": syms}
    op.operands = [base] + index_views + captured + syms
    return [result]


# -- verification -----------------------------------------------------------------------------

def _access_tile(op: Op) -> None:
    base = op.groups["base"][0]
    if not isinstance(base.type, (MemRefType, TensorType)):
        fail(f"access tile base {base.name} must be a memory view, got {base.type}")
    declared = op.attrs.get("base_type")
    if declared is not None and not compatible(base.type, declared):
        fail(f"base {base.name} has type {base.type}, but the op says {declared}")
    t = op.results[0].type
    if not isinstance(t, AccessTileType):
        fail(f"result must be an access tile, got {t}")
    s, order = op.attrs.get("access_tile_set"), op.attrs.get("access_tile_order")
    if not isinstance(s, AffineSet):
        fail("access_tile_set must be an affine_set")
    if not isinstance(order, AffineMap):
        fail("access_tile_order must be an affine_map")
    bm: AffineMap = op.attrs["base_map"]
    rank = len(base.type.shape)
    if bm.num_results != rank:
        fail(f"{bm.num_results} subscripts for a view of rank {rank}")
    if bm.num_dims != len(op.groups["indices"]) or bm.num_syms:
        fail(f"base_map {bm} takes {bm.num_dims} dims and {bm.num_syms} symbols, but "
              f"{len(op.groups['indices'])} index operands are given")
    if s.num_dims != rank or len(t.shape) != rank:
        fail(f"access_tile_set has {s.num_dims} dims, the tile rank is {len(t.shape)} and the "
              f"view rank is {rank}: they must be equal")
    if order.num_dims != s.num_dims or order.num_results != s.num_dims:
        fail("access_tile_order must be a square map with as many dims as access_tile_set")
    if s.num_syms != len(op.groups["symbols"]):
        fail(f"access_tile_set has {s.num_syms} symbols but {len(op.groups['symbols'])} "
              "symbol operands are given")
    for v in op.groups["indices"] + op.groups["symbols"]:
        if elem(v.type) not in INT_TYPES:
            fail(f"subscript value {v.name} must be an index, got {v.type}")


def _indirect_tile(op: Op) -> None:
    base = op.groups["base"][0]
    if not isinstance(base.type, MemRefType):
        fail(f"base {base.name} must be a memory view, got {base.type}")
    t = op.results[0].type
    kinds = op.attrs["subscript_kinds"]
    if len(kinds) != len(base.type.shape):
        fail(f"{len(kinds)} subscripts for a view of rank {len(base.type.shape)}")
    s = op.attrs.get("variables_space_set")
    order = op.attrs.get("variables_space_order")
    if not isinstance(s, AffineSet) or not isinstance(order, AffineMap):
        fail("variables_space_set (affine_set) and variables_space_order (affine_map) are required")
    if s.num_dims != op.attrs["num_variables"]:
        fail(f"{op.attrs['num_variables']} intermediate variables but variables_space_set has "
              f"{s.num_dims} dims")
    if order.num_dims != s.num_dims or order.num_results != s.num_dims:
        fail("variables_space_order must be a square map over the variables")
    if not isinstance(t, AccessTileType) or len(t.shape) != s.num_dims:
        fail(f"result {t} must be an access tile with one dim per intermediate variable")
    maps = op.attrs["subscript_maps"]
    for iv, m in zip(op.groups["indirect"],
                     [m for k, m in zip(kinds, maps) if k == "indirect"]):
        if not isinstance(iv.type, MemRefType) or iv.type.elem not in INT_TYPES:
            fail(f"index view {iv.name} must be a memref of integers, got {iv.type}")
        if m.num_results != len(iv.type.shape):
            fail(f"index view {iv.name} has rank {len(iv.type.shape)} but {m.num_results} "
                  "subscripts")
    _outer_variables(op, s)


def _outer_variables(op: Op, s: AffineSet) -> None:
    """An intermediate variable named like a value of an enclosing scope stands for that value
    (the parser adds it to the variable's iterator), which is only what the program means when
    the iterator cannot move: its range in variables_space_set must be exactly [0, 0]."""
    names = op.attrs["variable_names"]
    for k in op.attrs.get("outer_variables", ()):
        try:
            lo, hi = s.bounding_box(tuple(0 for _ in range(s.num_syms)))[k] if not s.num_syms \
                else (None, None)
        except ValueError:
            lo = hi = None
        if (lo, hi) != (0, 0):
            where = f"[{lo}, {hi}]" if lo is not None else "a range that is not a constant"
            fail(f"intermediate variable {names[k]} is an outer SSA value, but "
                  f"variables_space_set lets it range over {where}: iterating it would replace "
                  "the value by the iterator; pin its range to [0, 0] or use a fresh name")


set_part("verify", "ktdp.construct_access_tile",
         Rule((1, None), (1, 1), ("access_tile_set", "access_tile_order"), check=_access_tile))
set_part("verify", "ktdp.construct_indirect_access_tile",
         Rule((1, None), (1, 1), ("variables_space_set", "variables_space_order"),
              check=_indirect_tile))


# -- tile geometry ----------------------------------------------------------------------------

def static_box(box) -> tuple[tuple, tuple]:
    """(lower corner, extents) of a box without symbols (``AffineSet.box_bounds``)."""
    los = tuple(b.lo[1] if b.lo[0] == "c" else affine.eval_bound(b.lo, ()) for b in box)
    return los, tuple(affine.eval_bound(b.hi, ()) - lo + 1 for b, lo in zip(box, los))


def tile_geometry(s: affine.AffineSet, order: affine.AffineMap):
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
    message = unfilled_fault(op, set_key, order_key)
    if message is None or not c.users.get(id(op.result)):
        return None

    def step(env):
        raise FaultSignal(message)

    return step


# -- steps ------------------------------------------------------------------------------------

@implements("build", "ktdp.construct_access_tile")
def build_access_tile(c, op):
    unfilled = _unfilled_step(c, op, "access_tile_set", "access_tile_order")
    if unfilled is not None:
        return unfilled
    s: affine.AffineSet = op.attrs["access_tile_set"]
    order: affine.AffineMap = op.attrs["access_tile_order"]
    bm: affine.AffineMap = op.attrs["base_map"]
    ibase = c.slot(op.groups["base"][0])
    idx_fn = values_fn(c, op.groups["indices"])
    sym_fn = values_fn(c, op.groups["symbols"])
    ir = c.slot(op.result)
    box, perm, identity, is_perm = tile_geometry(s, order)
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

            lo_fn = anchor_fn(c, bm, op.groups["indices"], los)

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


@implements("build", "ktdp.construct_indirect_access_tile")
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
    cap_fn = values_fn(c, op.groups["captured"])
    sym_fn = values_fn(c, op.groups["symbols"])
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
                idx = to_host(gather(iview, np.stack(vals, axis=1))).astype(np.int64)
                if idx.size and idx.min() < 0:
                    raise FaultSignal("indirect index value is negative")
                coords.append(idx)
        pts = np.stack(coords, axis=1) if coords else np.zeros((n, 0), np.int64)
        shape = tshape if all(d is not None for d in tshape) else (n,)
        env[ir] = Tile(env[ibase], None, None, None, pts, tuple(shape))

    return step


# -- stacked step -----------------------------------------------------------------------------

@implements("stacked", "ktdp.construct_access_tile")
def stacked_access_tile(b, op, plain):
    c = b.c
    base = op.groups["base"][0]
    if b.varies(base) or op.groups["symbols"]:
        return None
    if unfilled_fault(op, "access_tile_set", "access_tile_order") is not None:
        return None  # the plain step (its fault, or nothing for an unused tile)
    s, order = op.attrs["access_tile_set"], op.attrs["access_tile_order"]
    box, perm, _, is_perm = tile_geometry(s, order)
    if box is None or not is_perm or s.num_syms:
        return None
    los, ext = static_box(box)
    shape = tuple(ext[p] for p in perm) if perm is not None else ext
    lo_fn = anchor_fn(c, op.attrs["base_map"], op.groups["indices"], los)
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


# -- cost -------------------------------------------------------------------------------------

# evaluated into the latency walker's env (its abstract views and tiles), charging nothing

@implements("cost", "ktdp.construct_access_tile")
def cost_access_tile(w: CoreWalker, op: Op, scale: float) -> None:
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
            npoints = type_points(op.result.type)
    else:
        npoints = type_points(op.result.type)
    base_type = op.attrs.get("base_type")
    if isinstance(base, CostView):
        w.env[op.result] = CostTile(base, base.space, base.itemsize, anchor, extents, npoints)
    elif isinstance(base, tuple) and base and base[0] == "distributed":
        w.env[op.result] = CostTile(None, base[1], base[2], None, None, npoints)
    else:
        size = itemsize(base_type) if base_type is not None else 2
        w.env[op.result] = CostTile(None, "lx", size, None, None, npoints)
    w.free(op)


@implements("cost", "ktdp.construct_indirect_access_tile")
def cost_indirect_tile(w: CoreWalker, op: Op, scale: float) -> None:
    base = w.env.get(op.groups["base"][0])
    space = base.space if isinstance(base, CostView) else "hbm"
    size = base.itemsize if isinstance(base, CostView) else 2
    n = type_points(op.result.type)
    reads = n * len(op.groups.get("indirect", []))
    w.env[op.result] = CostTile(None, space, size, None, None, n, indirect_reads=reads)
    w.free(op)

