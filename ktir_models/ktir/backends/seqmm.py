"""K-blocked matmul over f16 operands with one fixed summation order (the native ``seqmm`` kernel).

A KTIR K-loop computes, for every output element, partial sums over blocks of ``kb`` consecutive
k's, rounds each partial to ``part_dtype`` and chains the partials into an accumulator rounded to
``acc_dtype`` after every trip. :func:`kloop` computes exactly that, reading the f16 operands
directly (no f32 weight copies), in an order that depends on nothing but the definition: not on
shapes, batching, strides or the number of threads. Callers may therefore batch cores, rows or
requests freely and still get the same bits as one element at a time.

Definition, per output element (c, m, n), with ``B[c,k,n] = b[c,n,k]`` when ``transpose_b``::

    r = acc[c,m,n] if acc is not None else <none>
    for t in range(trips):
        s = +0.0f                                              # f32
        for k in range(t*kb, (t+1)*kb):
            s = f32(s + f32(a[c,m,k]) * f32(B[c,k,n]))         # the f16*f16 product is exact in f32
        p = round_to(part_dtype, s)                            # round to nearest even
        r = p if r is <none> else round_to(acc_dtype, f32(f32(r) + f32(p)))
    out = round_to(acc_dtype, r)

:func:`kloop_reference` is that definition in numpy (vectorised over c, m, n; sequential over k
and t); the native kernel (``seqmm.c``, compiled on first use with the system C compiler, loaded
with ctypes) matches it bit for bit, signed zeros, subnormals, infinities and NaN included (any
NaN where the reference has one). When no kernel can be built, :func:`available` is False and
:func:`unavailable_reason` says why; callers then use BLAS on f32 copies.

Environment: ``KTIR_MODELS_NATIVE=0`` disables the kernel, ``KTIR_MODELS_NATIVE=portable`` forces
its portable C path (no AVX2/F16C intrinsics) so it can be tested on any machine, and
``KTIR_MODELS_NATIVE=avx2`` its AVX2 path where the CPU also has AVX-512, and
``KTIR_MODELS_NATIVE=avx512`` its AVX-512 path without the AVX512-FP16 closing of f16 chains where
the CPU has FP16 (tests cover each path);
``KTIR_MODELS_CACHE`` (default ``~/.cache/ktir-models``) holds the built library under ``native/``
(verified against its recorded sha256 before it is loaded);
``CC`` names the compiler (else ``cc``, ``gcc``, ``clang`` are tried).

Threads (:func:`default_threads`): a call of at least ``_BIG_PROBLEM`` multiply-adds is shared
between two threads (both cores stream weights), a smaller one runs on the caller's thread. The
threads split the (c, n) columns into work items, never k, so the count never changes a bit;
:func:`set_threads` fixes the count for every call that does not pass ``threads`` (to measure
what the second core buys, and to test that whole forwards keep their bits).
"""

from __future__ import annotations

import array
import ctypes
import hashlib
import os
import platform
import subprocess
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ...cache_entries import cache_folder, ensure_entry
from . import fastcall
from .native_build import compiler_identity
from .native_build import compilers as find_compilers

_SOURCE = Path(__file__).with_name("seqmm.c")
# compiled into the same library: numpy-exact f16 <-> f32 array conversions (f16_convert.py),
# cache-blocked copies of transposed 2-byte arrays (strided_copy.py) and row sums and maxima
# with numpy's bits (row_reduce.py)
_SOURCES = (_SOURCE, Path(__file__).with_name("f16conv.c"), Path(__file__).with_name("copy16.c"),
            Path(__file__).with_name("rowreduce.c"))
