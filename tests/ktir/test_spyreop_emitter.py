"""torch-spyre's Inductor KTIR emitter output that uses spyreop (``ts_emitter_*.mlir`` of the
shared upstream-ktir collection, read in place): each file checks and runs, its output against a
numpy reference of the kernel written here (float64 evaluation, one rounding to f16)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_path
from scipy.special import erf

from ktir_models import ktir


def upstream_dir() -> Path:
    configured = os.environ.get("KTIR_UPSTREAM")
    if configured:
        return Path(configured).expanduser().resolve()
    return corpus_path().parent / "upstream-ktir" / "2026h2"


def _softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(x)))  # beta 1, threshold 20


REFERENCES = {  # file stem -> (input range, float64 reference)
    "exp_derived": ((-6, 6), np.exp),
    "sqrt": ((0, 40), np.sqrt),
    "reciprocal_derived": ((0.05, 30), lambda x: 1.0 / x),
    "sigmoid_derived": ((-12, 12), lambda x: 1.0 / (1.0 + np.exp(-x))),
    "gelufwd_derived": ((-6, 6), lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))),
    "layernormscale_derived": ((0.01, 9), lambda v: 1.0 / np.sqrt(v)),
    "softplus_derived": ((-30, 30), _softplus),
}


@pytest.mark.parametrize("stem", list(REFERENCES))
def test_emitter_kernel_checks_and_runs(stem):
    path = upstream_dir() / f"ts_emitter_{stem}.mlir"
    if not path.is_file():
        pytest.skip(f"upstream KTIR not found at {path} (set KTIR_UPSTREAM)")
    module = ktir.load_module(path)
    (lo, hi), ref = REFERENCES[stem]
    x = np.random.default_rng(7).uniform(lo, hi, (16, 512, 64)).astype(np.float16)
    m = ktir.Machine()
    a = m.hbm.allocate_from(x, name="x")
    out = m.hbm.allocate_from(np.zeros_like(x), name="out")
    m.compile(module.only_function).run([a.address, out.address])
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(out.read().view(np.uint16), want.view(np.uint16))
