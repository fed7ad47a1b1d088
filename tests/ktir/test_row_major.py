"""N-contiguous weight copies (ktir/exec/row_major.py): where a tape's step hands the native kernel
a box of a read-only region that it would read transposed, it hands it a copy holding the same
values N-contiguous. The bytes computed must be those of reading the weight where it lies (a
machine without copies), box by box, and only read-only regions are ever copied."""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import load, program, store, tile, ty, view

from ktir_models import ktir
from ktir_models.ktir.backends import seqmm
from ktir_models.errors import UserError
from ktir_models.ktir.exec.row_major import n_contiguous

pytestmark = pytest.mark.skipif(not seqmm.available(),
                                reason=f"native kernel unavailable: {seqmm.unavailable_reason()}")
RNG = np.random.default_rng(3)
M, K, N = 2, 64, 32  # x [M, K] @ two boxes W[0:N] and W[N:2N] of one weight [2N, K], transposed


def two_boxes() -> ktir.Function:
    """o[:, 0:N] = x @ W[0:N]^T and o[:, N:2N] = x @ W[N:2N]^T: two boxes of one region with
    the same shape and strides (only their addresses differ)."""
    body = (view("vx", "x", (M, K)) + view("vw", "w", (2 * N, K)) + view("vo", "o", (M, 2 * N))
            + tile("tx", "vx", (M, K), (M, K), "%c0, %c0") + load("xv", "tx", (M, K))
            + f"    %n = arith.constant {N} : index\n"
            + f"    %z = arith.constant dense<0.0> : tensor<{ty((M, N))}>\n")
    for h, row in ((0, "%c0"), (1, "%n")):
        body += (tile(f"tw{h}", "vw", (2 * N, K), (N, K), f"{row}, %c0")
                 + load(f"w{h}", f"tw{h}", (N, K))
                 + f"    %r{h} = linalg.matmul_transpose_b ins(%xv, %w{h} : tensor<{ty((M, K))}>, "
                   f"tensor<{ty((N, K))}>) outs(%z : tensor<{ty((M, N))}>) -> tensor<{ty((M, N))}>\n"
                 + tile(f"to{h}", "vo", (M, 2 * N), (M, N), f"%c0, {row}")
                 + store(f"r{h}", f"to{h}", (M, N)))
    return program("%x: index, %w: index, %o: index", body)


def _runs(machine, read_only: bool, xs) -> list:
    w = (RNG.standard_normal((2 * N, K)) * 0.5).astype(np.float16)
    bw = machine.hbm.allocate_from(w, name="w", read_only=read_only)
    bx = machine.hbm.allocate((M, K), "float16", name="x")
    bo = machine.hbm.allocate((M, 2 * N), "float16", name="o")
    plan = machine.compile(two_boxes())
    out = []
    for x in xs:
        bx.write(x)
        plan.run([bx.address, bw.address, bo.address])
        out.append(bo.read().view(np.uint16))
    return out, w


def test_each_box_of_a_read_only_weight_is_copied_and_computes_the_same_bits():
    xs = [(RNG.standard_normal((M, K))).astype(np.float16) for _ in range(6)]
    state = RNG.bit_generator.state
    with_copies = ktir.Machine(native_matmul=True)
    got, w = _runs(with_copies, True, xs)
    RNG.bit_generator.state = state
    plain = ktir.Machine(native_matmul=True, row_major_bytes=0, tapes=False, grid_batching=False)
    want, w2 = _runs(plain, True, xs)
    assert np.array_equal(w, w2)
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"run {k}")
    # the two halves: two copies, one per box, the weight's bytes in all
    assert len(with_copies.row_major_cache) == 2 and with_copies.row_major_used == w.nbytes
    assert plain.row_major_used == 0
    # the halves differ, so a copy reused for the other box would have shown
    assert not np.array_equal(got[-1][:, :N], got[-1][:, N:])


def test_a_writable_weight_is_never_copied():
    m = ktir.Machine(native_matmul=True)
    _runs(m, False, [np.ones((M, K), np.float16)] * 5)
    assert m.row_major_used == 0 and not m.row_major_cache


