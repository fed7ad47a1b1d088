"""Stacked steps on ragged values: repeated groups (reroll.py) whose values differ in shape.

An unrolled loop over rows often gives each row a tile of another length: the prefill attention
of row r reads the r + 1 new keys. reroll.py compiles the *template* group, the one where every
such ragged value has its largest shape, and runs it for every group side by side. A ragged value
is then held in the template's shape, stacked by (virtual) core; for core v only the leading
``lengths[v]`` entries of each ragged dimension are the group's value, the rest is *junk* (what
the padded computation gives). An op may touch a ragged value only where the valid entries of its
results are exactly the group's results, whatever the junk holds (inf and NaN included):

* elementwise float ops, casts, compares, selects, transpose, broadcast, splat, empty: entry by
  entry;
* loads of box tiles in identity order at the group's corner (reroll.py checks the corners): the
  group's box is the leading part of the template's box. The memory beyond it is read, never
  written; a padded box outside its view or memory faults, and the run is redone plainly;
* matmuls: ragged rows or columns are entry by entry. A ragged reduction dimension k is padded
  with +0.0 in both operands, and only on the native kernel, which sums each element sequentially
  over k from +0.0: the group's products come first, and the sum is never -0.0 (it starts at +0.0
  and x + y rounds to -0.0 only when both are -0.0), so the padded ±0.0 products leave it as it is;
* reductions over a ragged dimension: max and min fill the junk with their identity (-inf, +inf;
  NaN for maxnumf/minnumf, which ignore it); sums, whose f32 order numpy picks by length, run per
  group on exactly its valid entries;
* extract at constant indices inside every group's extent.

Anything else that touches a ragged value (a store of a ragged tile, loops, reshapes, integer
ops, ...) raises :class:`Unsupported`, and the function is not rerolled.

Group-invariant operands. On a grid, virtual core v runs group v % G of core v // G, and a tile
whose corner depends on the core only (the keys and values of a core's head, read by every row)
holds the same data for all G groups of a core. When such a load feeds only transposes and the
B operand of native matmuls, it is read once per core, a :class:`Shared` [C, ...] value, and the
matmul multiplies the G groups' A rows of a core as one [G*M, K] block by it: the same products
summed in the same order (the native kernel's order depends on nothing but k).
"""

from __future__ import annotations

import numpy as np

from ..ir.nodes import Op, TensorType
from ..backends.f16_convert import f16_all_finite
from ..backends.row_reduce import row_sums
from .stacked_values import Builder, Fallback, StackedTile, fallback, lift

_FLOAT_ELEMENTWISE = {
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf", "arith.maximumf",
    "arith.minimumf", "arith.maxf", "arith.minf", "arith.maxnumf", "arith.minnumf",
    "arith.negf", "arith.absf", "arith.cmpf", "arith.select", "arith.extf", "arith.truncf",
    "math.exp", "math.exp2", "math.log", "math.log2", "math.log10", "math.log1p", "math.sqrt",
    "math.rsqrt", "math.tanh", "math.sin", "math.cos", "math.erf", "math.absf", "math.ceil",
    "math.floor", "math.round", "math.fma", "math.powf",
}
_ENTRYWISE = _FLOAT_ELEMENTWISE | {
    "linalg.transpose", "linalg.broadcast", "tensor.splat", "tensor.empty", "arith.constant",
    "ktdp.construct_access_tile", "ktdp.load",
}
_MATMULS = ("linalg.matmul", "linalg.matmul_transpose_b", "linalg.batch_matmul")
_PAD = {"max": -np.inf, "min": np.inf, "nanmax": np.nan, "nanmin": np.nan}


class Unsupported(Exception):
    """An op that cannot run on padded ragged values: the function is not rerolled."""


def ragged_dims(shapes: list) -> dict:
    """{dimension: [extent per group]} for the dimensions where the groups' shapes differ."""
    return {d: [s[d] for s in shapes] for d in range(len(shapes[0]))
            if len({s[d] for s in shapes}) > 1}


def masked_ops(ops: list, ragged: dict) -> list:
    """The ops of ``ops`` whose result depends on where a group's valid entries end (matmuls
    over a ragged k, reductions over a ragged dimension): their results vary between groups
    even when their operands do not."""
    out = []
    for op in ops:
        if op.name in _MATMULS:
            a, b = op.groups["ins"]
            if _k_dim(op, 0) in ragged.get(id(a), {}) or _k_dim(op, 1) in ragged.get(id(b), {}):
                out.append(op)
        elif op.name == "linalg.reduce":
            x = op.groups["ins"][0]
            if set(op.attrs["dimensions"]) & set(ragged.get(id(x), {})):
                out.append(op)
    return out


