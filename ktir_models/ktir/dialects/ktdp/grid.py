"""``ktdp.get_compute_tile_id``: the core's coordinates in the grid (x, y, z), as index values.

A core's coordinates come from its context (``env[0].coords``, execute.CoreContext); the stacked
form holds every core's at once, one [C] array per result (core c = x + X*(y + Y*z)).
"""

from __future__ import annotations

from ...ir.nodes import Op, ScalarType
from ...latency.walker import CoreWalker
from ...ir.registry import implements, set_part
from ...verify.rules import Rule, fail


# -- syntax -----------------------------------------------------------------------------------

@implements("syntax", "ktdp.get_compute_tile_id")
def _h_get_tile_id(p, op: Op):
    p.expect(":", "before the result types")
    return p.type_list()


# -- verification -----------------------------------------------------------------------------

def _tile_id(op: Op) -> None:
    for r in op.results:
        if r.type != ScalarType("index"):
            fail("get_compute_tile_id results must be 'index'")
    if len(op.results) > 3:
        fail("get_compute_tile_id has at most 3 results (x, y, z)")


set_part("verify", "ktdp.get_compute_tile_id", Rule((0, 0), (1, 3), check=_tile_id))


# -- plain and stacked steps ------------------------------------------------------------------

@implements("build", "ktdp.get_compute_tile_id")
def build_tile_id(c, op):
    slots = [c.slot(r) for r in op.results]

    def step(env):
        coords = env[0].coords
        for k, s in enumerate(slots):
            env[s] = coords[k]

    return step


@implements("stacked", "ktdp.get_compute_tile_id")
def stacked_tile_id(b, op, plain):
    X, Y, _ = b.grid
    cores = b.core_of
    coords = [cores % X, (cores // X) % Y, cores // (X * Y)]
    slots = [b.c.slot(r) for r in op.results]
    for a in coords:
        a.flags.writeable = False

    def step(senv):
        for k, s in enumerate(slots):
            senv[s] = coords[k]

    return step


# -- cost -------------------------------------------------------------------------------------

# evaluated into the latency walker's env (its abstract views and tiles), charging nothing

@implements("cost", "ktdp.get_compute_tile_id")
def cost_tile_id(w: CoreWalker, op: Op, scale: float) -> None:
    for k, r in enumerate(op.results):
        w.env[r] = w.coords[k] if k < len(w.coords) else 0
    w.free(op)

