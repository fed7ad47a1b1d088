"""The native matmul kernel (backends/seqmm.py) against f32 BLAS on every scratchy node kind.

Both are the faithful numerics (exact f16 products summed in f32, the program's roundings); they
differ only in the f32 summation order inside a matmul: the kernel sums each element sequentially
over k, OpenBLAS in blocked partial sums. An f32 result moved by that lands on the other side of an
f16 rounding boundary now and then, so a few elements move by an ulp of their K-chain's (or
attention row's) scale; node kinds without a matmul must be bit-identical. The kernel itself is
checked bit for bit against its definition in tests/ktir/test_seqmm.py; the fast paths with the
kernel against the plain plan in test_fastpaths.py, test_stacked.py and test_reroll.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.backends import seqmm

import test_scratchy_nodes as nodes  # noqa: E402
from test_torch_backend import assert_order_deviation, deviation, scale_of  # noqa: E402


@pytest.mark.parametrize("fixture,index,kind", nodes.node_cases())
def test_scratchy_node_native_matches_blas(fixture: str, index: int, kind: str, monkeypatch) -> None:
    if not seqmm.available():
        pytest.skip(f"native matmul kernel unavailable: {seqmm.unavailable_reason()}")
    manifest = nodes.load_manifest(fixture)
    node = manifest.nodes[index]
    seed = sum(map(ord, fixture)) * 1000 + index
    inputs = {a["tensor"]: nodes.make_input(manifest, nodes.FIXTURES[fixture], a["tensor"], seed)
              for a in node["args"] if not a["is_output"]}
    (out_id,) = [a["tensor"] for a in node["args"] if a["is_output"]]
    outs = {}
    for native in (False, True):
        with monkeypatch.context() as patch:
            patch.setattr(ktir, "Machine", functools.partial(ktir.Machine, native_matmul=native))
            outs[native] = nodes.run_node(manifest, node, inputs)[out_id]
    blas, got = outs[False], outs[True]
    dev = deviation(got, blas, scale_of(manifest, node, kind, inputs, blas))
    what = f"{fixture} node{index} ({kind}, {node['fn']})"
    print(f"\n[deviation] {fixture} {kind}: {dev}")
    # sequential sums drift further from BLAS's blocked ones than two BLAS libraries do
    assert_order_deviation(dev, kind, what, differing_per=20)
