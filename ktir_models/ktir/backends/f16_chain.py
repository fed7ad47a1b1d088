"""Sequential f16 accumulation: ``acc = f16(acc + f16(part[t]))`` for t = 0, 1, ...

This is what an ``scf.for`` K-loop over f16 partials does (docs/emulator.md, "batched K-loops"):
every partial is rounded to f16, then added to the f16 accumulator and the sum rounded to f16, in
trip order. The chain cannot be reordered, so its cost is T vector operations; numpy has no fast
float16 arithmetic, torch (CPU) has vectorised half conversion and half addition.

Invariant: :func:`chain_add_f16` returns exactly the array the plain numpy loop

    for p in parts.astype(np.float16):
        acc = np.add(acc, p, dtype=np.float32).astype(np.float16)

returns. torch computes a half + half on CPU by widening both to f32, adding, and rounding once to
nearest-even; an f32 sum of two f16 values rounded to f16 is the correctly rounded f16 sum (f32
carries 24 >= 2*11 + 2 bits), so both paths give the IEEE f16 result. Tests check this on random,
tie, subnormal and overflowing values (tests/ktir/test_fastpaths.py).

torch runs the chain single-threaded: each step is a few tens of thousands of elements, where
waking a second thread costs more than it saves (and on a busy machine much more).
"""

from __future__ import annotations

import contextlib

import numpy as np

try:  # torch is an optional dependency (the `torch` extra)
    import torch
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None


def torch_available() -> bool:
    return torch is not None


@contextlib.contextmanager
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def chain_add_f16(acc: np.ndarray, parts: np.ndarray, use_torch: bool | None = None) -> np.ndarray:
    """``acc`` (f16, shape S) plus each ``parts[t]`` (f32 or f16, shape [T, *S]) in order, every
    partial and every sum rounded to f16. Returns a new f16 array of shape S."""
    if use_torch is None:
        use_torch = torch is not None
    if use_torch:
        with _single_thread():
            p16 = torch.from_numpy(np.ascontiguousarray(parts)).to(torch.float16)
            total = torch.from_numpy(np.array(acc, dtype=np.float16, copy=True))
            # the chain is short and narrow in most K-loops (9 trips x 576): per-trip Python and
            # tensor-indexing overhead dominates, so take all trip views at once (unbind) and
            # call the bound in-place add (measured 9 x 576: 42 -> 30 us; 144 x 16384: unchanged)
            add = total.add_
            for p in p16.unbind(0):
                add(p)
            return total.numpy()
    with np.errstate(over="ignore"):  # overflow to ±inf is the IEEE result, not an error
        total = np.asarray(acc, dtype=np.float16)
        for p in np.asarray(parts).astype(np.float16):
            total = np.add(total, p, dtype=np.float32).astype(np.float16)
    return total


def chain_add_f16_tensors(acc, parts):
    """:func:`chain_add_f16` for torch tensors on any device (the torch array back end): the same
    roundings, on the tensors' device. CUDA and MPS add halves in f32 and round once, as the CPU
    does, so the chain is the IEEE f16 chain there too."""
    total = acc.to(torch.float16).clone(memory_format=torch.contiguous_format)
    add = total.add_
    if total.device.type == "cpu":
        with _single_thread():
            for p in parts.to(torch.float16).unbind(0):
                add(p)
    else:
        for p in parts.to(torch.float16).unbind(0):
            add(p)
    return total
