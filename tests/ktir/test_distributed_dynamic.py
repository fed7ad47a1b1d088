"""Ragged distributed views with dynamic sizes, against numpy.

``rfc/distributed-view-copy-dynamic.mlir`` (partitions split on the symbolic column axis, 64x32
tiles over 2*s0 columns) and ``rfc/distributed-view-copy-rowmerge-dynamic.mlir`` (partitions split
on rows, 64x16 tiles over s0 columns) run for s0 that are tile multiples (32, 64) and that are not
(24, 40): the last tile's points outside every partition's coordinate set are masked (not stored,
loads padded), the copies match numpy exactly, and nothing outside the views is read or written
(inputs of exactly their size next to never-written guards; the output next to a sentinel-filled
buffer). The symbols of each view's coordinate set are bound from its dynamic ``sizes`` operands
(so B's ``s0`` is the kernel's ``2 * s0``). A small kernel checks that a distributed load pads the
points outside every partition with zero.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import corpus_missing_reason, corpus_path
from ktir_models import ktir

SENTINEL = 3.5


def _kernel(name: str):
    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return ktir.load_module(corpus_path() / "ktir-examples" / "rfc" / name).only_function


def _parts(m, s0: int, seed: int):
    """Two 64 x s0 f16 partitions, each followed by a never-written guard."""
    r = np.random.default_rng(seed)
    a0 = r.standard_normal((64, s0)).astype(np.float16)
    a1 = r.standard_normal((64, s0)).astype(np.float16)
    b0 = m.hbm.allocate_from(a0, name="a0")
    g0 = m.hbm.allocate((4096,), "float16", name="guard0")
    b1 = m.hbm.allocate_from(a1, name="a1")
    g1 = m.hbm.allocate((4096,), "float16", name="guard1")
    return a0, a1, (b0, b1), (g0, g1)


def _out(m, shape):
    out = m.hbm.allocate((int(np.prod(shape)),), "float16", name="b")
    after = m.hbm.allocate_from(np.full(4096, SENTINEL, np.float16), name="after")
    return out, after


def _masked_per_run(total_cols: int, tile: int, rows: int, tiles_per_col: int) -> int:
    """Masked points of one run: the last column tile's columns past ``total_cols``, for its
    load and its store, in each of the ``tiles_per_col`` row positions."""
    past = -total_cols % tile
    return 2 * rows * past * tiles_per_col


@pytest.mark.parametrize("s0", [24, 32, 40, 64])
def test_distributed_copy_split_on_the_symbolic_axis(s0: int):
    fn = _kernel("distributed-view-copy-dynamic.mlir")
    m = ktir.Machine()
    a0, a1, (b0, b1), guards = _parts(m, s0, s0)
    out, after = _out(m, (64, 2 * s0))
    plan = m.compile(fn)
    for _ in range(2):
        plan.run([b0.address, b1.address, out.address, np.int32(s0)])
    np.testing.assert_array_equal(out.read().reshape(64, 2 * s0), np.concatenate([a0, a1], axis=1))
    assert (after.read() == SENTINEL).all()
    for g in guards:
        assert not g.region.mask.any(), g.name
    assert m.masked_points == 2 * _masked_per_run(2 * s0, 32, 64, 1)


@pytest.mark.parametrize("s0", [24, 32, 40, 64])
def test_distributed_copy_split_on_rows(s0: int):
    fn = _kernel("distributed-view-copy-rowmerge-dynamic.mlir")
    m = ktir.Machine()
    a0, a1, (b0, b1), guards = _parts(m, s0, s0 + 1)
    out, after = _out(m, (128, s0))
    plan = m.compile(fn)
    for _ in range(2):
        plan.run([b0.address, b1.address, out.address, np.int32(s0)])
    np.testing.assert_array_equal(out.read().reshape(128, s0), np.concatenate([a0, a1], axis=0))
    assert (after.read() == SENTINEL).all()
    for g in guards:
        assert not g.region.mask.any(), g.name
    # per column tile: two aligned row tiles and the straddling one
    assert m.masked_points == 2 * _masked_per_run(s0, 16, 64, 3)


def test_distributed_load_pads_points_outside_every_partition():
    """Partitions cover columns [0, s0) and [s0, 2*s0) of 4 rows; an 4x16 tile at column 16 is
    stored into a plain 4x32 view: the columns past 2*s0 come out zero."""
    set_lo = "affine_set<(d0, d1)[s0] : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + s0 - 1 >= 0)>"
    set_hi = "affine_set<(d0, d1)[s0] : (d0 >= 0, -d0 + 3 >= 0, d1 - s0 >= 0, -d1 + 2*s0 - 1 >= 0)>"
    tile = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 15 >= 0)>"
    out_set = "affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 31 >= 0)>"
    ident = "affine_map<(d0, d1) -> (d0, d1)>"
    text = f"""module {{
  func.func @k(%p0: index, %p1: index, %o: index, %s0: index) attributes {{grid = [1]}} {{
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %v0 = ktdp.construct_memory_view %p0, sizes: [4, %s0], strides: [%s0, 1] {{
      coordinate_set = {set_lo}, memory_space = #ktdp.memory_space<global> }} : memref<4x?xf16>
    %v1 = ktdp.construct_memory_view %p1, sizes: [4, %s0], strides: [%s0, 1] {{
      coordinate_set = {set_hi}, memory_space = #ktdp.memory_space<global> }} : memref<4x?xf16>
    %d = ktdp.construct_distributed_memory_view (%v0, %v1 : memref<4x?xf16>, memref<4x?xf16>)
      : memref<4x?xf16>
    %t = ktdp.construct_access_tile %d[%c0, %c16] {{
      access_tile_set = {tile}, access_tile_order = {ident} }} : memref<4x?xf16> -> !ktdp.access_tile<4x16xindex>
    %x = ktdp.load %t : !ktdp.access_tile<4x16xindex> -> tensor<4x16xf16>
    %vo = ktdp.construct_memory_view %o, sizes: [4, 32], strides: [32, 1] {{
      coordinate_set = {out_set}, memory_space = #ktdp.memory_space<global> }} : memref<4x32xf16>
    %to = ktdp.construct_access_tile %vo[%c0, %c16] {{
      access_tile_set = {tile}, access_tile_order = {ident} }} : memref<4x32xf16> -> !ktdp.access_tile<4x16xindex>
    ktdp.store %x, %to : tensor<4x16xf16>, !ktdp.access_tile<4x16xindex>
    return
  }}
}}
"""
    module = ktir.parse_text(text, "dist.mlir")
    ktir.verify(module)
    fn = module.only_function
    for s0 in (9, 12):
        m = ktir.Machine()
        a0 = np.arange(4 * s0, dtype=np.float16).reshape(4, s0) + 1
        a1 = -np.arange(4 * s0, dtype=np.float16).reshape(4, s0) - 1
        b0, b1 = m.hbm.allocate_from(a0, name="a0"), m.hbm.allocate_from(a1, name="a1")
        out = m.hbm.allocate_from(np.full((4, 32), SENTINEL, np.float16), name="o")
        m.compile(fn).run({"p0": b0.address, "p1": b1.address, "o": out.address, "s0": s0})
        whole = np.zeros((4, 32), np.float16)
        whole[:, :2 * s0] = np.concatenate([a0, a1], axis=1)
        want = np.full((4, 32), SENTINEL, np.float16)
        want[:, 16:] = whole[:, 16:]
        np.testing.assert_array_equal(out.read(), want)


def test_a_tile_whose_extent_is_a_run_time_symbol():
    """The access tile's set takes its extent from ``symbols(%m)`` (a ``?`` tile and tensor),
    the view's from its dynamic size %n: y = 2x lands on the first min(n, m) elements; a tile
    longer than the view is masked past n."""
    fn = ktir.parse_text("""module {
  func.func @k(%a: index, %o: index, %n: index, %m: index) attributes {grid = [1]} {
    %c0 = arith.constant 0 : index
    %va = ktdp.construct_memory_view %a, sizes: [%n], strides: [1] {
      coordinate_set = affine_set<(d0)[s0] : (d0 >= 0, -d0 + s0 - 1 >= 0)>,
      memory_space = #ktdp.memory_space<global> } : memref<?xf16>
    %ta = ktdp.construct_access_tile %va[%c0] [symbols(%m)] {
      access_tile_set = affine_set<(d0)[s0] : (d0 >= 0, -d0 + s0 - 1 >= 0)>,
      access_tile_order = affine_map<(d0) -> (d0)> } : memref<?xf16> -> !ktdp.access_tile<?xindex>
    %x = ktdp.load %ta : !ktdp.access_tile<?xindex> -> tensor<?xf16>
    %y = arith.addf %x, %x : tensor<?xf16>
    %vo = ktdp.construct_memory_view %o, sizes: [%n], strides: [1] {
      coordinate_set = affine_set<(d0)[s0] : (d0 >= 0, -d0 + s0 - 1 >= 0)>,
      memory_space = #ktdp.memory_space<global> } : memref<?xf16>
    %to = ktdp.construct_access_tile %vo[%c0] [symbols(%m)] {
      access_tile_set = affine_set<(d0)[s0] : (d0 >= 0, -d0 + s0 - 1 >= 0)>,
      access_tile_order = affine_map<(d0) -> (d0)> } : memref<?xf16> -> !ktdp.access_tile<?xindex>
    ktdp.store %y, %to : tensor<?xf16>, !ktdp.access_tile<?xindex>
    return
  }
}
""", "dyn.mlir").only_function
    for n, m_ in ((10, 10), (10, 6), (6, 10)):
        m = ktir.Machine()
        a = np.arange(16, dtype=np.float16) + 1
        ab = m.hbm.allocate_from(a, name="a")
        out = m.hbm.allocate_from(np.full(16, SENTINEL, np.float16), name="o")
        m.compile(fn).run({"a": ab.address, "o": out.address, "n": n, "m": m_})
        want = np.full(16, SENTINEL, np.float16)
        k = min(n, m_)
        want[:k] = a[:k] + a[:k]
        np.testing.assert_array_equal(out.read(), want, err_msg=f"n={n} m={m_}")
        assert m.masked_points == 2 * max(0, m_ - n)
