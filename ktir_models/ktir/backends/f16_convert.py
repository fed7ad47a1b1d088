"""float16 <-> float32 conversions, and f16 + - * / through f32, on the native library,
bit-identical to numpy.

numpy converts float16 element by element (~3-7 ns per element on the development machine: a
32 x 49152 f32 -> f16 logits conversion took 8.5 ms); ``f16conv.c``, built into the seqmm
library, uses the F16C instructions and gives numpy's exact bits for every input, NaN payloads
included (tests/ktir/test_f16_convert.py checks every f16 value and millions of f32 values
against numpy). Through ctypes a call costs ~4 us, so there arrays below :data:`MIN_ELEMENTS`
stay on numpy; where the CPython extension (fastcall.py) is built, the same functions are called
through it for well under a microsecond and every size goes native (:func:`native_from`).

:func:`convert` returns None when it does not apply (other dtypes, a small array, no native
library); the caller then converts with numpy.
"""

from __future__ import annotations

import array
from dataclasses import dataclass

import numpy as np

from . import seqmm

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
MIN_ELEMENTS = 2048  # measured: numpy 6.6 us, native 4.7 us at 2048 elements; 2.3 / 4.4 at 576

@dataclass(frozen=True)
class _Native:
    """The library's f16 functions and the path they may run: 0 portable C, 1 F16C, 2 (or 3)
    also AVX-512 (the binary ops use it); ``ext``: the extension calling the same functions
    (fastcall.py), or None."""

    h2f: object
    f2h: object
    binop: object
    any_nonfinite: object
    first_nonfinite: object
    lut: object
    simd: int
    ext: object = None


_made: list = [None, None]  # [the seqmm library record it came from, _Native or None]


def _functions() -> _Native | None:
    loaded = seqmm._loaded if seqmm._loaded is not None else seqmm._library()
    if _made[0] is not loaded:  # first use, or the library was reloaded (tests switch paths)
        lib = loaded.lib
        # the path level under the library's cap: 0 portable, 1 F16C, 2-3 AVX-512
        simd = 0 if lib is None else int(lib.seqmm_simd_level(loaded.force))
        _made[:] = [loaded, None if lib is None else
                    _Native(lib.seqmm_cvt_h2f, lib.seqmm_cvt_f2h, lib.seqmm_f16_binop,
                            lib.seqmm_f16_any_nonfinite, lib.seqmm_f16_first_nonfinite,
                            lib.seqmm_f16_lut, simd, loaded.ext)]
    return _made[1]


def native_from() -> int | None:
    """The element count from which :func:`convert` takes an f16 <-> f32 conversion natively: 0
    with the extension, :data:`MIN_ELEMENTS` through ctypes, None without the library. Callers
    that choose between a native and a numpy formulation (same bits) ask this."""
    fns = _functions()
    if fns is None:
        return None
    return 0 if fns.ext is not None else MIN_ELEMENTS


def convert(x, dtype) -> np.ndarray | None:
    """``x.astype(dtype)`` for C-contiguous f16 -> f32 and f32 -> f16 arrays (of at least
    MIN_ELEMENTS without the extension): a new C-contiguous array, as numpy makes it; None where
    numpy should do it (other layouts keep numpy's choice of output layout, which later
    reductions follow)."""
    if type(x) is not np.ndarray or not x.flags.c_contiguous:
        return None
    src = x.dtype
    if not ((src == F16 and dtype == F32) or (src == F32 and dtype == F16)):
        return None
    fns = _functions()
    if fns is None:
        return None
    out = np.empty(x.shape, dtype)
    if fns.ext is not None:
        fns.ext.convert(x, out)
        return out
    if x.size < MIN_ELEMENTS:
        return None
    fn = fns.h2f if src == F16 else fns.f2h
    fn(x.ctypes.data, out.ctypes.data, x.size, fns.simd)
    return out


BINOPS = {"add": 0, "subtract": 1, "multiply": 2, "divide": 3}
MIN_BINOP = 1024  # elements: from here a ctypes call (~12 us with its checks and pointers) beats
# numpy's f16 casts (~10 us at 576 elements, ~140-200 us at 18K); the extension beats them at
# every size (576 elements: 0.4 us against numpy's 3.1; 20-25 us when an operand broadcasts)


