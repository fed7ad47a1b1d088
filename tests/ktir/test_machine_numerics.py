"""The fast f16 rounding helper equals numpy's float32 -> float16 -> float32 round trip bit for
bit, on every f16 value, its neighbours, all rounding midpoints, random magnitudes and specials."""

from __future__ import annotations

import numpy as np

from ktir_models.ktir.numerics import round_to_f16


def test_round_to_f16_matches_numpy_cast_bit_for_bit():
    rng = np.random.default_rng(7)
    every = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    finite = every[np.isfinite(every)]
    pos = np.unique(finite[finite >= 0])
    mids = ((pos[:-1].astype(np.float64) + pos[1:]) / 2).astype(np.float32)
    up, down = np.float32(np.inf), np.float32(-np.inf)
    parts = [every, mids, -mids, np.nextafter(mids, up), np.nextafter(mids, down),
             np.nextafter(-mids, up), np.nextafter(-mids, down)]
    for eps in (1e-7, 1e-3, 0.3):
        parts += [(finite * (1 + eps)).astype(np.float32), (finite * (1 - eps)).astype(np.float32)]
    mags = np.float32(2.0) ** rng.integers(-40, 20, 500_000).astype(np.float32)
    parts.append(rng.standard_normal(500_000).astype(np.float32) * mags)
    parts.append(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.996, 65520, 65536,
                           1e30, -1e30, 2.0**-25, 2.0**-26, 3 * 2.0**-26, -(2.0**-25), 1e-40],
                          np.float32))
    x = np.concatenate(parts).astype(np.float32)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    got = round_to_f16(x)
    same = (want.view(np.uint32) == got.view(np.uint32)) | (np.isnan(want) & np.isnan(got))
    assert same.all(), x[~same][:10]
