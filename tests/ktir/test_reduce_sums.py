"""f16 sums into f32 (linalg.reduce with addf, the ragged steps' per-group sums) widen natively and
sum in f32 where that keeps numpy's bits (reduce.widened_rows): each case below is checked
against numpy's own ``np.add.reduce(x, dtype=float32)`` on the f16 array, the definition."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.ktir.dialects.linalg import reduce as reduce_mod
from ktir_models.ktir.backends import seqmm
from ktir_models.ktir.ir.nodes import TensorType

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
RNG = np.random.default_rng(17)

needs_native = pytest.mark.skipif(
    not seqmm.available(), reason=f"native library unavailable: {seqmm.unavailable_reason()}")


def _values(shape, specials: bool = True) -> np.ndarray:
    """f16 values over many magnitudes (so that the order of the f32 additions shows in the
    last bits), with a few infinities, a NaN, signed zeros and subnormals (``specials``)."""
    x = RNG.standard_normal(shape) * RNG.choice([1e-6, 1e-3, 1.0, 30.0, 600.0], size=shape)
    x = x.astype(F16)
    flat = x.reshape(-1)
    if specials and flat.size > 64:
        flat[RNG.integers(0, flat.size, 4)] = [np.inf, -np.inf, -0.0, 6e-8]
        flat[RNG.integers(0, flat.size)] = np.nan
    return x


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def _numpy_sum(x, dims, init, out_dtype):
    return np.add(np.add.reduce(x, axis=dims, dtype=F32), init.astype(F32)).astype(out_dtype)


@needs_native
@pytest.mark.parametrize("length", [1, 7, 8, 9, 31, 64, 65, 127, 128, 129, 576, 1536, 4097, 8192])
@pytest.mark.parametrize("elem", ["f16", "f32"])
def test_last_axis_sums_are_numpys(length, elem):
    rows = max(4, 4096 // length + 3)   # at least MIN_ELEMENTS, rows not a buffer's divisor
    x = _values((rows, 1, length))
    init = _values((rows, 1))
    t = TensorType((rows, 1), elem)
    assert reduce_mod.widened_rows(x, (2,), F32) is not None   # the fast path is taken
    with np.errstate(all="ignore"):
        got = reduce_mod.fast_reduce("sum", x, (2,), init, t, F32)
        want = _numpy_sum(x, (2,), init, t.dtype)
    np.testing.assert_array_equal(_bits(got), _bits(want))


@needs_native
def test_rows_longer_than_numpys_buffer_keep_numpys_order():
    """Past np.getbufsize() numpy sums an f16 row in buffer-sized pieces, an f32 row in one
    pairwise tree: the two differ here, so such rows must (and do) stay on numpy's path."""
    length = np.getbufsize() + 808
    x = _values((8, length), specials=False)
    f16_sum = np.add.reduce(x, axis=(1,), dtype=F32)
    f32_sum = np.add.reduce(x.astype(F32), axis=(1,))
    assert not np.array_equal(_bits(f16_sum), _bits(f32_sum)), "data no longer tell them apart"
    assert reduce_mod.widened_rows(x, (1,), F32) is None
    init = np.zeros(8, F32)
    got = reduce_mod.fast_reduce("sum", x, (1,), init, TensorType((8,), "f32"), F32)
    np.testing.assert_array_equal(_bits(got), _bits(_numpy_sum(x, (1,), init, F32)))


@needs_native
def test_other_layouts_and_axes_stay_on_numpys_path():
    """A reduced axis that is not the innermost in memory (a transposed view) is summed by numpy
    in another order than the rows of a contiguous copy: such inputs, and sums over other
    axes, keep numpy's own call."""
    x = _values((4096, 3)).T            # [3, 4096], the reduced axis strided
    assert reduce_mod.widened_rows(x, (1,), F32) is None
    y = _values((64, 96))
    assert reduce_mod.widened_rows(y, (0,), F32) is None
    assert reduce_mod.widened_rows(y, (0, 1), F32) is None
    assert reduce_mod.widened_rows(y.astype(F32), (1,), F32) is None
    for arr, dims in ((x, (1,)), (y, (0,)), (y, (0, 1))):
        out_shape = tuple(n for d, n in enumerate(arr.shape) if d not in dims)
        init = np.zeros(out_shape, F32)
        with np.errstate(all="ignore"):
            got = reduce_mod.fast_reduce("sum", arr, dims, init, TensorType(out_shape, "f32"), F32)
            want = _numpy_sum(arr, dims, init, F32)
        np.testing.assert_array_equal(_bits(got), _bits(want))
