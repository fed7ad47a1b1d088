"""The numpy array back end: tensors are numpy arrays on the host, computed with numpy and BLAS.

This is the reference back end. Every name of the back-end vocabulary (see
:mod:`ktir_models.ktir.backends`) is the numpy function itself where one exists, so plans compiled
for it run the exact numpy expressions the op modules document, with no wrapper in between.
"""

from __future__ import annotations

import numpy as np

from .capabilities import ALL
from .f16_convert import convert

_as_strided = np.lib.stride_tricks.as_strided

_F16 = np.dtype(np.float16)
_SIGN_MASKS = {np.bitwise_xor: np.uint16(0x8000), np.bitwise_and: np.uint16(0x7FFF)}


def _f16_sign_op(x, bit_op, ufunc):
    """``ufunc(x)`` (np.negative or np.abs); for an f16 array, the same bits from one integer
    op on the sign bit (numpy's f16 loops flip or clear it too, NaN payloads included: checked
    over every f16 value in tests/ktir/test_numpy_backend_f16.py), ~6x faster than numpy's f16
    loop."""
    if type(x) is np.ndarray and x.dtype == _F16 and x.ndim > 0:
        return bit_op(x.view(np.uint16), _SIGN_MASKS[bit_op]).view(_F16)
    return ufunc(x)


class NumpyBackend:
    """Host numpy arrays. ``device`` is always ``"cpu"``; memory is shared with HBM regions."""

    name = "numpy"
    device = "cpu"
    caps = ALL  # the reference: every fast tier is written for host numpy arrays
    array_type = np.ndarray
    #: the accumulator of an f32/f64 reduction (f64: numpy's pairwise sum in double precision)
    wide_float = np.dtype(np.float64)

    # -- elementwise (numpy ufuncs; ``dtype=`` is the computation dtype) ----------------------
    add = staticmethod(np.add)
    subtract = staticmethod(np.subtract)
    multiply = staticmethod(np.multiply)
    divide = staticmethod(np.divide)
    fmod = staticmethod(np.fmod)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    fmax = staticmethod(np.fmax)
    fmin = staticmethod(np.fmin)
    power = staticmethod(np.power)
    negative = staticmethod(lambda x: _f16_sign_op(x, np.bitwise_xor, np.negative))
    abs = staticmethod(lambda x: _f16_sign_op(x, np.bitwise_and, np.abs))
    exp = staticmethod(np.exp)
    exp2 = staticmethod(np.exp2)
    log = staticmethod(np.log)
    log2 = staticmethod(np.log2)
    log10 = staticmethod(np.log10)
    log1p = staticmethod(np.log1p)
    sqrt = staticmethod(np.sqrt)
    tanh = staticmethod(np.tanh)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    ceil = staticmethod(np.ceil)
    floor = staticmethod(np.floor)
    trunc = staticmethod(np.trunc)
    isnan = staticmethod(np.isnan)
    isfinite = staticmethod(np.isfinite)
    equal = staticmethod(np.equal)
    not_equal = staticmethod(np.not_equal)
    greater = staticmethod(np.greater)
    greater_equal = staticmethod(np.greater_equal)
    less = staticmethod(np.less)
    less_equal = staticmethod(np.less_equal)
    where = staticmethod(np.where)
    matmul = staticmethod(np.matmul)

    # -- shapes and creation ------------------------------------------------------------------
    reshape = staticmethod(np.reshape)
    transpose = staticmethod(np.transpose)
    broadcast_to = staticmethod(np.broadcast_to)
    moveaxis = staticmethod(np.moveaxis)
    expand_dims = staticmethod(np.expand_dims)
    ascontiguousarray = staticmethod(np.ascontiguousarray)
    full = staticmethod(np.full)
    zeros = staticmethod(np.zeros)
    empty = staticmethod(np.empty)

    @staticmethod
    def asarray(x, dtype=None):
        return np.asarray(x, dtype=dtype)

    @staticmethod
    def astype(x, dtype):
        """``x`` as ``dtype`` (no copy when it already is); large f16 <-> f32 conversions run on
        the native library, with numpy's exact bits (f16_convert.py)."""
        fast = convert(x, dtype)
        return fast if fast is not None else x.astype(dtype, copy=False)

    @staticmethod
    def copy(x):
        """A fresh C-contiguous copy (results never alias memory that may be written)."""
        return x.copy()

    @staticmethod
    def view_as(x, dtype):
        """Reinterpret the bytes of ``x`` as ``dtype`` (bitcast)."""
        return x.view(dtype)

    @staticmethod
    def arange(n: int):
        return np.arange(n, dtype=np.int64)

    @staticmethod
    def stack(xs):
        return np.stack(xs)

    @staticmethod
    def is_array(x) -> bool:
        return isinstance(x, np.ndarray)

    @staticmethod
    def to_host(x) -> np.ndarray:
        return np.asarray(x)

    @staticmethod
    def item(x):
        """A 0-d array element as a numpy scalar."""
        return x[()] if isinstance(x, np.ndarray) else x

    # -- reductions (``kind`` as in dialects/linalg/reduce.py; ``dtype`` is the accumulator) --
    @staticmethod
    def reduce(kind: str, x, axis: tuple, dtype=None):
        if kind == "sum":
            return np.add.reduce(x, axis=axis, dtype=dtype)
        if kind == "prod":
            return np.multiply.reduce(x, axis=axis, dtype=dtype)
        return _REDUCE_UFUNCS[kind].reduce(x, axis=axis)

    # -- memory -------------------------------------------------------------------------------
    @staticmethod
    def memory(owner) -> np.ndarray:
        """The uint8 byte array behind an HBM region or an LX scratchpad."""
        return owner.data

    @staticmethod
    def typed(owner, dtype) -> np.ndarray:
        """The owner's bytes as a flat array of ``dtype`` (trailing partial element dropped)."""
        return owner.typed(dtype)

    @staticmethod
    def strided(flat, offset: int, shape: tuple, strides: tuple):
        """A writable view of ``flat`` from element ``offset`` with element ``strides``."""
        item = flat.dtype.itemsize
        return _as_strided(flat[offset:], shape=shape, strides=tuple(s * item for s in strides),
                           writeable=True)

    @staticmethod
    def take(flat, offsets: np.ndarray):
        return flat[offsets]

    @staticmethod
    def put(flat, offsets: np.ndarray, values) -> None:
        flat[offsets] = values

    @staticmethod
    def assign(dst, value) -> None:
        dst[...] = value

    @staticmethod
    def push(owner) -> None:
        """Host bytes -> device (nothing to do: the host array is the memory)."""

    @staticmethod
    def pull(owner) -> None:
        """Device -> host bytes (nothing to do)."""

    @staticmethod
    def release(owner) -> None:
        """Forget a device mirror (there is none)."""

    @staticmethod
    def from_const(value):
        """A compile-time constant as a run-time value (numpy constants are used as they are)."""
        return value

    @staticmethod
    def synchronize() -> None:
        return None

    def describe(self) -> str:
        return "numpy (cpu)"


_REDUCE_UFUNCS = {
    "max": np.maximum, "min": np.minimum, "nanmax": np.fmax, "nanmin": np.fmin,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
}
