"""Unrolled repeats run side by side (ktir/exec/reroll.py): same bytes and faults as the plain plan,
and only where the groups are isomorphic and independent."""

from __future__ import annotations


import numpy as np
import pytest
from conftest import scratchy_program
from test_fastpaths import bind_node
from test_machine import load, program, store, tile, view

from ktir_models import ktir
from ktir_models.ktir.exec.reroll import find_repeats

RNG = np.random.default_rng(11)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint16)


def group(k: int, src_row: str, dst_view: str = "vo", extra: str = "", dst_row: str = "",
          src_shape: tuple = (4, 16)) -> str:
    """Group k: load a row of x (a view of ``src_shape``), exp, scale by a shared constant, store
    it to row ``dst_row`` (default: the group's own constant k) of the destination view."""
    return (f"    %r{k} = arith.constant {k} : index\n" + extra +
            tile(f"t{k}", "vx", src_shape, (1, 16), f"{src_row}, %c0") +
            load(f"v{k}", f"t{k}", (1, 16)) +
            f"    %e{k} = math.exp %v{k} : tensor<1x16xf16>\n"
            f"    %s{k} = arith.mulf %e{k}, %half : tensor<1x16xf16>\n" +
            tile(f"o{k}", dst_view, (4, 16), (1, 16), f"{dst_row or f'%r{k}'}, %c0") +
            store(f"s{k}", f"o{k}", (1, 16)))


PREFIX = (view("vx", "x", (4, 16)) + view("vo", "o", (4, 16)) +
          "    %half = arith.constant dense<0.5> : tensor<1x16xf16>\n")


def run_both(fn, x: np.ndarray):
    outs = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bx = m.hbm.allocate_from(x.copy(), name="x")
        bo = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="o")
        plan = m.compile(fn)
        plan.run([bx.address, bo.address])  # the first run is plain; the second rerolls
        bx.write(x.copy())
        bo.write(np.zeros((4, 16), np.float16))
        plan.run([bx.address, bo.address])
        outs.append((plan, bx.read(), bo.read()))
    return outs


def test_independent_groups_are_rerolled_and_bit_identical():
    fn = program("%x: index, %o: index", PREFIX + "".join(group(k, f"%r{k}") for k in range(4)))
    rep = find_repeats(fn)
    assert rep is not None and rep.count == 4
    x = RNG.standard_normal((4, 16)).astype(np.float16)
    (p1, _, o1), (_, _, o2) = run_both(fn, x)
    assert p1._c.rerolled is not None
    np.testing.assert_array_equal(bits(o1), bits(o2))
    expect = (np.exp(x.astype(np.float32)).astype(np.float16) * np.float16(0.5)).astype(np.float16)
    np.testing.assert_array_equal(bits(o1), bits(expect))


@pytest.fixture(autouse=True)
def small_functions_qualify(monkeypatch):
    """These kernels are small; the size threshold only saves compile time on real programs."""
    from ktir_models.ktir.exec import reroll

    monkeypatch.setattr(reroll, "_MIN_OPS", 1)


def test_a_group_reading_what_a_group_wrote_is_not_rerolled():
    """In place: group k reads row k of x and writes row k+1, which group k+1 then reads; run
    side by side, group k+1 would read the old row."""
    body = PREFIX + "".join(group(k, f"%r{k}", dst_view="vx", dst_row=f"%w{k}",
                                  extra=f"    %w{k} = arith.constant {k + 1} : index\n")
                            for k in range(3))
    fn = program("%x: index, %o: index", body)
    assert find_repeats(fn) is None
    x = (RNG.standard_normal((4, 16)) * 0.3).astype(np.float16)
    (p1, x1, _), (_, x2, _) = run_both(fn, x)
    assert p1._c.rerolled is None
    np.testing.assert_array_equal(bits(x1), bits(x2))
    chained = x.copy()
    for k in range(3):
        chained[k + 1] = (np.exp(chained[k].astype(np.float32)).astype(np.float16) *
                          np.float16(0.5)).astype(np.float16)
    np.testing.assert_array_equal(bits(x1), bits(chained))


