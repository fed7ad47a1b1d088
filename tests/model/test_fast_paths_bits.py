"""The fast paths give the plain path's logits bits on the fixtures, on every back end.

Fast paths: the native kernel's calls shared between two threads (``seqmm.set_threads(2)``
forces every call, small ones included, onto two threads; the plain path is one thread), the
kernel's worker warming the next call's weights (``seqmm.set_warming``; off on the plain path),
and the last-token lm_head (its row against the all-rows pass's last row). On a back end that sums
matmuls on BLAS (numpy without the kernel, torch) the kernel's threads do not apply, and the
test shows that the pass is still the same bits whatever the setting."""

from __future__ import annotations

import numpy as np
import pytest

from fixture_runs import FIXTURES, bits, prepared
from ktir_models.ktir.backends import seqmm
from torch_test_device import TORCH_DEVICE

PROGRAMS = [("tiny-mha-decode", "tiny-mha"), ("tiny-mha-prefill7", "tiny-mha"),
            ("tiny-gqa4-llama3-prefill32", "tiny-gqa4-llama3")]
BACKENDS = {"numpy-native": {"native_matmul": True}, "numpy-blas": {"native_matmul": False},
            "torch": {"backend": "torch", "device": TORCH_DEVICE}}


@pytest.fixture
def threads():
    """seqmm.set_threads for the test; the size rule again afterwards."""
    yield seqmm.set_threads
    seqmm.set_threads(None)
    seqmm.set_warming(None)


def passes(program, model, machine, count: int, last_token: bool = False) -> list[np.ndarray]:
    """``count`` passes of one fresh runner (the later ones run its batched forms and tapes)."""
    runner, inputs, _ = prepared(FIXTURES / program, model, **machine)
    return [runner.run(inputs, last_token=last_token).result for _ in range(count)]


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("program, model", PROGRAMS)
def test_two_kernel_threads_and_last_token_keep_the_bits(threads, backend, program, model):
    machine = BACKENDS[backend]
    if backend == "torch":
        pytest.importorskip("torch")
    if backend == "numpy-native" and not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    threads(1)
    seqmm.set_warming(False)
    plain = passes(program, model, machine, 4)
    threads(2)
    seqmm.set_warming(True)
    fast = passes(program, model, machine, 4)
    last = passes(program, model, machine, 4, last_token=True)
    for result in plain[1:] + fast:  # every pass (plain, batched forms, tapes) the same bits
        np.testing.assert_array_equal(bits(result), bits(plain[0]))
    for result in last:
        np.testing.assert_array_equal(bits(result), bits(plain[0][-1:]))


@pytest.mark.parametrize("program, model", PROGRAMS + [("tiny-gqa4-llama3-decode-p31", "tiny-gqa4-llama3")])
def test_n_contiguous_weight_copies_keep_the_bits(program, model):
    """The native kernel reading N-contiguous copies of the weights (ktir/exec/row_major.py,
    made where a tape's steps read a weight box, and by the K-loop rule) against reading the
    weights where they lie: the same logits bits on every pass."""
    if not seqmm.available():
        pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    runs = {}
    for budget in (0, None):
        runner, inputs, _ = prepared(FIXTURES / program, model, native_matmul=True,
                                     row_major_bytes=budget)
        runs[budget] = [runner.run(inputs).result for _ in range(5)]
        used = runner.machine.row_major_used
        assert (used > 0) == (budget is None), used
    for k, (with_copies, without) in enumerate(zip(runs[None], runs[0])):
        np.testing.assert_array_equal(bits(with_copies), bits(without), err_msg=f"pass {k}")


@pytest.mark.parametrize("program, model", PROGRAMS)
def test_the_fastcall_extension_keeps_the_bits(monkeypatch, program, model):
    """The f16 arithmetic and conversions of every size, and the kernel's pointers, called
    through the fastcall extension (ktir/backends/fastcall.py) against the same library called
    through ctypes, small arrays left to numpy: the same logits bits on every pass."""
    from ktir_models.ktir.backends import fastcall

    runs = {}
    try:
        for setting in ("0", "1"):
            monkeypatch.setenv("KTIR_MODELS_NATIVE_EXT", setting)
            seqmm._reset()
            if not seqmm.available():
                pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
            if setting == "1" and seqmm._library().ext is None:
                pytest.skip(f"the fastcall extension is unavailable: {fastcall.reason}")
            assert (seqmm._library().ext is None) == (setting == "0")
            runs[setting] = passes(program, model, {"native_matmul": True}, 4)
    finally:
        seqmm._reset()
    for k, (on, off) in enumerate(zip(runs["1"], runs["0"])):
        np.testing.assert_array_equal(bits(on), bits(off), err_msg=f"pass {k}")
