"""``ktdp.runtime_arg_extract``: the value, granularity or upper bound of a runtime_arg.

A function argument of type ``!ktdp.runtime_arg<T, granularity=G, upperbound=U>`` is bound like
a scalar of type T (``plan.run({"M": 96})``). Granularity and upper bound are compile-time
constants of the type. The value is checked against the bound each time it is extracted (a
value above U faults, naming the argument and its bound); the granularity is reported, not
enforced: the frontend's definition calls it a constraint without saying on what (the value's
multiple or a tiling step), so the emulator leaves its use to the program.
"""

from __future__ import annotations

from ..errors import FaultSignal
from ..ir import RuntimeArgType
from . import register


@register("ktdp.runtime_arg_extract")
def build_runtime_arg_extract(c, op):
    (x,) = op.operands
    t: RuntimeArgType = x.type
    kind = op.attrs["kind"]
    if kind != "value":
        c.set_const(op.result, int(getattr(t, kind)))
        return None
    ix, ir = c.slot(x), c.slot(op.result)
    bound = t.upperbound
    cast = t.underlying.dtype.type if t.underlying.is_float else int

    def step(env):
        v = env[ix]
        if bound is not None and v > bound:
            raise FaultSignal(f"runtime_arg {x.name} is {v}, above its upperbound {bound}")
        env[ir] = cast(v)

    return step
