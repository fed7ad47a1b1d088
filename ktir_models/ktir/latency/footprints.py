"""The store map: every ``ktdp.store`` execution of a function and the elements it writes (used
to name the store that wrote a given output element).

Invariants: stores are listed per core in program order; an offset set is given only when the
placement is fully known statically (else None, never a guess).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.nodes import Function, Op
from .params import HardwareParams
from .walker import CoreWalker, Tile, core_coords, uses_tile_id


@dataclass
class StoreFootprint:
    """The elements one ``ktdp.store`` execution writes, as element offsets from the start of the
    kernel argument ``arg`` (None when the placement cannot be known without running)."""

    op: Op
    core: int
    arg: str | None
    offsets: np.ndarray | None


def store_footprints(fn: Function, max_trips: int = 4096) -> list[StoreFootprint]:
    """Every store execution of ``fn`` on every core, in program order (used to name the store
    that wrote a given output element). Loops longer than ``max_trips`` are sampled once."""
    params = HardwareParams(num_cores=max(32, fn.num_cores))
    out: list[StoreFootprint] = []
    cores = range(fn.num_cores) if uses_tile_id(fn) else [0]
    for c in cores:
        walker = CoreWalker(fn, c, core_coords(fn.grid, c), params, [], {})
        walker.footprints = []
        walker.trip_limit = max_trips
        walker.block(fn.body.block, 1.0)
        for op, tile in walker.footprints:
            offs = None
            arg = None
            if isinstance(tile, Tile) and tile.view is not None:
                arg = tile.view.base_arg
                v = tile.view
                if tile.anchor is not None and tile.extents is not None and v.offset is not None \
                        and len(v.strides) == len(tile.extents) and None not in v.strides:
                    grids = np.meshgrid(*[np.arange(e, dtype=np.int64) for e in tile.extents],
                                        indexing="ij")
                    offs = v.offset + sum((g + a) * s for g, a, s in
                                          zip(grids, tile.anchor, v.strides))
                    offs = np.asarray(offs, dtype=np.int64).reshape(-1)
            out.append(StoreFootprint(op, c, arg, offs))
    return out
