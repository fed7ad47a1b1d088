"""Syntax pieces the op kinds' custom assembly formats share (each op kind's handler is its
``syntax`` part in the registry, registered by its dialect module in dialects/).

A handler takes the parser positioned after the op name, fills ``op`` (operands, operand groups,
attributes, regions) and returns the result types. It may look at most two tokens past the last
one it consumes (op_templates.py relies on it).
"""

from __future__ import annotations

from ..ir.nodes import Op, Value


# ---------------------------------------------------------------------------------------------
# op handlers: parse the rest of the op after its name; return the result types

def bracket_ints_or_values(p, what: str) -> tuple[list, list[Value]]:
    """``[4, %n, ...]`` -> static list (None marks a dynamic slot), dynamic operand list."""
    p.expect("[", f"opening {what}")
    static: list = []
    dyn: list[Value] = []
    while not p.accept("]"):
        if p.kind() == "ssa":
            static.append(None)
            dyn.append(p.operand())
        else:
            i = p.pos
            v = p.number()
            if not isinstance(v, int):
                p.fail(f"{what} entries must be integers or SSA values", i)
            static.append(v)
        if not p.accept(","):
            p.expect("]", f"closing {what}")
            break
    return static, dyn


def h_yield(p, op: Op):
    if p.kind() == "ssa":
        op.operands = p.operand_list()
        p.expect(":", "before the yielded types")
        op.attrs["types"] = p.type_list()
    return []

