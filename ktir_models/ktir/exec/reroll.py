"""Unrolled repeats as a batch dimension: N isomorphic, independent op groups run as one.

Emitted single-core kernels often unroll a loop by hand: the scratchy decode attention node is a
prefix (views, shared constants, the mask load) followed by 9 copies of one head's ~68 ops that
differ only in a few ``arith.constant`` values (the head's columns). :func:`find_repeats` finds
such a structure; :func:`compile_rerolled` then compiles the prefix and one group with
those differing constants as per-group values [N], and builds stacked steps (stacked.py) over N
"virtual cores", one per group: every head in one pass of ~68 steps instead of ~600.

The same holds on a grid: virtual core v runs group v % G of core v // G, so the 9-core scratchy
prefill attention runs its 9 heads x 32 unrolled rows as 288 virtual cores. Groups may also differ
in the static shapes of their tensors and tiles (row r of that attention reads r + 1 keys): then
the template group is the one with the largest shapes, run on padded values under the rules of
ragged_steps.py, which declines whatever padding could change.

The analysis costs a few milliseconds per long kernel (~5 ms for the 629-op smollm2 attention,
more than one run saves), so a plan does it at its *second* run (plan.Plan.run): a program run
once never pays, one run again and again (passes, generation) pays once.

Accepted only when running the groups side by side cannot change a byte:

* the top level is ``prefix + N groups + terminator``; group g's ops correspond one to one to
  group 0's (same op kinds, types up to static shapes, attributes, nested bodies), and every
  operand is either the corresponding value of the same group or the *same* value from the prefix;
* only constants and static shapes may differ between groups, and no value of a group is used
  outside it;
* no byte that any op stores to lies in a view that any op loads from, so no group reads what the
  prefix, another group or itself wrote, and running the function again writes the same bytes: a
  fault raised by the rerolled run is reported by rerunning the plain plan, which locates it at
  the right group's op exactly as without rerolling. Views are built from address arguments, so
  this is checked for each run's addresses (two arguments may point at the same buffer, e.g. an
  in-place kernel): a run whose stored and loaded views overlap runs the plain plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..backends.capabilities import caps_of
from ..ir.nodes import AccessTileType, DenseConstant, Function, Op, ScalarType, TensorType
from ..ir.registry import part

_MIN_OPS = 40  # below this the plain steps cost less than the detection is worth


@dataclass
class Repeats:
    """``fn``'s top level: ops[:start] prefix, then ``count`` groups of ``period`` ops, then the
    terminator; ``differing``: positions (within a group) of constants whose value differs;
    ``footprints``: the views loads and stores go through (checked per run); ``template``: the
    group to compile (every ragged value has its largest shape there); ``ragged``: (position,
    result index) -> each group's static shape, for results whose shape differs between groups."""

    start: int
    period: int
    count: int
    differing: list[int]
    footprints: list
    template: int = 0
    ragged: dict = field(default_factory=dict)


@dataclass
class Rerolled:
    """A function's repeats as a stacked plan over ``template`` (the rerolled compile's slots);
    ``disjoint(values)`` tells whether a run with these arguments may use it."""

    plan: object
    template: list
    arg_slots: list[int]
    disjoint: object
    slots: dict  # id(value) -> slot of the rerolled compile
    ops: list  # the ops it runs: the prefix and the template group
    cores: np.ndarray  # the real core of each virtual core (group v % G of core v // G)


_REPR: dict = {}  # id(attribute object) -> (object, its repr); parsed attributes are shared


def _repr(v) -> str:
    hit = _REPR.get(id(v))
    if hit is not None and hit[0] is v:
        return hit[1]
    text = repr(v)
    if len(_REPR) > 100_000:
        _REPR.clear()
    _REPR[id(v)] = (v, text)
    return text


