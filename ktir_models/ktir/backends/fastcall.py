"""The CPython extension ``_ktir_fastcall`` (``fastcall.c``): the seqmm library's f16 functions
(conversions, + - * / through f32, the SiLU tail of exec/tape_fusion.py) called on array buffers,
and the kernel's three data pointers read in one call, instead of through ctypes.

A ctypes call with three array pointers costs several microseconds of Python, more than numpy
spends on a few hundred f16 elements, so through ctypes only large arrays go native
(f16_convert.MIN_ELEMENTS, MIN_BINOP), and every kernel call pays ~4 us for its pointers
(``ndarray.ctypes.data``). The extension reads its arguments with the buffer protocol and costs
well under a microsecond a call, so every f16 array can take the native path: a decode pass's
~1000 small f16 operations (norm scales, residual adds, attention rows) run several times
faster. What is computed does not change: the extension calls the loaded library's own
functions (their addresses handed over by :func:`load`), so f16conv.c stays the one definition
and the bits are the ones tests/ktir/test_f16_convert.py checks against numpy.

Built like the kernel (seqmm.py), which loads it right after the library: compiled on first use
with the system C compiler against this Python's headers, kept as a digest-verified cache entry
``native/fastcall-<key>/`` under ``KTIR_MODELS_CACHE``. Where it cannot be built (no headers, no
compiler) or ``KTIR_MODELS_NATIVE_EXT=0`` is set, :func:`load` returns None with a reason:
small arrays stay on numpy and pointers come from ctypes, with the same bits.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

from ...cache_entries import cache_folder, ensure_entry
from .native_build import compiler_identity, compilers

_SOURCE = Path(__file__).with_name("fastcall.c")
_MODULE = "_ktir_fastcall"
_CFLAGS = ("-O2", "-shared", "-fPIC", "-fno-fast-math")
# on macOS an extension leaves the interpreter's symbols to be found when it is loaded
_LDFLAGS = ("-undefined", "dynamic_lookup") if sys.platform == "darwin" else ()

_lock = threading.Lock()
_imported: list = []  # [module] once imported: an extension module cannot be loaded twice
reason: str | None = None  # why the last load() returned None


def headers() -> Path | None:
    """This Python's C header folder, where it holds Python.h; else None."""
    include = sysconfig.get_paths().get("include")
    if include and (Path(include) / "Python.h").is_file():
        return Path(include)
    return None


def _build(cc: str, include: Path) -> Path:
    """The extension compiled with ``cc``: a verified cache entry (seqmm's scheme, keyed also by
    the Python version, whose ABI the module is built for)."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256()
    for part in (_SOURCE.read_bytes(), " ".join(_CFLAGS + _LDFLAGS).encode(), cc.encode(),
                 compiler_identity(cc).encode(), platform.platform().encode(),
                 sys.version.encode(), str(include).encode(), suffix.encode()):
        key.update(part)
        key.update(b"\0")

    def compile_into(tmp: Path) -> None:
        command = [cc, *_CFLAGS, f"-I{include}", "-o", str(tmp / (_MODULE + suffix)),
                   str(_SOURCE), *_LDFLAGS]
        res = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            msg = (res.stderr or res.stdout).strip().splitlines()
            raise RuntimeError(f"{cc} failed on {_SOURCE.name}: " + " | ".join(msg[:5]))

    entry = ensure_entry(cache_folder("native"), f"fastcall-{key.hexdigest()[:24]}",
                         compile_into)
    return entry / (_MODULE + suffix)


def _import():
    """The extension module, built and imported once per process; None (``reason`` set) when it
    cannot be."""
    global reason
    if _imported:
        return _imported[0]
    include = headers()
    if include is None:
        reason = "this Python's C headers (Python.h) are not installed"
        return None
    errors = []
    for cc in compilers():
        try:
            path = _build(cc, include)
            loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
            spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except (OSError, ImportError, RuntimeError, subprocess.SubprocessError) as exc:
            errors.append(f"{os.path.basename(cc)}: {exc}")
            continue
        _imported.append(module)
        return module
    reason = ("could not build the fastcall extension: " + "; ".join(errors)) if errors else \
        "no C compiler found ($CC, cc, gcc, clang)"
    return None


def load(lib, simd: int):
    """The extension set up to call the library ``lib``'s f16 functions on ``simd``'s path (the
    level ``seqmm_simd_level`` gives); None where it is off or cannot be built (``reason`` says
    why)."""
    global reason
    setting = os.environ.get("KTIR_MODELS_NATIVE_EXT", "1").strip().lower()
    if setting in ("0", "off", "false", "no"):
        reason = "disabled by KTIR_MODELS_NATIVE_EXT=0"
        return None
    with _lock:
        module = _import()
        if module is None:
            return None
        address = [ctypes.cast(fn, ctypes.c_void_p).value
                   for fn in (lib.seqmm_f16_binop, lib.seqmm_cvt_h2f, lib.seqmm_cvt_f2h,
                              lib.seqmm_silu_tail, lib.seqmm_f16_lut)]
        module.setup(*address, int(simd))
        reason = None
        return module
