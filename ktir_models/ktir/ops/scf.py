"""scf: for (with iter_args), parallel (with reduce), if, yield. Loops replay their compiled body; no per-trip parsing."""

from __future__ import annotations

import itertools

import numpy as np

from ..tape import LoopShape
from . import register


@register("scf.for")
def build_for(c, op):
    lb, ub, st = op.groups["bounds"]
    inits = op.groups["inits"]
    block = op.regions[0].block
    body = c.compile_block(block)
    batched = _try_batched_gemm_loop(c, op)
    if batched is not None:
        return batched
    ilb, iub, ist = c.slot(lb), c.slot(ub), c.slot(st)
    iv = c.slot(block.args[0])
    carried = [c.slot(a) for a in block.args[1:]]
    init_slots = [c.slot(v) for v in inits]
    last = block.ops[-1] if block.ops else None
    yields = [c.slot(v) for v in last.operands] if last is not None and last.name == "scf.yield" \
        else []
    results = [c.slot(v) for v in op.results]
    n = len(carried)
    shape = LoopShape(iv, body, carried, init_slots, yields, results, _carry,
                      lambda env: _trip_ivs(env[ilb], env[iub], env[ist]))
    step = _plain_for(ilb, iub, ist, iv, body, carried, init_slots, yields, results, n)
    step.loop = shape
    return step


def _carry(env, dst: list, src: list) -> None:
    """Loop-carried values from slots ``src`` into slots ``dst`` (all read before any write)."""
    vals = [env[k] for k in src]
    for k, v in zip(dst, vals):
        env[k] = v


def _trip_ivs(lo, hi, s):
    if s <= 0:
        from ..errors import FaultSignal

        raise FaultSignal(f"scf.for step must be positive, got {s}")
    return range(lo, hi, s)


def _plain_for(ilb, iub, ist, iv, body, carried, init_slots, yields, results, n):
    from ..compile import run_steps

    if n == 0:
        def step(env):
            for i in _trip_ivs(env[ilb], env[iub], env[ist]):
                env[iv] = i
                run_steps(body, env)
        return step

    if n == 1:
        (ca,), (ys,), (rs,), (ins,) = carried, yields, results, init_slots

        def step(env):
            acc = env[ins]
            for i in _trip_ivs(env[ilb], env[iub], env[ist]):
                env[iv] = i
                env[ca] = acc
                run_steps(body, env)
                acc = env[ys]
            env[rs] = acc
        return step

    def step(env):
        accs = [env[k] for k in init_slots]
        for i in _trip_ivs(env[ilb], env[iub], env[ist]):
            env[iv] = i
            for k, a in zip(carried, accs):
                env[k] = a
            run_steps(body, env)
            accs = [env[k] for k in yields]
        for k, a in zip(results, accs):
            env[k] = a

    return step


@register("scf.parallel")
def build_parallel(c, op):
    """MLIR's scf.parallel: every point of the iteration box runs the body (here in
    lexicographic order, last dimension fastest; the op promises no order), and each value
    given to the body's terminating scf.reduce is folded into its accumulator with that value's
    combiner region, ``acc = combiner(acc, value)``, starting from the init value."""
    from ..compile import run_steps

    g = op.groups
    lbs, ubs, sts = ([c.slot(v) for v in g[k]] for k in ("lbs", "ubs", "steps"))
    block = op.regions[0].block
    ivs = [c.slot(a) for a in block.args]
    body = c.compile_block(block)
    last = block.ops[-1] if block.ops else None
    combiners = []
    if last is not None and last.name == "scf.reduce":
        for v, region in zip(last.operands, last.regions):
            rb = region.block
            lhs, rhs = (c.slot(a) for a in rb.args)
            steps = c.compile_block(rb)
            combiners.append((c.slot(v), lhs, rhs, steps, c.slot(rb.ops[-1].operands[0])))
    inits = [c.slot(v) for v in g["inits"]]
    results = [c.slot(v) for v in op.results]

    def points(env):
        ranges = [_trip_ivs(env[lo], env[hi], env[st]) for lo, hi, st in zip(lbs, ubs, sts)]
        return itertools.product(*ranges)

    def step(env):
        accs = [env[k] for k in inits]
        for point in points(env):
            for k, i in zip(ivs, point):
                env[k] = i
            run_steps(body, env)
            for n, (value, lhs, rhs, steps, out) in enumerate(combiners):
                env[lhs] = accs[n]
                env[rhs] = env[value]
                run_steps(steps, env)
                accs[n] = env[out]
        for k, a in zip(results, accs):
            env[k] = a

    return step


