"""The SiLU tail fused in replayed tapes (ktir/exec/tape_fusion.py): the same output bits as the
plain plan, on f32 chains with their truncf, on f16 chains, with the product's operands either
way round, on a stacked grid (a grid of cores); no fusion where an intermediate has another
user; the original entries run where the operands' layout is not the fused step's."""

from __future__ import annotations

import numpy as np
import pytest

from test_machine import load, program, store, tile, ty, view
from ktir_models import ktir
from ktir_models.ktir.backends import f16_convert, seqmm
from ktir_models.ktir.exec import tape_fusion

R, N = 4, 40


@pytest.fixture(autouse=True)
def extension():
    if not seqmm.available() or f16_convert._functions().ext is None:
        pytest.skip("the native library or its fastcall extension is unavailable")


def _chain(elem: str, u_left: bool, second_use: bool, stacked: bool = False) -> ktir.Function:
    """o = silu(x) * u over [R, N] (f16 in memory; f32 chains widen and truncate); ``stacked``:
    a grid of R cores, core c computing row c."""
    shape, at = ((1, N), "%core, %c0") if stacked else ((R, N), "%c0, %c0")
    body = "".join(view(n, p, (R, N)) for n, p in (("vx", "px"), ("vu", "pu"), ("vo", "po"),
                                                     ("vq", "pq")))
    if stacked:
        body += "    %core = ktdp.get_compute_tile_id : index\n"
    body += tile("tx", "vx", (R, N), shape, at) + load("x16", "tx", shape)
    body += tile("tu", "vu", (R, N), shape, at) + load("u16", "tu", shape)
    t = f"tensor<{ty(shape, elem)}>"
    if elem == "f32":
        body += (f"    %x = arith.extf %x16 : tensor<{ty(shape)}> to {t}\n"
                 f"    %u = arith.extf %u16 : tensor<{ty(shape)}> to {t}\n"
                 f"    %k = arith.constant dense<1.000000e+00> : {t}\n")
    else:
        body += ("    %x = arith.addf %x16, %x16 : " + t + "\n"
                 "    %u = arith.addf %u16, %u16 : " + t + "\n"
                 "    %one = arith.constant 1.0 : f16\n"
                 f"    %k = tensor.splat %one : {t}\n")
    product = "%u, %q" if u_left else "%q, %u"
    body += (f"    %n = arith.negf %x : {t}\n"
             f"    %e = math.exp %n : {t}\n"
             f"    %s = arith.addf %k, %e : {t}\n"
             f"    %q = arith.divf %x, %s : {t}\n"
             f"    %p = arith.mulf {product} : {t}\n")
    if elem == "f32":
        body += f"    %h = arith.truncf %p : {t} to tensor<{ty(shape)}>\n"
        if second_use:
            body += f"    %hq = arith.truncf %q : {t} to tensor<{ty(shape)}>\n"
    else:
        body += "    %h = arith.addf %p, %p : " + t + "\n"
        if second_use:
            body += "    %hq = arith.addf %q, %q : " + t + "\n"
    body += tile("to", "vo", (R, N), shape, at) + store("h", "to", shape)
    if second_use:
        body += tile("tq", "vq", (R, N), shape, at) + store("hq", "tq", shape)
    return program("%px: index, %pu: index, %po: index, %pq: index", body,
                   grid=f"[{R}]" if stacked else "[1]")


def _runs(fn, arrays, count=5):
    """(the plain plan's outputs, the replayer's outputs after ``count`` runs, the replayer)."""
    outs = []
    replay = None
    for tapes in (False, True):
        m = ktir.Machine(tapes=tapes, grid_batching=tapes)
        bufs = [m.hbm.allocate_from(a, name=f"a{k}") for k, a in enumerate(arrays)]
        bufs += [m.hbm.allocate((R, N), "float16", name=f"o{k}") for k in range(2)]
        args = [b.address for b in bufs]
        plan = m.compile(fn)
        for _ in range(count):
            plan.run(args)
        if tapes:
            replay = plan.replayer(args)
            assert replay is not None
            for b in bufs[2:]:
                b.write(np.zeros((R, N), np.float16))
            replay()
        outs.append([b.read().view(np.uint16) for b in bufs[2:]])
    return outs[0], outs[1], replay


def _operands(rng):
    x = (rng.standard_normal((R, N)) * 4).astype(np.float16)
    u = (rng.standard_normal((R, N)) * 4).astype(np.float16)
    x[0, :6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 60000.0]  # exp overflow, 0/0, signed zeros
    u[1, :3] = [np.nan, np.inf, 6e-8]
    return x, u


@pytest.mark.parametrize("elem", ["f32", "f16"])
@pytest.mark.parametrize("u_left", [False, True])
def test_fused_tails_keep_the_bits(elem, u_left):
    plain, replayed, replay = _runs(_chain(elem, u_left, False), _operands(np.random.default_rng(1)))
    fused = [e for e in replay.entries if getattr(e, "fused", None)]
    assert len(fused) == 1 and len(fused[0].fused) == (4 if elem == "f32" else 3)
    for a, b in zip(plain, replayed):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("elem", ["f32", "f16"])
def test_an_intermediate_with_another_user_is_not_fused(elem):
    plain, replayed, replay = _runs(_chain(elem, False, True), _operands(np.random.default_rng(2)))
    assert not any(getattr(e, "fused", None) for e in replay.entries)
    for a, b in zip(plain, replayed):
        np.testing.assert_array_equal(a, b)


def test_switched_off_with_the_rewrites(monkeypatch):
    from ktir_models.ktir import patterns

    with patterns.disabled():
        _, _, replay = _runs(_chain("f32", False, False), _operands(np.random.default_rng(3)))
    assert not any(getattr(e, "fused", None) for e in replay.entries)


@pytest.mark.parametrize("elem", ["f32", "f16"])
def test_a_stacked_grid_keeps_its_bits(elem):
    """The tail on stacked values: a grid of R cores, one row each, run as one stacked plan."""
    plain, replayed, replay = _runs(_chain(elem, False, False, stacked=True),
                                    _operands(np.random.default_rng(4)))
    assert replay.plan._strategy.__class__.__name__ == "Stacked"
    assert sum(1 for e in replay.entries if getattr(e, "fused", None)) == 1
    for a, b in zip(plain, replayed):
        np.testing.assert_array_equal(a, b)


def test_another_layout_runs_the_original_entries():
    """A fused step whose operands are not C-contiguous arrays of its dtype runs what it stands
    for instead."""
    ran = []
    original = type("Step", (), {"op": None, "__call__": lambda self, env: ran.append(True)})()
    tail = tape_fusion._Tail(0, 1, 2, 3, 1.0, np.dtype(np.float32), np.dtype(np.float16), False)
    step = tape_fusion._step(tail, [original], f16_convert._functions().ext)
    x = np.ones((4, 6), np.float32)
    step([x.T, x.T, x.T, None])  # transposed views: not C-contiguous
    assert ran == [True]
    env = [x, x, x, None]
    step(env)
    assert ran == [True] and env[3].dtype == np.float16
    np.testing.assert_array_equal(env[3], (x / (1 + x) * x).astype(np.float16))
