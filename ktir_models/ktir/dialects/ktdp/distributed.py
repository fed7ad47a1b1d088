"""``ktdp.inter_tile_produce`` / ``inter_tile_consume`` / ``inter_tile_reduce`` and their
region terminators, as the dialect's definition (KTDP.td) states them.

A produce runs its region on every core of a producer group and posts the n yielded partials
(one per role of its ``!ktdp.tile_future<(T_1, ..., T_n), groups = S>``) in the plan's exchange
(strategies.Exchange: an inter-tile grid runs its cores as threads); its result, a
:class:`Future`, names the exchange box by (op, occurrence on that core) so a produce inside a
loop posts each trip's partials apart.

A delivery op on core c of consumer group g waits for its sources: every producer of g, or,
with ``producer_dependency_per_consumer`` ``(p)[c]`` / ``(p)[c, g]``, the producers that set
names for c (the per-consumer synchronization of the dialect's section 3.4).

* ``inter_tile_consume`` (broadcast, routing) delivers its one source's partials unchanged; a
  consumer with another number of sources faults (the legality pass refuses such programs
  statically). A core in no consumer group holds zeros (the dialect leaves its value undefined;
  no use of the result is reachable from such a core).
* ``inter_tile_reduce`` folds its sources' partials in ascending producer (core id) order with
  the combiner region, all n roles at once (the region takes lhs_1..lhs_n, rhs_1..rhs_n); a
  fixed order makes results deterministic. A consumer with no source, and a core in no consumer
  group, gets the identity.

Waiting faults as a deadlock when every core is waiting or finished and no waiter's producers
have all posted (decided from the exchange's state, never from elapsed time), and stops when
another core failed.

The static rules that need both ends of the future (one use, consumers a subset of producers,
dependency sets) are the legality pass's (``ktir/verify/legality.py``); the helpers that ground the
parameterized sets at concrete groups (:func:`group_values`, :func:`tiles_of`,
:func:`dep_tiles_of`) are shared with it.
"""

from __future__ import annotations

import math

from ...ir import affine
from ...ir.affine import AffineSet
from ...ir.errors import FaultSignal
from ...exec.execute import run_steps
from ...ir.nodes import Op, TensorType, TileFutureType
from ...latency.walker import CoreWalker, elements
from ...parse.ops_custom import h_yield
from ...ir.registry import implements, set_part
from ...verify.rules import Rule, check_yield, compatible, fail
from ..arith import coerce

PRODUCE, CONSUME, REDUCE = ("ktdp.inter_tile_produce", "ktdp.inter_tile_consume",
                            "ktdp.inter_tile_reduce")
DEPS = "producer_dependency_per_consumer"


# -- the sets, grounded -----------------------------------------------------------------------

def group_values(groups: AffineSet) -> list[int] | None:
    """The group ids of a ``groups`` set, ascending; None when the set is unbounded."""
    try:
        return sorted(int(p[0]) for p in groups.points(()))
    except ValueError:
        return None


def tiles_of(tiles: AffineSet, g: int) -> set[int] | None:
    """The tile ids of an ``(i)[g]`` set at group ``g``; None when unbounded there."""
    try:
        return {int(p[0]) for p in tiles.points((g,))}
    except ValueError:
        return None


def _dep_syms(dep: AffineSet, c: int, g: int) -> tuple[int, ...]:
    return (c,) if dep.num_syms == 1 else (c, g)


def dep_tiles_of(dep: AffineSet, c: int, g: int) -> set[int] | None:
    """The producers a ``(p)[c]`` / ``(p)[c, g]`` dependency set names for consumer ``c`` of
    group ``g``; None when unbounded there."""
    try:
        return {int(p[0]) for p in dep.points(_dep_syms(dep, c, g))}
    except ValueError:
        return None


# -- syntax -----------------------------------------------------------------------------------