# No -ffast-math, no -march=native: the AVX2/FMA/F16C path is selected at run time by a CPU check
# inside the library (function target attributes), so one build serves every x86-64 CPU.
# -ffp-contract=off: contraction would be harmless (every product is exact) but keeps the
# portable path's arithmetic literally the written one on every compiler.
_CFLAGS = ("-O3", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math")
_LDFLAGS = ("-lpthread",)
# multiply-adds from which a second thread pays for itself (measured with the kernel's worker
# pool: 2 threads gain from ~300K on, e.g. 1x576 @ 576x1536: 118 -> 75 us; never lose below)
_DEFAULT_THREADS = min(2, os.cpu_count() or 1)  # os.cpu_count() costs ~15 us: asked once
_BIG_PROBLEM = 1 << 18
_NATIVE_FOLDER = "native"  # below the cache root
_LIBRARY = "libseqmm.dylib" if sys.platform == "darwin" else "libseqmm.so"
_fixed_threads: int | None = None  # set_threads: every call without ``threads`` uses this count


@dataclass(frozen=True)
class _Loaded:
    """The loaded library, or why there is none (exactly one of the two is set)."""

    lib: ctypes.CDLL | None
    reason: str | None
    force: int = 0   # the kernel's path cap, read when the library is loaded: 0 the best the CPU
    #                  has, 1 portable C (KTIR_MODELS_NATIVE=portable), 2 at most AVX2 (=avx2),
    #                  3 at most AVX-512 without FP16 (=avx512)
    ext: object = None  # the fastcall extension set up on this library (fastcall.py), or None


_lock = threading.Lock()
_loaded: _Loaded | None = None


def _build(cc: str, source: bytes) -> Path:
    """The library compiled from ``seqmm.c`` with ``cc``: a digest-verified cache entry
    ``native/seqmm-<key>/`` holding :data:`_LIBRARY` (ktir_models/cache_entries.py).

    The key hashes the source, flags, compiler identity and platform, so a stale or foreign
    build is never loaded; the entry's sha256 is checked before every load, so a damaged library
    (truncated, bytes replaced) is moved aside and compiled again, never mapped into the process
    (a truncated shared object faults with SIGBUS when its missing pages are touched)."""
    key = hashlib.sha256()
    for part in (source, " ".join(_CFLAGS + _LDFLAGS).encode(), cc.encode(),
                 compiler_identity(cc).encode(), platform.platform().encode(),
                 platform.machine().encode(), sys.implementation.cache_tag.encode()):
        key.update(part)
        key.update(b"\0")

    def compile_into(tmp: Path) -> None:
        command = [cc, *_CFLAGS, "-o", str(tmp / _LIBRARY), *map(str, _SOURCES), *_LDFLAGS]
        res = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            msg = (res.stderr or res.stdout).strip().splitlines()
            names = ", ".join(p.name for p in _SOURCES)
            raise RuntimeError(f"{cc} failed on {names}: " + " | ".join(msg[:5]))

    name = f"seqmm-{key.hexdigest()[:24]}"
    entry = ensure_entry(cache_folder(_NATIVE_FOLDER), name, compile_into)
    return entry / _LIBRARY


_P = ctypes.c_void_p
_I = ctypes.c_ssize_t
_ARGTYPES = [
    _P, _I, _I, _I,          # a, strides (elements) over c, m, k
    _P, _I, _I,              # b, strides over c and over its non-unit inner dim (k for nn, n for nt)
    _P,                      # out: C-contiguous [C, M, N] of acc dtype, holding acc when given
    _I, _I, _I,              # C, M, N
    _I, _I,                  # trips, kb
    ctypes.c_int,            # transpose_b (b is [C, N, K] with K unit stride)
    ctypes.c_int,            # part is f16
    ctypes.c_int,            # acc (and out) is f16
    ctypes.c_int,            # acc given (out already holds it)
    ctypes.c_int,            # threads
    ctypes.c_int,            # path cap (_Loaded.force)
]


def _load() -> _Loaded:
    setting = os.environ.get("KTIR_MODELS_NATIVE", "1").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return _Loaded(None, "disabled by KTIR_MODELS_NATIVE=0")
    for path in _SOURCES:
        if not path.exists():
            return _Loaded(None, f"kernel source {path} is missing")
    compilers = find_compilers()
    if not compilers:
        return _Loaded(None, "no C compiler found ($CC, cc, gcc, clang)")
    source = b"\0".join(path.read_bytes() for path in _SOURCES)
    errors = []
    for cc in compilers:
        try:
            lib = ctypes.CDLL(str(_build(cc, source)))
            fn = lib.seqmm_kloop
            fn.argtypes = _ARGTYPES
            fn.restype = ctypes.c_int
            packed = lib.seqmm_kloop_packed   # the same call, its arguments in one int64 array
            packed.argtypes = [_P]
            packed.restype = ctypes.c_int
            lib.seqmm_force_streaming_aids.argtypes = [ctypes.c_int]
            lib.seqmm_force_streaming_aids.restype = ctypes.c_int
            lib.seqmm_has_simd.argtypes = []
            lib.seqmm_has_simd.restype = ctypes.c_int
            for name in ("seqmm_cvt_h2f", "seqmm_cvt_f2h"):
                conv = getattr(lib, name)
                conv.argtypes = [_P, _P, _I, ctypes.c_int]
                conv.restype = None
            lib.seqmm_f16_binop.argtypes = [_P, _P, _P, _I, ctypes.c_int, ctypes.c_int]
            lib.seqmm_f16_binop.restype = ctypes.c_int
            lib.seqmm_f16_any_nonfinite.argtypes = [_P, _I]
            lib.seqmm_f16_lut.argtypes = [_P, _P, _P, _I]
            lib.seqmm_f16_lut.restype = None
            lib.seqmm_f16_any_nonfinite.restype = ctypes.c_int
            lib.seqmm_f16_first_nonfinite.argtypes = [_P, _I]
            lib.seqmm_f16_first_nonfinite.restype = _I
            lib.seqmm_copy16.argtypes = [_P, _P, _P, _P]
            lib.seqmm_copy16.restype = None
            lib.seqmm_row_sums_f32.argtypes = [_P, _I, _I, _P, _I, _P]
            lib.seqmm_row_sums_f32.restype = ctypes.c_int
            for name in ("seqmm_row_max_f32", "seqmm_row_max_f16"):
                getattr(lib, name).argtypes = [_P, _I, _I, _P, _I, _P]
                getattr(lib, name).restype = ctypes.c_int
            force = {"portable": 1, "avx2": 2, "avx512": 3}.get(setting, 0)
            return _Loaded(lib, None, force, fastcall.load(lib, lib.seqmm_simd_level(force)))
        except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as exc:
            errors.append(f"{os.path.basename(cc)}: {exc}")
    return _Loaded(None, "could not build the native kernel: " + "; ".join(errors))


def _library() -> _Loaded:
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = _load()
    return _loaded


def available() -> bool:
    """True when the native kernel is built and loaded (decided once per process)."""
    return _library().lib is not None


def unavailable_reason() -> str | None:
    """Why :func:`available` is False (None when it is True)."""
    return _library().reason


def _reset() -> None:
    """Forget the loaded library, so that the next call reads the environment again (tests)."""
    global _loaded
    with _lock:
        _loaded = None


def uses_simd() -> bool:
    """True when :func:`kloop` runs the AVX2/FMA/F16C path (False: the portable C path)."""
    loaded = _library()
    return loaded.lib is not None and loaded.force != 1 and bool(loaded.lib.seqmm_has_simd())


_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def _check_dtype(name: str, dt) -> np.dtype:
    dt = np.dtype(dt)
    if dt != _F16 and dt != _F32:
        raise TypeError(f"seqmm: {name} must be float16 or float32, got {dt}")
    return dt


def _shapes(a: np.ndarray, b: np.ndarray, trips: int, kb: int, transpose_b: bool):
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"seqmm: a and b must be 3-D [C, ...], got {a.shape} and {b.shape}")
    if trips < 1 or kb < 1:
        raise ValueError(f"seqmm: trips and kb must be >= 1, got trips={trips} kb={kb}")
    Ca, M, K = a.shape
    if K != trips * kb:
        raise ValueError(f"seqmm: a has K={K}, expected trips*kb = {trips}*{kb} = {trips * kb}")
    Cb, d1, d2 = b.shape
    C = max(Ca, Cb)  # an operand with C = 1 is shared by every c (as if broadcast)
    Kb, N = (d2, d1) if transpose_b else (d1, d2)
    if Ca not in (1, C) or Cb not in (1, C) or Kb != K:
        want = f"[{C}, N, {K}]" if transpose_b else f"[{C}, {K}, N]"
        raise ValueError(f"seqmm: b has shape {list(b.shape)}, expected {want}")
    return C, M, N, K


