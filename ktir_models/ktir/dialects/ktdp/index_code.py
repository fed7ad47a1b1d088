"""Index operands as generated code: ``env -> tuple of ints`` functions for subscripts and sizes.

A tile's anchor and a view's sizes are evaluated on every run of their op; instead of walking the
operands, each becomes one generated lambda reading its slots (constants folded). The code object
is made once per distinct body text, so the many ops that differ only in slots share it.
"""

from __future__ import annotations

from ...ir import affine


_FACTORIES: dict[str, object] = {}


def _generated(params: list[str], body: str, values: list):
    """``lambda env: body`` with ``params`` bound to ``values``; the code object is generated once
    per distinct body text (slots and constants are parameters, so bodies repeat a lot)."""
    text = f"lambda {', '.join(params) or '*_'}: lambda env: {body}"
    factory = _FACTORIES.get(text)
    if factory is None:
        factory = eval(text)
        _FACTORIES[text] = factory
    return factory(*values)


def _operand_refs(c, vals):
    """Source snippets reading each value, plus the parameters they need."""
    refs, params, values = [], [], []
    for j, v in enumerate(vals):
        if c.is_const(v):
            params.append(f"_k{j}")
            values.append(int(c.const(v)))
            refs.append(f"_k{j}")
        else:
            params.append(f"_s{j}")
            values.append(c.slot(v))
            refs.append(f"env[_s{j}]")
    return refs, params, values


def values_fn(c, vals):
    """env -> tuple of the values' current ints (constants folded), as generated code."""
    if all(c.is_const(v) for v in vals):
        t = tuple(int(c.const(v)) for v in vals)
        return lambda env: t
    refs, params, values = _operand_refs(c, vals)
    return _generated(params, f"({''.join(r + ', ' for r in refs)})", values)


def anchor_fn(c, bm: affine.AffineMap, indices, offsets):
    """env -> absolute lower corner: base_map(indices) + per-dim offsets, as generated code."""
    refs, params, values = _operand_refs(c, indices)
    parts = []
    for k, (e, off) in enumerate(zip(bm.results, offsets)):
        text = affine.to_python(e, refs, [])
        if off:
            params.append(f"_o{k}")
            values.append(off)
            text = f"{text} + _o{k}"
        parts.append(text)
    return _generated(params, f"({''.join(p + ', ' for p in parts)})", values)
