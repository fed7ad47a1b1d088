"""GEMM nodes: ``y = x @ W^T`` with W bound in PyTorch ``[out, in]`` layout, plus fused epilogues.

Work split: output columns are cut into chunks (:class:`~..tiling.ColumnChunks`) dealt round-robin
to the cores through ``ktdp.get_compute_tile_id``; each chunk runs a K-blocked loop whose
accumulator is f32 (mixed-precision ``linalg.matmul_transpose_b``: f16 tiles, f32 accumulator, so
every product is exact and the long sum never rounds to f16); the epilogue works in f32 and rounds once when storing f16.

Epilogues (all from the f32 accumulators):

* ``"none"``: ``y = acc``
* ``"residual"``: ``y = acc + residual`` (o_proj and down_proj fused with the residual add)
* ``"silu_mul"``: two weights (gate, up): ``y = silu(acc_gate) * acc_up``
* ``"bias"``: ``y = acc + bias`` (qwen2's q/k/v projections; the f16 bias widened to f32 and added
  to the f32 accumulator, as ``nn.Linear`` adds it to its f32 product)

Family scalars, applied to the f32 accumulator before the epilogue adds anything, each exactly as
transformers writes it: ``multiplier`` (``acc * multiplier``: granite's residual_multiplier on a
branch before its residual add) and ``divisor`` (``acc / divisor``: granite's logits_scaling).
A value of 1.0 emits no op. Still one rounding, at the store.
"""

from __future__ import annotations

from ..ktir_text import Kernel, KernelText, Val, View
from ..tiling import plan_gemm, row_blocks
from .rows import RowBase

EPILOGUES = ("none", "residual", "silu_mul", "bias")


def gemm_kernel(
    name: str,
    *,
    m: int,
    k: int,
    n: int,
    x: str,
    weights: list[str],
    out: str,
    epilogue: str = "none",
    residual: str | None = None,
    out_rows: int | None = None,
    out_base: RowBase = RowBase(),
    bias: str | None = None,
    multiplier: float = 1.0,
    divisor: float = 1.0,
    plan_rows: int | None = None,
) -> KernelText:
    """A GEMM kernel.

    ``x`` is ``[m, k]``; each weight ``[n, k]``; the output view has ``out_rows`` rows (default m)
    and rows ``out_base + i`` receive row i (that is how K/V projections write into a cache);
    ``bias`` (epilogue ``"bias"``) is ``[n]``. ``plan_rows`` (default m): the rows the column
    chunks and the K block are planned for. A kernel over fewer rows planned for the rows of
    another computes each of its rows with that kernel's K blocks, so in that kernel's f16
    roundings (the last-token lm_head, ``model/last_token.py``).
    """
    assert epilogue in EPILOGUES, epilogue
    assert (epilogue == "silu_mul") == (len(weights) == 2) and 1 <= len(weights) <= 2, (epilogue, weights)
    assert (epilogue == "residual") == (residual is not None), (epilogue, residual)
    assert (epilogue == "bias") == (bias is not None), (epilogue, bias)
    assert epilogue != "silu_mul" or (multiplier == 1.0 and divisor == 1.0), "scalars on gate/up"
    plan = plan_gemm(m if plan_rows is None else plan_rows, k, n, weights=len(weights),
                     epilogue=epilogue, scalars=int(multiplier != 1.0) + int(divisor != 1.0))
    cols = plan.cols
    extra = [residual] if residual else ([bias] if bias else [])
    args = [x, *weights, *extra, out, *out_base.args()]
    kt = Kernel(name, args, cols.grid)

    xv = kt.view(x, (m, k))
    wvs = [kt.view(w, (n, k)) for w in weights]
    rv = kt.view(residual, (m, n)) if residual else (kt.view(bias, (n,)) if bias else None)
    ov = kt.view(out, (out_rows or m, n))
    core = kt.core_id()

    groups = [(cols.size, cols.full, 0)]
    if cols.tail:
        groups.append((cols.tail, 1, cols.full * cols.size))
    for r0, mb in row_blocks(m):  # plan.rows when plan_rows is m
        for size, count, col_offset in groups:
            j, _, _ = kt.for_begin(core, kt.index(count), kt.index(cols.grid))
            n0 = kt.offset(j, size, col_offset)
            accs = [_k_loop(kt, xv, wv, r0, mb, n0, size, k, plan.kblock) for wv in wvs]
            accs = [_scalars(kt, acc, multiplier, divisor) for acc in accs]
            y = _epilogue(kt, epilogue, accs, rv, r0, n0)
            kt.store(kt.truncf(y), ov, [out_base.plus(kt, r0), n0])
            kt.for_end()
    return KernelText(kt.text(), cols.grid, plan.lx_estimate)


def _k_loop(kt: Kernel, xv: View, wv: View, r0: int, mb: int, n0: Val, size: int, k: int, kb: int) -> Val:
    """``sum over K blocks of x[r0:r0+mb, kk:kk+kb] @ w[n0:n0+size, kk:kk+kb]^T`` in f32."""
    zero = kt.splat(0.0, (mb, size))
    kk, acc, result = kt.for_begin(kt.index(0), kt.index(k), kt.index(kb), carried=zero)
    assert acc is not None
    xt = kt.load(xv, [kt.index(r0), kk], (mb, kb))
    wt = kt.load(wv, [n0, kk], (size, kb))
    nxt = kt.matmul(xt, wt, acc, transpose_b=True)
    out = kt.for_end(nxt, result)
    assert out is not None
    return out


def _scalars(kt: Kernel, acc: Val, multiplier: float, divisor: float) -> Val:
    if multiplier != 1.0:
        acc = kt.binary("mulf", acc, kt.splat(multiplier, acc.shape))
    if divisor != 1.0:
        acc = kt.binary("divf", acc, kt.splat(divisor, acc.shape))
    return acc


def _epilogue(kt: Kernel, kind: str, accs: list[Val], rv: View | None, r0: int, n0: Val) -> Val:
    """``rv`` is the residual view (``"residual"``) or the bias view (``"bias"``)."""
    if kind == "none":
        return accs[0]
    if kind == "residual":
        assert rv is not None
        res = kt.extf(kt.load(rv, [kt.index(r0), n0], accs[0].shape))
        return kt.binary("addf", accs[0], res)
    if kind == "bias":
        assert rv is not None
        mb, size = accs[0].shape
        row = kt.extf(kt.load(rv, [n0], (size,)))
        return kt.binary("addf", accs[0], kt.broadcast(row, (mb, size), new_dim=0))
    gate, up = accs
    # silu(g) = g / (1 + exp(-g)), all in f32.
    one = kt.splat(1.0, gate.shape)
    denom = kt.binary("addf", one, kt.unary("math.exp", kt.unary("arith.negf", gate)))
    return kt.binary("mulf", kt.binary("divf", gate, denom), up)