def test_the_budget_bounds_the_copies():
    m = ktir.Machine(native_matmul=True, row_major_bytes=N * K * 2)  # one box's bytes
    _runs(m, True, [np.ones((M, K), np.float16)] * 5)
    assert len(m.row_major_cache) == 1 and m.row_major_used == N * K * 2


def test_a_read_only_region_refuses_stores_and_writes():
    m = ktir.Machine()
    b = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="w", read_only=True)
    body = (view("vw", "w", (4, 16)) + tile("tw", "vw", (4, 16), (4, 16), "%c0, %c0")
            + "    %v = arith.constant dense<1.0> : tensor<4x16xf16>\n" + store("v", "tw", (4, 16)))
    with pytest.raises(ktir.EmulationFault, match="read-only"):
        m.compile(program("%w: index", body)).run([b.address])
    with pytest.raises(Exception, match="read-only"):
        b.write(np.ones((4, 16), np.float16))
    assert not b.read().any()


def test_n_contiguous_copies_hold_the_same_values_n_contiguous():
    m = ktir.Machine()
    w = (RNG.standard_normal((3, 40, 24))).astype(np.float16)
    buf = m.hbm.allocate_from(w, name="w", read_only=True)
    block = buf.region.typed(np.dtype(np.float16))[:w.size].reshape(w.shape)  # [C, N, K], K unit-stride
    nt = n_contiguous(m, buf.region, block, -2)
    assert nt.shape == block.shape and np.array_equal(nt, block) and nt.strides[-2] == 2
    assert n_contiguous(m, buf.region, block, -2) is nt  # cached
    nn = block.swapaxes(-1, -2)  # [C, K, N] with N strided
    copy = n_contiguous(m, buf.region, nn, -1)
    assert np.array_equal(copy, nn) and copy.flags.c_contiguous
    assert n_contiguous(m, buf.region, copy, -1) is copy  # N unit-stride already: as it is
    writable = m.hbm.allocate_from(w.copy(), name="v")
    view_ = writable.region.typed(np.dtype(np.float16))[:w.size].reshape(w.shape)
    assert n_contiguous(m, writable.region, view_, -2) is view_


def _with_and_without_copies(fn, w, xs, out_shape, blocked_count) -> list:
    """``fn(x, w, o)`` run on each of ``xs`` on a machine with copies and one without, ``w``
    read-only: the bits of each run (equal on both), after checking that the first machine
    made one blocked copy (``blocked_count(machine)``) and the second none."""
    outs = []
    for budget in (None, 0):
        mach = ktir.Machine(native_matmul=True, row_major_bytes=budget)
        bw = mach.hbm.allocate_from(w, name="w", read_only=True)
        bx = mach.hbm.allocate(xs[0].shape, "float16", name="x")
        bo = mach.hbm.allocate(out_shape, "float16", name="o")
        plan = mach.compile(fn)
        runs = []
        for x in xs:
            bx.write(x)
            plan.run([bx.address, bw.address, bo.address])
            runs.append(bo.read().view(np.uint16))
        outs.append(runs)
        assert blocked_count(mach) == (1 if budget is None else 0)
    for run, (a, b) in enumerate(zip(*outs)):
        np.testing.assert_array_equal(a, b, err_msg=f"run {run}")
    return outs


def kloop_program(m: int, k: int, n: int, kb: int) -> ktir.Function:
    """o = sum over K blocks of x[:, blk] @ W[:, blk]^T, each block's f16 partial added in f16:
    a K-loop the gemm-kloop-native rule runs as one kernel call, W [n, k] shared by the rows."""
    body = (view("va", "x", (m, k)) + view("vb", "w", (n, k)) + view("vo", "o", (m, n))
            + f"    %K = arith.constant {k} : index\n    %KB = arith.constant {kb} : index\n"
            + f"    %z = arith.constant dense<0.0> : tensor<{ty((m, n))}>\n"
            + f"    %mm = scf.for %k = %c0 to %K step %KB iter_args(%acc = %z) -> "
              f"(tensor<{ty((m, n))}>) {{\n"
            + tile("ta", "va", (m, k), (m, kb), "%c0, %k") + tile("tb", "vb", (n, k), (n, kb), "%c0, %k")
            + load("x", "ta", (m, kb)) + load("w", "tb", (n, kb))
            + f"    %p = linalg.matmul_transpose_b ins(%x, %w : tensor<{ty((m, kb))}>, "
              f"tensor<{ty((n, kb))}>) outs(%z : tensor<{ty((m, n))}>) -> tensor<{ty((m, n))}>\n"
            + f"    %nx = arith.addf %acc, %p : tensor<{ty((m, n))}>\n"
            + f"    scf.yield %nx : tensor<{ty((m, n))}>\n    }}\n"
            + tile("to", "vo", (m, n), (m, n), "%c0, %c0") + store("mm", "to", (m, n)))
    return program("%x: index, %w: index, %o: index", body)


