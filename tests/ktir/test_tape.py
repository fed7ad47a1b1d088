"""Tapes (ktir/exec/tape.py): a plan run again with the same arguments replays its recorded data steps.

Replays must give exactly the bytes, and the faults, of running the steps: with fresh data in
memory on every run, with addresses computed from data, with loop bounds read from memory, with
other arguments, and after HBM regions change. The reference is the same function on a machine
without tapes, core after core (``grid_batching=False, tapes=False``).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scratchy_program
from test_fastpaths import bind_node
from test_machine import load, program, store, tile, view

from ktir_models import ktir
from ktir_models.ktir.exec.tape import static_values

RNG = np.random.default_rng(11)
RUNS = 5  # run 1 plain, 2 stacked/rerolled (tier-up), 3 records, 4 and 5 replay


def bits(a) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint16)


def gather_row() -> ktir.Function:
    """o[0, :] = x[idx[0], :]: the row address comes from memory (a data-dependent access). The
    view has 16 rows over the 8 of ``x`` (the callers' last region but for ``o``): rows 12.. lie
    in no region (a fault; rows outside the view's set would be masked instead)."""
    body = (view("vi", "i", (1, 1), "i32") + view("vx", "x", (16, 16)) + view("vo", "o", (1, 16)) +
            tile("ti", "vi", (1, 1), (1, 1), "%c0, %c0", "i32") + load("iv", "ti", (1, 1), "i32") +
            "    %r32 = tensor.extract %iv[%c0, %c0] : tensor<1x1xi32>\n"
            "    %r = arith.index_cast %r32 : i32 to index\n" +
            tile("tx", "vx", (16, 16), (1, 16), "%r, %c0") + load("v", "tx", (1, 16)) +
            tile("to", "vo", (1, 16), (1, 16), "%c0, %c0") + store("v", "to", (1, 16)))
    return program("%i: index, %x: index, %o: index", body)


def sum_first_rows() -> ktir.Function:
    """o = x[0] + ... + x[n-1] (f16 adds in order) with n read from memory: a loop whose bound
    is data."""
    body = (view("vi", "i", (1, 1), "i32") + view("vx", "x", (8, 16)) + view("vo", "o", (1, 16)) +
            tile("ti", "vi", (1, 1), (1, 1), "%c0, %c0", "i32") + load("nv", "ti", (1, 1), "i32") +
            "    %n32 = tensor.extract %nv[%c0, %c0] : tensor<1x1xi32>\n"
            "    %n = arith.index_cast %n32 : i32 to index\n"
            "    %c1 = arith.constant 1 : index\n"
            "    %z = arith.constant dense<0.0> : tensor<1x16xf16>\n"
            "    %s = scf.for %k = %c0 to %n step %c1 iter_args(%acc = %z) -> (tensor<1x16xf16>) {\n"
            + tile("tx", "vx", (8, 16), (1, 16), "%k, %c0") + load("v", "tx", (1, 16)) +
            "    %a = arith.addf %acc, %v : tensor<1x16xf16>\n"
            "    scf.yield %a : tensor<1x16xf16>\n"
            "    }\n" +
            tile("to", "vo", (1, 16), (1, 16), "%c0, %c0") + store("s", "to", (1, 16)))
    return program("%i: index, %x: index, %o: index", body)


def scaled_rows(grid: int = 4) -> ktir.Function:
    """Core c: o[c] = x[c] * 2 over a loop of one trip per core (static bounds: unrolled)."""
    body = (view("vx", "x", (4, 16)) + view("vo", "o", (4, 16)) +
            "    %core = ktdp.get_compute_tile_id : index\n"
            "    %c4 = arith.constant 4 : index\n"
            "    scf.for %r = %core to %c4 step %c4 {\n" +
            tile("tx", "vx", (4, 16), (1, 16), "%r, %c0") + load("v", "tx", (1, 16)) +
            "    %a = arith.addf %v, %v : tensor<1x16xf16>\n" +
            tile("to", "vo", (4, 16), (1, 16), "%r, %c0") + store("a", "to", (1, 16)) +
            "    }\n")
    return program("%x: index, %o: index", body, grid=f"[{grid}]")


def _index_and_rows(fn, machine=None, x=None):
    """``fn``'s plan with buffers i (one i32, zero), x (8 x 16 f16) and o (1 x 16)."""
    m = machine or ktir.Machine()
    x = RNG.standard_normal((8, 16)).astype(np.float16) if x is None else x
    bufs = (m.hbm.allocate_from(np.zeros((1, 1), np.int32), name="i"),
            m.hbm.allocate_from(x, name="x"), m.hbm.allocate((1, 16), "float16", name="o"))
    return x, m.compile(fn), bufs


def test_data_dependent_address_follows_the_data():
    x, plan, (bi, bx, bo) = _index_and_rows(gather_row())
    for run, row in enumerate([3, 3, 3, 5, 0, 7, 1]):
        bi.write(np.array([[row]], np.int32))
        plan.run([bi.address, bx.address, bo.address])
        np.testing.assert_array_equal(bits(bo.read()[0]), bits(x[row]), err_msg=f"run {run}")
    assert plan.replays >= 3


def test_loop_bound_read_from_memory_follows_the_data():
    x, plan, (bi, bx, bo) = _index_and_rows(sum_first_rows())
    for run, n in enumerate([2, 2, 2, 8, 0, 5]):
        bi.write(np.array([[n]], np.int32))
        plan.run([bi.address, bx.address, bo.address])
        expect = np.zeros(16, np.float16)
        for k in range(n):
            expect = (expect + x[k]).astype(np.float16)
        np.testing.assert_array_equal(bits(bo.read()[0]), bits(expect), err_msg=f"run {run}")
    assert plan.replays >= 2


def test_static_analysis_keeps_data_out():
    fn = sum_first_rows()
    static = static_values(fn)
    names = {v.name: id(v) in static for op in fn.walk() for v in op.results}
    assert names["%vx"] and names["%ti"] and names["%c1"]
    assert not names["%nv"] and not names["%n"] and not names["%v"] and not names["%s"]
    # the loop's bound is data: its induction variable, and the tile built from it, are not static
    assert not names["%tx"]


@pytest.mark.parametrize("batched", [True, False])
def test_new_arguments_and_new_regions_are_not_replayed_stale(batched):
    fn = scaled_rows()
    m = ktir.Machine(grid_batching=batched)
    plan = m.compile(fn)
    xs = [RNG.standard_normal((4, 16)).astype(np.float16) for _ in range(2)]
    bufs = [(m.hbm.allocate_from(x, name=f"x{k}"), m.hbm.allocate((4, 16), "float16",
                                                                   name=f"o{k}"))
            for k, x in enumerate(xs)]
    for run in range(12):
        k = (run // 4) % 2  # four runs on one pair of buffers, then four on the other, ...
        bx, bo = bufs[k]
        fresh = RNG.standard_normal((4, 16)).astype(np.float16)
        bx.write(fresh)
        if run == 9:  # a region appears: views are rebuilt, the tape's key changes
            m.hbm.allocate((64, 64), "float16", name="extra")
        plan.run([bx.address, bo.address])
        np.testing.assert_array_equal(bits(bo.read()), bits((fresh + fresh).astype(np.float16)),
                                      err_msg=f"run {run}")
    # core after core (the reference order) runs the steps; the stacked grid replays
    assert plan.replays >= 3 if batched else plan.replays == 0
    plan.run([bufs[1][0].address, bufs[1][1].address])  # not the taped arguments: dropped
    assert plan._tape is None


def test_a_fault_during_replay_is_the_plain_fault():
    """The gathered row index leaves HBM on the last run: the replay raises the fault the plain
    plan raises, at the same op."""
    fn = gather_row()
    faults = []
    for tapes in (True, False):
        _, plan, (bi, bx, bo) = _index_and_rows(fn, ktir.Machine(tapes=tapes),
                                                np.ones((8, 16), np.float16))
        for _ in range(4):
            plan.run([bi.address, bx.address, bo.address])
        assert (plan.replays > 0) == tapes
        bi.write(np.array([[12]], np.int32))
        with pytest.raises(ktir.EmulationFault) as info:
            plan.run([bi.address, bx.address, bo.address])
        faults.append((info.value.op, str(info.value)))
    assert faults[0] == faults[1] and faults[0][0] == "ktdp.load"


def test_tapes_off_never_record():
    m = ktir.Machine(tapes=False)
    bx = m.hbm.allocate_from(np.ones((4, 16), np.float16), name="x")
    bo = m.hbm.allocate((4, 16), "float16", name="o")
    plan = m.compile(scaled_rows())
    for _ in range(RUNS):
        plan.run([bx.address, bo.address])
    assert plan.replays == 0 and plan._tape is None


# ----------------------------------------------------------------------------- corpus nodes

def _replayed_outputs(directory, node, tensors, native_matmul):
    """Per run, with fresh inputs written into the same buffers: the node's outputs with tapes
    (on the stacked or rerolled form) and with the plain plan; and the taped plan."""
    fn = ktir.load_module(directory / node["mlir"]).function(node["fn"])
    machines = [ktir.Machine(native_matmul=native_matmul),
                ktir.Machine(grid_batching=False, tapes=False, native_matmul=native_matmul)]
    bound = []
    for m in machines:
        addresses, inputs, outputs = {}, {}, {}
        for a in node["args"]:
            buf = m.hbm.allocate(tensors[a["tensor"]], "float16", name=a["name"])
            (outputs if a["is_output"] else inputs)[a["name"]] = (buf, a["tensor"])
            addresses[a["name"]] = buf.address
        bound.append((m.compile(fn), addresses, inputs, outputs))
    runs = []
    for _ in range(RUNS):
        fresh = {a["tensor"]: (RNG.standard_normal(tensors[a["tensor"]]) * 0.5).astype(np.float16)
                 for a in node["args"] if not a["is_output"]}
        outs = []
        for plan, addresses, inputs, outputs in bound:
            for buf, tensor in inputs.values():
                buf.write(fresh[tensor])
            for buf, _ in outputs.values():
                buf.write(np.zeros(buf.shape, np.float16))
            plan.run(addresses)
            outs.append({name: buf.read() for name, (buf, _) in outputs.items()})
        runs.append(outs)
    return runs, bound[0][0]


# every node kind of layer 0 of the scratchy decode program (embedding, norms, projections,
# rope, the single-core attention that rerolls its 9 heads, the MLP; all single-core), the
# prefill program's stacked grids (32-core GEMMs whose K-loop is one kernel call on fixed
# operands, the 9-core attention of 32 unrolled rows, the rerolled RoPE), and the lm_heads
@pytest.mark.parametrize("fixture,indices", [
    ("smollm2-135m", list(range(0, 16))),
    ("smollm2-135m-prefill", [1, 5, 6, 10, 12, 13]),
    pytest.param("smollm2-135m", [451], marks=pytest.mark.slow),
    pytest.param("smollm2-135m-prefill", [451], marks=pytest.mark.slow),
])
def test_corpus_nodes_replay_bit_identical(fixture, indices, native_matmul):
    directory, nodes, tensors = scratchy_program(fixture)
    for index in indices:
        runs, plan = _replayed_outputs(directory, nodes[index], tensors, native_matmul)
        for run, (taped, plain) in enumerate(runs):
            assert taped.keys() == plain.keys() and taped
            for name in taped:
                np.testing.assert_array_equal(bits(taped[name]), bits(plain[name]),
                                              err_msg=f"node {index} run {run} {name}")
        assert plan.replays >= RUNS - 3, f"node {index} never replayed a tape"
