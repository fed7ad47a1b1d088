"""Pieces of the frontend's op syntax that several readers share: the kinds a
``ktdp.runtime_arg_extract`` may extract (its custom form: dialects/runtime_arg.py; its generic
form: generic_form.py) and the ``(T, ...) -> (R, ...)`` function type (``func.call``:
dialects/func.py; generic-form functions and calls: generic_form.py).
"""

from __future__ import annotations

EXTRACT_KINDS = ("value", "granularity", "upperbound")


def function_type(p) -> tuple[list, list]:
    """``(T, ...) -> R`` or ``(T, ...) -> (R, ...)``: argument and result types."""
    p.expect("(", "opening the argument types")
    args = [] if p.peek() == ")" else p.type_list()
    p.expect(")", "closing the argument types")
    p.expect("->")
    if p.accept("("):
        results = [] if p.peek() == ")" else p.type_list()
        p.expect(")", "closing the result types")
    else:
        results = [p.parse_type()]
    return args, results


__all__ = ["EXTRACT_KINDS", "function_type"]
