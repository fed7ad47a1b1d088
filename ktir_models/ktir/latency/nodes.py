"""The latency of a node (one function on its grid: every core walked, the critical core's
figures) and of a model (nodes one after the other).

Invariants: a node's cycles are the maximum over its cores; cores that cannot differ (no tile
id read) are walked once; a model's cycles are the sum over its nodes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from ..ir.nodes import Function
from .params import CATEGORIES, HardwareParams
from .records import CoreCost, ModelLatency, NodeLatency
from .walker import CoreWalker, core_coords, uses_tile_id


def _lx_peak(fn: Function, params: HardwareParams) -> int:
    """Peak live LX bytes per core, from the emulator's own static accounting (lx_liveness.py,
    its default allocator model)."""
    from ..verify.lx_liveness import account

    return int(account(fn, params.lx_bytes).peak)


def function_latency(fn: Function, params: HardwareParams | None = None, label: str | None = None,
                     top: int = 8, args: dict | None = None, trace: bool = False) -> NodeLatency:
    """The latency of one kernel on its grid (every core walked; identical cores walked once).

    ``args``: the call's arguments by name; its integer scalars (loop bounds, dynamic sizes)
    are evaluated, so a loop bounded by an argument counts its real trips (without them such a
    loop counts one trip, with a note). ``trace``: every core's ``events`` lists one
    :class:`~.records.TraceEvent` per executed op (loops walked trip by trip).
    The result's ``cores`` holds every core's :class:`~.records.CoreCost`."""
    params = params or HardwareParams()
    notes: list[str] = []
    if fn.num_cores > params.num_cores:
        notes.append(f"grid {list(fn.grid)} has {fn.num_cores} cores, the machine {params.num_cores}")
    stick_cache: dict = {}
    cores: list[CoreCost] = []
    if uses_tile_id(fn):
        for c in range(fn.num_cores):
            walker = CoreWalker(fn, c, core_coords(fn.grid, c), params, notes, stick_cache,
                                args, trace)
            walker.block(fn.body.block, 1.0)
            cores.append(walker.cost)
    else:
        walker = CoreWalker(fn, 0, (0, 0, 0), params, notes, stick_cache, args, trace)
        walker.block(fn.body.block, 1.0)
        cores = [replace(walker.cost, core=c) for c in range(fn.num_cores)]
    crit = max(cores, key=lambda cc: cc.total(params.pipeline))
    parts = {"memory": crit.memory, "compute": crit.compute, "comm": crit.comm}
    bottleneck = max(parts, key=lambda k: parts[k])
    dominant = max(CATEGORIES, key=lambda c: crit.cycles[c])
    hbm = sum(c.hbm_read_bytes + c.hbm_write_bytes for c in cores)
    flops = sum(c.flops for c in cores)
    ai = flops / hbm if hbm else float("inf")
    active = max(1, min(fn.num_cores, params.num_cores))
    ridge = (params.systolic_flops_per_cycle * active) / params.hbm_bytes_per_cycle
    total = crit.total(params.pipeline)
    lx_peak = _lx_peak(fn, params)
    if lx_peak > params.lx_bytes:
        notes.append(f"LX peak {lx_peak} bytes exceeds the {params.lx_bytes}-byte scratchpad")
    top_ops = sorted(crit.ops.values(), key=lambda o: -o.total)[:top]
    return NodeLatency(
        label=label or fn.name, function=fn.name,
        file=fn.loc.file if fn.loc is not None else "?", grid=tuple(fn.grid),
        cycles=total, time_us=params.cycles_to_us(total), critical_core=crit.core,
        memory_cycles=crit.memory, compute_cycles=crit.compute, comm_cycles=crit.comm,
        category_cycles=dict(crit.cycles), bottleneck=bottleneck if total > 0 else "none",
        dominant=dominant if total > 0 else "none", hbm_bytes=hbm, flops=flops,
        lx_bytes=sum(c.lx_bytes for c in cores), lx_peak_bytes=lx_peak, arithmetic_intensity=ai,
        roofline_bound="memory" if ai < ridge else "compute", top_ops=top_ops, notes=notes,
        cores=cores)


def model_latency(functions: Iterable[tuple], params: HardwareParams | None = None) -> ModelLatency:
    """Latency of functions executed one after the other (a program's nodes in order). Each item
    is ``(label, fn)`` or ``(label, fn, args)`` with the call's arguments by name (see
    :func:`function_latency`); a function listed several times with the same arguments is
    costed once and counted each time."""
    params = params or HardwareParams()
    cache: dict[tuple, NodeLatency] = {}
    nodes = []
    for label, fn, *rest in functions:
        args = rest[0] if rest else None
        key = (id(fn), repr(sorted((args or {}).items())))
        if key not in cache:
            cache[key] = function_latency(fn, params, label, args=args)
        nodes.append(replace(cache[key], label=label))
    return ModelLatency(params, nodes)
