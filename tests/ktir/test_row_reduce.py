"""Row sums and maxima with numpy's bits (backends/row_reduce.py, rowreduce.c): the bits of
``np.add.reduce(x, axis=-1)`` for every run length through the pairwise blocks and splits, for
stacked and strided row layouts, signed zeros, infinities and NaN, and for rows of their own
lengths (a ragged reduction's groups) against numpy on each row cut to its length; the bits of
``np.maximum.reduce`` for f16 and f32 rows, the rows numpy alone decides (NaN, zeros of both
signs) left to it, and rows of their own lengths against rows padded with -inf."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.ktir.backends import seqmm
from ktir_models.ktir.backends.row_reduce import row_max, row_sums

pytestmark = pytest.mark.skipif(not seqmm.available(),
                                reason=f"native kernel unavailable: {seqmm.unavailable_reason()}")
RNG = np.random.default_rng(5)


def spread(shape) -> np.ndarray:
    """Values over many binades, so that a different order of additions shows in the bits."""
    return (RNG.standard_normal(shape) * np.exp(RNG.standard_normal(shape) * 4)).astype(np.float32)


def same_bits(got, want):
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32), np.asarray(want).view(np.uint32))


@pytest.mark.parametrize("n", list(range(1, 140)) + [255, 256, 257, 1000, 1031, 4099, 9000])
def test_rows_sum_to_numpys_bits(n):
    x = spread((7, n))
    same_bits(row_sums(x), np.add.reduce(x, axis=-1))
    same_bits(row_sums(x[3]), np.add.reduce(x[3]))  # one row


@pytest.mark.parametrize("shape", [(288, 1, 64), (9, 32, 40), (2, 3, 4, 33)])
def test_stacked_rows_sum_to_numpys_bits(shape):
    x = spread(shape)
    same_bits(row_sums(x), np.add.reduce(x, axis=-1))


def test_strided_rows_and_cut_rows_sum_to_numpys_bits():
    x = spread((64, 1, 96))
    for view in (x[::4], x[3::8, :, :50], x[::-2, :, 7:77]):
        same_bits(row_sums(view), np.add.reduce(view, axis=-1))
    assert row_sums(x[:, :, ::2]) is None  # rows not contiguous: numpy's call
    assert row_sums(np.broadcast_to(x[:1], x.shape)) is None  # broadcast rows: numpy's call
    assert row_sums(np.ones((4, 8), np.float16)) is None  # f16: numpy casts through its buffer


def test_signed_zeros_infinities_and_nan_follow_numpy():
    x = np.full((6, 20), -0.0, np.float32)
    x[1, 3] = np.inf
    x[2, [4, 9]] = [np.inf, -np.inf]
    x[3, 17] = np.nan
    x[4, :7] = -0.0
    x[5] = spread(20)
    x[5, 12] = -np.inf
    for n in (3, 8, 20):
        with np.errstate(invalid="ignore"):
            same_bits(row_sums(x[:, :n]), np.add.reduce(x[:, :n], axis=-1))
    assert not np.signbit(row_sums(x[:1])).any()  # a row of -0.0 sums to +0.0, as numpy's


def test_rows_of_their_own_lengths_sum_as_numpy_sums_each_cut():
    x = spread((96, 1, 64))
    lengths = RNG.integers(0, 65, size=96).astype(np.int64)
    got = row_sums(x, lengths)
    for i, n in enumerate(lengths):
        same_bits(got[i], np.add.reduce(x[i, :, :n], axis=-1))
    for bad in (np.full(96, 65), np.full(96, -1)):
        with pytest.raises(ValueError, match="outside its row"):
            row_sums(x, bad)
    with pytest.raises(ValueError, match="one per row"):
        row_sums(x, lengths[:5])


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 64, 129, 1000])
def test_row_maxima_are_numpys(dtype, n):
    x = spread((33, n)).clip(-6e4, 6e4).astype(dtype)
    want = np.maximum.reduce(x.astype(np.float32), axis=-1)
    same_bits(row_max(x), want)
    view = x[::3]
    same_bits(row_max(view), np.maximum.reduce(view.astype(np.float32), axis=-1))


def test_row_maxima_leave_nan_and_mixed_zeros_to_numpy():
    x = np.full((4, 10), -1.0, np.float32)
    x[:, 2] = -0.0
    same_bits(row_max(x), np.maximum.reduce(x, axis=-1))  # -0.0 alone: its bits
    x[1, 5] = 0.0  # +0.0 and -0.0 both the maximum: numpy's order picks
    assert row_max(x) is None
    x[1, 5] = -2.0
    x[3, 7] = np.nan
    assert row_max(x) is None
    assert row_max(x[:3]) is not None
    h = np.array([[1.0, np.nan]], np.float16)
    assert row_max(h) is None
    sub = np.array([[-6e-8, -1e-7, -3e-5, -65504.0]], np.float16)  # f16 subnormals and the edge
    same_bits(row_max(sub), np.maximum.reduce(sub.astype(np.float32), axis=-1))


def test_row_maxima_of_their_own_lengths_are_those_of_the_rows_padded_with_minus_inf():
    x = spread((96, 1, 64)).clip(-6e4, 6e4).astype(np.float16)
    lengths = RNG.integers(0, 65, size=96).astype(np.int64)
    padded = np.where(np.arange(64) < lengths[:, None, None], x, np.float16(-np.inf))
    same_bits(row_max(x, lengths), np.maximum.reduce(padded.astype(np.float32), axis=-1))
