"""``ktdp.construct_memory_view`` and ``ktdp.construct_distributed_memory_view``.

A memory view (memory_views.View) is rebuilt on every run of its op from the offset, sizes and
strides operands; built views are cached by everything they depend on and stay valid while HBM's
set of regions is unchanged (``hbm.generation``). The offset is in the machine's address unit
(``machine.unit_bytes``). A distributed view flattens nested distributed views into one list of
plain partitions.
"""

from __future__ import annotations

from ...ir.affine import AffineSet
from ...ir.errors import KtirError
from ...ir.nodes import INT_TYPES, MemorySpace, MemRefType, Op, ScalarType
from ...latency.walker import CoreWalker, View as CostView, itemsize, static_or_dynamic
from ...exec.memory_views import DistView, View
from ...parse.ops_custom import bracket_ints_or_values
from ...ir.registry import implements, set_part
from ...verify.rules import Rule, elem, fail
from .index_code import values_fn


# -- syntax -----------------------------------------------------------------------------------

@implements("syntax", "ktdp.construct_memory_view")
def _h_memory_view(p, op: Op):
    op.operands = [p.operand()]
    p.expect(",")
    for key in ("sizes", "strides"):
        p.expect(key, "in construct_memory_view")
        p.expect(":")
        static, dyn = bracket_ints_or_values(p, key)
        op.attrs["static_" + key] = static
        op.groups[key] = dyn
        if key == "sizes":
            p.expect(",")
    op.attrs.update(p.attr_dict() if p.peek() == "{" else {})
    p.expect(":", "before the memref type")
    op.operands = op.operands + op.groups["sizes"] + op.groups["strides"]
    op.groups["offset"] = op.operands[:1]
    return [p.parse_type()]


@implements("syntax", "ktdp.construct_distributed_memory_view")
def _h_distributed_view(p, op: Op):
    p.expect("(")
    op.operands = p.operand_list()
    p.expect(":", "before the partition types")
    op.attrs["types"] = p.type_list()
    p.expect(")")
    if p.peek() == "{":
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the result type")
    return [p.parse_type()]


# -- verification -----------------------------------------------------------------------------

def _memory_view(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, MemRefType):
        fail(f"construct_memory_view must produce a memref, got {t}")
    sizes, strides = op.attrs["static_sizes"], op.attrs["static_strides"]
    if not (len(sizes) == len(strides) == len(t.shape)):
        fail(f"the result memref {t} has rank {len(t.shape)}, which does not match the "
              f"{len(sizes)} sizes and {len(strides)} strides given")
    for k, (s, d) in enumerate(zip(sizes, t.shape)):
        if s is not None and d is not None and s != d:
            fail(f"static size {s} of dim {k} does not match {t}")
    cs = op.attrs.get("coordinate_set")
    if cs is not None:
        if not isinstance(cs, AffineSet):
            fail("coordinate_set must be an affine_set")
        if cs.num_dims != len(t.shape):
            fail(f"coordinate_set has {cs.num_dims} dims but the view has rank {len(t.shape)}")
    ms = op.attrs.get("memory_space")
    if ms is not None and not isinstance(ms, MemorySpace):
        fail("memory_space must be a #ktdp memory space attribute")
    for v in op.operands:
        if elem(v.type) not in INT_TYPES or not isinstance(v.type, ScalarType):
            fail(f"offset/size/stride operand {v.name} must be an index scalar, got {v.type}")


def _distributed_view(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, MemRefType):
        fail(f"construct_distributed_memory_view must produce a memref, got {t}")
    for v in op.operands:
        if not isinstance(v.type, MemRefType):
            fail(f"partition {v.name} is not a memref view")
        if v.type.elem != t.elem:
            fail(f"partition {v.name} ({v.type}) holds {v.type.elem}, but the result {t} holds "
                  f"{t.elem}: every input memref must have the result's element type")
        if len(v.type.shape) != len(t.shape):
            fail(f"partition {v.name} ({v.type}) has rank {len(v.type.shape)}, but the result "
                  f"{t} has rank {len(t.shape)}: every input memref must have the result's rank")


# coordinate_set may be omitted (one corpus kernel does): it then defaults to the full box
set_part("verify", "ktdp.construct_memory_view",
         Rule((1, None), (1, 1), ("memory_space",), check=_memory_view))
