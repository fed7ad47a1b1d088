"""Number literals of the KTIR text: their length bound and hexadecimal float bit patterns.

Imports nothing of the emulator, so the parser and the dialect modules (``arith.constant`` folds
``0x...`` literals of float type) may both use it.
"""

from __future__ import annotations

import struct

from .bounds import MAX_LITERAL_CHARS


def check_literal(p, text: str, i: int) -> None:
    """Refuse (located at token ``i``) a number literal longer than any KTIR type holds: Python
    converts integers of more than 4,300 digits only on request, and no type needs them."""
    if len(text) > MAX_LITERAL_CHARS:
        p.fail(f"number literal of {len(text)} characters is too long (at most "
               f"{MAX_LITERAL_CHARS}; i64 needs 19 digits)", i)


def hex_float(bits: int, elem: str) -> float:
    """Reinterpret an integer bit pattern as a float of type ``elem``."""
    if elem == "f32":
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if elem == "f16":
        return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    if elem == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0]
    raise ValueError(elem)
