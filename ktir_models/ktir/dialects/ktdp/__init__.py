"""The ktdp dialect: memory views, access tiles (direct and indirect), load/store, tile ids,
inter-tile produce/reduce. Importing this package registers every ktdp op kind.

One module per group of op kinds, each holding its ops' parts side by side (syntax, verification
rule, plain step, stacked step):

* grid.py         -- ``get_compute_tile_id``
* views.py        -- ``construct_memory_view``, ``construct_distributed_memory_view``
* tiles.py        -- ``construct_access_tile``, ``construct_indirect_access_tile``
* transfer.py     -- ``load``, ``store`` (and the f32 copies of matmul inputs)
* distributed.py  -- ``inter_tile_produce``, ``inter_tile_reduce``, ``yield_partial``,
  ``yield_reduced``

and what they share: access.py (element access through views and tiles: masking, faults,
written masks), index_code.py (index operands as generated code), stacked_boxes.py (where the
stacked tiles' boxes lie). The run-time records (View, DistView, Tile) are memory_views.py, a
lower layer.
"""

from __future__ import annotations

from . import grid, views, tiles, transfer, distributed  # noqa: F401  (registration)