@pytest.mark.parametrize("m", [1, 3])
def test_a_shared_weight_of_a_kloop_is_read_in_blocks_with_the_same_bits(m):
    k, n, kb = 96, 192, 32  # n: three blocks of 64 columns
    w = (RNG.standard_normal((n, k)) * 0.3).astype(np.float16)
    xs = [RNG.standard_normal((m, k)).astype(np.float16) for _ in range(6)]
    outs = _with_and_without_copies(kloop_program(m, k, n, kb), w, xs, (m, n),
                                    lambda mach: sum(key[0] == "blocked" for key in mach.row_major_cache))
    # and against numpy (the loop's roundings, f64 partials: within an f16 rounding or two)
    want = np.zeros((m, n), np.float16)
    for k0 in range(0, k, kb):
        part = xs[-1][:, k0:k0 + kb].astype(np.float64) @ w[:, k0:k0 + kb].astype(np.float64).T
        want = (want.astype(np.float32) + part.astype(np.float16).astype(np.float32)).astype(np.float16)
    got = outs[0][-1].view(np.float16).astype(np.float64)
    assert np.allclose(got, want, rtol=4e-3, atol=4e-3)


def per_core_boxes(grid: int, m: int, k: int, n: int) -> ktir.Function:
    """Core c: o[:, c*n:(c+1)*n] = x @ W[c*n:(c+1)*n]^T, W [grid*n, k] read-only, x shared:
    a load of a box wider than NARROW, read by the matmul step (stacked on a grid)."""
    body = (view("vx", "x", (m, k)) + view("vw", "w", (grid * n, k)) + view("vo", "o", (m, grid * n))
            + "    %core = ktdp.get_compute_tile_id : index\n"
            + f"    %n = arith.constant {n} : index\n    %r = arith.muli %core, %n : index\n"
            + tile("tx", "vx", (m, k), (m, k), "%c0, %c0") + load("xv", "tx", (m, k))
            + tile("tw", "vw", (grid * n, k), (n, k), "%r, %c0") + load("wv", "tw", (n, k))
            + f"    %z = arith.constant dense<0.25> : tensor<{ty((m, n))}>\n"
            + f"    %p = linalg.matmul_transpose_b ins(%xv, %wv : tensor<{ty((m, k))}>, "
              f"tensor<{ty((n, k))}>) outs(%z : tensor<{ty((m, n))}>) -> tensor<{ty((m, n))}>\n"
            + tile("to", "vo", (m, grid * n), (m, n), "%c0, %r") + store("p", "to", (m, n)))
    return program("%x: index, %w: index, %o: index", body, grid=f"[{grid}]")


@pytest.mark.parametrize("grid", [1, 4])
def test_a_wide_weight_box_loaded_for_a_matmul_is_read_in_blocks_with_the_same_bits(grid):
    m, k, n = 2, 96, 192
    w = (RNG.standard_normal((grid * n, k)) * 0.3).astype(np.float16)
    xs = [RNG.standard_normal((m, k)).astype(np.float16) for _ in range(6)]
    outs = _with_and_without_copies(per_core_boxes(grid, m, k, n), w, xs, (m, grid * n),
                                    lambda mach: len(mach.row_major_views))
    want = (xs[-1].astype(np.float64) @ w.astype(np.float64).T + 0.25).astype(np.float16)
    assert np.allclose(outs[0][-1].view(np.float16), want, rtol=4e-3, atol=4e-3)


