"""Cost handlers and cost categories of the op kinds whose dialect modules do not declare their
cost yet (registered into the registry's ``cost`` part on import).

A handler ``handler(walker, op, scale)`` charges ``op`` on one core (see walker.py); a category
name picks one of the walker's generic rules (:data:`~.walker.GENERIC_RULES`). Each entry here
moves to its dialect module (``dialects/<dialect>.py``) with the rest of that op kind; the
numbers must not change on the way.

The handlers themselves now live with their op kinds in dialects/ (the evaluators of views,
tiles and tile ids in dialects/ktdp/, constants in dialects/arith.py): they charge nothing and
leave every result they cannot evaluate as None; region handlers walk each region body with the
scale of its executions.
"""

from __future__ import annotations

from .. import registry

# ------------------------------------------------------------------------------------ categories
# Op kinds charged by a generic rule, by category: waiting for their dialect modules, which take
# their entries with them. Op kinds in none of these (and with no handler) keep the walker's
# name-based rule.
CATEGORY_TABLE: dict[str, tuple[str, ...]] = {
    # (arith, math, tensor, linalg, scf and return declare theirs in their dialect modules; the
    # tensor and arith names here are kinds no dialect module defines, costed should a program
    # name them)
    "free": (
        "tensor.reshape", "tensor.dim", "tensor.cast", "func.return", "ktdp.region_terminator"),
    "scalar": ("arith.ceildivui",),
    "layout": ("tensor.pad", "tensor.concat"),
}
for _category, _names in CATEGORY_TABLE.items():
    for _name in _names:
        registry.set_part("cost", _name, _category)