def _k_dim(op: Op, operand: int) -> int:
    rank = len(op.groups["ins"][operand].type.shape)
    if operand == 0 or op.name == "linalg.matmul_transpose_b":
        return rank - 1
    return rank - 2


def _mask(lengths: np.ndarray, shape: tuple, dim: int) -> np.ndarray:
    """[C, 1.., n, ..1]: True where index ``dim`` of a value of ``shape`` is below the core's
    extent."""
    n = shape[dim]
    m = np.arange(n, dtype=np.int64)[None, :] < lengths[:, None]
    view = [len(lengths)] + [1] * len(shape)
    view[dim + 1] = n
    out = m.reshape(view)
    out.flags.writeable = False
    return out


def _masks(b: Builder, v) -> list:
    """(mask, dimension) per ragged dimension of value ``v``."""
    shape = tuple(v.type.shape)
    return [(_mask(lengths, shape, d), d) for d, lengths in b.ragged.get(id(v), {}).items()]


class Shared:
    """A group-invariant value held once per core: ``compact`` [C, ...]; item v (virtual core v,
    for core-by-core fallbacks) is its core's."""

    __slots__ = ("compact", "G")

    def __init__(self, compact: np.ndarray, G: int):
        self.compact = compact
        self.G = G

    def __getitem__(self, v: int):
        return self.compact[v // self.G]

    def expanded(self) -> np.ndarray:
        return np.repeat(self.compact, self.G, axis=0)


def shares_b(c, op: Op, vary_ids: set) -> bool:
    """Whether matmul ``op`` can take a per-core B (:class:`Shared`): on the native kernel, with
    a 2-D A and a zero or per-virtual-core accumulator (the rows of a core's groups then form
    one block)."""
    from ..dialects.linalg import is_zero_const as _is_zero_const
    from .native_matmul import uses_native

    (a, _), (acc,) = op.groups["ins"], op.groups["outs"]
    return uses_native(c, op) and len(a.type.shape) == 2 and \
        (_is_zero_const(c, acc) or id(acc) in vary_ids)


def shareable(ops: list, invariant: set, native) -> set:
    """ids of the values of ``ops`` to hold as :class:`Shared`: group-invariant loads (and
    transposes of them) whose every use is a transpose of the kind or the B operand of a
    matmul that ``native(op)`` accepts (:func:`shares_b`)."""
    users: dict = {}
    for op in ops:
        for v in op.operands:
            users.setdefault(id(v), []).append(op)
    out: set = set()

    def ok(v) -> bool:
        uses = users.get(id(v), [])
        return bool(uses) and all(
            (u.name == "linalg.transpose" and u.result is not None and ok(u.result)) or
            (u.name in _MATMULS and native(u) and u.groups["ins"][1] is v and
             u.groups["ins"][0] is not v and id(u.groups["ins"][0]) not in invariant)
            for u in uses)

    for op in reversed(ops):  # users first, so a transpose's result is decided before its input
        if op.name in ("ktdp.load", "linalg.transpose") and op.results and \
                id(op.result) in invariant and ok(op.result):
            out.add(id(op.result))
    # a transpose is shared only when its input is
    for op in ops:
        if op.name == "linalg.transpose" and id(op.result) in out and \
                id(op.groups["ins"][0]) not in out:
            out.discard(id(op.result))
    return out


def ragged_step(b: Builder, op: Op, plain):
    """The step of ``op``, which touches a ragged or shared value (module docstring), or raises
    :class:`Unsupported`."""
    if op.results and id(op.results[0]) in b.shared:
        return _shared_load(b, op) if op.name == "ktdp.load" else _shared_transpose(b, op)
    if op.name in _MATMULS:
        return _matmul(b, op, plain)
    if op.name == "linalg.reduce":
        return _reduce(b, op, plain)
    if op.name == "tensor.extract":
        idx = op.operands[1:]
        if not all(b.c.is_const(v) for v in idx):
            raise Unsupported(op.name)
        where = [int(b.c.const(v)) for v in idx]
        for d, lengths in b.ragged.get(id(op.operands[0]), {}).items():
            if where[d] >= int(lengths.min()):
                raise Unsupported(op.name)
        return b.stacked_step(op, plain)
    if op.name not in _ENTRYWISE or op.regions:
        raise Unsupported(op.name)
    return b.stacked_step(op, plain)


def _shared_load(b: Builder, op: Op):
    """The load once per core (the first group's corner of each core: they all agree)."""
    from ..dialects.ktdp.stacked_boxes import read_boxes

    c = b.c
    it, ir = c.slot(op.operands[0]), c.slot(op.result)
    G = _group_count(b)
    C = b.C // G
    hbm = c.machine.hbm
    cache: dict = {}

    def step(senv):
        st = senv[it]
        if type(st) is not StackedTile:
            raise Fallback
        per_core = StackedTile(st.view, st.los[::G], st.ext, st.perm, st.shape)
        data, _ = read_boxes(cache, per_core, hbm, C)
        senv[ir] = Shared(np.array(data, copy=True), G)

    step.op = op
    b.native += 1
    return _or_per_core(b, op, step)


def _shared_transpose(b: Builder, op: Op):
    c = b.c
    ix, ir = c.slot(op.groups["ins"][0]), c.slot(op.result)
    perm = (0,) + tuple(p + 1 for p in op.attrs["permutation"])

    def step(senv):
        x = senv[ix]
        senv[ir] = Shared(x.compact.transpose(perm), x.G)

    step.op = op
    b.native += 1
    return step


def _or_per_core(b: Builder, op: Op, step):
    """``step``, or where its conditions fail (a box outside its view, a region with a written
    mask) the op's plain step for every virtual core, which loads the same data or raises the
    located fault."""
    plain = b.c.step_of[id(op)]
    slot = b.c.slot(op.result)
    G = _group_count(b)

    def guarded(senv):
        try:
            step(senv)
        except Fallback:
            fallback(b, op, plain)(senv)
            senv[slot] = Shared(senv[slot][::G], G)

    guarded.op = op
    return guarded


def _matmul(b: Builder, op: Op, plain):
    from ..dialects.linalg import (is_zero_const as _is_zero_const,
                                  native_matmul_step as _native_matmul_step)
    from .native_matmul import uses_native

    (a, bb), (acc,) = op.groups["ins"], op.groups["outs"]
    ka, kb = _k_dim(op, 0), _k_dim(op, 1)
    ragged_k = ka in b.ragged.get(id(a), {}) or kb in b.ragged.get(id(bb), {})
    shared_b = id(bb) in b.shared
    if not ragged_k and not shared_b:
        return b.stacked_step(op, plain)
    if not uses_native(b.c, op):
        raise Unsupported("a matmul over a ragged k off the native kernel")
    c = b.c
    mask_a = mask_b = None
    if ragged_k:
        lengths = (b.ragged.get(id(a)) or {}).get(ka)
        if lengths is None:
            lengths = b.ragged[id(bb)][kb]
        mask_a = _mask(lengths, tuple(a.type.shape), ka)
        mask_b = _mask(lengths, tuple(bb.type.shape), kb)
    ia, ib, iacc, ir = c.slot(a), c.slot(bb), c.slot(acc), c.slot(op.result)
    zero_acc = _is_zero_const(c, acc)
    kernel = _native_matmul_step(0, 1, 2, 3, op.result.type.dtype,
                                 op.name == "linalg.matmul_transpose_b", zero_acc)
    zero = np.float16(0)
    V = b.C
    G = _group_count(b)
    a_varies, b_varies, acc_varies = b.varies(a), b.varies(bb), b.varies(acc)
    M, N = op.result.type.shape[-2:]

    def step(senv):
        A = senv[ia]
        if not a_varies:
            A = lift(A, a.type, V)
        if mask_a is not None:
            A = np.where(mask_a, A, zero)
        B = senv[ib]
        acc_ = senv[iacc]
        if type(B) is Shared:
            if mask_b is None or f16_all_finite(B.compact):
                # padded rows of a finite B meet +0.0 in A: ±0.0 products (module docstring)
                Cn = V // G
                A = np.ascontiguousarray(A).reshape(Cn, G * M, A.shape[-1])
                if not zero_acc:
                    acc_ = np.ascontiguousarray(acc_).reshape(Cn, G * M, N)
                env = [A, B.compact, acc_, None]
                kernel(env)
                senv[ir] = env[3].reshape(V, M, N)
                return
            B = B.expanded()
        elif not b_varies:
            B = lift(B, bb.type, V)
        if mask_b is not None:
            B = np.where(mask_b, B, zero)
        if not zero_acc and not acc_varies:
            acc_ = lift(acc_, acc.type, V)
        env = [A, B, acc_, None]
        kernel(env)
        senv[ir] = env[3]

    step.op = op
    b.native += 1
    return step


def _reduce(b: Builder, op: Op, plain):
    from ..dialects.arith import coerce
    from ..dialects.linalg import (REDUCERS as _REDUCERS, accumulator as _accumulator,
                                  body_combiner as _body_combiner, fast_reduce as _fast_reduce)
    from ..dialects.linalg.reduce import last_axis_max, widened_rows

    (x,), (init,) = op.groups["ins"], op.groups["outs"]
    dims = tuple(op.attrs["dimensions"])
    ragged = b.ragged.get(id(x), {})
    if not set(dims) & set(ragged):
        return b.stacked_step(op, plain)
    combiner = _body_combiner(op)
    if combiner is None or not isinstance(x.type, TensorType) or x.type.dtype.kind != "f":
        raise Unsupported("a reduction over a ragged dimension")
    kind = _REDUCERS[combiner][0]
    c, xp = b.c, b.c.xp
    ix, iinit, ir = c.slot(x), c.slot(init), c.slot(op.result)
    t = op.result.type
    acc_t = _accumulator(x.type.dtype, xp)
    sdims = tuple(d + 1 for d in dims)
    x_varies, C = b.varies(x), b.C

    def stacked_x(senv):
        v = senv[ix]
        return v if x_varies else lift(v, x.type, C)

    G = _group_count(b)
    last = len(x.type.shape) - 1
    lengths = None  # one ragged last axis reduced: each row's group length, core by core
    if dims == (last,) and set(ragged) == {last}:
        rows_per_core = int(np.prod(x.type.shape[:-1], dtype=np.int64))
        lengths = np.repeat(np.asarray(ragged[last], np.int64)[np.arange(C) % G], rows_per_core)
    if kind in _PAD:
        pad = x.type.dtype.type(_PAD[kind])
        masks = [m for m, d in _masks(b, x) if d in dims]
        rows_max = kind == "max" and lengths is not None

        def step(senv):
            v = stacked_x(senv)
            if rows_max:  # each row over its valid entries, natively (numpy's bits)
                m = last_axis_max(v, sdims, lengths)
                if m is not None:
                    senv[ir] = coerce(np.maximum(m, senv[iinit]), t, xp)
                    return
            for m in masks:
                v = np.where(m, v, pad)
            senv[ir] = _fast_reduce(kind, v, sdims, senv[iinit], t, acc_t, xp)
    elif kind == "sum":
        # each group's valid entries, in the plain plan's call shape: numpy's f32 summation
        # order depends on the length summed
        cuts = []
        for g in range(G):
            cut = [slice(g, None, G)] + [slice(None)] * len(x.type.shape)
            for d in dims:
                if d in ragged:
                    cut[d + 1] = slice(0, int(ragged[d][g]))
            cuts.append(tuple(cut))
        shape = (C,) + tuple(t.shape)
        # one ragged last axis: each row of v summed natively over its group's length, in
        # numpy's order for that row cut to it (backends/row_reduce.py); the same bits
        if acc_t != np.float32:
            lengths = None

        def step(senv):
            v = stacked_x(senv)
            # widened once where each group's f32 sum keeps its bits (reduce.widened_rows)
            wide = widened_rows(v, sdims, acc_t)
            src = v if wide is None else wide
            sums = None if lengths is None else row_sums(src, lengths)
            if sums is None:
                sums = np.empty(shape, acc_t)
                for cut in cuts:  # as _fast_reduce sums, group by group
                    np.add.reduce(src[cut], axis=sdims, dtype=acc_t, out=sums[cut[0]])
            senv[ir] = coerce(xp.add(sums, xp.astype(senv[iinit], acc_t)), t, xp)
    else:
        raise Unsupported(f"a {kind} over a ragged dimension")
    step.op = op
    b.native += 1
    return step


def _group_count(b: Builder) -> int:
    """The number of groups G (virtual core v is group v % G of core v // G)."""
    return int(np.count_nonzero(b.core_of == b.core_of[0]))
