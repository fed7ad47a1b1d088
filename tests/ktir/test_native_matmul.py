"""The native matmul kernel (backends/seqmm.py) against f32 BLAS on every scratchy node kind.

Both are the faithful numerics (exact f16 products summed in f32, the program's roundings); they
differ only in the f32 summation order inside a matmul: the kernel sums each element sequentially
over k, OpenBLAS in blocked partial sums. An f32 result moved by that lands on the other side of an
f16 rounding boundary now and then, so a few elements move by an ulp of their K-chain's (or
attention row's) scale; node kinds without a matmul must be bit-identical. The kernel itself is
checked bit for bit against its definition in tests/ktir/test_seqmm.py; the fast paths with the
kernel against the plain plan in test_fastpaths.py, test_stacked.py and test_reroll.py.

Also here: a weight load feeding the kernel is a view of HBM only when nothing can write those
bytes before the matmul (a store in between must not change the loaded value; checked by making
the analysis always answer "view": the native variants then fail).
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


# --------------------------------------------------------------------------------------------
# Loads feeding the kernel are views of HBM only when no write can intervene

def _overwrite_between_load_and_matmul(grid: str, in_loop: bool):
    """Each core: load its 64 rows of w, store zeros over those rows, then multiply x by the
    loaded rows. The loaded value is the OLD w (SSA), so the result must not be zero; a view of
    HBM taken at the load would read the zeros. ``in_loop`` puts it inside an scf.for."""
    from test_machine import load, program, store, tile, view

    body = (view("vx", "x", (1, 576)) + view("vw", "w", (128, 576)) + view("vo", "o", (1, 128)) +
            "    %core = ktdp.get_compute_tile_id : index\n"
            "    %c64 = arith.constant 64 : index\n"
            "    %r = arith.muli %core, %c64 : index\n" +
            tile("tx", "vx", (1, 576), (1, 576), "%c0, %c0") + load("a", "tx", (1, 576)) +
            tile("tw", "vw", (128, 576), (64, 576), "%r, %c0") + load("b", "tw", (64, 576)) +
            "    %zeros = arith.constant dense<0.0> : tensor<64x576xf16>\n" +
            store("zeros", "tw", (64, 576)) +
            "    %z = arith.constant dense<0.0> : tensor<1x64xf32>\n"
            "    %mm = linalg.matmul_transpose_b ins(%a, %b : tensor<1x576xf16>, "
            "tensor<64x576xf16>) outs(%z : tensor<1x64xf32>) -> tensor<1x64xf32>\n"
            "    %h = arith.truncf %mm : tensor<1x64xf32> to tensor<1x64xf16>\n" +
            tile("to", "vo", (1, 128), (1, 64), "%c0, %r") + store("h", "to", (1, 64)))
    if in_loop:
        lines = body.splitlines(keepends=True)
        start = next(k for k, line in enumerate(lines) if "get_compute_tile_id" in line)
        inner = "".join("  " + line for line in lines[start:])
        body = ("".join(lines[:start]) + "    %c1 = arith.constant 1 : index\n"
                "    scf.for %it = %c0 to %c1 step %c1 {\n" + inner + "      scf.yield\n    }\n")
    return program("%x: index, %w: index, %o: index", body, grid=grid)


@pytest.mark.parametrize("grid,in_loop", [("[1]", False), ("[2]", False), ("[2]", True)])
def test_a_store_between_load_and_matmul_keeps_the_loaded_values(grid, in_loop, native_matmul):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 576)).astype(np.float16)
    w = (rng.standard_normal((128, 576)) * 0.1).astype(np.float16)
    cores = 2 if grid == "[2]" else 1
    want = (x.astype(np.float64) @ w[:64 * cores].astype(np.float64).T).astype(np.float16)
    fn = _overwrite_between_load_and_matmul(grid, in_loop)
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched, native_matmul=native_matmul)
        bx, bw = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(w.copy(), name="w")
        bo = m.hbm.allocate((1, 128), "float16", name="o")
        plan = m.compile(fn)
        for _ in range(3):  # plain, then the batched forms (stacked from the second run)
            bw.write(w)
            plan.run([bx.address, bw.address, bo.address])
            got = bo.read()[:, :64 * cores]
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                       rtol=2e-3, atol=2e-3)
            assert not bw.read()[:64 * cores].any()  # the store did happen
