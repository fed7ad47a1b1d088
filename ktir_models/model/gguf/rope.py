"""llama3 RoPE scaling recovered from a GGUF's ``rope_freqs.weight``.

llama.cpp's converter does not store a Llama 3.x checkpoint's ``rope_scaling`` as metadata; it
writes one factor per frequency, ``rope_freqs.weight [head_dim/2]`` (F32), computed from
``factor``, ``low_freq_factor``, ``high_freq_factor`` and ``original_max_position_embeddings``:
1 where the wavelength is below ``original / high``, ``factor`` above ``original / low``, and
``1 / ((1 - s) / factor + s)`` between, ``s = (original / wavelength - low) / (high - low)``.

We recover the four numbers: ``factor`` is the largest factor; between the two bands ``s`` is
affine in the frequency, and a line through the blended frequencies gives ``original / (high -
low)`` and ``low / (high - low)``. Those fix the RoPE exactly but not the scale of
(``original``, ``low``, ``high``): ``original`` comes from ``llama.rope.scaling.original_context_length``
when the file has it, else ``low = 1`` (Llama 3.1 / 3.2). With fewer than two blended frequencies
the converter's defaults (1, 4, 8192) are tried. Invariant: whatever is recovered must reproduce
the file's factors (relative 1e-5) through the same inverse frequencies the runner and
transformers use, else a UserError names the tensor.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ktir_models.errors import UserError
from ktir_models.model.config import ModelConfig, RopeScaling

from .names import ROPE_FREQS
from .reader import GgufFile

ORIGINAL_KEY = "llama.rope.scaling.original_context_length"
_TOLERANCE = 1e-5


def llama3_scaling(f: GgufFile, unscaled: ModelConfig) -> RopeScaling | None:
    """The llama3 scaling the file's ``rope_freqs.weight`` encodes for ``unscaled`` (the config
    without scaling), or None when every factor is 1."""
    from gguf import GGMLQuantizationType as Q

    from ktir_models.model.inputs.runtime_inputs import rope_inv_freq

    where = f"{f.path}: tensor {ROPE_FREQS!r}"
    entry = f.tensors[ROPE_FREQS]
    half = unscaled.head_dim // 2
    if entry.qtype != Q.F32 or entry.shape != (half,):
        raise UserError(f"{where} must be F32 of shape [{half}] (head size / 2), got {entry.qtype.name} "
                        f"{list(entry.shape)}")
    factors = np.asarray(entry.data, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(factors)) or factors.min() < 1 - _TOLERANCE:
        raise UserError(f"{where}: factors must be finite and at least 1 (llama3 scaling)")
    factor = float(factors.max())
    if factor <= 1 + _TOLERANCE:
        return None
    freq = rope_inv_freq(unscaled).astype(np.float64)
    original = f.value(ORIGINAL_KEY)
    for scaling in _candidates(factors, freq, factor, original):
        ours = rope_inv_freq(replace(unscaled, rope_scaling=scaling)).astype(np.float64)
        if np.allclose(freq / ours, factors, rtol=_TOLERANCE, atol=0):
            return scaling
    raise UserError(f"{where}: the factors are not a llama3 RoPE scaling we can recover "
                    f"(factor {factor:g}; {ORIGINAL_KEY} = {original!r})")


def _candidates(factors: np.ndarray, freq: np.ndarray, factor: float, original):
    def make(low: float, high: float, orig: float) -> RopeScaling:
        return RopeScaling("llama3", float(f"{factor:.6g}"), float(f"{low:.6g}"), float(f"{high:.6g}"),
                           int(round(orig)))

    blended = (factors > 1 + _TOLERANCE) & (factors < factor * (1 - _TOLERANCE))
    if blended.sum() >= 2:
        s = (1 / factors[blended] - 1 / factor) / (1 - 1 / factor)
        slope, intercept = np.polyfit(freq[blended], s, 1)  # s = slope * freq + intercept
        if slope > 0 and intercept < 0:
            span = None
            if isinstance(original, int) and original > 0:
                span = original / (2 * math.pi * slope)  # high - low
                low = -intercept * span
                yield make(low, low + span, original)
            span = -1 / intercept  # low = 1
            yield make(1.0, 1.0 + span, slope * 2 * math.pi * span)
    yield make(1.0, 4.0, original if isinstance(original, int) and original > 0 else 8192)
