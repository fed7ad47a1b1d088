"""Masked access (dialects/ktdp/access.py): points of an access tile outside its view's
coordinate set are padded on load and skipped on store, and nothing outside the set is ever read
or written.

The Triton-emitted ``vector_add_dynamic_ktir.mlir`` says so in its header ("elements outside this
range are masked on load and ignored on store"); it runs here for n in {1, 300, 512, 1024} against
numpy, with sentinel-filled buffers longer than n (elements >= n untouched) and, separately, with
inputs of exactly n elements followed by never-written memory (any read past n would fault). The
small kernels below cover what the corpus does not: transposed box tiles, general coordinate sets,
non-zero padding, the tiers that decline masked tiles (tapes, stacked grids, the batched K-loop),
and the checking mode's warning.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import corpus_missing_reason, corpus_path
from ktir_models import ktir
from ktir_models.ktir.exec.checks import NumericChecks
from torch_test_device import device_for

SENTINEL = -7.25


def _vector_add():
    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    path = corpus_path() / "ktir-examples" / "triton-ktir" / "vector_add_dynamic_ktir.mlir"
    return ktir.load_module(path).only_function


@pytest.mark.parametrize("n", [1, 300, 512, 1024])
def test_vector_add_dynamic_leaves_elements_past_n_untouched(n: int):
    fn = _vector_add()
    r = np.random.default_rng(n)
    length = 1024 + 96  # longer than the 1024-wide access tile as well
    x = r.standard_normal(length).astype(np.float32)
    y = r.standard_normal(length).astype(np.float32)
    m = ktir.Machine()
    xb, yb = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(y, name="y")
    out = m.hbm.allocate_from(np.full(length, SENTINEL, np.float32), name="out")
    plan = m.compile(fn)
    for _ in range(3):  # the third run replays a tape (tape.py): same bytes
        plan.run([xb.address, yb.address, out.address, np.int32(n)])
        got = out.read()
        np.testing.assert_array_equal(got[:n], x[:n] + y[:n])
        assert (got[n:] == SENTINEL).all()
    assert m.masked_points == 3 * 3 * (1024 - n)  # three tiles per run


@pytest.mark.parametrize("n", [1, 300, 512])
def test_vector_add_dynamic_reads_nothing_past_n(n: int):
    """Inputs of exactly n elements, each followed by a never-written buffer, and an output of n
    elements followed by an uninitialised guard: a read past n would fault, a write would mark
    the guard written."""
    fn = _vector_add()
    r = np.random.default_rng(n + 1)
    x = r.standard_normal(n).astype(np.float32)
    y = r.standard_normal(n).astype(np.float32)
    m = ktir.Machine()
    xb = m.hbm.allocate_from(x, name="x")
    gx = m.hbm.allocate((4096,), "float32", name="guard_x")
    yb = m.hbm.allocate_from(y, name="y")
    gy = m.hbm.allocate((4096,), "float32", name="guard_y")
    out = m.hbm.allocate((n,), "float32", name="out")
    go = m.hbm.allocate((4096,), "float32", name="guard_out")
    m.compile(fn).run([xb.address, yb.address, out.address, np.int32(n)])
    np.testing.assert_array_equal(out.read(), x + y)
    for g in (gx, gy, go):
        assert g.region.mask is not None and not g.region.mask.any(), g.name


# --------------------------------------------------------------------------------------------
# small kernels

def _module(body: str, args: str = "%a: index, %o: index, %n: index") -> ktir.ir.Function:
    text = ("module {\n  func.func @k(" + args + ") attributes {grid = [1]} {\n"
            "    %c0 = arith.constant 0 : index\n" + body + "    return\n  }\n}\n")
    module = ktir.parse_text(text, "masked.mlir")
    ktir.verify(module)
    return module.only_function


ROWS_N = "affine_set<(d0, d1)[s0] : (d0 >= 0, -d0 + s0 - 1 >= 0, d1 >= 0, -d1 + 7 >= 0)>"
BOX_4x8 = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>"
BOX_8x4 = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 7 >= 0, d1 >= 0, -d1 + 3 >= 0)>"


def _transpose_copy(load_attrs: str = "") -> ktir.ir.Function:
    """Rows [0, n) of an ?x8 view read through a transposing 4x8 tile anchored at row %c2, then
    stored into a 8x4 output box; rows >= n of the source read as zero (or as the padding that
    ``load_attrs`` gives the load)."""
    return _module(f"""
    %c2 = arith.constant 2 : index
    %va = ktdp.construct_memory_view %a, sizes: [%n, 8], strides: [8, 1] {{
      coordinate_set = {ROWS_N}, memory_space = #ktdp.memory_space<global> }} : memref<?x8xf16>
    %ta = ktdp.construct_access_tile %va[%c2, %c0] {{
      access_tile_set = {BOX_4x8}, access_tile_order = affine_map<(d0, d1) -> (d1, d0)>
    }} : memref<?x8xf16> -> !ktdp.access_tile<8x4xindex>
    %x = ktdp.load %ta {load_attrs}: !ktdp.access_tile<8x4xindex> -> tensor<8x4xf16>
    %vo = ktdp.construct_memory_view %o, sizes: [8, 4], strides: [4, 1] {{
      coordinate_set = {BOX_8x4}, memory_space = #ktdp.memory_space<global> }} : memref<8x4xf16>
    %to = ktdp.construct_access_tile %vo[%c0, %c0] {{
      access_tile_set = {BOX_8x4}, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<8x4xf16> -> !ktdp.access_tile<8x4xindex>
    ktdp.store %x, %to : tensor<8x4xf16>, !ktdp.access_tile<8x4xindex>
""")


@pytest.mark.parametrize("n", [2, 3, 5, 6, 9])
def test_transposed_masked_load_pads_with_zero(n: int):
    fn = _transpose_copy()
    m = ktir.Machine()
    a = (np.arange(n * 8, dtype=np.float16) + 1).reshape(n, 8)
    ab = m.hbm.allocate_from(a, name="a")
    out = m.hbm.allocate((8, 4), "float16", name="o")
    m.compile(fn).run({"a": ab.address, "o": out.address, "n": n})
    padded = np.zeros((12, 8), np.float16)
    padded[:n] = a
    np.testing.assert_array_equal(out.read(), padded[2:6].T)


def _store_rows(order: str = "(d0, d1)") -> ktir.ir.Function:
    """A 4x8 box of ones stored at row %c2 of rows [0, n) of an ?x8 view (traversed in
    ``order``: the data tile is 8x4 for the transposing order)."""
    shape = "8x4" if order == "(d1, d0)" else "4x8"
    return _module(f"""
    %c2 = arith.constant 2 : index
    %one = arith.constant 1.0 : f16
    %x = tensor.splat %one : tensor<{shape}xf16>
    %vo = ktdp.construct_memory_view %o, sizes: [%n, 8], strides: [8, 1] {{
      coordinate_set = {ROWS_N}, memory_space = #ktdp.memory_space<global> }} : memref<?x8xf16>
    %to = ktdp.construct_access_tile %vo[%c2, %c0] {{
      access_tile_set = {BOX_4x8}, access_tile_order = affine_map<(d0, d1) -> {order}>
    }} : memref<?x8xf16> -> !ktdp.access_tile<{shape}xindex>
    ktdp.store %x, %to : tensor<{shape}xf16>, !ktdp.access_tile<{shape}xindex>
""", "%o: index, %n: index")


@pytest.mark.parametrize("n", [1, 2, 4, 6, 7])
def test_masked_store_writes_only_inside_the_set(n: int):
    m = ktir.Machine()
    buf = m.hbm.allocate_from(np.full((8, 8), SENTINEL, np.float16), name="o")
    m.compile(_store_rows()).run({"o": buf.address, "n": n})
    want = np.full((8, 8), SENTINEL, np.float16)
    want[2:min(6, n)] = 1
    np.testing.assert_array_equal(buf.read(), want)


def test_general_coordinate_set_masks_point_by_point():
    """A lower-triangular view (d1 <= d0): a 4x4 box load reads the triangle, zero elsewhere;
    the store back into a plain 4x4 view writes all 16 (zeros above the diagonal)."""
    tri = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 3 >= 0, d0 - d1 >= 0)>"
    box = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 3 >= 0)>"
    fn = _module(f"""
    %va = ktdp.construct_memory_view %a, sizes: [4, 4], strides: [4, 1] {{
      coordinate_set = {tri}, memory_space = #ktdp.memory_space<global> }} : memref<4x4xf32>
    %ta = ktdp.construct_access_tile %va[%c0, %c0] {{
      access_tile_set = {box}, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<4x4xf32> -> !ktdp.access_tile<4x4xindex>
    %x = ktdp.load %ta : !ktdp.access_tile<4x4xindex> -> tensor<4x4xf32>
    %vo = ktdp.construct_memory_view %o, sizes: [4, 4], strides: [4, 1] {{
      coordinate_set = {box}, memory_space = #ktdp.memory_space<global> }} : memref<4x4xf32>
    %to = ktdp.construct_access_tile %vo[%c0, %c0] {{
      access_tile_set = {box}, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<4x4xf32> -> !ktdp.access_tile<4x4xindex>
    ktdp.store %x, %to : tensor<4x4xf32>, !ktdp.access_tile<4x4xindex>
""", "%a: index, %o: index")
    m = ktir.Machine()
    a = np.arange(16, dtype=np.float32).reshape(4, 4) + 1
    ab = m.hbm.allocate_from(a, name="a")
    out = m.hbm.allocate((4, 4), "float32", name="o")
    m.compile(fn).run({"a": ab.address, "o": out.address})
    np.testing.assert_array_equal(out.read(), np.tril(a))
    assert m.masked_points == 6


def test_padding_attribute_sets_the_value_of_masked_points():
    """The load's ``padding`` attribute (in its attr-dict, KtdpOps.td's format) fills the masked
    points."""
    fn = _transpose_copy("{padding = -1.5} ")
    m = ktir.Machine()
    a = (np.arange(3 * 8, dtype=np.float16) + 1).reshape(3, 8)
    ab = m.hbm.allocate_from(a, name="a")
    out = m.hbm.allocate((8, 4), "float16", name="o")
    m.compile(fn).run({"a": ab.address, "o": out.address, "n": 3})
    padded = np.full((12, 8), -1.5, np.float16)
    padded[:3] = a
    np.testing.assert_array_equal(out.read(), padded[2:6].T)
    with pytest.raises(ktir.KtirError, match="padding must be a number"):
        ktir.Machine().compile(_transpose_copy('{padding = "zero"} '))


def _grid_rows(cores: int) -> ktir.ir.Function:
    """Core t copies rows [4t, 4t + 4) of an n x 8 input to the output; rows >= n are masked."""
    text = f"""module {{
  func.func @k(%a: index, %o: index, %n: index) attributes {{grid = [{cores}]}} {{
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %t = ktdp.get_compute_tile_id : index
    %r = arith.muli %t, %c4 : index
    %va = ktdp.construct_memory_view %a, sizes: [%n, 8], strides: [8, 1] {{
      coordinate_set = {ROWS_N}, memory_space = #ktdp.memory_space<global> }} : memref<?x8xf16>
    %ta = ktdp.construct_access_tile %va[%r, %c0] {{
      access_tile_set = {BOX_4x8}, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<?x8xf16> -> !ktdp.access_tile<4x8xindex>
    %x = ktdp.load %ta : !ktdp.access_tile<4x8xindex> -> tensor<4x8xf16>
    %y = arith.addf %x, %x : tensor<4x8xf16>
    %vo = ktdp.construct_memory_view %o, sizes: [%n, 8], strides: [8, 1] {{
      coordinate_set = {ROWS_N}, memory_space = #ktdp.memory_space<global> }} : memref<?x8xf16>
    %to = ktdp.construct_access_tile %vo[%r, %c0] {{
      access_tile_set = {BOX_4x8}, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<?x8xf16> -> !ktdp.access_tile<4x8xindex>
    ktdp.store %y, %to : tensor<4x8xf16>, !ktdp.access_tile<4x8xindex>
    return
  }}
}}
"""
    module = ktir.parse_text(text, "grid.mlir")
    ktir.verify(module)
    return module.only_function


@pytest.mark.parametrize("batching", [True, False])
def test_ragged_tail_of_a_grid_in_every_tier(batching: bool):
    """Four cores over 13 rows: core 3's tile has 3 rows inside. Run five times (lock step, the
    stacked form from the second run, tapes once the arguments repeat) and core by core: every
    run stores exactly 2 * a on rows < 13 and leaves the sentinel rows alone."""
    fn = _grid_rows(4)
    m = ktir.Machine(grid_batching=batching)
    a = np.random.default_rng(4).standard_normal((13, 8)).astype(np.float16)
    ab = m.hbm.allocate_from(a, name="a")
    out = m.hbm.allocate_from(np.full((16, 8), SENTINEL, np.float16), name="o")
    plan = m.compile(fn)
    for _ in range(5):
        plan.run({"a": ab.address, "o": out.address, "n": 13})
        got = out.read()
        np.testing.assert_array_equal(got[:13], a + a)
        assert (got[13:] == SENTINEL).all()


def test_checking_mode_warns_on_masking():
    fn = _transpose_copy()
    checks = NumericChecks()
    m = ktir.Machine()
    m.checks = checks
    a = np.ones((3, 8), np.float16)
    ab = m.hbm.allocate_from(a, name="a")
    out = m.hbm.allocate((8, 4), "float16", name="o")
    m.compile(fn).run({"a": ab.address, "o": out.address, "n": 3})
    [w] = checks.warnings
    assert w.kind == "masked" and w.op == "ktdp.load"
    assert "24 point(s)" in w.message  # rows 3..5 of the 4 rows from row 2 and "padding" in w.message
    m2 = ktir.Machine()
    m2.checks = NumericChecks()
    ab = m2.hbm.allocate_from(np.ones((6, 8), np.float16), name="a")
    out = m2.hbm.allocate((8, 4), "float16", name="o")
    m2.compile(fn).run({"a": ab.address, "o": out.address, "n": 6})
    assert m2.checks.warnings == []  # rows 2..5 all inside: nothing masked
    strict = ktir.Machine()
    strict.checks = NumericChecks(strict=True)
    ab = strict.hbm.allocate_from(a, name="a")
    out = strict.hbm.allocate((8, 4), "float16", name="o")
    with pytest.raises(ktir.EmulationFault, match="masked"):
        strict.compile(fn).run({"a": ab.address, "o": out.address, "n": 3})


def test_index_tables_are_not_masked():
    """An indirect access whose index read falls outside the index view is a fault, not a
    padded index (which would address row 0)."""
    idx_set = "affine_set<(d0) : (d0 >= 0, -d0 + 1 >= 0)>"
    fn = _module(f"""
    %vi = ktdp.construct_memory_view %o, sizes: [2], strides: [1] {{
      coordinate_set = {idx_set}, memory_space = #ktdp.memory_space<global> }} : memref<2xi32>
    %va = ktdp.construct_memory_view %a, sizes: [8, 8], strides: [8, 1] {{
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 7 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      memory_space = #ktdp.memory_space<global> }} : memref<8x8xf16>
    %g = ktdp.construct_indirect_access_tile intermediate_variables(%p, %q) %va[ind(%vi[%p]), (%q)] {{
      variables_space_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
      variables_space_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<8x8xf16>, memref<2xi32> -> !ktdp.access_tile<4x8xindex>
    %x = ktdp.load %g : !ktdp.access_tile<4x8xindex> -> tensor<4x8xf16>
""", "%a: index, %o: index")
    m = ktir.Machine()
    ab = m.hbm.allocate_from(np.ones((8, 8), np.float16), name="a")
    ib = m.hbm.allocate_from(np.array([1, 2, 3, 4], np.int32), name="idx")
    with pytest.raises(ktir.EmulationFault, match="coordinate set"):
        m.compile(fn).run({"a": ab.address, "o": ib.address})


def test_masked_access_on_the_torch_back_end_matches_numpy():
    """The masked paths use the back-end vocabulary only (full, assign, put, take): torch on the
    cpu gives numpy's bytes for a masked transposing load and a masked store."""
    pytest.importorskip("torch")
    outs = {}
    for backend in ("numpy", "torch"):
        m = ktir.Machine(backend=backend, device=device_for(backend))
        a = (np.arange(3 * 8, dtype=np.float16) + 1).reshape(3, 8)
        ab = m.hbm.allocate_from(a, name="a")
        out = m.hbm.allocate((8, 4), "float16", name="o")
        m.compile(_transpose_copy()).run({"a": ab.address, "o": out.address, "n": 3})
        rows = m.hbm.allocate_from(np.full((8, 8), SENTINEL, np.float16), name="rows")
        m.compile(_store_rows("(d1, d0)")).run({"o": rows.address, "n": 4})
        outs[backend] = (out.read(), rows.read())
    for x, y in zip(outs["numpy"], outs["torch"]):
        np.testing.assert_array_equal(x, y)
    want = np.full((8, 8), SENTINEL, np.float16)
    want[2:4] = 1
    np.testing.assert_array_equal(outs["numpy"][1], want)


@pytest.mark.parametrize("n", [3, 5, 8])
def test_transposed_masked_store_puts_each_value_at_its_point(n: int):
    """An 8x4 data tile stored through the transposing order of a 4x8 box at row 2: element
    (j, i) goes to (2 + i, j), only where 2 + i < n."""
    fn = _module(f"""
    %c2 = arith.constant 2 : index
    %va = ktdp.construct_memory_view %a, sizes: [8, 4], strides: [4, 1] {{
      coordinate_set = {BOX_8x4}, memory_space = #ktdp.memory_space<global> }} : memref<8x4xf16>
    %ta = ktdp.construct_access_tile %va[%c0, %c0] {{
      access_tile_set = {BOX_8x4}, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    }} : memref<8x4xf16> -> !ktdp.access_tile<8x4xindex>
    %x = ktdp.load %ta : !ktdp.access_tile<8x4xindex> -> tensor<8x4xf16>
    %vo = ktdp.construct_memory_view %o, sizes: [%n, 8], strides: [8, 1] {{
      coordinate_set = {ROWS_N}, memory_space = #ktdp.memory_space<global> }} : memref<?x8xf16>
    %to = ktdp.construct_access_tile %vo[%c2, %c0] {{
      access_tile_set = {BOX_4x8}, access_tile_order = affine_map<(d0, d1) -> (d1, d0)>
    }} : memref<?x8xf16> -> !ktdp.access_tile<8x4xindex>
    ktdp.store %x, %to : tensor<8x4xf16>, !ktdp.access_tile<8x4xindex>
""")
    m = ktir.Machine()
    a = np.arange(32, dtype=np.float16).reshape(8, 4) + 1
    ab = m.hbm.allocate_from(a, name="a")
    out = m.hbm.allocate_from(np.full((8, 8), SENTINEL, np.float16), name="o")
    m.compile(fn).run({"a": ab.address, "o": out.address, "n": n})
    want = np.full((8, 8), SENTINEL, np.float16)
    for i in range(4):
        if 2 + i < n:
            want[2 + i] = a[:, i]
    np.testing.assert_array_equal(out.read(), want)


def _ragged_k_gemm() -> ktir.ir.Function:
    """acc += A[:, k:k+16] @ B[k:k+16, :] for k = 0, 16, 32 over views whose K ends at 40 (the
    memory behind them goes on, NaN-filled): the last trip's K columns 40..47 are masked."""
    a_set = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 7 >= 0, d1 >= 0, -d1 + 39 >= 0)>"
    b_set = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 39 >= 0, d1 >= 0, -d1 + 15 >= 0)>"
    o_set = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 7 >= 0, d1 >= 0, -d1 + 15 >= 0)>"
    ta = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 7 >= 0, d1 >= 0, -d1 + 15 >= 0)>"
    tb = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 15 >= 0, d1 >= 0, -d1 + 15 >= 0)>"
    ident = "affine_map<(d0, d1) -> (d0, d1)>"
    return _module(f"""
    %c16 = arith.constant 16 : index
    %c48 = arith.constant 48 : index
    %va = ktdp.construct_memory_view %a, sizes: [8, 40], strides: [64, 1] {{
      coordinate_set = {a_set}, memory_space = #ktdp.memory_space<global> }} : memref<8x40xf16>
    %vb = ktdp.construct_memory_view %b, sizes: [40, 16], strides: [16, 1] {{
      coordinate_set = {b_set}, memory_space = #ktdp.memory_space<global> }} : memref<40x16xf16>
    %z = arith.constant dense<0.0> : tensor<8x16xf32>
    %r = scf.for %k = %c0 to %c48 step %c16 iter_args(%acc = %z) -> (tensor<8x16xf32>) {{
      %ta = ktdp.construct_access_tile %va[%c0, %k] {{
        access_tile_set = {ta}, access_tile_order = {ident} }} : memref<8x40xf16> -> !ktdp.access_tile<8x16xindex>
      %x = ktdp.load %ta : !ktdp.access_tile<8x16xindex> -> tensor<8x16xf16>
      %tb = ktdp.construct_access_tile %vb[%k, %c0] {{
        access_tile_set = {tb}, access_tile_order = {ident} }} : memref<40x16xf16> -> !ktdp.access_tile<16x16xindex>
      %y = ktdp.load %tb : !ktdp.access_tile<16x16xindex> -> tensor<16x16xf16>
      %p = linalg.matmul ins(%x, %y : tensor<8x16xf16>, tensor<16x16xf16>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
      %n = arith.addf %acc, %p : tensor<8x16xf32>
      scf.yield %n : tensor<8x16xf32>
    }}
    %vo = ktdp.construct_memory_view %o, sizes: [8, 16], strides: [16, 1] {{
      coordinate_set = {o_set}, memory_space = #ktdp.memory_space<global> }} : memref<8x16xf32>
    %to = ktdp.construct_access_tile %vo[%c0, %c0] {{
      access_tile_set = {o_set}, access_tile_order = {ident} }} : memref<8x16xf32> -> !ktdp.access_tile<8x16xindex>
    ktdp.store %r, %to : tensor<8x16xf32>, !ktdp.access_tile<8x16xindex>
""", "%a: index, %b: index, %o: index")


@pytest.mark.parametrize("native", [True, False], ids=["native-kernel", "blas"])
def test_batched_k_loop_pads_a_ragged_k_with_zero(native: bool):
    """The K-loop runs as one batched step (one load of the whole K range): its masked points
    are zero like the per-trip loads', so no NaN from past K reaches the sum, on the native
    kernel and on BLAS (whose f32 weight cache must not keep the masked tile either)."""
    if native:
        from ktir_models.ktir.backends import seqmm

        if not seqmm.available():
            pytest.skip(f"native kernel unavailable: {seqmm.unavailable_reason()}")
    r = np.random.default_rng(7)
    a = np.full((8, 64), np.nan, np.float16)
    a[:, :40] = r.standard_normal((8, 40))
    b = np.full((48, 16), np.nan, np.float16)
    b[:40] = r.standard_normal((40, 16))
    m = ktir.Machine(native_matmul=native)
    ab, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    out = m.hbm.allocate((8, 16), "float32", name="o")
    plan = m.compile(_ragged_k_gemm())
    for _ in range(3):
        plan.run({"a": ab.address, "b": bb.address, "o": out.address})
        ref = a[:, :40].astype(np.float64) @ b[:40].astype(np.float64)
        np.testing.assert_allclose(out.read(), ref, rtol=1e-5, atol=1e-5)
    assert not m.f32_cache or all(np.isfinite(v[2]).all() for v in m.f32_cache.values())