def _kind(t):
    """A type without its shape: tensors and access tiles of one rank and element type agree
    (ragged groups); other types by identity (types are shared objects per text)."""
    if isinstance(t, ScalarType):
        return t.name
    if isinstance(t, TensorType):
        return ("tensor", len(t.shape), t.elem)
    if isinstance(t, AccessTileType):
        return ("tile", len(t.shape))
    return id(t)


def _signature(op: Op):
    """A cheap key for finding the period; :func:`_iso` then checks the correspondence in
    full."""
    return (op.name, len(op.operands), len(op.regions), tuple(_kind(r.type) for r in op.results))


def _reshaped(a, b) -> bool:
    """Types ``a`` and ``b`` differ in their static shape only."""
    return type(a) is type(b) and isinstance(a, (TensorType, AccessTileType)) and \
        _kind(a) == _kind(b) and all(isinstance(x, int) for x in a.shape + b.shape)


def _tile_corner(op: Op):
    """The lower corner of an access tile whose set is the box of its type's shape in identity
    order (a ragged tile: groups differ in the box's extents only), else None."""
    from ..dialects.ktdp.tiles import static_box, tile_geometry

    s = op.attrs["access_tile_set"]
    box, _, identity, _ = tile_geometry(s, op.attrs["access_tile_order"])
    if box is None or not identity or s.num_syms:
        return None
    los, ext = static_box(box)
    return los if ext == tuple(op.result.type.shape) else None


def _same_splat(a: Op, b: Op) -> bool:
    """Two dense splat constants of one value (their tensor types may differ in shape)."""
    va, vb = a.attrs.get("value"), b.attrs.get("value")
    return isinstance(va, DenseConstant) and isinstance(vb, DenseConstant) and va.splat and \
        vb.splat and isinstance(a.result.type, TensorType) and \
        _repr(va.values) == _repr(vb.values)


