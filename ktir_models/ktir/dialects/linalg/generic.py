"""linalg.generic, linalg.index and linalg.yield: each op kind's parts side by side (syntax,
verification rule, builder, cost). A generic runs its body once over the whole loop space when it
has no reduction loop, else sequentially over the reduction positions, vectorised over the others.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...ir import registry
from ...ir.affine import AffineMap
from ...ir.errors import KtirError
from ...exec.execute import run_steps
from ...ir.nodes import Op, TensorType
from ...parse.ops_custom import h_yield
from ...verify.rules import Rule, check_declared_ins_outs, fail, ins_outs
from ..arith import NP, coerce
from .syntax import parse_structured


# -- linalg.generic -----------------------------------------------------------------------------

def _generic(op: Op) -> None:
    ins, outs = ins_outs(op)
    check_declared_ins_outs(op)
    maps = op.attrs.get("indexing_maps")
    its = op.attrs.get("iterator_types")
    if not isinstance(maps, list) or not all(isinstance(m, AffineMap) for m in maps):
        fail("linalg.generic needs indexing_maps = [affine_map, ...]")
    if len(maps) != len(ins) + len(outs):
        fail(f"{len(maps)} indexing maps for {len(ins) + len(outs)} operands")
    if not isinstance(its, list) or any(i not in ("parallel", "reduction") for i in its):
        fail('iterator_types must list "parallel" / "reduction"')
    for m, v in zip(maps, ins + outs):
        if m.num_dims != len(its):
            fail(f"indexing map {m} has {m.num_dims} dims but there are {len(its)} loops")
        if isinstance(v.type, TensorType) and m.num_results != len(v.type.shape):
            fail(f"indexing map {m} has {m.num_results} results for {v.type}")
    if len(op.regions) != 1 or len(op.regions[0].block.args) != len(ins) + len(outs):
        fail("linalg.generic body needs one block argument per operand")


registry.set_part("syntax", "linalg.generic", parse_structured)
registry.set_part("verify", "linalg.generic",
                  Rule((1, None), (1, None), ("indexing_maps", "iterator_types"), (1, 1),
                       check=_generic))
registry.set_part("cost", "linalg.generic", "vector")


def _operand_view(arr, amap, n_loops: int, xp=NP):
    """``arr`` re-indexed by loop coordinates: an array broadcastable to the loop space."""
    perm = []
    ok = True
    for e in amap.results:
        if e[0] != "d":
            ok = False
            break
        perm.append(e[1])
    if ok and len(set(perm)) == len(perm):
        order = np.argsort(perm)
        v = xp.transpose(arr, tuple(int(o) for o in order)) \
            if list(order) != list(range(len(order))) else arr
        shape = [1] * n_loops
        for k, d in enumerate(sorted(perm)):
            shape[d] = v.shape[k]
        return v.reshape(shape)
    return None


@registry.implements("build", "linalg.generic")
def build_generic(c, op):
    ins, outs = ins_outs(op)
    maps = op.attrs["indexing_maps"]
    its = op.attrs["iterator_types"]
    n = len(its)
    block = op.regions[0].block
    # loop extents from the static operand shapes
    extents: list = [None] * n
    for v, m in zip(ins + outs, maps):
        if isinstance(v.type, TensorType):
            for e, size in zip(m.results, v.type.shape):
                if e[0] == "d" and size is not None:
                    extents[e[1]] = size
    if any(e is None for e in extents):
        raise KtirError.at(op.loc, "linalg.generic: cannot infer every loop extent statically")
    index_slots = [c.new_slot() for _ in range(n)]
    c.index_slots.append(index_slots)
    body = c.compile_block(block)
    c.index_slots.pop()
    arg_slots = [c.slot(a) for a in block.args]
    yield_slots = [c.slot(v) for v in block.ops[-1].operands]
    in_slots = [c.slot(v) for v in ins]
    out_slots = [c.slot(v) for v in outs]
    res_slots = [c.slot(v) for v in op.results]
    res_types = [v.type for v in op.results]
    red = [k for k in range(n) if its[k] == "reduction"]
    n_in = len(ins)
    aranges = []
    for k in range(n):
        shape = [1] * n
        shape[k] = extents[k]
        aranges.append(np.arange(extents[k], dtype=np.int64).reshape(shape))
    full = tuple(extents)
    out_maps = maps[n_in:]
    xp = c.xp
    env_aranges = [xp.from_const(a) for a in aranges]  # loop indices as the back end's arrays
    gathers: dict = {}

    def as_array(v):
        return v if xp.is_array(v) else xp.asarray(v)

    def gather(arr, m):
        arr = as_array(arr)
        v = _operand_view(arr, m, n, xp)
        if v is not None:
            return v
        coords = gathers.get(id(m))
        if coords is None:  # the map's coordinates depend on the static extents only
            coords = gathers[id(m)] = tuple(
                xp.from_const(np.ascontiguousarray(np.broadcast_to(x, full)))
                for x in m.evaluator()(*[aranges[k] for k in range(n)]))
        return arr[coords]

    def scatter_back(val, m, t):
        """A loop-space value (reduction axes of size 1) -> the output tensor."""
        val = xp.broadcast_to(as_array(val), tuple(1 if k in red else extents[k]
                                                   for k in range(n)))
        perm = [e[1] for e in m.results]
        val = val.reshape([extents[k] for k in range(n) if k not in red]) if red else val
        kept = [k for k in range(n) if k not in red]
        order = [kept.index(d) for d in perm]
        return coerce(xp.transpose(val, order), t, xp)

    def step(env):
        views = [gather(env[s], m) for s, m in zip(in_slots, maps)]
        if not red:
            for s, v in zip(arg_slots[:n_in], views):
                env[s] = v
            for s, o, m in zip(arg_slots[n_in:], out_slots, out_maps):
                env[s] = gather(env[o], m)
            for s, a in zip(index_slots, env_aranges):
                env[s] = a
            run_steps(body, env)
            for s, y, m, t in zip(res_slots, yield_slots, out_maps, res_types):
                env[s] = scatter_back(env[y], m, t)
            return
        views = [xp.broadcast_to(v, full) for v in views]
        accs = [gather(env[o], m) for o, m in zip(out_slots, out_maps)]
        for k in range(n):
            if k not in red:
                env[index_slots[k]] = env_aranges[k]
        for pos in itertools.product(*[range(extents[k]) for k in red]):
            idx = [slice(None)] * n
            for k, p in zip(red, pos):
                idx[k] = slice(p, p + 1)
                env[index_slots[k]] = p
            idx = tuple(idx)
            for s, v in zip(arg_slots[:n_in], views):
                env[s] = v[idx]
            for s, a in zip(arg_slots[n_in:], accs):
                env[s] = a
            run_steps(body, env)
            accs = [env[y] for y in yield_slots]
        for s, a, m, t in zip(res_slots, accs, out_maps, res_types):
            env[s] = scatter_back(a, m, t)

    return step


# -- linalg.index -------------------------------------------------------------------------------

@registry.implements("syntax", "linalg.index")
def parse_index(p, op: Op):
    i = p.pos
    dim = p.number()
    if not isinstance(dim, int):
        p.fail("linalg.index takes an integer dimension", i)
    op.attrs["dim"] = dim
    p.expect(":")
    return [p.parse_type()]


def _index(op: Op) -> None:
    if op.attrs["dim"] < 0:
        fail("linalg.index dimension must be >= 0")


registry.set_part("verify", "linalg.index", Rule((0, 0), (1, 1), ("dim",), check=_index))
registry.set_part("cost", "linalg.index", "free")


@registry.implements("build", "linalg.index")
def build_index(c, op):
    if not c.index_slots:
        raise KtirError.at(op.loc, "linalg.index outside a linalg.generic body")
    slots = c.index_slots[-1]
    dim = op.attrs["dim"]
    if dim >= len(slots):
        raise KtirError.at(op.loc, f"linalg.index {dim}: the generic has {len(slots)} loops")
    c.alias(op.result, slots[dim])
    return None


# -- linalg.yield -------------------------------------------------------------------------------

registry.set_part("syntax", "linalg.yield", h_yield)
registry.set_part("verify", "linalg.yield", Rule())
registry.set_part("cost", "linalg.yield", "free")


@registry.implements("build", "linalg.yield")
def build_yield(c, op):
    return None  # linalg.reduce / linalg.generic read the yielded slots directly