@register("scf.reduce", "scf.reduce.return")
def build_reduce_terminator(c, op):
    return None  # scf.parallel reads the reduced and returned slots directly


@register("scf.if")
def build_if(c, op):
    from ..compile import run_steps

    cond = c.slot(op.operands[0])
    branches = []
    for r in op.regions:
        block = r.block
        steps = c.compile_block(block)
        last = block.ops[-1] if block.ops else None
        ys = [c.slot(v) for v in last.operands] if last is not None and last.name == "scf.yield" \
            else []
        branches.append((steps, ys))
    if len(branches) == 1:
        branches.append(([], []))
    (then_steps, then_y), (else_steps, else_y) = branches
    results = [c.slot(v) for v in op.results]

    def step(env):
        if env[cond]:
            run_steps(then_steps, env)
            ys = then_y
        else:
            run_steps(else_steps, env)
            ys = else_y
        for k, y in zip(results, ys):
            env[k] = env[y]

    return step


# ---------------------------------------------------------------------------------------------
# K-blocked GEMM loops, batched
#
#   %r = scf.for %k = LB to UB step KB iter_args(%acc = %init) {
#     %ta = construct_access_tile %A[..., %k + a]   (box, identity order, K extent KB)
#     %a  = ktdp.load %ta
#     %tb = construct_access_tile %B[..., %k + b]
#     %b  = ktdp.load %tb
#     %p  = linalg.matmul[_transpose_b] ins(%a, %b) outs(<zero constant>)
#     %n  = arith.addf %acc, %p
#     scf.yield %n
#   }
#
# runs as: one load of the whole K range of A and of B (B's f32 copy cached), one batched f32
# matmul giving every trip's partial, each partial rounded to the result type, then the trips'
# additions in order, each rounded -- the same roundings the loop performs, with one Python step
# instead of ~6 per trip. (The f32 partials may differ from the per-trip ones only by BLAS
# summation order, which the numerics model leaves open.)

_GEMMS = ("linalg.matmul", "linalg.matmul_transpose_b")


def _k_dim(c, tile_op, iv) -> int | None:
    """The base dim that advances with the induction variable (coefficient 1), else None."""
    from .. import affine

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


def _try_batched_gemm_loop(c, op):
    from .ktdp import Tile, _anchor_fn, load_f32, load_tile
    from .linalg import _is_zero_const, uses_native

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
    if len(ops) != 7 or names.count("ktdp.construct_access_tile") != 2 or \
            names.count("ktdp.load") != 2 or names[-1] != "scf.yield" or \
            names[-2] != "arith.addf" or names[-3] not in _GEMMS:
        return None
    mm, add, yld = ops[-3], ops[-2], ops[-1]
    (a_val, b_val), (zero,) = mm.groups["ins"], mm.groups["outs"]
    if not _is_zero_const(c, zero) or yld.operands != [add.result]:
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
        lo_fn = _anchor_fn(c, tile.attrs["base_map"], tile.groups["indices"], los)
        plans.append((c.slot(base), lo_fn, tuple(ext), load.result.type.elem))
    if uses_native(c, mm):
        return _native_gemm_loop(c, op, plans, trips, step_k, mm, acc)
    from ..backends.f16_chain import chain_add_f16, chain_add_f16_tensors, torch_available

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
    if xp.name != "numpy":  # tensors already live in torch: the chain runs there
        def chain(total, parts):
            return chain_add_f16_tensors(total, parts)
    else:
        def chain(total, parts):
            return chain_add_f16(total, parts, chain_on_torch)
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    if acc.type.elem == "f16":
        def add(x, y):  # exactly rounded f16 sum, computed in f32 (see ops/arith.py)
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


