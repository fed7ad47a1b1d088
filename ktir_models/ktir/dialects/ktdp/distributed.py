"""``ktdp.inter_tile_produce`` / ``ktdp.inter_tile_reduce`` and their region terminators.

A produce runs its region on every core of a producer group and posts the yielded partial in the
plan's exchange (strategies.Exchange: an inter-tile grid runs its cores as threads); its result,
a :class:`Future`, names the exchange box by (op, occurrence on that core) so a produce inside a
loop posts each trip's partials apart. A reduce waits for every producer of its core's group and folds the
partials in producer order with its combiner region (a fixed order: results are deterministic);
a core in no consumer group gets the identity. Waiting faults as a deadlock once every core has
been waiting or finished for a second (or after 60 s), and stops when another core failed.
"""

from __future__ import annotations

import math
import time

from ... import affine
from ...affine import AffineSet
from ...errors import FaultSignal
from ...execute import run_steps
from ...ir import Op, TensorType, TileFutureType
from ...latency.walker import CoreWalker, elements
from ...parse.ops_custom import h_yield
from ...registry import implements, set_part
from ...verify_rules import Rule, check_yield, fail
from ..arith import coerce


# -- syntax -----------------------------------------------------------------------------------

@implements("syntax", "ktdp.inter_tile_produce")
def _h_produce(p, op: Op):
    p.expect("producer_tiles_per_group")
    p.expect("=")
    op.attrs["producer_tiles_per_group"] = p.parse_attr_value()
    if p.accept(":"):
        op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    result = p.parse_type()
    op.regions = [p.parse_region()]
    return [result]


@implements("syntax", "ktdp.inter_tile_reduce")
def _h_reduce_tiles(p, op: Op):
    p.expect("(")
    op.operands = [p.operand()]
    p.expect(")")
    while p.peek() != ":":
        key = p.expect_kind("ident", "an inter_tile_reduce clause")
        if key == "identity":
            p.expect("(")
            ident = p.operand()
            p.expect(":")
            p.parse_type()
            p.expect(")")
            op.groups["identity"] = [ident]
        else:
            p.expect("=")
            op.attrs[key] = p.parse_attr_value()
        p.accept(",")
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    result = p.parse_type()
    op.operands = op.operands + op.groups.get("identity", [])
    op.regions = [p.parse_region()]
    return [result]


set_part("syntax", "ktdp.yield_partial", h_yield)
set_part("syntax", "ktdp.yield_reduced", h_yield)


# -- verification -----------------------------------------------------------------------------

def _produce(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, TileFutureType):
        fail(f"inter_tile_produce must produce a tile_future, got {t}")
    if not isinstance(op.attrs.get("producer_tiles_per_group"), AffineSet):
        fail("producer_tiles_per_group must be an affine_set")
    if t.groups is None:
        fail("the tile_future type needs groups = affine_set<...>")
    block = op.regions[0].block
    if len(block.args) != 1:
        fail("inter_tile_produce region takes one index argument (the group id)")
    check_yield(op, block, [t.tensor], "ktdp.yield_partial")


def _reduce_tiles(op: Op) -> None:
    fu = op.operands[0]
    if not isinstance(fu.type, TileFutureType):
        fail(f"inter_tile_reduce operand {fu.name} must be a tile_future, got {fu.type}")
    if not isinstance(op.attrs.get("consumer_tiles_per_group"), AffineSet):
        fail("consumer_tiles_per_group must be an affine_set")
    t = op.results[0].type
    part = fu.type.tensor
    if not isinstance(t, TensorType) or (t.num_elements is not None and part.num_elements
                                         is not None and t.num_elements != part.num_elements):
        fail(f"reduce result {t} must have as many elements as the partial {part}")
    block = op.regions[0].block
    if len(block.args) != 2:
        fail("inter_tile_reduce combiner takes two arguments")
    check_yield(op, block, [part], "ktdp.yield_reduced")


set_part("verify", "ktdp.inter_tile_produce",
         Rule((0, 0), (1, 1), ("producer_tiles_per_group",), (1, 1), check=_produce))
set_part("verify", "ktdp.inter_tile_reduce",
         Rule((2, 2), (1, 1), ("consumer_tiles_per_group",), (1, 1), check=_reduce_tiles))
set_part("verify", "ktdp.yield_partial", Rule((1, 1), (0, 0)))
set_part("verify", "ktdp.yield_reduced", Rule((1, 1), (0, 0)))


# -- steps ------------------------------------------------------------------------------------


def build_yield(c, op):
    return None  # the parent op reads the yielded slot directly


set_part("build", "ktdp.yield_partial", build_yield)
set_part("build", "ktdp.yield_reduced", build_yield)

class Future:
    __slots__ = ("key", "group", "producers")

    def __init__(self, key, group, producers):
        self.key = key
        self.group = group
        self.producers = producers


def _group_ids(groups: affine.AffineSet) -> list[int]:
    return [int(p[0]) for p in groups.points(())]


@implements("build", "ktdp.inter_tile_produce")
def build_produce(c, op):
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


@implements("build", "ktdp.inter_tile_reduce")
def build_reduce_tiles(c, op):
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


# -- cost -------------------------------------------------------------------------------------

# the produce region runs where it is; a reduce forwards the partials around the ring

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


@implements("cost", "ktdp.inter_tile_reduce")
def cost_reduce(w: CoreWalker, op: Op, scale: float) -> None:
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


set_part("cost", "ktdp.yield_partial", "free")
set_part("cost", "ktdp.yield_reduced", "free")