def _clauses(p, op: Op) -> None:
    """``key = attr`` clauses separated by commas, and ``identity(%a, ... : T, ...)``, up to
    the ``:`` before the future's type."""
    while p.peek() != ":":
        key = p.expect_kind("ident", f"an {op.name[5:]} clause")
        if key == "identity":
            p.expect("(")
            op.groups["identity"] = p.operand_list(")")
            if op.groups["identity"]:
                p.expect(":")
                p.type_list()
            p.expect(")")
        else:
            p.expect("=")
            op.attrs[key] = p.parse_attr_value()
        p.accept(",")


@implements("syntax", PRODUCE)
def _h_produce(p, op: Op):
    p.expect("producer_tiles_per_group")
    p.expect("=")
    op.attrs["producer_tiles_per_group"] = p.parse_attr_value()
    if p.accept(":"):
        op.attrs["types"] = p.type_list()
    p.expect("->")
    result = p.parse_type()
    op.regions = [p.parse_region()]
    return [result]


def _delivery_syntax(p, op: Op) -> list:
    """``(%future) clauses : future-type -> T_1, ..., T_n`` (the result types)."""
    p.expect("(")
    future = p.operand()
    p.expect(")")
    _clauses(p, op)
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    op.operands = [future] + op.groups.get("identity", [])
    return p.type_list()


@implements("syntax", CONSUME)
def _h_consume(p, op: Op):
    return _delivery_syntax(p, op)


@implements("syntax", REDUCE)
def _h_reduce_tiles(p, op: Op):
    results = _delivery_syntax(p, op)
    op.regions = [p.parse_region()]
    return results


set_part("syntax", "ktdp.yield_partial", h_yield)
set_part("syntax", "ktdp.yield_reduced", h_yield)


# -- verification -----------------------------------------------------------------------------

def _future(op: Op) -> TileFutureType:
    fu = op.operands[0]
    if not isinstance(fu.type, TileFutureType):
        fail(f"{op.name} operand {fu.name} must be a tile_future, got {fu.type}")
    _groups(fu.type)
    return fu.type


def _groups(t: TileFutureType) -> None:
    """The future names its groups, a bounded set: every core's group is found by enumerating
    them (an unbounded set is an emulator limit, refused here rather than at run time)."""
    if t.groups is None:
        fail("the tile_future type needs groups = affine_set<...>")
    if group_values(t.groups) is None:
        fail(f"tile_future groups {t.groups} is unbounded: the emulator enumerates the groups "
             "of an exchange and needs bounds")


def _tile_set(op: Op, key: str, tile: str) -> AffineSet:
    s = op.attrs.get(key)
    if not isinstance(s, AffineSet):
        fail(f"`{key}` must be an affine_set")
    if s.num_syms != 1:
        fail(f"`{key}` must have exactly one symbol (the group index g)")
    if s.num_dims != 1:
        fail(f"`{key}` must have exactly one dimension (the tile id {tile})")
    return s


def _dep_set(op: Op) -> None:
    dep = op.attrs.get(DEPS)
    if dep is None:
        return
    if not isinstance(dep, AffineSet):
        fail(f"`{DEPS}` must be an affine_set")
    if dep.num_syms not in (1, 2):
        fail(f"`{DEPS}` must have one symbol (c) or two symbols (c, g)")
    if dep.num_dims != 1:
        fail(f"`{DEPS}` must have exactly one dimension (the producer tile id p)")


def _produce(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, TileFutureType):
        fail(f"inter_tile_produce must produce a tile_future, got {t}")
    _groups(t)
    block = op.regions[0].block
    if len(block.args) != 1 or str(block.args[0].type) != "index":
        fail("producer region must take a single `index` group-id argument")
    who = _tile_set(op, "producer_tiles_per_group", "i")
    _disjoint(who, t.groups)
    last = block.ops[-1] if block.ops else None
    if last is not None and last.name == "ktdp.yield_partial":
        vals = last.operands
        if len(vals) != len(t.partials):
            fail(f"yield_partial yields {len(vals)} values but the future carries "
                 f"{len(t.partials)} partial type(s)")
        for k, (v, pt) in enumerate(zip(vals, t.partials)):
            if not compatible(v.type, pt):
                fail(f"yield_partial operand #{k} type {v.type} does not match future partial "
                     f"type {pt}")
    check_yield(op, block, list(t.partials), "ktdp.yield_partial")


