"""RMSNorm nodes: ``y = w * x / sqrt(mean(x^2) + eps)`` per row, all in f32, rounded once.

Rows are dealt round-robin to ``min(m, 32)`` cores; the weight is loaded once per core.
"""

from __future__ import annotations

from ....errors import UserError
from ..ktir_text import Kernel, KernelText
from ..tiling import LX_BUDGET, rmsnorm_lx, rows_grid


def rmsnorm_kernel(name: str, *, m: int, hidden: int, eps: float, x: str, weight: str, out: str) -> KernelText:
    if rmsnorm_lx(hidden) > LX_BUDGET:
        raise UserError(f"config field 'hidden_size' = {hidden}: one row does not fit a core's LX in the RMSNorm kernel")
    grid = rows_grid(m)
    kt = Kernel(name, [x, weight, out], grid)
    xv = kt.view(x, (m, hidden))
    wv = kt.view(weight, (hidden,))
    ov = kt.view(out, (m, hidden))
    core = kt.core_id()
    w = kt.broadcast(kt.extf(kt.load(wv, [kt.index(0)], (hidden,))), (1, hidden), new_dim=0)

    r, _, _ = kt.for_begin(core, kt.index(m), kt.index(grid))
    row = kt.extf(kt.load(xv, [r, kt.index(0)], (1, hidden)))
    total = kt.reduce_rows("addf", kt.binary("mulf", row, row), kt.splat(0.0, (1,)))
    mean = kt.binary("divf", total, kt.splat(float(hidden), (1,)))
    rms = kt.unary("math.sqrt", kt.binary("addf", mean, kt.splat(eps, (1,))))
    inv = kt.binary("divf", kt.splat(1.0, (1,)), rms)
    normed = kt.binary("mulf", row, kt.broadcast(inv, (1, hidden), new_dim=1))
    kt.store(kt.truncf(kt.binary("mulf", normed, w)), ov, [r, kt.index(0)])
    kt.for_end()
    return KernelText(kt.text(), grid, rmsnorm_lx(hidden))
