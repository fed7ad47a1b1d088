"""Replayers (``Plan.replayer``, ``TwinPlan.replayer``): a plan's tape called directly, without
the plan's per-run binding and dispatch, as the model's runner does once a node's plan replays.

A replayer must give exactly the bytes and the faults of ``plan.run`` on the same arguments, with
fresh data on every call, and exist only while ``ktir.replay_state`` of its machine holds. The
reference is the same function on a machine without tapes."""

from __future__ import annotations

import numpy as np
import pytest
from test_machine import load, program, store, tile, view

from ktir_models import ktir
from ktir_models.ktir.exec.tape import fold_assignments
from ktir_models.ktir.exec.twin_plans import TwinPlan, compile_functions
from ktir_models.ktir.exec.twins import TwinLoader

RNG = np.random.default_rng(5)
WARM = 4  # runs after which a plan replays its tape (tape.py: record at the third)


def bits(a) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint16)


def gather_body(x: str = "x") -> str:
    """o[0, :] = x[idx[0], :] (the row address read from memory; rows 12.. of the 16-row view
    lie in no region: a fault); ``x``: the argument's name."""
    return (view("vi", "i", (1, 1), "i32") + view("vx", x, (16, 16)) + view("vo", "o", (1, 16)) +
            tile("ti", "vi", (1, 1), (1, 1), "%c0, %c0", "i32") + load("iv", "ti", (1, 1), "i32") +
            "    %r32 = tensor.extract %iv[%c0, %c0] : tensor<1x1xi32>\n"
            "    %r = arith.index_cast %r32 : i32 to index\n" +
            tile("tx", "vx", (16, 16), (1, 16), "%r, %c0") + load("v", "tx", (1, 16)) +
            tile("to", "vo", (1, 16), (1, 16), "%c0, %c0") + store("v", "to", (1, 16)))


def doubled_rows() -> ktir.Function:
    """o[r] = x[r] + x[r] for r = 0..3, one core, a loop of four static trips (unrolled on the
    tape: its induction variable and the tiles built from it are assigned once a trip)."""
    body = (view("vx", "x", (4, 16)) + view("vo", "o", (4, 16)) +
            "    %c1 = arith.constant 1 : index\n    %c4 = arith.constant 4 : index\n"
            "    scf.for %r = %c0 to %c4 step %c1 {\n" +
            tile("tx", "vx", (4, 16), (1, 16), "%r, %c0") + load("v", "tx", (1, 16)) +
            "    %a = arith.addf %v, %v : tensor<1x16xf16>\n" +
            tile("to", "vo", (4, 16), (1, 16), "%r, %c0") + store("a", "to", (1, 16)) +
            "    }\n")
    return program("%x: index, %o: index", body)


def _gather(machine):
    x = RNG.standard_normal((8, 16)).astype(np.float16)
    bufs = (machine.hbm.allocate_from(np.zeros((1, 1), np.int32), name="i"),
            machine.hbm.allocate_from(x, name="x"), machine.hbm.allocate((1, 16), "float16", name="o"))
    return x, bufs


def _warm_gather(machine):
    """The gather's plan on ``machine`` after WARM runs, its buffers (index, x, o) and its
    arguments."""
    plan = machine.compile(program("%i: index, %x: index, %o: index", gather_body()))
    _, bufs = _gather(machine)
    args = [b.address for b in bufs]
    for _ in range(WARM):
        plan.run(args)
    return plan, bufs, args


def test_no_replayer_before_the_plan_replays_then_the_same_bytes_with_fresh_data():
    m = ktir.Machine()
    plan = m.compile(program("%i: index, %x: index, %o: index", gather_body()))
    x, (bi, bx, bo) = _gather(m)
    args = [bi.address, bx.address, bo.address]
    assert plan.replayer(args) is None
    for _ in range(WARM):
        plan.run(args)
    replay = plan.replayer(args)
    assert replay is not None
    assert plan.replayer([bi.address, bx.address, bx.address]) is None  # not the taped arguments
    before = plan.replays
    for row in (3, 5, 0, 7, 7):
        fresh = RNG.standard_normal((8, 16)).astype(np.float16)
        bx.write(fresh)
        bi.write(np.array([[row]], np.int32))
        replay()
        np.testing.assert_array_equal(bits(bo.read()[0]), bits(fresh[row]), err_msg=f"row {row}")
    assert plan.replays == before + 5