def test_the_default_budget_follows_the_environment(monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_ROW_MAJOR_MIB", "0")
    m = ktir.Machine(native_matmul=True)
    assert m.row_major_bytes == 0
    _runs(m, True, [np.ones((M, K), np.float16)] * 5)
    assert m.row_major_used == 0
    monkeypatch.setenv("KTIR_MODELS_ROW_MAJOR_MIB", "3")
    assert ktir.Machine().row_major_bytes == 3 << 20
    monkeypatch.setenv("KTIR_MODELS_ROW_MAJOR_MIB", "lots")
    with pytest.raises(UserError, match="KTIR_MODELS_ROW_MAJOR_MIB"):
        ktir.Machine()


def test_no_copy_leaves_less_than_a_third_of_the_memory_available(monkeypatch):
    """The memory guard: with 24 GiB and 7.5 GiB available (an 8B model's weights marshalled),
    no copy is kept; with 20 GiB available the same copies are kept. The bits are the same
    either way."""
    import sys

    from ktir_models.ktir.exec import row_major

    monkeypatch.setattr(row_major, "_total_bytes", lambda: 24 << 30)
    xs = [RNG.standard_normal((M, K)).astype(np.float16) for _ in range(5)]
    outs = []
    for available, kept in ((15 << 29, 0), (20 << 30, 2)):
        monkeypatch.setattr(row_major, "_available_bytes", lambda a=available: a)
        monkeypatch.setattr(sys.modules[__name__], "RNG", np.random.default_rng(11))  # one w
        m = ktir.Machine(native_matmul=True)
        outs.append(_runs(m, True, xs))
        assert len(m.row_major_cache) == kept
    (a, wa), (b, wb) = outs
    np.testing.assert_array_equal(wa, wb)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_block_widths_divide_the_columns_in_strips():
    from ktir_models.ktir.exec.row_major import block_width

    assert block_width(192) == 64 and block_width(4096) == 64
    assert block_width(400) == 80   # granite-3.3-8b's gate/up boxes
    assert block_width(160) == 80 and block_width(48) == 48 and block_width(112) == 112
    assert block_width(40) is None and block_width(100) is None  # no multiple of 16 divides them


def grid_kloop(grid: int, m: int, k: int, n: int, kb: int) -> ktir.Function:
    """Core c: o[:, c*n:(c+1)*n] = the K-loop of x @ W[c*n:(c+1)*n]^T (f16 partials added in
    f16), W [grid*n, k]: each core's own box of one read-only weight, read by the K-loop rule
    (core after core in the first pass, the grid in one kernel call after)."""
    body = (view("va", "x", (m, k)) + view("vb", "w", (grid * n, k)) + view("vo", "o", (m, grid * n))
            + "    %core = ktdp.get_compute_tile_id : index\n"
            + f"    %G = arith.constant {grid} : index\n"
            + "    scf.for %i = %core to %G step %G {\n"  # the emitter's per-core loop
            + f"    %n = arith.constant {n} : index\n    %r = arith.muli %i, %n : index\n"
            + f"    %K = arith.constant {k} : index\n    %KB = arith.constant {kb} : index\n"
            + f"    %z = arith.constant dense<0.0> : tensor<{ty((m, n))}>\n"
            + f"    %mm = scf.for %k = %c0 to %K step %KB iter_args(%acc = %z) -> "
              f"(tensor<{ty((m, n))}>) {{\n"
            + tile("ta", "va", (m, k), (m, kb), "%c0, %k") + tile("tb", "vb", (grid * n, k), (n, kb), "%r, %k")
            + load("x", "ta", (m, kb)) + load("w", "tb", (n, kb))
            + f"    %p = linalg.matmul_transpose_b ins(%x, %w : tensor<{ty((m, kb))}>, "
              f"tensor<{ty((n, kb))}>) outs(%z : tensor<{ty((m, n))}>) -> tensor<{ty((m, n))}>\n"
            + f"    %nx = arith.addf %acc, %p : tensor<{ty((m, n))}>\n"
            + f"    scf.yield %nx : tensor<{ty((m, n))}>\n    }}\n"
            + tile("to", "vo", (m, grid * n), (m, n), "%c0, %r") + store("mm", "to", (m, n))
            + "    }\n")
    return program("%x: index, %w: index, %o: index", body, grid=f"[{grid}]")


@pytest.mark.parametrize("n", [160, 48])  # blocks of 80 columns; 48 columns N-contiguous
def test_a_weight_read_core_by_core_then_as_a_grid_is_held_once(n, monkeypatch):
    """The first pass reads each core's box on its own, later passes the grid's boxes in one
    call: only the stacked copy is made (a box read once by the plain step gets none), and it
    serves the boxes too, so the copies hold the weight's bytes once. The bits are those of a
    machine without copies, and of numpy's loop within roundings."""
    grid, m, k, kb = 4, 1, 96, 32
    w = (RNG.standard_normal((grid * n, k)) * 0.3).astype(np.float16)
    xs = [RNG.standard_normal((m, k)).astype(np.float16) for _ in range(6)]
    kinds, made = [], []
    from ktir_models.ktir.exec import row_major

    keep = row_major._keep
    monkeypatch.setattr(row_major, "_keep", lambda *a: made.append(a[-1].shape) or keep(*a))

    def count(mach):
        kinds.append(sorted({key[0] for key in mach.row_major_cache}))
        assert mach.row_major_used == (w.nbytes if mach.row_major_bytes else 0)
        parts = [hit for hit in mach.row_major_cache.values() if len(hit) == 3]
        return 1 if len(parts) == grid else 0
    outs = _with_and_without_copies(grid_kloop(grid, m, k, n, kb), w, xs, (m, grid * n), count)
    assert kinds[0] == (["nn"] if n <= 64 else ["blocked"])
    assert len(made) == 1 and made[0][0] == (grid if n <= 64 else 2 * grid)  # the stacked copy only
    want = np.zeros((m, grid * n), np.float16)
    for k0 in range(0, k, kb):
        part = xs[-1][:, k0:k0 + kb].astype(np.float64) @ w[:, k0:k0 + kb].astype(np.float64).T
        want = (want.astype(np.float32) + part.astype(np.float16).astype(np.float32)).astype(np.float16)
    assert np.allclose(outs[0][-1].view(np.float16).astype(np.float64), want, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("n", [160, 48])
def test_a_stacked_copy_replaces_the_copies_of_its_boxes(n):
    """Box copies made first (a plan that reads core by core, again and again) are dropped
    when a stacked copy of the same boxes is made; asked again, each box gets its part of the
    stacked copy: the same values, the memory of the stacked copy, the weight's bytes once."""
    from ktir_models.ktir.exec.row_major import fastest_form

    grid, k = 4, 96
    m = ktir.Machine(native_matmul=True)
    w = (RNG.standard_normal((grid * n, k))).astype(np.float16)
    buf = m.hbm.allocate_from(w, name="w", read_only=True)
    boxes = buf.region.typed(np.dtype(np.float16))[:w.size].reshape(grid, n, k)  # [C, N, K]

    def form(view):
        nn, blocked = fastest_form(m, buf.region, view, -2)
        return nn if blocked is None else blocked.data
    singles = [form(boxes[c][None]) for c in range(grid)]
    assert m.row_major_used == w.nbytes
    stacked = form(boxes)
    assert m.row_major_used == w.nbytes  # the singles' bytes were given back
    for c in range(grid):
        again = form(boxes[c][None])
        assert np.shares_memory(again, stacked) and not np.shares_memory(again, singles[c])
        np.testing.assert_array_equal(again, singles[c])


def test_mapped_weights_raise_a_default_budget_only(monkeypatch):
    from ktir_models.ktir.exec.row_major import room_for_mapped

    monkeypatch.delenv("KTIR_MODELS_ROW_MAJOR_MIB", raising=False)
    default = ktir.Machine(native_matmul=True)
    room_for_mapped(default, default.row_major_bytes + (5 << 30))
    assert default.row_major_bytes == ktir.Machine().row_major_bytes + (5 << 30)
    for fixed in (ktir.Machine(row_major_bytes=1 << 20), ktir.Machine(row_major_bytes=0)):
        before = fixed.row_major_bytes
        room_for_mapped(fixed, 16 << 30)
        assert fixed.row_major_bytes == before
    monkeypatch.setenv("KTIR_MODELS_ROW_MAJOR_MIB", "3")
    pinned = ktir.Machine()
    room_for_mapped(pinned, 16 << 30)
    assert pinned.row_major_bytes == 3 << 20
