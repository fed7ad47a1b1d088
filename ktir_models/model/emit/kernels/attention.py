"""Attention nodes: causal GQA attention of the m new query rows over the KV cache.

The cache (``[C, kv_heads*head_dim]`` per layer, rows = positions) already holds this pass's
rotated k and its v at rows ``past .. past+m-1`` (written by the RoPE-k and v_proj nodes). The
scores have two parts, joined in one softmax:

* the *prefix*: cache rows ``0 .. past-1`` plus the host's additive mask ``[m, C]`` (0 = visible,
  -65504 = hidden; the external dumps' convention: columns ``< past`` visible). With a static
  position only the ``past`` valid rows are read (none for a first pass); with a dynamic position
  (one decode program for every step) all C rows are read and the mask hides the unused ones;
* the *fresh* block: cache rows ``past .. past+m-1`` with the causal triangle of the m new tokens
  (a constant of the program: it depends on m only).

Query heads are dealt round-robin to the cores; each head reads the K/V rows of its KV head
(``head // (heads / kv_heads)``). Numerics (all f32, like transformers' eager f32 forward):
``s = (q @ k^T) * head_dim^-0.5 + mask``, ``p = exp(s - max s) / sum p``, ``o = p @ v``, rounded
once to f16. The matmuls take the f16 q/K/V tiles directly (mixed precision, f32 accumulator).

Sliding window (mistral, ``window`` = W): the query at position p sees keys at positions
``p - W < j <= p``. For the fresh block that is part of the causal constant (row i sees fresh keys
``i - W < j <= i``); for the prefix the host's mask hides the old columns (docs/emitter.md, "Host
contract"), so one program serves every position.
"""

from __future__ import annotations

from ..ktir_text import Kernel, KernelText, Val, float_literal
from ..tiling import LX_BUDGET, AttentionPlan, plan_attention
from .rows import RowBase

#: Initial value of the running row maximum: finite (so ``s - max`` never sees ``inf - inf``).
MAX_INIT = -3.0e38
#: Additive mask value of a hidden key (the most negative finite f16).
HIDDEN = -65504.0


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
    fresh: RowBase,
    budget: int = LX_BUDGET,
    scale: float | None = None,
    window: int | None = None,
) -> KernelText:
    """``fresh`` is where this pass's rows start in the cache (the constant ``past`` or the
    ``pos`` argument). The prefix part reads ``past`` rows when static, all C rows when dynamic.
    ``scale`` (default ``head_dim ** -0.5``) multiplies the scores; ``window`` limits the fresh
    block's causal constant to the sliding window."""
    prefix_rows = capacity if fresh.arg is not None else fresh.static
    scale = head_dim**-0.5 if scale is None else scale
    plan = plan_attention(m, capacity, heads, head_dim, budget)
    if plan.key_block is not None:
        return _streaming_attention(name, plan, m=m, capacity=capacity, heads=heads, kv_heads=kv_heads,
                                    head_dim=head_dim, q=q, k_cache=k_cache, v_cache=v_cache, mask=mask,
                                    out=out, fresh=fresh, prefix_rows=prefix_rows, scale=scale,
                                    window=window)
    group = heads // kv_heads
    kt, (qv, kv, vv, mv, ov) = _kernel_and_views(name, plan, m=m, capacity=capacity, heads=heads,
                                                 kv_heads=kv_heads, head_dim=head_dim, q=q,
                                                 k_cache=k_cache, v_cache=v_cache, mask=mask,
                                                 out=out, fresh=fresh)
    core = kt.core_id()
    c0 = kt.index(0)
    frow = fresh.value(kt)

    h, _, _ = kt.for_begin(core, kt.index(heads), kt.index(plan.grid))
    qcol = kt.offset(h, head_dim)
    kvh = h if group == 1 else kt.divui(h, kt.index(group))
    kcol = kt.offset(kvh, head_dim)
    # K/V rows of this head: the prefix (if any) and the fresh block, loaded once per head.
    prefix = None
    if prefix_rows > 0:
        prefix = (kt.load(kv, [c0, kcol], (prefix_rows, head_dim)),
                  kt.load(vv, [c0, kcol], (prefix_rows, head_dim)))
    fresh_k = kt.load(kv, [frow, kcol], (m, head_dim))
    fresh_v = kt.load(vv, [frow, kcol], (m, head_dim))
    for r0, mb in plan.rows:
        row = kt.index(r0)
        qt = kt.load(qv, [row, qcol], (mb, head_dim))
        parts = []  # (scores, values) of each part
        if prefix is not None:
            mask_tile = kt.extf(kt.load(mv, [row, c0], (mb, prefix_rows)))
            parts.append((attention_scores(kt, qt, prefix[0], mask_tile, scale), prefix[1]))
        causal = _causal(kt, r0, mb, m, window)
        parts.append((attention_scores(kt, qt, fresh_k, causal, scale), fresh_v))

        top = kt.splat(MAX_INIT, (mb,))
        for s, _ in parts:
            top = kt.binary("maximumf", top, kt.reduce_rows("maximumf", s, kt.splat(MAX_INIT, (mb,))))
        total = kt.splat(0.0, (mb,))
        o = kt.splat(0.0, (mb, head_dim))
        for s, values in parts:
            p = kt.unary("math.exp", kt.binary("subf", s, kt.broadcast(top, s.shape, new_dim=1)))
            total = kt.binary("addf", total, kt.reduce_rows("addf", p, kt.splat(0.0, (mb,))))
            o = kt.matmul(p, values, o, transpose_b=False)
        o = kt.binary("divf", o, kt.broadcast(total, (mb, head_dim), new_dim=1))
        kt.store(kt.truncf(o), ov, [row, qcol])
    kt.for_end()
    return KernelText(kt.text(), plan.grid, plan.lx_estimate)