def _period(sig: list[int]) -> tuple[int, int, int] | None:
    """(start, period, count) with sig[start:] = count repeats of one period, count >= 2; the
    shortest prefix wins, then the shortest period."""
    n = len(sig)
    for start in range(0, min(n // 2, 200)):
        first = sig[start]
        m = n - start
        for period in [p for p in range(2, int(m ** 0.5) + 1) if m % p == 0] + \
                [m // p for p in range(int(m ** 0.5), 1, -1) if m % p == 0 and m // p > p]:
            if sig[start + period] != first:
                continue
            block = sig[start:start + period]
            count = (n - start) // period
            if all(sig[start + g * period:start + (g + 1) * period] == block
                   for g in range(1, count)):
                return start, period, count
    return None


def _same_attrs(a: Op, b: Op, *skip: str) -> bool:
    """Equal attributes, compared by identity, else by printed form (parsed attribute objects
    need not define ==); the types an op's text spells out (``types``, ``in_types``, ...) may
    differ in static shapes, as its operands' and results' types may."""
    if a.attrs.keys() != b.attrs.keys():
        return False
    for k, va in a.attrs.items():
        vb = b.attrs[k]
        if k not in skip and va is not vb and _repr(va) != _repr(vb) and \
                not _written_types_agree(va, vb):
            return False
    return True


def _written_types_agree(x, y) -> bool:
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and bool(x) and all(_written_types_agree(p, q)
                                                     for p, q in zip(x, y))
    return isinstance(x, (TensorType, AccessTileType, ScalarType)) and (x == y or _reshaped(x, y))


def _iso(a: Op, b: Op, vmap: dict, differing: list, pos: int, ragged: set) -> bool:
    """``a`` (group g) corresponds to ``b`` (group 0): same kind, attributes, nested bodies, and
    operands mapped through ``vmap`` (group g value id -> group 0 value) or shared. A top-level
    result may differ in its static shape (added to ``ragged`` as (pos, result index)) where the
    op says nothing else about the shape: splat constants, box access tiles, shape-generic ops."""
    if a.name != b.name or len(a.operands) != len(b.operands) or \
            len(a.results) != len(b.results) or len(a.regions) != len(b.regions) or \
            {k: len(v) for k, v in a.groups.items()} != {k: len(v) for k, v in b.groups.items()}:
        return False
    for va, vb in zip(a.operands, b.operands):
        if vmap.get(id(va), va) is not vb:
            return False
    reshaped = False
    for k, (ra, rb) in enumerate(zip(a.results, b.results)):
        if ra.type is not rb.type and str(ra.type) != str(rb.type):
            if pos < 0 or not _reshaped(ra.type, rb.type):
                return False
            ragged.add((pos, k))
            reshaped = True
    if a.name == "arith.constant":
        va, vb = a.attrs.get("value"), b.attrs.get("value")
        if va is not vb and _repr(va) != _repr(vb) and not (reshaped and _same_splat(a, b)):
            if pos < 0 or reshaped:
                return False  # a constant inside a nested body: not a per-group value
            if pos not in differing:
                differing.append(pos)
        if not _same_attrs(a, b, "value"):
            return False
    elif reshaped and a.name == "ktdp.construct_access_tile":
        corner = _tile_corner(a)
        if corner is None or corner != _tile_corner(b) or \
                not _same_attrs(a, b, "access_tile_set"):
            return False
    elif not _same_attrs(a, b):
        return False
    for ra, rb in zip(a.results, b.results):
        vmap[id(ra)] = rb
    for xa, xb in zip(a.regions, b.regions):
        if len(xa.blocks) != len(xb.blocks):
            return False
        for ba, bb in zip(xa.blocks, xb.blocks):
            if len(ba.ops) != len(bb.ops) or len(ba.args) != len(bb.args):
                return False
            for va, vb in zip(ba.args, bb.args):
                vmap[id(va)] = vb
            if not all(_iso(oa, ob, vmap, differing, -1, ragged) for oa, ob in zip(ba.ops, bb.ops)):
                return False
    return True


def _walk(op: Op):
    yield op
    for r in op.regions:
        for b in r.blocks:
            for o in b.ops:
                yield from _walk(o)


@dataclass(frozen=True)
class _Footprint:
    """The memory a view can touch, from its address argument: bytes [address * unit + lo,
    address * unit + hi) of its memory space. ``arg``: the function argument holding the address
    (None: the constant ``const``)."""

    space: str
    arg: int | None
    const: int
    dtype: object
    span: int  # bytes from the view's first element to one past its last
    stored: bool


def _footprints(fn: Function) -> list[_Footprint] | None:
    """Every view a load or store goes through, or None when one is not analysable (a view not
    built directly from a function argument or constant, dynamic sizes or strides, indirect
    tiles, inter-tile ops)."""
    args = {id(a): k for k, a in enumerate(fn.args)}
    out = []
    for top in fn.body.block.ops:
        for op in _walk(top):
            if op.name not in ("ktdp.load", "ktdp.store"):
                if op.name.startswith("ktdp.") and op.name not in (
                        "ktdp.construct_memory_view", "ktdp.construct_access_tile",
                        "ktdp.get_compute_tile_id"):
                    return None  # indirect tiles, inter-tile ops, ...: not analysed here
                continue
            tile = op.operands[0] if op.name == "ktdp.load" else op.operands[1]
            owner = tile.owner
            if owner is None or owner.name != "ktdp.construct_access_tile":
                return None
            view = owner.groups["base"][0].owner
            if view is None or view.name != "ktdp.construct_memory_view":
                return None
            sizes, strides = view.attrs.get("static_sizes"), view.attrs.get("static_strides")
            if not sizes or any(x is None for x in sizes) or any(x is None or x <= 0 for x in strides):
                return None
            addr = view.operands[0]
            const = None
            if id(addr) not in args:
                if addr.owner is None or addr.owner.name != "arith.constant":
                    return None
                const = addr.owner.attrs["value"].values[0]
                if not isinstance(const, int):
                    return None
            dtype = view.result.type.dtype
            span = (sum((n - 1) * st for n, st in zip(sizes, strides)) + 1) * dtype.itemsize
            space = getattr(view.attrs.get("memory_space"), "kind", "hbm")
            out.append(_Footprint(space, args.get(id(addr)), const or 0, dtype, span,
                                  op.name == "ktdp.store"))
    return out


def _memory_is_independent(prints: list[_Footprint] | None) -> bool:
    """Statically: every access is analysable (:func:`_footprints`) and no view Value is both
    stored to and loaded from. Whether differently named views overlap depends on the addresses
    a run passes: :func:`disjoint_at` checks that per run."""
    if prints is None:
        return False
    views = {}
    for f in prints:
        views.setdefault((f.space, f.arg, f.const, f.span, str(f.dtype)), set()).add(f.stored)
    return not any(len(kinds) == 2 for kinds in views.values())


def disjoint_at(prints: list[_Footprint], values: list, unit_bytes) -> bool:
    """No byte any store may write lies in a view any load may read, for this run's argument
    values (``unit_bytes(dtype)``: the machine's address unit): then no op reads what the
    function writes, and the groups may run side by side."""
    spans: dict[str, tuple[list, list]] = {}
    for f in prints:
        base = (int(values[f.arg]) if f.arg is not None else f.const) * unit_bytes(f.dtype)
        spans.setdefault(f.space, ([], []))[f.stored].append((base, base + f.span))
    for loads, stores in spans.values():
        for a0, a1 in stores:
            for b0, b1 in loads:
                if a0 < b1 and b0 < a1:
                    return False
    return True


def find_repeats(fn: Function) -> Repeats | None:
    """The repeated structure of a function, or None (see the module docstring)."""
    ops = fn.body.block.ops
    if len(ops) < _MIN_OPS or ops[-1].name != "return" or ops[-1].operands:
        return None
    body = ops[:-1]
    ids: dict = {}
    sig = [ids.setdefault(_signature(op), len(ids)) for op in body]
    found = _period(sig)
    if found is None:
        return None
    start, period, count = found
    first = body[start:start + period]
    differing: list[int] = []
    ragged: set = set()
    for g in range(1, count):
        vmap: dict = {}
        group = body[start + g * period:start + (g + 1) * period]
        for pos, (a, b) in enumerate(zip(group, first)):
            if not _iso(a, b, vmap, differing, pos, ragged):
                return None
    # every value a group defines is used inside that group only
    group_of = {}
    for k, top in enumerate(body[start:]):
        for op in _walk(top):
            group_of[id(op)] = k // period
    users = fn.users()
    for k, top in enumerate(body[start:]):
        g = k // period
        for op in _walk(top):
            for r in op.results:
                if any(group_of.get(id(u)) != g for u in users.get(id(r), ())):
                    return None
    prints = _footprints(fn)
    if not _memory_is_independent(prints):
        return None
    shapes = {key: [tuple(body[start + g * period + key[0]].results[key[1]].type.shape)
                    for g in range(count)] for key in sorted(ragged)}
    template = _template(shapes, count)
    if template is None:
        return None
    return Repeats(start, period, count, sorted(differing), prints, template, shapes)


def _template(shapes: dict, count: int) -> int | None:
    """A group whose every ragged value is at least as large as every other group's in every
    dimension (the last one, usually), or None."""
    for t in [count - 1] + list(range(count - 1)):
        if all(all(x <= y for x, y in zip(s, per_group[t]))
               for per_group in shapes.values() for s in per_group):
            return t
    return None


def is_candidate(c, fn: Function) -> bool:
    """Cheap pre-check: a function on a back end that runs rerolled forms (``caps.stacked``),
    long enough to hold repeats worth the analysis."""
    return caps_of(c.xp).stacked and len(fn.body.block.ops) >= _MIN_OPS


def compile_rerolled(c_plain, fn: Function) -> Rerolled | None:
    """``fn``'s repeats side by side, on every core of its grid at once, or None. ``c_plain``:
    the compiler of the plain plan (it holds every group's folded constants)."""
    from .ragged_steps import Unsupported, masked_ops, ragged_dims, ragged_step, shareable, shares_b
    from .stacked import varying_values
    from .stacked_values import Builder, restack

    if not caps_of(c_plain.xp).stacked or c_plain.lx_faults or not is_candidate(c_plain, fn):
        return None
    rep = find_repeats(fn)
    if rep is None:
        return None
    C, G = fn.num_cores, rep.count
    if C > 1 and any(f.space != "hbm" for f in rep.footprints):
        return None  # each core's own LX: not one address space across the virtual cores
    block = fn.body.block
    body = block.ops[:-1]
    at = rep.start + rep.template * rep.period
    indices = list(range(rep.start)) + list(range(at, at + rep.period))
    prefix = body[:rep.start]
    template = body[at:at + rep.period]
    c = type(c_plain)(c_plain.machine, fn)  # a fresh compiler of the same kind (compile.py)
    arg_slots = [c.slot(a) for a in fn.args]
    seeds, preset = set(), {}
    for pos in rep.differing:
        op = template[pos]
        values = []
        for g in range(G):
            twin = body[rep.start + g * rep.period + pos]
            if not c_plain.is_const(twin.result):
                return None
            values.append(c_plain.const(twin.result))
        per_group = restack(values, op.result.type)
        if not isinstance(per_group, np.ndarray):
            return None
        stacked = np.concatenate([per_group] * C)  # virtual core v: group v % G of core v // G
        stacked.flags.writeable = False
        slot = c.slot(op.result)

        def step(senv, slot=slot, stacked=stacked):
            senv[slot] = stacked

        step.op = op
        preset[id(op)] = step
        seeds.add(id(op.result))
    for i, op in zip(indices, prefix + template):
        if id(op) in preset:
            c.step_of[id(op)] = preset[id(op)]
            continue
        c.where = (block, i)
        step = part("build", op.name)(c, op)  # compiled in the plain plan: it has one
        if step is not None:
            step.op = op
        c.step_of[id(op)] = step
    ragged = {}
    for (pos, k), shapes in rep.ragged.items():
        v = template[pos].results[k]
        ragged[id(v)] = {d: np.asarray(ext * C, np.int64) for d, ext in ragged_dims(shapes).items()}
    # a padded value is the same for every group where its inputs are; what differs is where its
    # valid part ends, which only the masked ops see: their results vary
    for op in masked_ops(template, ragged):
        seeds.update(id(r) for r in op.results)
    ops = prefix + template
    core_seeds = {id(r) for op in prefix for r in op.results
                  if op.name == "ktdp.get_compute_tile_id"} if C > 1 else set()
    vary_ids = varying_values(fn, seeds=seeds | core_seeds, ops=ops)
    b = Builder(c, C * G, fn.grid, vary_ids)
    b.preset = preset
    b.core_of = np.repeat(np.arange(C, dtype=np.int64), G)
    b.ragged = ragged
    b.ragged_step = ragged_step
    if core_seeds:  # values that differ between cores but not between a core's groups
        invariant = varying_values(fn, seeds=core_seeds, ops=ops) - \
            varying_values(fn, seeds=seeds, ops=ops)
        b.shared = shareable(ops, invariant, lambda op: shares_b(c, op, vary_ids))
    try:
        steps = [s for s in (b.op(op) for op in ops) if s is not None]
    except Unsupported:
        return None
    if b.native == 0:
        return None
    plan = b.finish(steps)
    slot_template = [None] * c.n_slots
    for s, v in c.consts.items():
        slot_template[s] = c.xp.from_const(v)
    machine = c_plain.machine
    prints = rep.footprints
    seen: dict = {}

    def disjoint(values) -> bool:
        key = tuple(values)
        ok = seen.get(key)
        if ok is None:
            if len(seen) > 64:
                seen.clear()
            ok = seen[key] = disjoint_at(prints, values, machine.unit_bytes)
        return ok

    return Rerolled(plan, slot_template, arg_slots, disjoint, c.slots, ops, b.core_of)