def kloop_reference(a, b, acc, *, trips: int, kb: int, transpose_b: bool,
                    part_dtype, acc_dtype) -> np.ndarray:
    """The definition in the module docstring, literally, in numpy: f32 products and f32 sums one
    k at a time, vectorised over (c, m, n). Slow (K numpy steps); for tests and small shapes."""
    a = np.asarray(a)
    b = np.asarray(b)
    part_dtype = _check_dtype("part_dtype", part_dtype)
    acc_dtype = _check_dtype("acc_dtype", acc_dtype)
    C, M, N, K = _shapes(a, b, trips, kb, transpose_b)
    B = np.swapaxes(b, 1, 2) if transpose_b else b          # [C, K, N]
    a32 = a.astype(np.float32)
    B32 = B.astype(np.float32)
    r = None if acc is None else np.broadcast_to(np.asarray(acc, dtype=acc_dtype),
                                                 (C, M, N)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for t in range(trips):
            s = np.zeros((C, M, N), np.float32)
            for k in range(t * kb, (t + 1) * kb):
                prod = a32[:, :, k, None] * B32[:, None, k, :]    # exact: f16*f16 fits in f32
                s = s + prod
            p = s.astype(part_dtype).astype(np.float32)
            r = p if r is None else (r + p).astype(acc_dtype).astype(np.float32)
        return np.ascontiguousarray(r.astype(acc_dtype))


def _element_strides(x: np.ndarray) -> tuple[int, int, int] | None:
    """The strides of a 3-D array in elements, or None when one is not a whole element."""
    s0, s1, s2 = x.strides
    n = x.itemsize
    if s0 % n or s1 % n or s2 % n:
        return None
    return s0 // n, s1 // n, s2 // n


def _as_f16(name: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.float16:
        raise TypeError(f"seqmm: {name} must be float16, got {x.dtype}")
    return x


def _unit_inner(b: np.ndarray, transpose_b: bool) -> tuple[np.ndarray, bool]:
    """``b`` as the kernel reads it: its last dim unit-stride, and the layout that means.

    A [C, K, N] operand whose K (not N) is unit-stride is a transposed [C, N, K] one and is read
    as such (and vice versa), without a copy. Otherwise the operand is copied once, and when it is
    shared by every core (stride 0 over C) only one core's worth is copied."""
    st = _element_strides(b)
    if st is not None and st[2] == 1:
        return b, transpose_b
    if st is not None and st[1] == 1:
        return np.swapaxes(b, 1, 2), not transpose_b
    if b.shape[0] > 1 and b.strides[0] == 0:
        one = np.ascontiguousarray(b[:1])
        return np.broadcast_to(one, b.shape), transpose_b
    return np.ascontiguousarray(b), transpose_b


@dataclass(frozen=True)
class _Call:
    """What a kernel call needs besides the three data pointers; it depends only on the
    operands' shapes, strides and dtypes and the call's parameters, so it is kept per signature
    (:data:`_CALLS`) and a repeated call skips the checks."""

    out_shape: tuple
    acc_dtype: np.dtype
    sa: tuple       # a's strides in elements over c, m, k (0 over c when shared)
    sb: tuple       # b's strides over c and over its non-unit inner dim
    rest: tuple     # C, M, N, trips, kb, nt, part16, acc16, acc given, threads, path cap
    warm: tuple     # b's bytes as seqmm.c's warm_t after its base: cs, cstride, rows, stride,
    #                 seg; () when too few to be worth warming (_WARM_MIN)
    groups: int = 1  # the output's groups (kloop's ``groups``)
    acc_cs: int = 0  # groups > 1: the acc's elements between its [M, groups * N] blocks


_CALLS: dict = {}  # signature -> _Call, for operands the kernel reads where they lie
_WARM_MIN = 1 << 16  # weight bytes from which a call's weights are warmed before it
_NO_WARM = (0, 0, 0, 0, 0, 0)


class _Order:
    """The order of a pass's kernel calls, as the weights each one reads after another's: a
    forward pass repeats its calls in the same order, so once a pass has run, each call can name
    the weights of the call that came after it last time, and the kernel's idle worker prefetches
    them while the caller runs what lies between (seqmm.c, "warming"). Only calls with at least
    _WARM_MIN bytes of weights take part (a small attention call between two projections does not
    break the chain). A guess that does not hold costs bandwidth, never bits: the kernel's results
    never depend on what the caches hold."""

    on = _DEFAULT_THREADS > 1  # a worker on another core, which would otherwise wait
    after: dict = {}           # b's address -> the warm_t of the weights read next (last pass)
    last = 0                   # b's address in the last call that took part


def _warm_args(call: _Call, b_ptr: int) -> tuple:
    """seqmm_kloop_packed's six warming arguments for a call reading weights at ``b_ptr``, and
    the order learned from it (:class:`_Order`)."""
    if not call.warm or not _Order.on:
        return _NO_WARM
    last, after = _Order.last, _Order.after
    if last:
        if len(after) > 65536:
            after.clear()
        after[last] = (b_ptr, *call.warm)
    _Order.last = b_ptr
    return after.get(b_ptr, _NO_WARM)


def _run(loaded: _Loaded, call: _Call, a: np.ndarray, b: np.ndarray, out: np.ndarray,
         acc_ptr: int = 0) -> np.ndarray:
    # seqmm_kloop's 19 arguments (and the 6 of the weights to warm after it, and the output's
    # groups, the acc read in place and its block stride) packed in one int64 array: ctypes
    # converts one argument instead of 28 (~2.5 us less per call); `args` stays referenced until
    # the call returns. The three pointers come from the fastcall extension in one call (~0.3
    # us; ``x.ctypes.data`` costs ~1.4 us a pointer, ``__array_interface__`` ~2.3 us).
    if loaded.ext is not None:
        a_ptr, b_ptr, out_ptr = loaded.ext.pointers(a, b, out)
    else:
        a_ptr, b_ptr, out_ptr = a.ctypes.data, b.ctypes.data, out.ctypes.data
    args = array.array("q", (a_ptr, *call.sa, b_ptr, *call.sb, out_ptr, *call.rest,
                             *_warm_args(call, b_ptr), call.groups, acc_ptr, call.acc_cs))
    rc = loaded.lib.seqmm_kloop_packed(args.buffer_info()[0])
    if rc != 0:
        raise MemoryError(f"seqmm native kernel failed (code {rc}): out of memory or threads")
    return out


def _warm_shape(C: int, N: int, K: int, nt: bool, sb: tuple) -> tuple:
    """:attr:`_Call.warm` for a b of strides ``sb`` (elements; 0 over c when shared)."""
    cs = C if sb[0] else 1
    rows, seg = (N, 2 * K) if nt else (K, 2 * N)
    if cs * rows * seg < _WARM_MIN:
        return ()
    return cs, 2 * sb[0], rows, 2 * sb[1], seg


def set_warming(on: bool | None) -> None:
    """Whether calls warm the next call's weights (:class:`_Order`); None: the default rule, on
    where the CPU has two cores. The results are the same bits either way."""
    if on is not None and not isinstance(on, bool):
        raise ValueError(f"seqmm.set_warming: expected a bool or None, got {on!r}")
    _Order.on = _DEFAULT_THREADS > 1 if on is None else on
    _Order.after.clear()
    _Order.last = 0


def force_streaming_aids(on: bool | None) -> None:
    """For tests: run every call as on a CPU that wants the software streaming aids (True: the
    next-item prefetch, staged nt rows, 32-row nt decode items, as on AMD) or not (False: as on
    Intel), whatever this CPU is; None: this CPU's own choice. The results are the same bits
    either way; only the speed differs."""
    if on is not None and not isinstance(on, bool):
        raise ValueError(f"seqmm.force_streaming_aids: expected a bool or None, got {on!r}")
    loaded = _loaded if _loaded is not None else _library()
    if loaded.lib is not None:
        loaded.lib.seqmm_force_streaming_aids(-1 if on is None else int(on))


def default_threads(macs: int) -> int:
    """Threads for a call of ``macs`` multiply-adds that does not choose: the count given to
    :func:`set_threads`, else two (where the CPU has two) from ``_BIG_PROBLEM`` on, else one."""
    if _fixed_threads is not None:
        return _fixed_threads
    return _DEFAULT_THREADS if macs >= _BIG_PROBLEM else 1


def set_threads(threads: int | None) -> None:
    """Every later call without ``threads`` runs on ``threads`` threads (None: the size rule of
    :func:`default_threads`). The results are the same bits whatever the count."""
    global _fixed_threads
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"seqmm.set_threads: expected a positive int or None, got {threads!r}")
    _fixed_threads = threads
    _CALLS.clear()  # the cached calls hold the count chosen when they were first seen


def kloop(a, b, acc, *, trips: int, kb: int, transpose_b: bool, part_dtype, acc_dtype,
          threads: int | None = None, groups: int = 1) -> np.ndarray:
    """The native kernel: same arguments and the same bits as :func:`kloop_reference`.

    ``a`` is float16 [C, M, K] (K = trips*kb), ``b`` float16 [C, K, N] (or [C, N, K] with
    ``transpose_b``), both with any strides (stride 0 over C shares an operand between cores, and
    so does a leading dim of 1: it broadcasts like numpy's, without a view being made);
    ``acc`` is None or [C, M, N] (or [1, M, N]) of ``acc_dtype``. Returns a new C-contiguous [C, M, N] array of
    ``acc_dtype``; the inputs are never written. ``threads`` (None: :func:`default_threads`)
    never changes the result: threads split (c, n) ranges, never
    k. Raises RuntimeError when :func:`available` is False.

    ``groups`` > 1 (dividing C): the C results side by side in C // groups outputs, item c's N
    columns at columns (c % groups) * N of output c // groups -- the [C // groups, M, groups * N]
    array ``kloop(a, b, acc')`` would give reshaped to [C // groups, groups, M, N] and moved to
    [C // groups, M, groups, N] (a blocked weight's pieces put back together), with acc then
    None or [1 or C // groups, M, groups * N], read where it lies (its rows made contiguous
    first where they are not), and the same bits."""
    loaded = _loaded if _loaded is not None else _library()
    lib = loaded.lib
    if lib is None:
        raise RuntimeError(f"seqmm native kernel unavailable: {loaded.reason}")
    key = None
    if type(a) is np.ndarray and type(b) is np.ndarray:
        key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype, trips, kb, transpose_b,
               part_dtype, acc_dtype, threads, loaded, groups,
               None if acc is None else (np.shape(acc), getattr(acc, "dtype", None),
                                         None if groups == 1 else getattr(acc, "strides", None)))
        call = _CALLS.get(key)
        if call is not None:
            out = np.empty(call.out_shape, call.acc_dtype)
            if call.groups != 1:
                acc = _acc_in_place(acc)
                return _run(loaded, call, a, b, out, 0 if acc is None else acc.ctypes.data)
            if acc is not None:
                np.copyto(out, acc)
            return _run(loaded, call, a, b, out)
    a = _as_f16("a", a)
    b = _as_f16("b", b)
    acc_dtype = _check_dtype("acc_dtype", acc_dtype)
    C, M, N, K = _shapes(a, b, trips, kb, transpose_b)
    if groups != 1:
        return _grouped(lib, loaded, key, a, b, acc, (C, M, N, K), trips, kb, transpose_b,
                        part_dtype, acc_dtype, threads, groups)
    out = np.empty((C, M, N), dtype=acc_dtype)
    if acc is not None:
        np.copyto(out, _checked_acc(acc, acc_dtype, (C, M, N)))
    if out.size == 0:
        return out
    a, b, call, in_place = _prepare(loaded, a, b, (C, M, N, K), trips, kb, transpose_b,
                                    part_dtype, acc_dtype, threads, acc is not None)
    _keep_call(key, call, in_place)
    return _run(loaded, call, a, b, out)