def _disjoint(who: AffineSet, groups: AffineSet) -> None:
    """R1: the producer tile sets of distinct groups do not overlap (checked where both are
    bounded, as the dialect's verifier does)."""
    gs = group_values(groups)
    sets = [tiles_of(who, g) for g in gs or ()]
    if gs is None or any(s is None for s in sets):
        return
    for a in range(len(gs)):
        for b in range(a + 1, len(gs)):
            if sets[a] & sets[b]:
                fail(f"producer_tiles_per_group for groups {gs[a]} and {gs[b]} are not "
                     "disjoint")


def _results_match(op: Op, partials, first_by_elements: bool) -> None:
    """Each result has its role's partial type (role 0 may differ in shape only: the verifier
    pass decides that one, for ktir-cpu's reshaping reading)."""
    res = [r.type for r in op.results]
    if len(res) != len(partials):
        fail("failed to verify that result types must match future partial types: "
             f"{len(res)} result(s) for {len(partials)} partial type(s)")
    for k, (t, pt) in enumerate(zip(res, partials)):
        if k == 0 and first_by_elements:
            if isinstance(t, TensorType) and t.elem == pt.elem and (
                    t.num_elements is None or pt.num_elements is None
                    or t.num_elements == pt.num_elements):
                continue
        elif compatible(t, pt):
            continue
        fail(f"failed to verify that result types must match future partial types: result "
             f"#{k} is {t}, the partial type is {pt}")


def _consume(op: Op) -> None:
    t = _future(op)
    _tile_set(op, "consumer_tiles_per_group", "i")
    _dep_set(op)
    _results_match(op, t.partials, first_by_elements=False)


def _reduce_tiles(op: Op) -> None:
    t = _future(op)
    parts = list(t.partials)
    n = len(parts)
    _tile_set(op, "consumer_tiles_per_group", "i")
    _dep_set(op)
    _results_match(op, parts, first_by_elements=True)
    ids = op.operands[1:]
    if len(ids) != n or not all(compatible(v.type, pt) for v, pt in zip(ids, parts)):
        got = ", ".join(str(v.type) for v in ids) or "nothing"
        fail(f"failed to verify that identity types must match result types: identity "
             f"({got}) for partial types ({', '.join(map(str, parts))})")
    block = op.regions[0].block
    if len(block.args) != 2 * n:
        fail(f"reducer region must take 2*{n} arguments, got {len(block.args)}")
    for k, pt in enumerate(parts):
        if not (compatible(block.args[k].type, pt) and compatible(block.args[n + k].type, pt)):
            fail(f"reducer region argument pair #{k} must both have partial type {pt}")
    last = block.ops[-1] if block.ops else None
    if last is not None and last.name == "ktdp.yield_reduced" and len(last.operands) != n:
        fail(f"yield_reduced yields {len(last.operands)} values but expected {n}")
    check_yield(op, block, parts, "ktdp.yield_reduced")


set_part("verify", PRODUCE,
         Rule((0, 0), (1, 1), ("producer_tiles_per_group",), (1, 1), check=_produce))
set_part("verify", CONSUME,
         Rule((1, 1), (1, None), ("consumer_tiles_per_group",), (0, 0), check=_consume))
set_part("verify", REDUCE,
         Rule((2, None), (1, None), ("consumer_tiles_per_group",), (1, 1), check=_reduce_tiles))
set_part("verify", "ktdp.yield_partial", Rule((1, None), (0, 0)))
set_part("verify", "ktdp.yield_reduced", Rule((1, None), (0, 0)))


