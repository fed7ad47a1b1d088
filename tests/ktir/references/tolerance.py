"""Comparison helpers with float16 error models (shared by the corpus tests).

``U16`` is the float16 unit roundoff: one correctly rounded f16 operation on a value v errs by at
most ``U16 * |v|`` (half an ulp), and a rounding error is uniform within +-ulp/2, i.e. has std
``ulp / sqrt(12) <= U16 * |v| / sqrt(3)``.
"""

from __future__ import annotations

import numpy as np

U16 = 2.0**-11


def assert_within(got: np.ndarray, ref: np.ndarray, bound, what: str) -> None:
    """``got`` is finite, has ref's shape, and ``|got - ref| <= bound`` elementwise."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != reference {ref.shape}"
    g = got.astype(np.float64)
    assert np.all(np.isfinite(g)), f"{what}: non-finite values"
    err = np.abs(g - np.asarray(ref, dtype=np.float64))
    limit = np.broadcast_to(np.asarray(bound, dtype=np.float64), err.shape)
    if np.any(err > limit):
        worst = np.unravel_index(np.argmax(err - limit), err.shape)
        raise AssertionError(
            f"{what}: {int((err > limit).sum())}/{err.size} elements out of tolerance; worst at "
            f"{worst}: got {g[worst]!r}, reference {float(ref[worst])!r}, |err| {err[worst]:.3g} "
            f"> {limit[worst]:.3g}; max |err| {err.max():.3g}"
        )


def assert_f16_gemm_close(got: np.ndarray, ref: np.ndarray, k_steps: int, what: str) -> None:
    """Check a K-blocked GEMM whose ``k_steps`` partial products are summed in an f16 accumulator.

    Error model: the accumulator's partial sums go from 0 to y like a random-walk bridge, so
    ``sum_k acc_k^2 ~ n (y^2/3 + s^2/6)`` (s = rms of the outputs), and each step's rounding has
    std ``<= U16 |acc_k| / sqrt(3)``; each partial product (size ~ s/sqrt(n) + y/n) is rounded once
    more, adding ``~ U16^2 (s^2 + y^2/n) / 3`` of variance. So the error of output y has std
    ``<= sigma(y) = U16 * sqrt(n/9 (y^2 + s^2/2) + (s^2 + y^2/n) / 3)``. Two checks:

    * bulk: the rms error is at most 1.5x the rms of sigma(y) (observed 0.7-0.86x: ulp(v)
      averages ~1.4 U16 |v|, not 2; the 1.5 covers the rough partial-product term at small n);
      a wrong tile, chunk, bias or transposition errs by ~s, hundreds of times more;
    * every element: ``|err| <= 10 sigma(y) + U16 |y|``. The tails are heavier than Gaussian (a
      walk that lingers at |acc| ~ 3 s rounds on a 4x coarser grid): 7 sigma(y) is seen over
      1.5M outputs, and the kernels' f16 accumulation is bit-for-bit what the program asks for.
    """
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != reference {ref.shape}"
    ref = np.asarray(ref, dtype=np.float64)
    s2 = float(np.mean(ref * ref))
    y2 = ref * ref
    sigma = U16 * np.sqrt(k_steps / 9.0 * (y2 + s2 / 2.0) + (s2 + y2 / k_steps) / 3.0)
    err = got.astype(np.float64) - ref
    assert np.all(np.isfinite(err)), f"{what}: non-finite values"
    rms_err, rms_sigma = float(np.sqrt(np.mean(err * err))), float(np.sqrt(np.mean(sigma * sigma)))
    assert rms_err <= 1.5 * rms_sigma, f"{what}: rms error {rms_err:.3g} > 1.5 x model {rms_sigma:.3g}"
    assert_within(got, ref, 10.0 * sigma + U16 * np.abs(ref), what)
