"""RoPE nodes: rotate each head of q or k by the host's cos/sin rows (HF layout, ``[m, head_dim]``).

``out = x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = cat(-x2, x1)``, i.e.
``out1 = x1*cos1 - x2*sin1`` and ``out2 = x2*cos2 + x1*sin2`` (both table halves are used, so no
assumption that they repeat). Computed in f32, rounded once. Row r of the output lands at row
``out_base + r``: the rotated k goes straight into the KV cache.

The input ``[m, heads*head_dim]`` is viewed as ``[m*heads, head_dim]`` so one row of tokens is a
``[heads, head_dim/2]`` tile per half; cos/sin are viewed 1-d so their halves broadcast over heads.
"""

from __future__ import annotations

from ....errors import UserError
from ..ktir_text import Kernel, KernelText
from ..tiling import LX_BUDGET, rope_lx, rows_grid
from .rows import RowBase


def rope_kernel(
    name: str,
    *,
    m: int,
    heads: int,
    head_dim: int,
    x: str,
    cos: str,
    sin: str,
    out: str,
    out_rows: int | None = None,
    out_base: RowBase = RowBase(),
) -> KernelText:
    if rope_lx(heads, head_dim) > LX_BUDGET:
        raise UserError(f"config fields 'num_attention_heads' x 'head_dim' = {heads} x {head_dim}: one token's "
                        "heads do not fit a core's LX in the RoPE kernel")
    half = head_dim // 2
    grid = rows_grid(m)
    kt = Kernel(name, [x, cos, sin, out, *out_base.args()], grid)
    xv = kt.view(x, (m * heads, head_dim))
    cv = kt.view(cos, (m * head_dim,))
    sv = kt.view(sin, (m * head_dim,))
    ov = kt.view(out, ((out_rows or m) * heads, head_dim))
    core = kt.core_id()
    c0, ch = kt.index(0), kt.index(half)

    r, _, _ = kt.for_begin(core, kt.index(m), kt.index(grid))
    xrow = kt.offset(r, heads)
    x1 = kt.extf(kt.load(xv, [xrow, c0], (heads, half)))
    x2 = kt.extf(kt.load(xv, [xrow, ch], (heads, half)))

    def table_half(view, first: bool):
        at = kt.offset(r, head_dim, 0 if first else half)
        return kt.broadcast(kt.extf(kt.load(view, [at], (half,))), (heads, half), new_dim=0)

    cos1, cos2 = table_half(cv, True), table_half(cv, False)
    sin1, sin2 = table_half(sv, True), table_half(sv, False)
    out1 = kt.binary("subf", kt.binary("mulf", x1, cos1), kt.binary("mulf", x2, sin1))
    out2 = kt.binary("addf", kt.binary("mulf", x2, cos2), kt.binary("mulf", x1, sin2))
    orow = kt.offset(out_base.plus(kt, r), heads)
    kt.store(kt.truncf(out1), ov, [orow, c0])
    kt.store(kt.truncf(out2), ov, [orow, ch])
    kt.for_end()
    return KernelText(kt.text(), grid, rope_lx(heads, head_dim))
