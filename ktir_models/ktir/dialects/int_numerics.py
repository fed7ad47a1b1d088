"""arith's integer numerics: MLIR's two's-complement semantics on signless integers.

A signless ``iN`` value is N bits; the op decides how they are read: as a signed number
(``divsi``, ``cmpi slt``, ``extsi``, ``sitofp``, ...) or as an unsigned one (``divui``,
``cmpi ult``, ``extui``, ``uitofp``, ...). The emulator stores the bits in the signed numpy type
of the same width (``i1`` as ``bool``); a scalar is a Python int in the signed range
(``i1``: a bool). Invariants of every function here:

* results wrap modulo 2^N (no numpy overflow warning escapes, no Python int grows past N bits);
* ``index`` scalars are exact Python ints (the target's 64-bit wrap is never reached by
  programs that address memory); its unsigned reading is the low 64 bits;
* what MLIR leaves undefined is given one deterministic value: a shift by N or more bits gives 0
  (``shli``, ``shrui``) or the sign fill (``shrsi``); ``divsi``/``floordivsi``/``ceildivsi`` of
  the most negative value by -1 wraps to the most negative value; division by zero raises
  ``ZeroDivisionError`` (an emulation fault).

Every function takes Python ints/bools or numpy arrays (or numpy scalars) of one element type.
"""

from __future__ import annotations

import numpy as np

from ..ir.nodes import ELEMENT_DTYPES, int_width

_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
             8: np.dtype(np.uint64)}


def _is_arr(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic))


def wrap(v: int, elem: str):
    """Python int ``v`` as a value of type ``elem``: the low N bits read as signed (i1: bool;
    an unsigned ``uiN``: read unsigned); index is returned as it is."""
    if elem == "index":
        return v
    bits = int_width(elem)
    if bits == 1:
        return bool(v & 1)
    if elem.startswith("ui"):
        return v & ((1 << bits) - 1)
    half = 1 << (bits - 1)
    return ((v + half) & ((1 << bits) - 1)) - half


def _array(x, elem: str) -> np.ndarray:
    """``x`` as an array of ``elem``'s storage type (a grid's stacked scalars may be int64)."""
    x = np.asarray(x)
    dt = ELEMENT_DTYPES[elem]
    return x if x.dtype == dt else x.astype(dt)


def signed(x, elem: str):
    """The signed reading of ``x`` (i1: true is -1)."""
    if _is_arr(x):
        x = _array(x, elem)
        return -x.astype(np.int8) if x.dtype == np.bool_ else x
    return -int(x) if elem == "i1" else int(x)


def unsigned(x, elem: str):
    """The unsigned reading of ``x``: arrays viewed as the unsigned type of their width."""
    if _is_arr(x):
        x = _array(x, elem)
        return x.astype(np.uint8) if x.dtype == np.bool_ else x.view(_UNSIGNED[x.dtype.itemsize])
    return int(x) & ((1 << int_width(elem)) - 1)


def narrow(v, elem: str):
    """A computed result (any integer dtype, or a Python int) as a value of type ``elem``."""
    if _is_arr(v):
        v = np.asarray(v)
        if elem == "i1":
            return (v & 1).astype(np.bool_)
        return v.astype(ELEMENT_DTYPES[elem], copy=False)
    return wrap(int(v), elem)


def _nonzero(b, elem: str):
    if _is_arr(b):
        if not np.all(b):
            raise ZeroDivisionError("integer division by zero")
    elif not b:
        raise ZeroDivisionError("integer division by zero")
    return b


def _trunc_div(a, b):
    """Quotient rounded toward zero (a, b in one signed domain)."""
    q = a // b
    r = a - q * b
    adj = (r != 0) & ((a < 0) != (b < 0))
    return q + adj if _is_arr(adj) else (q + 1 if adj else q)


def _ceil_div(a, b):
    """Quotient rounded toward +infinity."""
    q = a // b
    r = a - q * b
    return q + (r != 0)


def _shift_left(a, s, elem):
    bits = int_width(elem)
    if _is_arr(s):
        return np.where(s >= bits, 0, a << np.minimum(s, bits - 1).astype(a.dtype))
    return 0 if s >= bits else a << s


def _ashr(a, s, elem):
    """Arithmetic shift right; a shift by N or more bits fills with the sign."""
    bits = int_width(elem)
    if _is_arr(s):
        return a >> np.minimum(s, bits - 1).astype(np.asarray(a).dtype)
    return a >> min(s, bits - 1)


