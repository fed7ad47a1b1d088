"""SwiGLU feed-forward block with a residual connection (float64)."""

from __future__ import annotations

import numpy as np


def swiglu_ffn_residual(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray) -> np.ndarray:
    """``x + (silu(x @ Wg) * (x @ Wu)) @ Wd`` with weights stored ``[in, out]``."""
    x, wg, wu, wd = (np.asarray(a, dtype=np.float64) for a in (x, w_gate, w_up, w_down))
    gate = x @ wg
    hidden = gate / (1.0 + np.exp(-gate)) * (x @ wu)
    return x + hidden @ wd
