"""A cycle-approximate roofline model of KTIR kernels: per op, per node (function), per model.

The model is *static*: it walks a function's IR once per core of its grid with a tiny evaluator
for index scalars (constants, tile ids, loop induction variables, integer arithmetic, and the
call's integer arguments when given), so it needs no data and no emulator run. Every core's costs
are kept (``NodeLatency.cores``); with tracing, each core lists one event per executed op. Costs (see docs/latency.md for the derivation of every number):

* ``hbm``        -- ``ktdp.load``/``ktdp.store`` on HBM: bytes counted in whole 128-byte sticks
  touched, at ``HBM bandwidth / active cores`` bytes per cycle. Kernel pointer arguments are
  assumed stick-aligned (the runner's HBM regions are).
* ``lx``         -- loads/stores on LX: bytes counted; cycles only if ``lx_bytes_per_cycle`` is set
  (the default treats the scratchpad as free, like the reference model).
* ``vector``     -- float/int elementwise ops, reductions, casts on tensors: elements / SIMD width.
* ``transcendental`` -- ``math.exp``-like ops: vector cost times ``transcendental_penalty``.
* ``matmul``     -- ``linalg.matmul*``: ``2*M*N*K`` FLOP / systolic FLOP per cycle.
* ``layout``     -- ops that materialise data in LX without arithmetic (transpose, broadcast,
  fill, splat, slices): elements / SIMD width.
* ``comm``       -- ``ktdp.inter_tile_reduce`` / ``inter_tile_consume``: bytes forwarded around
  the ring.

Scalar index math, views, access tiles, ``tensor.empty``/reshapes and control flow are free;
region bodies (loops, branches, produce regions) charge their inner ops per execution.

Per core: ``memory = hbm + lx``, ``compute = vector + transcendental + matmul + layout``;
``total = memory + compute + comm`` (pipeline "serial") or their maximum ("overlapped").
A node's cycles are the maximum over its cores; its bottleneck is the largest of memory, compute
and comm on that critical core. A model's cycles are the sum over its nodes (nodes run one after
the other).

Invariants: costs are never negative; a quantity that cannot be known statically (a loop bound
read from memory, say) is replaced by a stated assumption recorded in ``notes``, never silently.

Layout (by job): ``params`` (:class:`HardwareParams`, the categories), ``records`` (the result
records), ``walker`` (one core's walk: bookkeeping, dispatch by the registry's ``cost`` part,
the generic rules), ``nodes`` (:func:`function_latency`, :func:`model_latency`) and
``footprints`` (the store map, :func:`store_footprints`). Each op kind's cost (a handler or a
category name) is declared with the op kind in its dialect module (dialects/).
"""

from __future__ import annotations

from .footprints import StoreFootprint, store_footprints
from .nodes import function_latency, model_latency
from .params import (CATEGORIES, COMPUTE_CATEGORIES, EXACT_TRIP_LIMIT, MEMORY_CATEGORIES,
                     STICK_BYTES, HardwareParams)
from .records import CoreCost, ModelLatency, NodeLatency, OpCost, TraceEvent

__all__ = ["CATEGORIES", "COMPUTE_CATEGORIES", "EXACT_TRIP_LIMIT", "MEMORY_CATEGORIES", "STICK_BYTES",
           "CoreCost", "HardwareParams", "ModelLatency", "NodeLatency", "OpCost", "StoreFootprint",
           "TraceEvent", "function_latency", "model_latency", "store_footprints"]
