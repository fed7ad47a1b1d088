"""Paged KV-cache kernels of a serving step: the cache write by slot mapping and the attention that
reads each sequence's keys through its block table.

The KV cache of one layer is a pool of ``num_blocks`` blocks of ``block_size`` token slots, one
f16 tensor per k|v, ``[num_blocks, block_size, kv_heads, head_dim]`` (viewed here as
``[num_blocks * block_size, kv_dim]`` rows = slots, or ``[num_blocks, block_size, kv_dim]``). The
host binds two i32 index tables per step (docs/serving.md):

* ``slots [rows]``: the slot each of the step's rows writes its rotated k and its v to;
* ``block_table [groups, max_blocks]``: the pool blocks of each row group's sequence, in position
  order (position ``p`` of the sequence lives in slot ``block_table[g, p // block_size] *
  block_size + p % block_size``).

Both are read with ``ktdp.construct_indirect_access_tile``: the write scatters one row per tile
(``cache[ind(slots[r]), :]``), the attention gathers ``keys`` key rows per tile
(``cache[ind(block_table[g, b + p floordiv block_size]), p mod block_size, kv columns]``).

The attention's additive mask ``[rows, max_blocks * block_size]`` (0 visible, -65504 hidden) is the
host's: it holds causality, each sequence's context length and the sliding window, so the kernel
has no constant of its own and one program serves every step of its shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....errors import UserError
from ..ktir_text import Kernel, KernelText, Val, View, box_set, identity_map
from ..tiling import LX_BUDGET, MAX_CORES
from .attention import MAX_INIT, online_step


@dataclass(frozen=True)
class RowGroups:
    """The row groups of a step: an optional prefill group of ``prefill_rows`` rows (rows
    ``0 .. prefill_rows-1``, group 0), then ``decode_groups`` groups of one row each (group
    ``g0 + d`` is row ``prefill_rows + d``)."""

    prefill_rows: int
    decode_groups: int

    @property
    def rows(self) -> int:
        return self.prefill_rows + self.decode_groups

    @property
    def count(self) -> int:
        return (1 if self.prefill_rows else 0) + self.decode_groups

    @property
    def first_decode_group(self) -> int:
        return 1 if self.prefill_rows else 0


def indirect_tile(kt: Kernel, view: View, index: View, index_subs: str, subs: list[str],
                  shape: tuple[int, ...]) -> str:
    """An indirect access tile over ``view``: the first subscript is ``ind(index[index_subs])``,
    the others ``subs``; intermediate variables ``%p0, %p1, ...`` range over ``shape``."""
    tile = kt.fresh("gather")
    names = [f"%p{i}" for i in range(len(shape))]
    ttype = f"!ktdp.access_tile<{'x'.join(str(d) for d in shape)}xindex>"
    direct = ", ".join(f"({s})" for s in subs)
    kt.emit(f"{tile} = ktdp.construct_indirect_access_tile "
            f"intermediate_variables({', '.join(names)}) "
            f"{view.name}[ind({index.name}[{index_subs}]), {direct}] {{")
    kt.emit(f"  variables_space_set = {box_set(shape)},")
    kt.emit(f"  variables_space_order = {identity_map(len(shape))}")
    kt.emit(f"}} : {view.type}, {index.type} -> {ttype}")
    return tile


def load_tile(kt: Kernel, tile: str, shape: tuple[int, ...], dtype: str) -> Val:
    out = Val(kt.fresh("v"), tuple(shape), dtype)
    dims = "x".join(str(d) for d in shape)
    kt.emit(f"{out.name} = ktdp.load {tile} : !ktdp.access_tile<{dims}xindex> -> {out.type}")
    return out


def cache_write_kernel(name: str, *, rows: int, slots_total: int, kv_dim: int, k_new: str,
                       v_new: str, slots: str, k_cache: str, v_cache: str) -> KernelText:
    """``k_cache[slots[r]] = k_new[r]`` and the same for v, for every row r; rows dealt
    round-robin to ``min(rows, 32)`` cores. Every row writes (padding rows the host points at the
    pool's scratch block)."""
    grid = min(MAX_CORES, rows)
    kt = Kernel(name, [k_new, v_new, slots, k_cache, v_cache], grid)
    kn, vn = kt.view(k_new, (rows, kv_dim)), kt.view(v_new, (rows, kv_dim))
    sv = kt.view(slots, (rows,), "i32")
    kc, vc = kt.view(k_cache, (slots_total, kv_dim)), kt.view(v_cache, (slots_total, kv_dim))
    c0 = kt.index(0)
    r, _, _ = kt.for_begin(kt.core_id(), kt.index(rows), kt.index(grid))
    for new, cache in ((kn, kc), (vn, vc)):
        row = kt.load(new, [r, c0], (1, kv_dim))
        tile = indirect_tile(kt, cache, sv, f"{r.name} + %p0", ["%p1"], (1, kv_dim))
        kt.emit(f"ktdp.store {row.name}, {tile} : {row.type}, !ktdp.access_tile<1x{kv_dim}xindex>")
    kt.for_end()
    return KernelText(kt.text(), grid, 2 * kv_dim * 2)


def paged_attention_lx(rows: int, keys: int, head_dim: int) -> int:
    """LX of one (group, head) step over ``keys`` gathered keys: q (f16), K and V (f16), the mask
    tile (f16 + f32), scores and probabilities (f32, twice for the rescale), the running output
    (f32, carried: twice) and its rescaled copy."""
    return (rows * head_dim * 2 + 2 * keys * head_dim * 2 + rows * keys * (2 + 4 * 4)
            + rows * head_dim * 4 * 3)


def key_blocks(rows: int, max_blocks: int, block_size: int, head_dim: int, budget: int) -> int:
    """Pool blocks gathered per online-softmax step: the largest divisor of ``max_blocks`` whose
    keys fit the LX budget with ``rows`` query rows (UserError when not even one block fits)."""
    fits = [b for b in range(1, max_blocks + 1)
            if max_blocks % b == 0 and paged_attention_lx(rows, b * block_size, head_dim) <= budget]
    if not fits:
        raise UserError(f"paged attention: {rows} query rows x block size {block_size} "
                        f"(head_dim {head_dim}) do not fit one core's LX; use a smaller --chunk "
                        "or --block-size")
    return fits[-1]


def paged_attention_kernel(name: str, *, groups: RowGroups, heads: int, kv_heads: int,
                           head_dim: int, block_size: int, num_blocks: int, max_blocks: int,
                           q: str, k_cache: str, v_cache: str, block_table: str, mask: str,
                           out: str, scale: float, budget: int = LX_BUDGET) -> KernelText:
    """GQA attention of every row group over its own sequence's keys, gathered through the block
    table; (group, head) pairs dealt round-robin to the cores (the prefill group's heads first,
    then the decode groups' pairs). Numerics as the contiguous attention (``attention.py``): f32
    scores, scale, mask, online softmax over key blocks, ``p @ v``, one rounding."""
    rows, context, kv_dim = groups.rows, max_blocks * block_size, kv_heads * head_dim
    work = (heads if groups.prefill_rows else 0) + groups.decode_groups * heads
    grid = min(MAX_CORES, work)
    kt = Kernel(name, [q, k_cache, v_cache, block_table, mask, out], grid)
    views = _Views(
        q=kt.view(q, (rows, heads * head_dim)),
        k=kt.view(k_cache, (num_blocks, block_size, kv_dim)),
        v=kt.view(v_cache, (num_blocks, block_size, kv_dim)),
        table=kt.view(block_table, (groups.count, max_blocks), "i32"),
        mask=kt.view(mask, (rows, context)),
        out=kt.view(out, (rows, heads * head_dim)))
    core = kt.core_id()
    lx = 0
    step = _Step(kt, views, heads=heads, group=heads // kv_heads, head_dim=head_dim,
                 block_size=block_size, max_blocks=max_blocks, scale=scale)
    if groups.prefill_rows:
        kb = key_blocks(groups.prefill_rows, max_blocks, block_size, head_dim, budget)
        lx = paged_attention_lx(groups.prefill_rows, kb * block_size, head_dim)
        h, _, _ = kt.for_begin(core, kt.index(heads), kt.index(grid))
        step.emit(kt.index(0), kt.index(0), groups.prefill_rows, h, kb)
        kt.for_end()
    if groups.decode_groups:
        kb = key_blocks(1, max_blocks, block_size, head_dim, budget)
        lx = max(lx, paged_attention_lx(1, kb * block_size, head_dim))
        pairs = groups.decode_groups * heads
        # the decode pairs continue the round-robin where the prefill heads stopped
        start = core
        if groups.prefill_rows:
            shift = (grid - heads % grid) % grid
            start = _remui(kt, kt.addi(core, kt.index(shift)), kt.index(grid))
        w, _, _ = kt.for_begin(start, kt.index(pairs), kt.index(grid))
        d = kt.divui(w, kt.index(heads))
        h = _remui(kt, w, kt.index(heads))
        g = kt.addi(d, kt.index(groups.first_decode_group)) if groups.first_decode_group else d
        row = kt.addi(d, kt.index(groups.prefill_rows)) if groups.prefill_rows else d
        step.emit(g, row, 1, h, kb)
        kt.for_end()
    return KernelText(kt.text(), grid, lx)


@dataclass(frozen=True)
class _Views:
    q: View
    k: View
    v: View
    table: View
    mask: View
    out: View


@dataclass(frozen=True)
class _Step:
    """One (group, head) work item: gather, online softmax over key blocks, normalise, store."""

    kt: Kernel
    views: _Views
    heads: int
    group: int  # query heads per KV head
    head_dim: int
    block_size: int
    max_blocks: int
    scale: float

    def emit(self, g: Val, row: Val, rows: int, h: Val, kb: int) -> None:
        kt, vw, hd, bs = self.kt, self.views, self.head_dim, self.block_size
        qcol = kt.offset(h, hd)
        kvh = h if self.group == 1 else kt.divui(h, kt.index(self.group))
        kcol = kt.offset(kvh, hd)
        qt = kt.load(vw.q, [row, qcol], (rows, hd))
        state = [kt.splat(MAX_INIT, (rows,)), kt.splat(0.0, (rows,)), kt.splat(0.0, (rows, hd))]
        keys = kb * bs

        def block(b: Val, state: list[Val]) -> list[Val]:
            subs = f"{g.name}, {b.name} + %p0 floordiv {bs}"
            cols = [f"%p0 mod {bs}", f"{kcol.name} + %p1"]
            k, v = (load_tile(kt, indirect_tile(kt, pool, vw.table, subs, cols, (keys, hd)),
                              (keys, hd), "f16") for pool in (vw.k, vw.v))
            bias = kt.extf(kt.load(vw.mask, [row, kt.offset(b, bs)], (rows, keys)))
            return online_step(kt, state, qt, k, v, bias, self.scale)

        if kb == self.max_blocks:
            state = block(kt.index(0), state)
        else:
            b, carried, result = kt.loop_begin(kt.index(0), kt.index(self.max_blocks),
                                               kt.index(kb), state)
            state = kt.loop_end(block(b, carried), result)
        _, total, o = state
        o = kt.binary("divf", o, kt.broadcast(total, (rows, hd), new_dim=1))
        kt.store(kt.truncf(o), vw.out, [row, qcol])


def _remui(kt: Kernel, a: Val, b: Val) -> Val:
    v = kt.fresh("i")
    kt.emit(f"{v} = arith.remui {a.name}, {b.name} : index")
    return Val(v, (), "index")