def _streaming_attention(name: str, plan: AttentionPlan, *, m: int, capacity: int, heads: int, kv_heads: int,
                         head_dim: int, q: str, k_cache: str, v_cache: str, mask: str, out: str,
                         fresh: RowBase, prefix_rows: int, scale: float, window: int | None) -> KernelText:
    """Long caches: the prefix keys stream through blocks of ``plan.key_block`` rows with an
    online softmax (running row max, running sum, running output, all f32, carried by one
    ``scf.for``; a ragged last block follows the loop), then the fresh block; one division at the
    end. Same result as the single pass up to f32 reassociation."""
    kb = plan.key_block
    assert kb is not None
    group = heads // kv_heads
    kt, (qv, kv, vv, mv, ov) = _kernel_and_views(name, plan, m=m, capacity=capacity, heads=heads,
                                                 kv_heads=kv_heads, head_dim=head_dim, q=q,
                                                 k_cache=k_cache, v_cache=v_cache, mask=mask,
                                                 out=out, fresh=fresh)
    core = kt.core_id()
    frow = fresh.value(kt)
    full, tail = divmod(prefix_rows, kb)

    h, _, _ = kt.for_begin(core, kt.index(heads), kt.index(plan.grid))
    qcol = kt.offset(h, head_dim)
    kvh = h if group == 1 else kt.divui(h, kt.index(group))
    kcol = kt.offset(kvh, head_dim)
    fresh_k = kt.load(kv, [frow, kcol], (m, head_dim))
    fresh_v = kt.load(vv, [frow, kcol], (m, head_dim))
    for r0, mb in plan.rows:
        row = kt.index(r0)
        qt = kt.load(qv, [row, qcol], (mb, head_dim))
        state = [kt.splat(MAX_INIT, (mb,)), kt.splat(0.0, (mb,)), kt.splat(0.0, (mb, head_dim))]

        def block(at: Val, size: int, state: list[Val]) -> list[Val]:
            keys = kt.load(kv, [at, kcol], (size, head_dim))
            values = kt.load(vv, [at, kcol], (size, head_dim))
            bias = kt.extf(kt.load(mv, [row, at], (mb, size)))
            return online_step(kt, state, qt, keys, values, bias, scale)

        if full:
            j, carried, result = kt.loop_begin(kt.index(0), kt.index(full * kb), kt.index(kb), state)
            state = kt.loop_end(block(j, kb, carried), result)
        if tail:
            state = block(kt.index(full * kb), tail, state)
        state = online_step(kt, state, qt, fresh_k, fresh_v, _causal(kt, r0, mb, m, window), scale)
        _, total, o = state
        o = kt.binary("divf", o, kt.broadcast(total, (mb, head_dim), new_dim=1))
        kt.store(kt.truncf(o), ov, [row, qcol])
    kt.for_end()
    return KernelText(kt.text(), plan.grid, plan.lx_estimate)