def _keep_call(key, call: _Call, in_place: bool) -> None:
    """``call`` kept for its signature where the kernel reads the operands where they lie."""
    if key is not None and in_place:
        if len(_CALLS) > 4096:
            _CALLS.clear()
        _CALLS[key] = call


def _acc_in_place(acc) -> np.ndarray | None:
    """A grouped call's acc as the kernel reads it: one block where every output has the same
    (stride 0), rows contiguous (a copy only where they are not)."""
    if acc is None:
        return None
    acc = np.asarray(acc)
    if acc.shape[0] > 1 and acc.strides[0] == 0:
        acc = acc[:1]
    return np.ascontiguousarray(acc)


def _checked_acc(acc, acc_dtype, shape: tuple) -> np.ndarray:
    """``acc`` as an array of ``acc_dtype`` and ``shape`` (or [1, ...]), else a clear error."""
    acc = np.asarray(acc)
    if acc.dtype != acc_dtype:
        raise TypeError(f"seqmm: acc must be {acc_dtype}, got {acc.dtype}")
    if acc.shape not in (shape, (1,) + shape[1:]):
        raise ValueError(f"seqmm: acc has shape {list(acc.shape)}, expected {list(shape)}")
    return acc


def _prepare(loaded, a, b, shape, trips, kb, transpose_b, part_dtype, acc_dtype, threads,
             acc_given: bool):
    """(a, b, call, in_place): the operands as the kernel reads them (copies only where their
    layout needs one; ``in_place``: neither was copied) and the call's :class:`_Call`."""
    C, M, N, K = shape
    part_dtype = _check_dtype("part_dtype", part_dtype)
    in_place = _element_strides(a) is not None  # the kernel reads both where they lie
    if not in_place:
        a = np.ascontiguousarray(a)
    st = _element_strides(b)
    in_place = in_place and st is not None and (st[2] == 1 or st[1] == 1)
    b, nt = _unit_inner(b, transpose_b)
    sa = _element_strides(a)
    sb = _element_strides(b)
    if a.shape[0] != C:  # shared by every c
        sa = (0,) + sa[1:]
    if b.shape[0] != C:
        sb = (0,) + sb[1:]
    if threads is None:
        threads = default_threads(C * M * N * K)
    threads = max(1, min(int(threads), C * N))
    call = _Call((C, M, N), acc_dtype, sa, sb[:2],
                 (C, M, N, trips, kb, int(nt), int(part_dtype == _F16), int(acc_dtype == _F16),
                  int(acc_given), threads, loaded.force), _warm_shape(C, N, K, nt, sb))
    return a, b, call, in_place