# -- steps ------------------------------------------------------------------------------------


def build_yield(c, op):
    return None  # the parent op reads the yielded slots directly


set_part("build", "ktdp.yield_partial", build_yield)
set_part("build", "ktdp.yield_reduced", build_yield)


class Future:
    """A produce's result on one core: its exchange key, the core's group (None when the core
    produces nothing) and every group's producers (ascending core ids)."""
    __slots__ = ("key", "group", "producers")

    def __init__(self, key, group, producers):
        self.key = key
        self.group = group
        self.producers = producers


def _membership(who: AffineSet, groups: list[int], n: int) -> dict[int, int | None]:
    """Core -> the first group whose (i)[g] set contains it (None: in no group)."""
    contains = who.contains_fn()
    return {t: next((g for g in groups if contains(t, g)), None) for t in range(n)}


@implements("build", PRODUCE)
def build_produce(c, op):
    c.uses_inter_tile = True
    ftype: TileFutureType = op.result.type
    groups = group_values(ftype.groups)
    who: AffineSet = op.attrs["producer_tiles_per_group"]
    n = c.fn.num_cores
    my_group = _membership(who, groups, n)
    producers = {g: [t for t in range(n) if my_group[t] == g] for g in groups}
    block = op.regions[0].block
    body = c.compile_block(block)
    gid_slot = c.slot(block.args[0])
    ys = [c.slot(v) for v in block.ops[-1].operands]
    ir = c.slot(op.result)
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
            parts = tuple(env[y] for y in ys)
            with ex.cond:
                ex.boxes.setdefault((key, g), {})[ctx.core] = parts
                ex.cond.notify_all()
        env[ir] = Future(key, g, producers)

    return step


def _sources(op: Op, n: int):
    """``(fut, core, g) -> [producer cores]`` the delivery op on ``core`` waits for."""
    dep: AffineSet | None = op.attrs.get(DEPS)
    if dep is None:
        return lambda fut, core, g: fut.producers.get(g, [])
    dep_in = dep.contains_fn()
    two = dep.num_syms == 2
    cache: dict = {}

    def sources(fut, core, g):
        k = (core, g)
        if k not in cache:
            cache[k] = [p for p in range(n) if (dep_in(p, core, g) if two else dep_in(p, core))]
        return cache[k]

    return sources


def _await(ctx, box_key, need: list[int], opname: str) -> list[tuple]:
    """The partials of producers ``need`` in box ``box_key``, in that order, once all posted.

    A deadlock (every core waiting or finished, none able to go on: ``Exchange.deadlocked``) is
    a fault; the timed wait only bounds how long a missed wake-up can delay the next look."""
    ex = ctx.exchange
    with ex.cond:
        ex.waits[ctx.core] = (box_key, need)
        ex.cond.notify_all()  # the last core to block may complete a deadlock others must see
        try:
            while True:
                if ex.satisfied(box_key, need):
                    box = ex.boxes[box_key]
                    return [box[t] for t in need]
                if ex.failed is not None:
                    raise FaultSignal(f"another core failed while this core waited in {opname}")
                if ex.deadlocked():
                    box = ex.boxes.get(box_key, {})
                    missing = [t for t in need if t not in box]
                    raise FaultSignal(f"deadlock: waiting for partials of group {box_key[1]} "
                                      f"from core(s) {missing} that never produce them")
                ex.cond.wait(0.05)
        finally:
            del ex.waits[ctx.core]


def _delivery(c, op):
    """What consume and reduce share: the future's slot, each core's consumer group, the
    sources function and the result slots with their types."""
    c.uses_inter_tile = True
    n = c.fn.num_cores
    ftype: TileFutureType = op.operands[0].type
    my_group = _membership(op.attrs["consumer_tiles_per_group"], group_values(ftype.groups), n)
    outs = [(c.slot(r), r.type) for r in op.results]
    return c.slot(op.operands[0]), my_group, _sources(op, n), outs