def test_an_unrolled_loop_keeps_its_trips_assignments():
    m = ktir.Machine()
    plan = m.compile(doubled_rows())
    bx = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="x")
    bo = m.hbm.allocate((4, 16), "float16", name="o")
    args = [bx.address, bo.address]
    for _ in range(WARM):
        plan.run(args)
    replay = plan.replayer(args)
    for _ in range(3):
        fresh = RNG.standard_normal((4, 16)).astype(np.float16)
        bx.write(fresh)
        replay()
        np.testing.assert_array_equal(bits(bo.read()), bits((fresh + fresh).astype(np.float16)))
    # the folding kept what varies by trip and folded what does not
    entries = plan._tape.entries
    folded, env = fold_assignments(entries, [None] * 4096)
    pairs = [p for e in entries for p in getattr(e, "pairs", ())]
    kept = [p for e in folded for p in getattr(e, "pairs", ())]
    assert 0 < len(kept) < len(pairs)
    assert len({s for s, _ in kept}) < len(kept)  # a slot assigned once a trip
    assert any(v is not None for v in env)


def test_a_replayer_faults_as_the_plain_plan_does():
    faults = []
    for tapes in (True, False):
        plan, (bi, _, _), args = _warm_gather(ktir.Machine(tapes=tapes))
        replay = plan.replayer(args)
        assert (replay is not None) == tapes
        bi.write(np.array([[12]], np.int32))
        with pytest.raises(ktir.EmulationFault) as info:
            (replay or (lambda: plan.run(args)))()
        faults.append(str(info.value))
    assert faults[0] == faults[1] and "ktdp.load" in faults[0]


def test_run_quiet_is_the_call_inside_the_callers_error_state():
    """The runner enters np.errstate once a pass and calls each node's ``run_quiet``: the same
    bytes, the same replay count and the same fault as calling the replay."""
    plan, (bi, bx, bo), args = _warm_gather(ktir.Machine())
    replay = plan.replayer(args)
    before = plan.replays
    with np.errstate(all="ignore"):
        for row in (2, 6):
            fresh = RNG.standard_normal((8, 16)).astype(np.float16)
            bx.write(fresh)
            bi.write(np.array([[row]], np.int32))
            replay.run_quiet()
            np.testing.assert_array_equal(bits(bo.read()[0]), bits(fresh[row]))
    assert plan.replays == before + 2
    bi.write(np.array([[12]], np.int32))
    messages = []
    for call in (replay, replay.run_quiet):
        with pytest.raises(ktir.EmulationFault) as info, np.errstate(all="ignore"):
            call()
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "ktdp.load" in messages[0]
    assert plan.replays == before + 2  # a fault is no replay


def test_replayers_hold_only_in_their_machine_state():
    m = ktir.Machine()
    plan, _, args = _warm_gather(m)
    state = ktir.replay_state(m)
    assert plan.replayer(args) is not None
    m.hbm.allocate((8, 8), "float16", name="extra")  # regions changed: views are rebuilt
    assert ktir.replay_state(m) != state and plan.replayer(args) is None
    for _ in range(2):
        plan.run(args)
    assert plan.replayer(args) is not None
    state = ktir.replay_state(m)
    m.tapes = False
    assert ktir.replay_state(m) != state
    m.tapes = True
    m.grid_batching = False
    assert ktir.replay_state(m) != state


def test_a_twins_replayer_faults_in_the_twins_names(tmp_path):
    paths = []
    for k, name in enumerate(("gather_n1", "gather_node_22")):
        p = tmp_path / f"node{k}.mlir"
        p.write_text(f"module {{\n  func.func @{name}(%i: index, %x{k}: index, %o: index) "
                     f"attributes {{grid = [1]}} {{\n    %c0 = arith.constant 0 : index\n"
                     f"{gather_body(f'x{k}')}    return\n  }}\n}}\n")
        paths.append(p)
    loader = TwinLoader(share=True)
    functions = [loader.load(p).only_function for p in paths]
    m = ktir.Machine()
    plans = compile_functions(m, functions, loader)
    assert isinstance(plans[1], TwinPlan)
    _, (bi, bx, bo) = _gather(m)
    args = {"i": bi.address, "x1": bx.address, "o": bo.address}
    for _ in range(WARM):
        plans[1].run(args)
    replay = plans[1].replayer(args)
    assert replay is not None
    bi.write(np.array([[12]], np.int32))
    with pytest.raises(ktir.EmulationFault) as quiet, np.errstate(all="ignore"):
        replay.run_quiet()
    with pytest.raises(ktir.EmulationFault) as got:
        replay()
    assert str(quiet.value) == str(got.value)
    with pytest.raises(ktir.EmulationFault) as alone:
        ktir.Machine().compile(ktir.load_module(paths[1]).only_function).run(
            {"i": bi.address, "x1": bx.address, "o": bo.address})
    assert got.value.function == "gather_node_22" and got.value.loc.file == str(paths[1])
    assert got.value.op == alone.value.op == "ktdp.load"