def _grouped(lib, loaded, key, a, b, acc, shape, trips, kb, transpose_b, part_dtype, acc_dtype,
             threads, groups) -> np.ndarray:
    """:func:`kloop` with ``groups`` != 1 on checked f16 operands of ``shape`` (C, M, N, K): the
    output laid out in groups, the acc read in place."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"seqmm: groups must be a positive int, got {groups!r}")
    C, M, N, K = shape
    if C % groups:
        raise ValueError(f"seqmm: groups={groups} does not divide the {C} items")
    Cg, width = C // groups, groups * N
    acc_cs = 0
    if acc is not None:
        acc = _acc_in_place(_checked_acc(acc, acc_dtype, (Cg, M, width)))
        acc_cs = M * width if acc.shape[0] > 1 else 0
    out = np.empty((Cg, M, width), dtype=acc_dtype)
    if out.size == 0:
        return out
    a, b, call, in_place = _prepare(loaded, a, b, shape, trips, kb, transpose_b, part_dtype,
                                    acc_dtype, threads, acc is not None)
    call = replace(call, out_shape=(Cg, M, width), groups=groups, acc_cs=acc_cs)
    _keep_call(key, call, in_place)
    return _run(loaded, call, a, b, out, 0 if acc is None else acc.ctypes.data)