def binop(name: str, a, b) -> np.ndarray | None:
    """``np.<name>(a, b, dtype=float32).astype(float16)`` for two f16 arrays (whose broadcast
    shape has at least MIN_BINOP elements without the extension), bit for bit (a NaN with a NaN
    gives a NaN whose payload may be either's), in one native call on C-contiguous copies where
    they are not already (an f16 copy costs ~0.3 ns per element, numpy's f16 casts 3-7); None
    where numpy should do it. ``name``: add, subtract, multiply, divide."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != F16 or \
            b.dtype != F16:
        return None
    fns = _functions()
    if fns is None:
        return None
    ext = fns.ext
    if a.shape != b.shape:
        repeated = None if ext is None else _repeat(ext, name, a, b)
        if repeated is not None:
            return repeated
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            return None
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    if ext is None and a.size < MIN_BINOP:
        return None
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    if not b.flags.c_contiguous:
        b = np.ascontiguousarray(b)
    out = np.empty(a.shape, F16)
    if ext is not None:
        ext.binop(a, b, out, BINOPS[name])
    else:
        fns.binop(a.ctypes.data, b.ctypes.data, out.ctypes.data, a.size, BINOPS[name], fns.simd)
    return out


def _repeat(ext, name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """:func:`binop` of a C-contiguous operand and one that broadcasts to its shape by repeating
    along it (its shape, leading 1s dropped, a suffix of the other's: a [1, n] scale against
    [c, 1, n] rows, a [1, 1] value against [c, 1, 1]), without copying the repeated one out:
    one extension call; None for every other pair."""
    if a.size >= b.size:
        big, small, small_left = a, b, False
    else:
        big, small, small_left = b, a, True
    inner = small.shape
    while inner and inner[0] == 1:
        inner = inner[1:]
    # the broadcast shape is big's only when small has no more dims than big
    if small.ndim > big.ndim or big.shape[big.ndim - len(inner):] != inner or \
            not big.flags.c_contiguous or not small.flags.c_contiguous or small.size == 0:
        return None
    out = np.empty(big.shape, F16)
    ext.binop_repeat(big, small, out, BINOPS[name], small_left)
    return out


TABLE_ENTRIES = 1 << 16  # one per f16 bit pattern


def lookup(table: np.ndarray, x) -> np.ndarray | None:
    """``table[x]`` for the f16 array ``x`` read as its bit patterns, in one native pass:
    ``table`` is a C-contiguous [65536] float16 array holding a unary function's result for
    every f16 value (math.py's tables). None where numpy should compute the function instead
    (another dtype, no library, or through ctypes an array under :data:`MIN_ELEMENTS`)."""
    if type(x) is not np.ndarray or x.dtype != F16:
        return None
    fns = _functions()
    if fns is None or fns.ext is None and x.size < MIN_ELEMENTS:
        return None
    if table.dtype != F16 or table.shape != (TABLE_ENTRIES,) or not table.flags.c_contiguous:
        raise ValueError("lookup: the table must be a C-contiguous [65536] float16 array")
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    out = np.empty(x.shape, F16)
    if fns.ext is not None:
        fns.ext.lut(table, x, out)
    else:
        fns.lut(table.ctypes.data, x.ctypes.data, out.ctypes.data, x.size)
    return out


def all_finite(a: np.ndarray) -> bool | None:
    """Whether the C-contiguous float16 array ``a`` holds no inf or NaN, in one native pass; None
    where the caller should test it with numpy (no library, another layout or dtype)."""
    if type(a) is not np.ndarray or a.dtype != F16 or not a.flags.c_contiguous:
        return None
    fns = _functions()
    if fns is None:
        return None
    return not fns.any_nonfinite(a.ctypes.data, a.size)


def nonfinite_probe(a: np.ndarray):
    """A callable of no arguments answering, at each call, whether the C-contiguous float16
    array ``a`` now holds an inf or NaN (one native pass, the pointer resolved once; the
    callable keeps ``a`` alive); None where :func:`all_finite` would return None."""
    if type(a) is not np.ndarray or a.dtype != F16 or not a.flags.c_contiguous:
        return None
    fns = _functions()
    if fns is None:
        return None
    probe, ptr, n = fns.any_nonfinite, a.ctypes.data, a.size

    def any_nonfinite(_keep=a) -> bool:
        return probe(ptr, n) != 0
    return any_nonfinite


def nonfinite_scan(arrays: list):
    """A callable of no arguments answering, at each call, the index of the first of ``arrays``
    (C-contiguous float16 arrays whose memory never moves) that now holds an inf or NaN, or -1:
    one native call for all of them (a forward's node outputs, in node order, tested once after
    the pass). None where an array is not such an array or the library is not built."""
    if any(type(a) is not np.ndarray or a.dtype != F16 or not a.flags.c_contiguous for a in arrays):
        return None
    fns = _functions()
    if fns is None:
        return None
    table = array.array("q")
    for a in arrays:
        table.extend((a.ctypes.data, a.size))
    scan, ptr, n = fns.first_nonfinite, table.buffer_info()[0], len(arrays)

    def first_nonfinite(_keep=(table, tuple(arrays))) -> int:
        return int(scan(ptr, n))
    return first_nonfinite


_FINITE_CHUNK = 1 << 20  # elements per step: bounds the temporary of a big tensor's test


def f16_all_finite(a: np.ndarray) -> bool:
    """True when no element of the float16 array ``a`` is inf or NaN (exponent bits all ones):
    one native pass where the library is built (:func:`all_finite`), else integer ops on
    the bits (~5x faster than numpy's float16 ``isfinite``)."""
    native = all_finite(a)
    if native is not None:
        return native
    bits = np.ascontiguousarray(a).reshape(-1).view(np.uint16)
    for i in range(0, bits.size, _FINITE_CHUNK):
        if int(np.bitwise_and(bits[i:i + _FINITE_CHUNK], 0x7C00).max()) == 0x7C00:
            return False
    return True
