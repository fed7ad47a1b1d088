"""The K-blocked GEMM loop as one fused step (two rules: the native kernel's and BLAS's).

The pattern, anchored at ``scf.for``::

    %r = scf.for %k = LB to UB step KB iter_args(%acc = %init) {
      %ta = construct_access_tile %A[..., %k + a]   (box, identity order, K extent KB)
      %a  = ktdp.load %ta
      %tb = construct_access_tile %B[..., %k + b]
      %b  = ktdp.load %tb
      %p  = linalg.matmul[_transpose_b] ins(%a, %b) outs(<zero constant>)
      %n  = arith.addf %acc, %p
      scf.yield %n
    }

or its accumulating form, the matmul adding the carried value itself (the lm_heads of our
emitter)::

      %n  = linalg.matmul[_transpose_b] ins(%a, %b) outs(%acc)
      scf.yield %n

Each trip of the second form sums its products in f32 from +0.0 and adds the carried value in
f32, one rounding to the result type: a K-loop whose partials are f32 (not rounded) and whose
accumulator is the carried value. The native rule runs both; the BLAS rule the first only.

with constant bounds, at least two trips, each tile and load used once, no padding (masked
points of the whole-K load would pad with zero where the per-trip loads fault or pad), and the
tiles' bases and indices (but the induction variable) defined outside the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rule import RewriteRule, register


@dataclass(frozen=True)
class KLoop:
    """A matched K-loop: its matmul, the carried accumulator and induction variable, the lower
    bound, and for A then B (base value, access tile op, the box's lower corner, the whole-K
    extent, the element type)."""

    mm: object
    acc: object
    iv: object
    lb: object
    tiles: tuple
    trips: int
    step_k: int
    accumulates: bool = False  # the matmul adds the carried value itself (its outs is %acc)


def _plans(c, m: KLoop) -> list:
    """(base slot, lower-corner function, whole-K extent, element type) of A and of B."""
    from ..dialects.ktdp.index_code import anchor_fn

    return [(c.slot(base), anchor_fn(c, tile.attrs["base_map"], tile.groups["indices"], los),
             ext, elem) for base, tile, los, ext, elem in m.tiles]


# The BLAS form runs as: one load of the whole K range of A and of B (B's f32 copy cached), one
# batched f32 matmul giving every trip's partial, each partial rounded to the result type, then the
# trips' additions in order, each rounded -- the same roundings the loop performs, with one Python
# step instead of ~6 per trip. (The f32 partials may differ from the per-trip ones only by BLAS
# summation order, which the numerics model leaves open.)

_GEMMS = ("linalg.matmul", "linalg.matmul_transpose_b")


def _k_dim(c, tile_op, iv) -> int | None:
    """The base dim that advances with the induction variable (coefficient 1), else None."""
    from ..ir import affine

    bm = tile_op.attrs["base_map"]
    idx = tile_op.groups["indices"]
    found = None
    for d, e in enumerate(bm.results):
        lf = affine.linear_form(e)
        if lf is None:
            return None
        uses_iv = [j for j, v in enumerate(idx) if v is iv and ("d", j) in lf[0]]
        if not uses_iv:
            continue
        if found is not None or len(uses_iv) != 1 or lf[0][("d", uses_iv[0])] != 1:
            return None
        found = d
    return found


def match_kloop(c, op):
    """The matched loop (:class:`KLoop`), or None when ``op`` is not the pattern above."""
    from ..dialects.linalg import is_zero_const

    lb, ub, st = op.groups["bounds"]
    if len(op.groups["inits"]) != 1 or not c.all_const((lb, ub, st)):
        return None
    trips = len(range(int(c.const(lb)), int(c.const(ub)), int(c.const(st))))
    step_k = int(c.const(st))
    if trips < 2 or step_k <= 0:
        return None
    block = op.regions[0].block
    iv, acc = block.args
    ops = [o for o in block.ops if o.name != "arith.constant"]
    names = [o.name for o in ops]
    if names.count("ktdp.construct_access_tile") != 2 or names.count("ktdp.load") != 2 or \
            names[-1] != "scf.yield":
        return None
    accumulates = len(ops) == 6 and names[-2] in _GEMMS
    if accumulates:  # matmul ... outs(%acc); scf.yield %mm: the carried value used by it alone
        mm, yld = ops[-2], ops[-1]
        (a_val, b_val), (outs,) = mm.groups["ins"], mm.groups["outs"]
        if outs is not acc or yld.operands != [mm.result] or \
                len(c.users.get(id(acc), [])) != 1 or len(c.users.get(id(mm.result), [])) != 1:
            return None
    else:
        if len(ops) != 7 or names[-2] != "arith.addf" or names[-3] not in _GEMMS:
            return None
        mm, add, yld = ops[-3], ops[-2], ops[-1]
        (a_val, b_val), (zero,) = mm.groups["ins"], mm.groups["outs"]
        if not is_zero_const(c, zero) or yld.operands != [add.result]:
            return None
        if {id(v) for v in add.operands} != {id(acc), id(mm.result)}:
            return None
    inside = {id(r) for o in block.ops for r in o.results} | {id(iv), id(acc)}
    plans = []
    for v, kd_want in ((a_val, 1), (b_val, 1 if mm.name == "linalg.matmul_transpose_b" else 0)):
        load = v.owner
        if load is None or load.name != "ktdp.load" or len(c.users.get(id(v), [])) != 1 or \
                "padding" in load.attrs:  # masked points of the whole-K load pad with zero
            return None
        tile = load.operands[0].owner
        if tile is None or tile.name != "ktdp.construct_access_tile" or \
                len(c.users.get(id(tile.result), [])) != 1:
            return None
        base = tile.groups["base"][0]
        if id(base) in inside or any(id(x) in inside and x is not iv
                                     for x in tile.groups["indices"]) or tile.groups["symbols"]:
            return None
        s, order = tile.attrs["access_tile_set"], tile.attrs["access_tile_order"]
        box = s.box_bounds()
        if box is None or s.num_syms or not order.is_identity() or \
                any(b.lo[0] != "c" or b.hi[0] != "c" for b in box):
            return None
        los = tuple(b.lo[1] for b in box)
        ext = [b.hi[1] - b.lo[1] + 1 for b in box]
        if len(ext) != 2 or _k_dim(c, tile, iv) != kd_want or ext[kd_want] != step_k:
            return None
        ext[kd_want] = step_k * trips
        plans.append((base, tile, los, tuple(ext), load.result.type.elem))
    return KLoop(mm, acc, iv, lb, tuple(plans), trips, step_k, accumulates)


def build_blas_kloop(c, op, m: KLoop):
    """The K-loop on BLAS (:data:`BLAS_KLOOP`)."""
    from ..backends.capabilities import caps_of
    from ..backends.f16_chain import chain_add_f16, chain_add_f16_tensors, torch_available
    from ..dialects.ktdp.access import load_tile
    from ..dialects.ktdp.transfer import load_f32
    from ..exec.memory_views import Tile

    plans, trips, step_k, mm, acc = _plans(c, m), m.trips, m.step_k, m.mm, m.acc
    lb, iv = m.lb, m.iv
    machine = c.machine
    iv_slot, lb_value = c.slot(iv), int(c.const(lb))
    init_slot, res_slot = c.slot(op.groups["inits"][0]), c.slot(op.results[0])
    part_dt = mm.result.type.dtype
    transpose_b = mm.name == "linalg.matmul_transpose_b"
    (a_base, a_lo, a_ext, a_elem), (b_base, b_lo, b_ext, b_elem) = plans
    widen = {"f16", "bf16"}
    f16_path = part_dt == np.float16 and acc.type.elem == "f16"
    acc_elems = max(1, int(np.prod([d or 1 for d in acc.type.shape])))
    # <= 4 MiB of f32 partials at a time: a chunk's partials are converted to f16 and chained
    # while still in cache (the smollm2 lm_head, 288 trips x 49152: one 57 MB chunk 89 ms, 6 MB
    # chunks 62 ms, measured on the loaded 2-core machine)
    chunk_trips = max(1, (4 << 20) // (4 * acc_elems))
    # torch's half add beats numpy's f32 round trip from ~128 elements on (measured: 9 trips x
    # 192: 31 vs 40 us; 9 x 576: 33 vs 74 us; 9 x 64: 30 vs 27 us)
    chain_on_torch = torch_available() and acc_elems >= 128
    xp = c.xp
    matmul, astype, contiguous, transpose = xp.matmul, xp.astype, xp.ascontiguousarray, \
        xp.transpose
    if not caps_of(xp).host_arrays:  # tensors live on the (torch) device: the chain runs there
        def chain(total, parts):
            return chain_add_f16_tensors(total, parts)
    else:
        def chain(total, parts):
            return chain_add_f16(total, parts, chain_on_torch)
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    if acc.type.elem == "f16":
        def add(x, y):  # exactly rounded f16 sum, computed in f32 (see dialects/arith.py)
            return astype(xp.add(x, y, dtype=f32), f16)
    else:
        add = xp.add

    def trip_major(b):
        """[N, T*KB] -> contiguous [T, N, KB] (transpose_b) or [T*KB, N] -> [T, KB, N]."""
        if transpose_b:
            return contiguous(transpose(b.reshape(b.shape[0], trips, step_k), (1, 0, 2)))
        return b.reshape(trips, step_k, b.shape[1])

    layout = (("k-batched", trips, step_k, transpose_b), trip_major)

    def operands(env):
        """This core's A as [T, m, KB] and B as [T, KB, N] (f32; B from the f32 cache)."""
        env[iv_slot] = lb_value  # anchors of the first trip
        A = load_tile(Tile(env[a_base], a_lo(env), a_ext, None, None, a_ext))
        if A.dtype.itemsize < 4:
            A = astype(A, f32)
        tile_b = Tile(env[b_base], b_lo(env), b_ext, None, None, b_ext)
        if b_elem in widen:
            B3 = load_f32(machine, tile_b, layout)
        else:
            B3 = trip_major(astype(load_tile(tile_b), f32))
        m = A.shape[0]
        A3 = contiguous(transpose(A.reshape(m, trips, step_k), (1, 0, 2)))
        if transpose_b:
            B3 = transpose(B3, (0, 2, 1))
        return A3, B3

    def step(env):
        A3, B3 = operands(env)
        total = env[init_slot]
        small = A3.shape[1] * B3.shape[2] <= 16384
        if f16_path:
            # f16 partials into an f16 accumulator: batched f32 partials (trip chunks bound the
            # memory), then the sequential f16 chain on the fastest back end (bit-identical)
            for t0 in range(0, trips, chunk_trips):
                t1 = min(trips, t0 + chunk_trips)
                total = chain(total, matmul(A3[t0:t1], B3[t0:t1]))
        elif small:  # one batched matmul for all trips (Python overhead dominates)
            for p in astype(matmul(A3, B3), part_dt):
                total = add(total, p)
        else:
            for t in range(trips):
                total = add(total, astype(matmul(A3[t], B3[t]), part_dt))
        env[res_slot] = total

    def batched(envs):
        """Every core of the grid at once (the lock-step run of compile.py). Cores that share a
        B (the same cached f32 array) get their partials from one stacked matmul, which makes
        the same per-(core, trip) BLAS calls as :func:`step`; then one f16 chain runs over all
        cores' accumulators together (it is elementwise, so this is each core's chain)."""
        if not f16_path:
            for env in envs:
                step(env)
            return
        loaded = [operands(env) for env in envs]
        groups: dict = {}
        for k, (_, B3) in enumerate(loaded):
            groups.setdefault(id(B3), []).append(k)
        totals = xp.stack([env[init_slot] for env in envs])  # [C, m, N]
        for t0 in range(0, trips, max(1, chunk_trips // len(envs))):
            t1 = min(trips, t0 + max(1, chunk_trips // len(envs)))
            if len(groups) == 1:
                A4 = xp.stack([A3[t0:t1] for A3, _ in loaded])  # [C, t, m, KB]
                parts = matmul(A4, loaded[0][1][t0:t1])  # [C, t, m, N]
            else:
                parts = xp.stack([matmul(A3[t0:t1], B3[t0:t1]) for A3, B3 in loaded])
            totals = chain(totals, xp.moveaxis(parts, [0], [1]))  # trips first: [t, C, m, N]
        for k, env in enumerate(envs):
            env[res_slot] = totals[k]

    step.batched = batched
    step.op = op
    return step


def build_native_kloop(c, op, m: KLoop):
    """The K-loop on the native kernel (f16 operands, ``uses_native``): one call runs every trip's
    partial, its rounding to the matmul's type and the rounded accumulation, reading A and the
    f16 weight B where they lie (no f32 copies). The kernel sums each element sequentially over k
    whatever the batching, so cores stacked into one call get their own loop's bits."""
    from ..backends.seqmm import kloop
    from ..dialects.ktdp.access import load_tile
    from ..dialects.ktdp.transfer import load_view
    from ..exec.memory_views import Tile
    from ..exec.row_major import fastest_form

    plans, trips, step_k, mm, acc = _plans(c, m), m.trips, m.step_k, m.mm, m.acc
    (a_base, a_lo, a_ext, _), (b_base, b_lo, b_ext, _) = plans
    iv_slot, lb_value = c.slot(op.regions[0].block.args[0]), int(c.const(op.groups["bounds"][0]))
    init_slot, res_slot = c.slot(op.groups["inits"][0]), c.slot(op.results[0])
    transpose_b = mm.name == "linalg.matmul_transpose_b"
    # the accumulating form's partials are never rounded on their own (f32 sums, then the f32
    # sum with the carried value is rounded once): a K-loop with f32 partials
    part_dt = np.dtype(np.float32) if m.accumulates else mm.result.type.dtype
    acc_dt = acc.type.dtype

    def operands(env):
        """This core's A [m, K], B ([K, N], or [N, K] for transpose_b) and accumulator."""
        env[iv_slot] = lb_value  # anchors of the first trip
        A = load_tile(Tile(env[a_base], a_lo(env), a_ext, None, None, a_ext))
        B = load_view(Tile(env[b_base], b_lo(env), b_ext, None, None, b_ext))
        return A, B, env[init_slot]

    def kernel(A, B, total, transposed, groups=1):
        return kloop(A, B, total, trips=trips, kb=step_k, transpose_b=transposed,
                     part_dtype=part_dt, acc_dtype=acc_dt, groups=groups)

    def run(A, B, total):
        return kernel(A, B, total, transpose_b)

    n_axis = -2 if transpose_b else -1

    def weighted(A, B, region, make=True):
        """``total -> out`` = run(A, B, total) with B read as the kernel streams it fastest
        (row_major.py: a read-only weight's boxes of few columns N-contiguous, wider ones in
        blocks; the same values, so the same bits). ``make`` False: no new copy."""
        nn, blocked = fastest_form(c.machine, region, B, n_axis, make)
        if blocked is not None:  # rows too wide to read whole: in blocks
            if A.shape[0] == 1:
                return blocked.bind(A, kernel)
            return lambda total: blocked.apply(A, total, kernel)
        return lambda total: run(A, nn, total)

    # The plain step copies a box only when it reads it again: a grid's plain steps run once, in
    # the first pass, before its batched forms read the boxes as one stacked copy; copies made
    # box by box then would be made twice (memory an 8B model's copies do not leave).
    seen = set()

    def step(env):
        A, B, total = operands(env)
        box = B.__array_interface__["data"][0]
        call = weighted(A[None], B[None], getattr(env[b_base], "region", None), box in seen)
        seen.add(box)
        env[res_slot] = call(np.asarray(total)[None])[0]

    def batched(envs):
        """Every core of the grid in one kernel call: cores reading the same B as rows of one
        A, cores reading B boxes at a constant stride as one strided [C, ...] B."""
        loaded = [operands(env) for env in envs]
        As = [np.asarray(x[0]) for x in loaded]
        Bs = [x[1] for x in loaded]
        totals = [np.asarray(x[2]) for x in loaded]
        B = _evenly_spaced(Bs) if all(a.shape == As[0].shape for a in As) else None
        if B is not None and B.shape[0] == 1:  # one B for all: the cores' A as rows
            m = As[0].shape[0]
            out = run(np.concatenate(As)[None], B, np.concatenate(totals)[None])[0]
            results = [out[k * m:(k + 1) * m] for k in range(len(envs))]
        elif B is not None:
            results = list(run(np.stack(As), B, np.stack(totals)))
        else:
            results = [run(A[None], B[None], t[None])[0] for A, B, t in loaded]
        for env, r in zip(envs, results):
            env[res_slot] = r

    def placed(env):
        """For tapes: this core's A and B as fixed views of memory (tape.py), or None."""
        from ..dialects.ktdp.access import fixed_block

        env[iv_slot] = lb_value
        A = fixed_block(Tile(env[a_base], a_lo(env), a_ext, None, None, a_ext))
        B = fixed_block(Tile(env[b_base], b_lo(env), b_ext, None, None, b_ext))
        return None if A is None or B is None else (A, B)


    def specialize(env):
        """One core: the kernel reads A and B where they lie (read in the same step, as the
        loop's loads would copy them)."""
        ab = placed(env)
        if ab is None:
            return None
        call = weighted(ab[0][None], ab[1][None], getattr(env[b_base], "region", None))

        def fast(env):
            env[res_slot] = call(np.asarray(env[init_slot])[None])[0]
        return fast

    def specialize_stacked(senv, vary: list, C: int):
        """A stacked grid of C cores: every core's A and B fixed, as one [C, ...] view each when
        the cores' boxes are evenly spaced (B shared by all: a leading dim of 1), so a replay is
        one kernel call on memory in place; the per-element sums are the kernel's whatever the
        batching (seqmm.py), so the bits are those of the batched form above."""
        from ..exec.stacked_values import CoreEnv

        boxes = [placed(CoreEnv(senv, k, vary)) for k in range(C)]
        if any(ab is None for ab in boxes):
            return None
        A = _evenly_spaced([ab[0] for ab in boxes])
        B = _evenly_spaced([ab[1] for ab in boxes])
        if A is None or B is None:
            return None
        region = getattr(CoreEnv(senv, 0, vary)[b_base], "region", None)
        init_varies = vary[init_slot]
        rows = _as_rows(A) if B.shape[0] == 1 and A.shape[0] == C > 1 else None
        if rows is not None:  # a shared B: the cores' A rows as one [1, C*m, K] operand
            m = A.shape[1]
            call = weighted(rows, B, region)
            # a core-invariant init (the zero tile a K-loop starts from: a constant) laid out
            # once as the call's contiguous [1, C*m, ...] accumulator, not at every run; kept
            # for as long as the same init object comes back, read-only (the kernel only reads
            # its acc)
            laid_out: list = [None, None]

            def fast_rows(senv):
                total = senv[init_slot]
                if init_varies:
                    total = np.asarray(total)
                elif total is laid_out[0]:
                    total = laid_out[1]
                else:
                    first = np.asarray(total)
                    whole = np.ascontiguousarray(np.broadcast_to(first, (C,) + first.shape))
                    whole.flags.writeable = False
                    laid_out[:] = [total, whole]
                    total = whole
                out = call(total.reshape((1, C * m) + total.shape[2:]))
                senv[res_slot] = out.reshape((C, m) + out.shape[2:])
            return fast_rows
        call = weighted(A, B, region) if not init_varies else (lambda total: run(A, B, total))

        def fast(senv):
            total = np.asarray(senv[init_slot])
            out = call(total if init_varies else total[None])
            if out.shape[0] != C:  # every core read the same A and B: the same result C times
                out = np.ascontiguousarray(np.broadcast_to(out, (C,) + out.shape[1:]))
            senv[res_slot] = out
        return fast

    step.batched = batched
    step.specialize = specialize
    step.specialize_stacked = specialize_stacked
    step.op = op
    return step


def _as_rows(A: np.ndarray):
    """A strided [C, m, K] view as the [1, C*m, K] view of the same elements, when the cores'
    rows follow each other at one stride (m = 1, or the core step is m row steps); else None."""
    C, m, K = A.shape
    s0, s1, s2 = A.strides
    if m > 1 and s0 != m * s1:
        return None
    return np.lib.stride_tricks.as_strided(A, shape=(1, C * m, K),
                                           strides=(0, s0 if m == 1 else s1, s2), writeable=False)


def _evenly_spaced(views: list):
    """Same-shaped views of one buffer as one read-only [C, ...] strided view: [1, ...] when they
    are all the same box, a constant byte step between consecutive ones otherwise; else None."""
    first = views[0]
    if any(v.shape != first.shape or v.strides != first.strides or v.dtype != first.dtype
           for v in views):
        return None
    ptrs = [v.__array_interface__["data"][0] for v in views]
    steps = {q - p for p, q in zip(ptrs, ptrs[1:])}
    if not steps or steps == {0}:
        out = first[None]
        out.flags.writeable = False
        return out
    if len(steps) != 1:
        return None
    return np.lib.stride_tricks.as_strided(first, shape=(len(views),) + first.shape,
                                           strides=(steps.pop(),) + first.strides,
                                           writeable=False)


def _native_match(c, op):
    from ..exec.native_matmul import uses_native

    m = match_kloop(c, op)
    return m if m is not None and uses_native(c, m.mm) else None


def _blas_match(c, op):
    from ..exec.native_matmul import uses_native

    m = match_kloop(c, op)
    return m if m is not None and not m.accumulates and not uses_native(c, m.mm) else None


NATIVE_KLOOP = register(RewriteRule(
    "gemm-kloop-native", "scf.for", _native_match, build_native_kloop,
    """The matmul runs on the native kernel (``uses_native``: f16 operands), in either form of
    the pattern (the accumulating one with f32 partials). Bit-identical to the loop run trip by
    trip, always: the plain matmul is the same kernel with one trip, which
    sums each element's products sequentially over k from +0.0, rounds the partial to the
    matmul's type and then the f32 sum with the accumulator to the accumulator's type -- the
    loop's own roundings, in its order -- and the kernel does so whatever the batching."""))

BLAS_KLOOP = register(RewriteRule(
    "gemm-kloop-blas", "scf.for", _blas_match, build_blas_kloop,
    """The matmul runs on BLAS (f32 products of widened operands). Bit-identical to the loop run
    trip by trip when the BLAS library sums one trip's [m, KB] x [KB, N] product in the same
    order whether it is called per trip or as an entry of a batched (or wider) call: every
    partial is rounded to the matmul's type and the accumulation runs trip after trip with the
    loop's roundings (the f16 chain is exact f16 addition). numpy's batched matmul makes one
    gemm call per entry, so this holds for the OpenBLAS builds we test; the numerics model
    (docs/emulator.md) leaves the BLAS order open either way."""))
