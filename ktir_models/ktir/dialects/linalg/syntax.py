"""The custom syntax every linalg op shares: ``ins(...) outs(...)`` clauses, attributes, regions
and result types in any order until the op ends (:func:`parse_structured`). Each op module
registers it for its op kinds.
"""

from __future__ import annotations

from ...ir.nodes import Op, TensorType, Value


def _clause(p, key: str) -> tuple[list[Value], list]:
    p.expect(key)
    p.expect("(")
    vals = p.operand_list(")")
    types: list = []
    if p.accept(":"):
        types = p.type_list()
    p.expect(")", f"closing {key}(...)")
    return vals, types


def parse_structured(p, op: Op):
    """Named and generic linalg ops: clauses in any order until the op ends."""
    result_types: list = []
    while True:
        t = p.peek()
        k = p.kind()
        if t == "{" and k == "punct":
            if p.kind(1) == "ident" and p.peek(2) == "}":  # shorthand combiner { arith.addf }
                p.pos += 1
                op.attrs["combiner"] = p.next()
                p.pos += 1
            elif p.kind(1) == "ident" and p.peek(2) == "=":
                op.attrs.update(p.attr_dict())
            else:
                op.regions.append(p.parse_region())
        elif t == "ins" and p.peek(1) == "(":
            op.groups["ins"], op.attrs["in_types"] = _clause(p, "ins")
        elif t == "outs" and p.peek(1) == "(":
            op.groups["outs"], op.attrs["out_types"] = _clause(p, "outs")
        elif k == "ident" and p.peek(1) == "=" and t not in ("ins", "outs"):
            p.pos += 2
            op.attrs[t] = p.parse_attr_value()
        elif t == "(" and p.kind(1) == "ssa" and p.peek(2) == ":":
            # explicit region arguments: (%a: T, %b: T) { ... }
            p.pos += 1
            args = []
            while not p.accept(")"):
                ai = p.pos
                n = p.expect_kind("ssa", "a region argument")
                p.expect(":")
                args.append(Value(n, p.parse_type(), p.loc(ai)))
                if not p.accept(","):
                    p.expect(")")
                    break
            op.regions.append(p.parse_region(args))
        elif t == "->":
            p.pos += 1
            if p.accept("("):
                result_types = p.type_list()
                p.expect(")")
            else:
                result_types = p.type_list()
        else:
            break
    ins = op.groups.setdefault("ins", [])
    outs = op.groups.setdefault("outs", [])
    op.operands = ins + outs
    if not result_types:
        result_types = [o.type for o in outs if isinstance(o.type, TensorType)]
    return result_types