@implements("build", CONSUME)
def build_consume(c, op):
    ifu, my_group, sources, outs = _delivery(c, op)
    xp = c.xp
    zeros = [xp.zeros(t.shape, t.dtype) if t.is_static else None for _, t in outs]

    def step(env):
        ctx = env[0]
        g = my_group[ctx.core]
        if g is None:
            for (slot, _), z in zip(outs, zeros):
                env[slot] = z
            return
        fut: Future = env[ifu]
        need = sources(fut, ctx.core, g)
        if len(need) != 1:
            raise FaultSignal(f"inter_tile_consume: consumer core {ctx.core} of group {g} has "
                              f"{len(need)} sources {need}; it needs exactly one")
        parts = _await(ctx, (fut.key, g), need, "inter_tile_consume")[0]
        for (slot, t), v in zip(outs, parts):
            env[slot] = coerce(xp.reshape(v, t.shape), t, xp)

    return step


@implements("build", REDUCE)
def build_reduce_tiles(c, op):
    ifu, my_group, sources, outs = _delivery(c, op)
    iids = [c.slot(v) for v in op.operands[1:]]
    block = op.regions[0].block
    body = c.compile_block(block)
    n_roles = len(outs)
    lhs = [c.slot(a) for a in block.args[:n_roles]]
    rhs = [c.slot(a) for a in block.args[n_roles:]]
    ys = [c.slot(v) for v in block.ops[-1].operands]
    xp = c.xp

    def step(env):
        ctx = env[0]
        g = my_group[ctx.core]
        parts = []
        if g is not None:
            fut: Future = env[ifu]
            parts = _await(ctx, (fut.key, g), sources(fut, ctx.core, g), "inter_tile_reduce")
        if not parts:
            acc = tuple(env[i] for i in iids)
        else:
            acc = parts[0]
            for p in parts[1:]:
                for k in range(n_roles):
                    env[lhs[k]] = acc[k]
                    env[rhs[k]] = p[k]
                run_steps(body, env)
                acc = tuple(env[y] for y in ys)
        for (slot, t), v in zip(outs, acc):
            env[slot] = coerce(xp.reshape(v, t.shape), t, xp)

    return step


# -- cost -------------------------------------------------------------------------------------

# the produce region runs where it is; a delivery op (consume, reduce) forwards the partials
# around the ring

@implements("cost", "ktdp.inter_tile_produce")
def cost_produce(w: CoreWalker, op: Op, scale: float) -> None:
    w.charge(op, scale)
    for r in op.regions:
        for b in r.blocks:
            for a in b.args:
                w.env[a] = None
            w.block(b, scale)
    for r in op.results:
        w.env[r] = None


def _ring_bytes(w: CoreWalker, op: Op, scale: float) -> int:
    """Charge the ring transfer of a delivery op: its results' bytes forwarded over every other
    core of the ring; returns the hop count."""
    nbytes = sum((r.type.nbytes or 0) for r in op.results if isinstance(r.type, TensorType))
    hops = max(0, min(w.fn.num_cores, w.params.num_cores) - 1)
    w.charge(op, scale, "comm", nbytes * hops / w.params.ring_bytes_per_cycle)
    return hops


@implements("cost", CONSUME)
def cost_consume(w: CoreWalker, op: Op, scale: float) -> None:
    _ring_bytes(w, op, scale)
    for r in op.results:
        w.env[r] = None


@implements("cost", REDUCE)
def cost_reduce(w: CoreWalker, op: Op, scale: float) -> None:
    hops = _ring_bytes(w, op, scale)
    # the combiner runs once per received partial, over every role
    n = sum(elements(r.type) for r in op.results)
    w.charge(op, scale * hops, "vector", math.ceil(n / w.params.simd_elems_per_cycle))
    for r in op.results:
        w.env[r] = None


set_part("cost", "ktdp.yield_partial", "free")
set_part("cost", "ktdp.yield_reduced", "free")
