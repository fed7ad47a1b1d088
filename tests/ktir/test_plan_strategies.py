"""A plan's run strategy (ktir/exec/strategies.py) is chosen once, at its first run, and again only at
the tier-up of its second run or when the machine's ``grid_batching`` changes."""

from __future__ import annotations

import numpy as np
from test_stacked import bits, softmax_rows

from ktir_models import ktir
from ktir_models.ktir.exec import strategies


def _run(machine, plan, x):
    src = machine.hbm.allocate_from(x, name="x")
    out = machine.hbm.allocate_from(np.zeros((4, 16), np.float16), name="o")
    plan.run([src.address, out.address])
    return out.read()


def test_the_strategy_follows_the_tier_up_and_grid_batching():
    x = (np.random.default_rng(5).standard_normal((4, 16)) * 3).astype(np.float16)
    m = ktir.Machine()
    plan = m.compile(softmax_rows())
    assert plan._strategy is None
    first = _run(m, plan, x)
    chosen = plan._strategy
    assert type(chosen) is strategies.PerCore  # no batched step, not tiered up yet
    second = _run(m, plan, x)
    assert type(plan._strategy) is strategies.Stacked and plan._c.stacked is not None
    stacked = plan._strategy
    _run(m, plan, x)
    assert plan._strategy is stacked  # kept from run to run
    m.grid_batching = False
    plain = _run(m, plan, x)
    assert type(plan._strategy) is strategies.PerCore
    for a in (second, plain):
        np.testing.assert_array_equal(bits(a), bits(first))


def test_a_single_core_plan_runs_single():
    from test_machine import program

    m = ktir.Machine()
    plan = m.compile(program("%x: index", "", grid="[1]"))
    plan.run([0])
    assert type(plan._strategy) is strategies.Single
