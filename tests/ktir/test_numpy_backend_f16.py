"""The numpy back end's f16 negation and absolute value (a sign-bit op instead of numpy's
element-by-element f16 loop) give numpy's own bits for every f16 value and any layout."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.ktir.backends.numpy_backend import NumpyBackend

EVERY_F16 = np.arange(65536, dtype=np.uint16).view(np.float16)


@pytest.mark.parametrize("name, ufunc", [("negative", np.negative), ("abs", np.abs)])
def test_sign_ops_are_numpys_for_every_f16_value(name, ufunc):
    fn = getattr(NumpyBackend, name)
    got = fn(EVERY_F16)
    assert got.dtype == np.float16 and got.shape == EVERY_F16.shape
    np.testing.assert_array_equal(got.view(np.uint16), ufunc(EVERY_F16).view(np.uint16))
    # strided and multi-dimensional views keep their shape and values; inputs are not written
    grid = EVERY_F16.reshape(256, 256)
    before = grid.copy()
    for view in (grid[::3, 1::2], grid.T, grid[:, :1]):
        np.testing.assert_array_equal(fn(view).view(np.uint16), ufunc(view).view(np.uint16))
    np.testing.assert_array_equal(grid.view(np.uint16), before.view(np.uint16))


@pytest.mark.parametrize("name, ufunc", [("negative", np.negative), ("abs", np.abs)])
def test_sign_ops_leave_other_values_to_numpy(name, ufunc):
    fn = getattr(NumpyBackend, name)
    for x in (np.float16(-2.5), np.array([1.5, -0.0], np.float32), np.array(-3, np.int64),
              np.array(np.float16(-1.0))):
        got = fn(x)
        want = ufunc(x)
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