def _native_gemm_loop(c, op, plans, trips: int, step_k: int, mm, acc):
    """The K-loop on the native kernel (f16 operands, ``uses_native``): one call runs every trip's
    partial, its rounding to the matmul's type and the rounded accumulation, reading A and the
    f16 weight B where they lie (no f32 copies). The kernel sums each element sequentially over k
    whatever the batching, so cores stacked into one call get their own loop's bits."""
    from ..backends.seqmm import kloop
    from .ktdp import Tile, load_tile, load_view

    (a_base, a_lo, a_ext, _), (b_base, b_lo, b_ext, _) = plans
    iv_slot, lb_value = c.slot(op.regions[0].block.args[0]), int(c.const(op.groups["bounds"][0]))
    init_slot, res_slot = c.slot(op.groups["inits"][0]), c.slot(op.results[0])
    transpose_b = mm.name == "linalg.matmul_transpose_b"
    part_dt, acc_dt = mm.result.type.dtype, acc.type.dtype

    def operands(env):
        """This core's A [m, K], B ([K, N], or [N, K] for transpose_b) and accumulator."""
        env[iv_slot] = lb_value  # anchors of the first trip
        A = load_tile(Tile(env[a_base], a_lo(env), a_ext, None, None, a_ext))
        B = load_view(Tile(env[b_base], b_lo(env), b_ext, None, None, b_ext))
        return A, B, env[init_slot]

    def run(A, B, total):
        return kloop(A, B, total, trips=trips, kb=step_k, transpose_b=transpose_b,
                     part_dtype=part_dt, acc_dtype=acc_dt)

    def step(env):
        A, B, total = operands(env)
        env[res_slot] = run(A[None], B[None], np.asarray(total)[None])[0]

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
        from .ktdp import fixed_block

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
        A, B = ab[0][None], ab[1][None]

        def fast(env):
            env[res_slot] = run(A, B, np.asarray(env[init_slot])[None])[0]
        return fast

    def specialize_stacked(senv, vary: list, C: int):
        """A stacked grid of C cores: every core's A and B fixed, as one [C, ...] view each when
        the cores' boxes are evenly spaced (B shared by all: a leading dim of 1), so a replay is
        one kernel call on memory in place; the per-element sums are the kernel's whatever the
        batching (seqmm.py), so the bits are those of the batched form above."""
        from ..stacked import CoreEnv

        boxes = [placed(CoreEnv(senv, k, vary)) for k in range(C)]
        if any(ab is None for ab in boxes):
            return None
        A = _evenly_spaced([ab[0] for ab in boxes])
        B = _evenly_spaced([ab[1] for ab in boxes])
        if A is None or B is None:
            return None
        init_varies = vary[init_slot]
        rows = _as_rows(A) if B.shape[0] == 1 and A.shape[0] == C > 1 else None
        if rows is not None:  # a shared B: the cores' A rows as one [1, C*m, K] operand
            m = A.shape[1]

            def fast_rows(senv):
                total = np.asarray(senv[init_slot])
                if not init_varies:
                    total = np.broadcast_to(total, (C,) + total.shape)
                out = run(rows, B, total.reshape((1, C * m) + total.shape[2:]))
                senv[res_slot] = out.reshape((C, m) + out.shape[2:])
            return fast_rows

        def fast(senv):
            total = np.asarray(senv[init_slot])
            out = run(A, B, total if init_varies else total[None])
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
