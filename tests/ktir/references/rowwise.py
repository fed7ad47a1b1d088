"""Row-wise reductions of the example kernels: softmax, RMSNorm and LayerNorm (float64)."""

from __future__ import annotations

import numpy as np


def softmax_rows(x: np.ndarray) -> np.ndarray:
    """Numerically stable softmax along the last axis."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def rms_norm_rows(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """``x * rsqrt(mean(x^2) + eps) * weight``; ``weight`` broadcasts against ``x``."""
    x = np.asarray(x, dtype=np.float64)
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * rstd * np.asarray(weight, dtype=np.float64)


def layer_norm_rows(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, mean, rstd)`` of LayerNorm over the last axis with the biased variance."""
    x = np.asarray(x, dtype=np.float64)
    mean = np.mean(x, axis=-1)
    var = np.mean((x - mean[:, None]) ** 2, axis=-1)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean[:, None]) * rstd[:, None] * np.asarray(weight, np.float64) + np.asarray(bias, np.float64)
    return y, mean, rstd
