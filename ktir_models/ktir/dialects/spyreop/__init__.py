"""The spyreop dialect (the frontend's SpyreOp.td, SpyreOpTypes.td, SpyreOpAttrs.td): Spyre's
intrinsics and its element types. Importing this package registers every op kind.

* ``types``       -- ``!spyreop.df16`` and the fused pairs; the float64 numerics the intrinsics
  share;
* ``intrinsics``  -- the float intrinsics (exp ... softplus, the LayerNorm stages, exx2,
  compare, select);
* ``integer``     -- addi32toi32, addi64toi64, muli32toi32, idx32toaddr;
* ``constant``    -- spyreop.constant;
* ``slice_reduction`` -- spyreop.slice_reduction.
"""

from __future__ import annotations

from . import constant, integer, intrinsics, slice_reduction  # noqa: F401 (registration)
