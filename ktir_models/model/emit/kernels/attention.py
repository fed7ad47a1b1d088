"""Attention nodes: causal GQA attention of the m new query rows over the whole KV cache.

The cache (``[C, kv_heads*head_dim]`` per layer, rows = positions) already holds this pass's
rotated k and its v (written by the RoPE-k and v_proj nodes), so one code path serves decode,
prefill and decode after a prefill: the host's additive mask ``[m, C]`` (0 = visible, -65504 =
hidden) hides the future and the unused cache rows. Query heads are dealt round-robin to the cores;
each head reads the K/V slab of its KV head (``head // (heads / kv_heads)``).

Numerics (all f32, like transformers' eager f32 forward): ``s = (q @ k^T) * head_dim^-0.5 + mask``,
``p = exp(s - max s) / sum``, ``o = p @ v``, rounded once to f16.
"""

from __future__ import annotations

from ..ktir_text import Kernel, KernelText
from ..tiling import plan_attention

#: Initial value of the running row maximum: finite (so ``s - max`` never sees ``inf - inf``).
MAX_INIT = -3.0e38


def attention_kernel(
    name: str,
    *,
    m: int,
    capacity: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    q: str,
    k_cache: str,
    v_cache: str,
    mask: str,
    out: str,
) -> KernelText:
    plan = plan_attention(m, capacity, heads, head_dim)
    group = heads // kv_heads
    kt = Kernel(name, [q, k_cache, v_cache, mask, out], plan.grid)
    qv = kt.view(q, (m, heads * head_dim))
    kv = kt.view(k_cache, (capacity, kv_heads * head_dim))
    vv = kt.view(v_cache, (capacity, kv_heads * head_dim))
    mv = kt.view(mask, (m, capacity))
    ov = kt.view(out, (m, heads * head_dim))
    core = kt.core_id()
    c0 = kt.index(0)

    h, _, _ = kt.for_begin(core, kt.index(heads), kt.index(plan.grid))
    qcol = kt.offset(h, head_dim)
    kvh = h if group == 1 else kt.divui(h, kt.index(group))
    kcol = kt.offset(kvh, head_dim)
    keys = kt.extf(kt.load(kv, [c0, kcol], (capacity, head_dim)))
    values = kt.extf(kt.load(vv, [c0, kcol], (capacity, head_dim)))
    for r0, mb in plan.rows:
        row = kt.index(r0)
        qt = kt.extf(kt.load(qv, [row, qcol], (mb, head_dim)))
        s = kt.matmul(qt, keys, kt.splat(0.0, (mb, capacity)), transpose_b=True)
        s = kt.binary("mulf", s, kt.splat(head_dim**-0.5, (mb, capacity)))
        s = kt.binary("addf", s, kt.extf(kt.load(mv, [row, c0], (mb, capacity))))
        top = kt.reduce_rows("maximumf", s, kt.splat(MAX_INIT, (mb,)))
        p = kt.unary("math.exp", kt.binary("subf", s, kt.broadcast(top, (mb, capacity), new_dim=1)))
        total = kt.reduce_rows("addf", p, kt.splat(0.0, (mb,)))
        p = kt.binary("divf", p, kt.broadcast(total, (mb, capacity), new_dim=1))
        o = kt.matmul(p, values, kt.splat(0.0, (mb, head_dim)), transpose_b=False)
        kt.store(kt.truncf(o), ov, [row, qcol])
    kt.for_end()
    return KernelText(kt.text(), plan.grid, plan.lx_estimate)