def _lshr(a, s, elem):
    bits = int_width(elem)
    if _is_arr(s):
        big = s >= bits
        return np.where(big, 0, a >> np.minimum(s, bits - 1).astype(a.dtype))
    return 0 if s >= bits else a >> s


def _pick(cmp):
    """min/max by a comparison of readings, returning the original operand."""
    def fn(a, b, ra, rb):
        c = cmp(ra, rb)
        return np.where(c, a, b) if _is_arr(c) else (a if c else b)
    return fn


# name -> (reading, function of the two readings); the result is narrowed to the type.
# "raw" ops are the same on either reading (two's complement).
_BINARY = {
    "arith.addi": ("raw", lambda a, b, e: a + b),
    "arith.subi": ("raw", lambda a, b, e: a - b),
    "arith.muli": ("raw", lambda a, b, e: a * b),
    "arith.andi": ("raw", lambda a, b, e: a & b),
    "arith.ori": ("raw", lambda a, b, e: a | b),
    "arith.xori": ("raw", lambda a, b, e: a ^ b),
    "arith.divsi": ("s", lambda a, b, e: _trunc_div(a, _nonzero(b, e))),
    "arith.remsi": ("s", lambda a, b, e: a - _trunc_div(a, _nonzero(b, e)) * b),
    "arith.floordivsi": ("s", lambda a, b, e: a // _nonzero(b, e)),
    "arith.ceildivsi": ("s", lambda a, b, e: _ceil_div(a, _nonzero(b, e))),
    "arith.divui": ("u", lambda a, b, e: a // _nonzero(b, e)),
    "arith.remui": ("u", lambda a, b, e: a % _nonzero(b, e)),
    "arith.ceildivui": ("u", lambda a, b, e: _ceil_div(a, _nonzero(b, e))),
}
_SHIFTS = ("arith.shli", "arith.shrsi", "arith.shrui")
_MINMAX = {"arith.minsi": ("s", np.less), "arith.maxsi": ("s", np.greater),
           "arith.minui": ("u", np.less), "arith.maxui": ("u", np.greater)}
INT_OPS = tuple(_BINARY) + _SHIFTS + tuple(_MINMAX)


def _read(x, how: str, elem: str):
    if how == "s":
        return signed(x, elem)
    if how == "u":
        return unsigned(x, elem)
    if _is_arr(x):
        x = _array(x, elem)
        return x.astype(np.uint8) if x.dtype == np.bool_ else x
    return x


def binary(name: str, elem: str):
    """``fn(a, b)``: integer op ``name`` on values of type ``elem`` (see the module docstring)."""
    if name in _SHIFTS:
        def shift(a, b):
            with np.errstate(all="ignore"):
                s = unsigned(b, elem)
                if name == "arith.shli":
                    out = _shift_left(_read(a, "raw", elem), s, elem)
                elif name == "arith.shrsi":
                    out = _ashr(signed(a, elem), s, elem)
                else:
                    out = _lshr(unsigned(a, elem), s, elem)
                return narrow(out, elem)
        return shift
    if name in _MINMAX:
        how, cmp = _MINMAX[name]
        pick = _pick(cmp)

        def minmax(a, b):
            return pick(a, b, _read(a, how, elem), _read(b, how, elem))
        return minmax
    how, fn = _BINARY[name]
    if elem == "index" and how != "u":
        def exact(a, b):  # index scalars are exact; index tensors are int64 arrays
            with np.errstate(all="ignore"):
                return fn(a, b, elem)
        return exact

    def op(a, b):
        with np.errstate(all="ignore"):
            return narrow(fn(_read(a, how, elem), _read(b, how, elem), elem), elem)
    return op


_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}


def compare(pred: str, elem: str):
    """``fn(a, b)`` of ``arith.cmpi`` predicate ``pred``: a bool or a bool array."""
    if pred in ("eq", "ne"):
        cmp = _CMP[pred]
        how = "raw"
    else:
        cmp = _CMP[pred[1:]]
        how = pred[0]

    def fn(a, b):
        r = cmp(_read(a, how, elem), _read(b, how, elem))
        return bool(r) if isinstance(r, (bool, np.bool_)) else r
    return fn


def extend(x, src: str, dst: str, signed_read: bool):
    """``extsi``/``extui`` (and index_cast(ui) from a fixed width): the value of ``x`` read
    signed or unsigned, as type ``dst``."""
    v = signed(x, src) if signed_read else unsigned(x, src)
    return narrow(v.astype(np.int64) if _is_arr(v) and dst == "index" else v, dst)
