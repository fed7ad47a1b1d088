"""The ktdp tile types' parts read at parse time: the tile_future type, and access tiles clipped.

``!ktdp.tile_future<(T_1, ..., T_n), groups = S>`` (also ``<...>`` where the type is implied,
and the one-role spellings ``<T, ...>`` / ``<(T), ...>``) carries ranked tensor partial types
and a group set of one dimension and no symbols; :func:`parse_tile_future` refuses others with
the frontend's wording.

An access tile is its result type's box: a set larger than the type is clipped at parse time.

The dialect ties no extent of ``access_tile_set`` (or ``variables_space_set``) to the tile's
result type; its own tests build ``!ktdp.access_tile<1x64xindex>`` from a 2x64 set. The emulator
reads such a tile as the points of the set that fall inside the type's box, counted from the
set's lower corner in the order's dimension order. Where the set is a constant box and the
order a permutation, that is again a box, so the parser stores the clipped set and every later
stage (verification, the plain, stacked and taped plans, the printer) sees one consistent tile.
A set smaller than the type in some dimension (the type has positions no point of the set
fills) is kept as written; such a tile verifies, and a load or store through it faults at run
time (:func:`unfilled_fault`): it would need masked tile positions, which the emulator does not
model.
"""

from __future__ import annotations

from ..ir import affine
from ..ir.nodes import TensorType, TileFutureType


def parse_tile_future(p, i: int) -> TileFutureType:
    """Read a tile_future type at token ``i`` (``!ktdp.tile_future`` or the bare ``<``)."""
    if p.peek() == "!ktdp.tile_future":
        p.pos += 1
    p.expect("<")
    parts = []
    p.enter(i, "types")  # a partial type may (wrongly) be a future: bounded recursion
    if p.accept("("):
        parts.append(p.parse_type())
        while p.accept(","):
            parts.append(p.parse_type())
        p.expect(")", "closing the tile_future's partial types")
    else:
        parts.append(p.parse_type())
    p.depth -= 1
    for t in parts:
        if not isinstance(t, TensorType):
            p.fail("invalid kind of type specified: tile_future partial types are ranked "
                   f"tensors (expected builtin.tensor), found {t}", i)
    groups = None
    if p.accept(","):
        key = p.expect_kind("ident", "'groups'")
        if key != "groups":
            p.fail(f"expected 'groups', found '{key}'")
        p.expect("=")
        groups = p.parse_attr_value()
        if not isinstance(groups, affine.AffineSet):
            p.fail("tile_future groups must be an affine_set", i)
        if groups.num_dims != 1:
            p.fail("tile_future `groups` must have exactly one dimension (g)", i)
        if groups.num_syms:
            p.fail("tile_future `groups` must have no symbols", i)
    p.expect(">", "closing the tile_future type")
    return TileFutureType(tuple(parts), groups)


def clip_set_to_type(s, order, shape):
    """``s`` clipped to the tile type's ``shape`` (see the module docstring), or ``s`` itself."""
    if not isinstance(s, affine.AffineSet) or not isinstance(order, affine.AffineMap):
        return s
    box = s.box_bounds()
    perm = order.permutation()
    if box is None or s.num_syms or perm is None or len(perm) != len(shape) \
            or any(d is None for d in shape):
        return s
    if any(b.lo[0] != "c" or b.hi[0] != "c" for b in box):
        return s
    lo = [b.lo[1] for b in box]
    ext = [b.hi[1] - b.lo[1] + 1 for b in box]
    new = list(ext)
    for k, p in enumerate(perm):
        if shape[k] > ext[p]:
            return s  # the type has positions the set does not fill: keep it as written
        new[p] = shape[k]
    if new == ext:
        return s
    cons = []
    for d, (a, e) in enumerate(zip(lo, new)):
        cons.append((affine.add(("d", d), affine.const(-a)), False))
        cons.append((affine.add(affine.neg(("d", d)), affine.const(a + e - 1)), False))
    return affine.AffineSet(s.num_dims, 0, tuple(cons))


def unfilled_fault(op, set_key: str, order_key: str) -> str | None:
    """The fault message for a tile whose (constant box) set leaves positions of its result
    type unfilled, or None (the set fills the type, or is not a constant box)."""
    s, order = op.attrs.get(set_key), op.attrs.get(order_key)
    shape = getattr(op.results[0].type, "shape", None) if op.results else None
    if not isinstance(s, affine.AffineSet) or not isinstance(order, affine.AffineMap) or \
            shape is None or any(d is None for d in shape):
        return None
    box = s.box_bounds()
    perm = order.permutation()
    if box is None or s.num_syms or perm is None or len(perm) != len(shape) or \
            any(b.lo[0] != "c" or b.hi[0] != "c" for b in box):
        return None
    ext = [b.hi[1] - b.lo[1] + 1 for b in box]
    filled = tuple(ext[p] for p in perm)
    if all(f >= d for f, d in zip(filled, shape)):
        return None
    return (f"{set_key} fills {'x'.join(map(str, filled))} of the tile type's "
            f"{'x'.join(map(str, shape))} positions: accessing a tile with unfilled (masked) "
            "positions is not modelled")