set_part("verify", "ktdp.construct_distributed_memory_view",
         Rule((1, None), (1, 1), check=_distributed_view))


# -- steps ------------------------------------------------------------------------------------

@implements("build", "ktdp.construct_memory_view")
def build_memory_view(c, op):
    t = op.result.type
    dtype = t.dtype
    space: MemorySpace = op.attrs["memory_space"]
    cset = op.attrs.get("coordinate_set")
    machine = c.machine
    off_v = op.operands[0]
    ioff = c.slot(off_v)
    sizes_fn = _merge(op.attrs["static_sizes"], values_fn(c, op.groups["sizes"]))
    strides_fn = _merge(op.attrs["static_strides"], values_fn(c, op.groups["strides"]))
    dyn_sizes_fn = values_fn(c, op.groups["sizes"])
    if cset is not None and cset.num_syms > len(op.groups["sizes"]):
        raise KtirError.at(op.loc, f"coordinate_set has {cset.num_syms} symbols but only "
                                   f"{len(op.groups['sizes'])} dynamic sizes bind them")
    unit = machine.unit_bytes(dtype)
    ir = c.slot(op.result)
    # Views are rebuilt for every core and pass; cache them by everything they depend on. A cached
    # view stays valid while HBM's set of regions is unchanged (its generation counter).
    cache: dict = {}
    hbm = machine.hbm

    def step(env):
        core = space.core if space.core is not None else env[0].core
        addr = int(env[ioff]) * unit
        key = (addr, core, sizes_fn(env), strides_fn(env), dyn_sizes_fn(env))
        hit = cache.get(key)
        # valid while no allocation or free changed HBM's regions since the view was built
        if hit is not None and hit[0] == hbm.generation:
            env[ir] = hit[1]
            return
        v = View(machine, space, core, addr, dtype, key[2], key[3], cset, key[4])
        if len(cache) > 256:
            cache.clear()
        if v.region is not None:
            cache[key] = (hbm.generation, v)
        env[ir] = v

    return step


def _merge(static: list, dyn_fn):
    if all(s is not None for s in static):
        t = tuple(static)
        return lambda env: t

    def fn(env):
        it = iter(dyn_fn(env))
        return tuple(s if s is not None else next(it) for s in static)

    return fn


@implements("build", "ktdp.construct_distributed_memory_view")
def build_dist_view(c, op):
    slots = [c.slot(v) for v in op.operands]
    ir = c.slot(op.result)

    def step(env):
        parts = [env[s] for s in slots]
        flat = []
        for p in parts:
            flat.extend(p.parts if isinstance(p, DistView) else [p])
        env[ir] = DistView(flat)

    return step


# -- cost -------------------------------------------------------------------------------------

# evaluated into the latency walker's env (its abstract views and tiles), charging nothing

@implements("cost", "ktdp.construct_memory_view")
def cost_memory_view(w: CoreWalker, op: Op, scale: float) -> None:
    t = op.result.type
    off = w.env.get(op.groups.get("offset", [None])[0]) if op.groups.get("offset") else None
    sizes = static_or_dynamic(op.attrs.get("static_sizes"), op.groups.get("sizes", []), w.env)
    strides = static_or_dynamic(op.attrs.get("static_strides"), op.groups.get("strides", []), w.env)
    space = getattr(op.attrs.get("memory_space"), "kind", "hbm")
    offset_value = op.groups["offset"][0] if op.groups.get("offset") else None
    base_arg = offset_value.name.lstrip("%") if offset_value in w.fn.args else None
    w.env[op.result] = CostView(off if isinstance(off, int) else None, tuple(sizes),
                                tuple(strides), itemsize(t), "lx" if space == "lx" else "hbm",
                                base_arg)
    w.free(op)


@implements("cost", "ktdp.construct_distributed_memory_view")
def cost_distributed_view(w: CoreWalker, op: Op, scale: float) -> None:
    parts = [w.env.get(v) for v in op.operands]
    space = "hbm" if any(isinstance(p, CostView) and p.space == "hbm" for p in parts) else "lx"
    w.env[op.result] = ("distributed", space, itemsize(op.result.type))
    w.free(op)

