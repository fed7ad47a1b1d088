"""seqmm.kloop keeps each call signature's checked arguments (seqmm._CALLS): repeated calls with
new data, other strides, a given or absent accumulator, or an operand that must be copied still
match the reference definition bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models.ktir.backends import seqmm

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _kernel():
    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")


def _f16(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float16)


def _both(a, b, acc, **kw):
    got = seqmm.kloop(a, b, acc, **kw)
    ref = seqmm.kloop_reference(a, b, acc, **kw)
    np.testing.assert_array_equal(got.view(np.uint16 if got.dtype == np.float16 else np.uint32),
                                  ref.view(np.uint16 if ref.dtype == np.float16 else np.uint32))
    return got


def test_repeated_signatures_with_new_data_strides_and_accumulators():
    kw = dict(trips=3, kb=16, transpose_b=True, part_dtype=np.float32, acc_dtype=np.float16)
    seqmm._CALLS.clear()
    for _ in range(3):  # the same signature, new values each time
        _both(_f16(4, 2, 48), _f16(4, 24, 48), None, **kw)
    assert len(seqmm._CALLS) == 1
    wide = _f16(4, 24, 96)
    _both(_f16(4, 2, 48), wide[:, :, ::2], None, **kw)       # k not unit-stride: copied, not kept
    _both(_f16(4, 2, 48), wide[:, :, :48], None, **kw)       # another row stride: its own entry
    _both(_f16(4, 2, 48), np.swapaxes(_f16(4, 48, 24), 1, 2), None, **kw)  # read as nn
    acc = _f16(4, 2, 24)
    _both(_f16(4, 2, 48), _f16(4, 24, 48), acc, **kw)         # an accumulator: another signature
    _both(_f16(4, 2, 48), _f16(4, 24, 48), acc[:1], **kw)     # shared by every c
    _both(_f16(1, 2, 48), _f16(4, 24, 48), None, **kw)        # a shared by every c
    for _ in range(2):
        _both(_f16(4, 2, 48), _f16(4, 24, 48), None, **kw)
    assert not any(k[4] == wide[:, :, ::2].strides for k in seqmm._CALLS)


def test_a_bad_call_is_still_refused_after_a_good_one():
    kw = dict(trips=1, kb=8, transpose_b=False, part_dtype=np.float32, acc_dtype=np.float32)
    _both(_f16(2, 1, 8), _f16(2, 8, 4), None, **kw)
    with pytest.raises(TypeError):
        seqmm.kloop(_f16(2, 1, 8).astype(np.float32), _f16(2, 8, 4), None, **kw)
    with pytest.raises(ValueError):
        seqmm.kloop(_f16(2, 1, 8), _f16(2, 9, 4), None, **kw)
