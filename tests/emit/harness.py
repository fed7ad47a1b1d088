"""Run one emitted kernel on the emulator with numpy inputs (tests only)."""

from __future__ import annotations

import numpy as np

from ktir_models import ktir


def run_kernel(text: str, tensors: dict[str, np.ndarray], scalars: dict[str, int] | None = None):
    """Parse + verify ``text``, bind every named f16 array (inputs and pre-filled outputs) and the
    scalars, run the whole grid once; return (arrays after the run, RunStats)."""
    module = ktir.parse_text(text, "kernel.mlir")
    ktir.verify(module)
    (fn,) = module.functions.values()
    machine = ktir.Machine()
    bufs = {name: machine.hbm.allocate_from(np.ascontiguousarray(a, dtype=np.float16).copy(), name=name)
            for name, a in tensors.items()}
    args = {name: b.address for name, b in bufs.items()}
    args.update(scalars or {})
    stats = machine.compile(fn).run(args)
    return {name: b.read() for name, b in bufs.items()}, stats


def f16(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def close(actual: np.ndarray, expected: np.ndarray, rel: float = 2e-3) -> None:
    """``actual`` (f16) equals ``expected`` (f32 reference) up to about one f16 rounding."""
    a = actual.astype(np.float32)
    e = np.asarray(expected, dtype=np.float32)
    assert a.shape == e.shape, (a.shape, e.shape)
    assert np.all(np.isfinite(a))
    err = np.abs(a - e)
    bound = rel * np.abs(e) + rel * (np.abs(e).max() + 1e-6) * 1e-2
    worst = int(np.argmax(err - bound))
    assert np.all(err <= bound), (
        f"max error {err.max():.4g} at flat index {worst}: got {a.reshape(-1)[worst]}, "
        f"want {e.reshape(-1)[worst]}")
