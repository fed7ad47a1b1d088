"""Type texts defined by the ktdp frontend (KtdpTypes.td): ``!ktdp.runtime_arg<...>`` and
``memref<..., #ktdp.spyre_memory_space<...>>``.

Both functions take the text between the type's outer angle brackets and report problems with
``fail(message, offset)``, ``offset`` counted from the start of that body, so the parser can
point at the offending parameter.
"""

from __future__ import annotations

import re
from typing import Callable

from ..ir import ELEMENT_DTYPES, RuntimeArgType, ScalarType

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