def test_aliased_arguments_run_plainly():
    """Group k reads row k of %x and writes row k+1 of %o. With separate buffers the groups are
    independent and run side by side; called in place (%o = %x), group k+1 reads what group k
    wrote, so that run must take the plain plan."""
    body = PREFIX + "".join(group(k, f"%r{k}", dst_row=f"%w{k}",
                                  extra=f"    %w{k} = arith.constant {k + 1} : index\n")
                            for k in range(3))
    fn = program("%x: index, %o: index", body)
    assert find_repeats(fn) is not None
    x = (RNG.standard_normal((4, 16)) * 0.3).astype(np.float16)
    (p1, _, o1), (_, _, o2) = run_both(fn, x)
    assert p1._c.rerolled is not None
    np.testing.assert_array_equal(bits(o1), bits(o2))
    results = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bx = m.hbm.allocate_from(x.copy(), name="x")
        plan = m.compile(fn)
        for _ in range(2):  # the second run would reroll, but its addresses alias
            bx.write(x.copy())
            plan.run([bx.address, bx.address])
        results.append(bx.read())
    np.testing.assert_array_equal(bits(results[0]), bits(results[1]))
    chained = x.copy()
    for k in range(3):
        chained[k + 1] = (np.exp(chained[k].astype(np.float32)).astype(np.float16) *
                          np.float16(0.5)).astype(np.float16)
    np.testing.assert_array_equal(bits(results[0]), bits(chained))


def test_a_value_used_by_another_group_is_not_rerolled():
    """Group k > 0 loads the row named by group k-1's constant: a value crosses groups."""
    body = PREFIX + group(0, "%r0") + "".join(group(k, f"%r{k - 1}") for k in range(1, 4))
    fn = program("%x: index, %o: index", body)
    assert find_repeats(fn) is None


def test_a_fault_in_a_later_group_is_located_as_in_the_plain_run():
    """Group 3 reads row 7 of an 8-row view over the 4 rows of x, the last HBM region (a fault;
    rows outside the view's set would be masked): reported at group 3's load, as without
    rerolling."""
    rows = [0, 1, 2, 7]
    prefix = PREFIX.replace(view("vx", "x", (4, 16)), view("vx", "x", (8, 16)))
    body = prefix + "".join(group(k, f"%q{k}", extra=f"    %q{k} = arith.constant {r} : index\n",
                                  src_shape=(8, 16)) for k, r in enumerate(rows))
    fn = program("%x: index, %o: index", body)
    assert find_repeats(fn) is not None
    messages = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bo = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="o")
        bx = m.hbm.allocate_from(np.ones((4, 16), np.float16), name="x")
        plan = m.compile(fn)
        for _ in range(2):  # the first run is plain; the second rerolls
            with pytest.raises(ktir.EmulationFault) as info:
                plan.run([bx.address, bo.address])
            messages.append(str(info.value))
        assert (plan._c.rerolled is not None) == batched
    assert len(set(messages)) == 1 and "ktdp.load" in messages[0]


@pytest.mark.parametrize("fixture,index,heads", [("smollm2-135m", 6, 9), ("llama-3.2-1b", 6, 32)])
def test_corpus_decode_attention_is_rerolled_bit_identically(fixture, index, heads,
                                                            native_matmul):
    directory, nodes, tensors = scratchy_program(fixture)
    node = nodes[index]
    fn = ktir.load_module(directory / node["mlir"]).function(node["fn"])
    rep = find_repeats(fn)
    assert rep is not None and rep.count == heads
    inputs = {a["tensor"]: (RNG.standard_normal(tensors[a["tensor"]]) * 0.5).astype(np.float16)
              for a in node["args"] if not a["is_output"]}
    outs = []
    for batched in (True, False):
        machine = ktir.Machine(grid_batching=batched, native_matmul=native_matmul)
        addresses, outputs = bind_node(machine, node, tensors, inputs)
        plan = machine.compile(fn)
        plan.run(addresses)
        plan.run(addresses)  # the second run rerolls (with grid_batching)
        assert (plan._c.rerolled is not None) == batched
        outs.append({k: b.read() for k, b in outputs.items()})
    assert outs[0].keys() == outs[1].keys() and outs[0]
    for k in outs[0]:
        assert np.isfinite(outs[1][k]).all()
        np.testing.assert_array_equal(bits(outs[0][k]), bits(outs[1][k]))
