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

from ktir_models import ktir
from ktir_models.ktir.ir.errors import KtirError


def upstream_dir() -> Path:
    configured = os.environ.get("KTIR_UPSTREAM")
    if configured:
        return Path(configured).expanduser().resolve()
    return corpus_path().parent / "upstream-ktir" / "2026h2"


# the reference's erf: the C library's, element by element (float64), independent of the
# emulator's vectorised one
erf = np.vectorize(math.erf, otypes=[np.float64])


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


# -- the dialect frontend's own lit tests ---------------------------------------------------------

def _frontend_file(name: str) -> str:
    path = upstream_dir() / name
    if not path.is_file():
        pytest.skip(f"upstream KTIR not found at {path} (set KTIR_UPSTREAM)")
    return path.read_text()


def test_frontend_ops_file_checks_and_prints_back():
    """Every op of the frontend's ops.mlir checks; the generic form we print reads back to the
    same IR (printed again: the same text)."""
    from ktir_models.ktir.parse.printer import print_generic

    module = ktir.parse_text(_frontend_file("fe_Dialect_SpyreOp_ops.mlir"), "ops.mlir")
    ktir.verify(module)
    assert len(module.functions) == 13
    text = print_generic(module)
    again = ktir.parse_text(text, "generic.mlir")
    ktir.verify(again)
    assert print_generic(again) == text
    assert "opaque" not in text


def test_frontend_invalid_ops_each_refused_where_the_test_expects():
    """Each ``// -----`` case of ops-invalid.mlir: one error, on the line its
    ``expected-error@+N`` names, with the frontend's message (or, for a type inference failure,
    its first line)."""
    import re

    chunks = _frontend_file("fe_Dialect_SpyreOp_ops-invalid.mlir").split("// -----")
    expect = re.compile(r"//\s*expected-error@\+(\d+)\s*\{\{(.*?)\}\}")
    checked = 0
    for chunk in chunks:
        lines = chunk.split("\n")
        wanted = []
        for n, line in enumerate(lines, start=1):
            m = expect.search(line)
            if m:
                wanted.append((n + int(m.group(1)), m.group(2)))
        if not wanted:
            continue
        with pytest.raises(KtirError) as info:
            ktir.verify(ktir.parse_text(chunk, "case.mlir"))
        err = str(info.value)
        assert any(f"case.mlir:{line}:" in err and message in err
                   for line, message in wanted), (wanted, err)
        checked += 1
    assert checked == 18