def _kernel_and_views(name: str, plan: AttentionPlan, *, m: int, capacity: int, heads: int,
                      kv_heads: int, head_dim: int, q, k_cache, v_cache, mask, out, fresh):
    """The attention kernel and its five HBM views (q, K cache, V cache, mask, out), in the
    argument order both attention forms share."""
    kt = Kernel(name, [q, k_cache, v_cache, mask, out, *fresh.args()], plan.grid)
    views = (kt.view(q, (m, heads * head_dim)), kt.view(k_cache, (capacity, kv_heads * head_dim)),
             kt.view(v_cache, (capacity, kv_heads * head_dim)), kt.view(mask, (m, capacity)),
             kt.view(out, (m, heads * head_dim)))
    return kt, views


def online_step(kt: Kernel, state: list[Val], q: Val, keys: Val, values: Val, bias: Val,
                scale: float) -> list[Val]:
    """One online-softmax step: fold the scores of ``keys`` into (row max, row sum, output)."""
    top, total, o = state
    s = attention_scores(kt, q, keys, bias, scale)
    new_top = kt.binary("maximumf", top, kt.reduce_rows("maximumf", s, kt.splat(MAX_INIT, top.shape)))
    alpha = kt.unary("math.exp", kt.binary("subf", top, new_top))  # rescales what came before
    p = kt.unary("math.exp", kt.binary("subf", s, kt.broadcast(new_top, s.shape, new_dim=1)))
    total = kt.binary("addf", kt.binary("mulf", total, alpha), kt.reduce_rows("addf", p, kt.splat(0.0, top.shape)))
    o = kt.matmul(p, values, kt.binary("mulf", o, kt.broadcast(alpha, o.shape, new_dim=1)), transpose_b=False)
    return [new_top, total, o]


def attention_scores(kt: Kernel, q: Val, keys: Val, mask: Val, scale: float) -> Val:
    """``(q @ keys^T) * scale + mask`` in f32."""
    s = kt.matmul(q, keys, kt.splat(0.0, (q.shape[0], keys.shape[0])), transpose_b=True)
    s = kt.binary("mulf", s, kt.splat(scale, s.shape))
    return kt.binary("addf", s, mask)


def _causal(kt: Kernel, r0: int, mb: int, m: int, window: int | None = None) -> Val:
    """Rows ``r0 .. r0+mb-1`` of the causal triangle of m fresh tokens (f32 constant):
    row i sees fresh keys ``0 .. i``, and with a sliding ``window`` only those with ``i - j < window``."""
    if m == 1:  # a single fresh token sees itself
        return kt.splat(0.0, (1, 1))
    zero, hidden = float_literal(0.0, "f32"), float_literal(HIDDEN, "f32")
    rows = []
    for i in range(r0, r0 + mb):
        rows.append("[" + ", ".join(zero if j <= i and (window is None or i - j < window) else hidden
                                    for j in range(m)) + "]")
    out = Val(kt.fresh("causal"), (mb, m), "f32")
    kt.emit(f"{out.name} = arith.constant dense<[{', '.join(rows)}]> : {out.type}")
    return out
