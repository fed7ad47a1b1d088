"""Type and attribute texts defined by the ktdp frontend (KTDPTypes.td, KTDPAttrs.td):
``!ktdp.runtime_arg<...>``, ``memref<..., #memory space>`` and the memory-space attribute in its
two spellings.

``runtime_arg`` and ``split_memref_body`` take the text between the type's outer angle brackets
and report problems with ``fail(message, offset)``, ``offset`` counted from the start of that
body, so the parser can point at the offending parameter; ``memory_space`` reports with
``fail(message)`` at the attribute.
"""

from __future__ import annotations

import re
from typing import Callable

from ..ir.nodes import ELEMENT_DTYPES, MemorySpace, RuntimeArgType, ScalarType

_PARAM_RE = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*(-?\d+)\s*$")


def runtime_arg(body: str, fail: Callable[[str, int], None]) -> RuntimeArgType:
    """``T[, granularity=G][, upperbound=U]`` (either order) -> :class:`RuntimeArgType`.

    The underlying type must be a builtin scalar; G and U must be positive integers."""
    parts = body.split(",")
    under = parts[0].strip()
    if under not in ELEMENT_DTYPES:
        fail(f"runtime_arg wraps a builtin scalar type (index, i32, f32, ...), not '{under}'", 0)
    params: dict[str, int] = {}
    at = len(parts[0]) + 1
    for part in parts[1:]:
        m = _PARAM_RE.match(part)
        if m is None:
            fail(f"expected 'granularity=N' or 'upperbound=N' in a runtime_arg type, found "
                 f"'{part.strip()}'", at)
        key, value = m.group(1), int(m.group(2))
        if key not in ("granularity", "upperbound"):
            fail(f"unknown runtime_arg parameter '{key}' (expected granularity or upperbound)",
                 at)
        if key in params:
            fail(f"runtime_arg parameter '{key}' given twice", at)
        if value <= 0:
            fail(f"runtime_arg {key} must be positive, got {value}", at)
        params[key] = value
        at += len(part) + 1
    return RuntimeArgType(ScalarType(under), params.get("granularity"), params.get("upperbound"))


def split_memref_body(body: str) -> tuple[str, str | None, int]:
    """``4x8xf16, #ktdp.spyre_memory_space<HBM>`` -> (shape text, attribute text or None, the
    attribute's offset in ``body``). ``//`` comments inside a type written over several lines
    are blanked out first (offsets are kept)."""
    body = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), body)
    head, comma, rest = body.partition(",")
    if not comma:
        return body, None, 0
    at = len(head) + 1 + (len(rest) - len(rest.lstrip()))
    return head, rest.strip(), at


# spelling -> (its kinds -> ours, the name of its core parameter)
_SPACES = {
    "#ktdp.memory_space": ({"global": "hbm", "ct_local": "lx"}, "ct_id"),
    "#ktdp.spyre_memory_space": ({"HBM": "hbm", "LX": "lx", "L0": "lx", "unspecified": "hbm"},
                                 "core"),
}


def memory_space(text: str, fail: Callable[[str], None]) -> MemorySpace:
    """A memory-space attribute in either spelling -> :class:`MemorySpace`:
    ``#ktdp.memory_space<global>``, ``#ktdp.memory_space<ct_local[, ct_id = N]>`` (the
    dialect's current one) or ``#ktdp.spyre_memory_space<HBM|LX|L0|unspecified[, core = N]>``
    (the earlier one). Each spelling takes its own core parameter's name; a core names whose
    scratchpad holds the data, so only a core-local space takes one."""
    head, _, body = text.partition("<")
    if head not in _SPACES:
        fail(f"unknown attribute '{head}' (expected #ktdp.memory_space or "
             "#ktdp.spyre_memory_space)")
    kinds, core_key = _SPACES[head]
    parts = [p.strip() for p in body[:-1].split(",")]
    name = parts[0]
    core = None
    for extra in parts[1:]:
        key, eq, val = extra.partition("=")
        if not eq or key.strip() != core_key or not val.strip().isdigit() or core is not None:
            fail(f"bad memory space parameter '{extra}' (expected '{core_key} = N' once)")
        core = int(val.strip())
    if name not in kinds:
        fail(f"unknown memory space '{name}' (expected one of {', '.join(kinds)})")
    if core is not None and kinds[name] != "lx":
        # HBM is shared by every core
        fail(f"memory space '{name}' cannot name a core ({core_key} = {core}): core affinity "
             "belongs to a core's LX or L0 scratchpad only")
    return MemorySpace(kinds[name], core)
