"""Inter-tile communication as the dialect defines it: futures with several partial roles,
``inter_tile_consume`` (broadcast, routing) and multi-role ``inter_tile_reduce`` with
per-consumer dependency sets, run on 4- and 32-core grids against numpy references written
from the dialect's semantics (docs/emulator.md, "Inter-tile communication")."""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.latency import HardwareParams, function_latency
from test_machine import load, store, tile, view
from torch_test_device import TORCH_DEVICE

W = 8  # row width of every partial
ROW_F, ROW_I = f"tensor<1x{W}xf32>", f"tensor<1x{W}xi32>"
ROLES = f"{ROW_F}, {ROW_I}"
INT_MIN = np.iinfo(np.int32).min

GROUP = "affine_set<(i)[g] : (i - 4*g >= 0, -i + 4*g + 3 >= 0)>"  # tiles 4g .. 4g+3
LEAD = "affine_set<(i)[g] : (i - 4*g == 0)>"  # tile 4g
FIRST_TWO = "affine_set<(i)[g] : (i - 4*g >= 0, -i + 4*g + 1 >= 0)>"  # 4g, 4g+1
LAST_TWO = "affine_set<(i)[g] : (i - 4*g - 2 >= 0, -i + 4*g + 3 >= 0)>"  # 4g+2, 4g+3
MIRROR = "affine_set<(p)[c, g] : (p + c - 8*g - 3 == 0)>"  # c receives from 8g+3-c
SHIFT = "affine_set<(p)[c] : (p - c + 2 == 0)>"  # c receives from c-2 (group-independent)
PREFIX = "affine_set<(p)[c, g] : (p - 4*g >= 0, -p + c >= 0)>"  # producers 4g .. c


def groups(n: int) -> str:
    return f"affine_set<(g) : (g >= 0, -g + {n // 4 - 1} >= 0)>"


def future(n: int) -> str:
    return f"!ktdp.tile_future<({ROLES}), groups = {groups(n)}>"


def produce(n: int, producers: str) -> str:
    return (f"    %f = ktdp.inter_tile_produce producer_tiles_per_group = {producers}\n"
            f"        -> {future(n)}\n"
            "    { ^bb0(%gid: index):\n"
            f"        ktdp.yield_partial %ra, %rb : {ROLES} }}\n")


def consume(n: int, consumers: str, deps: str | None = None) -> str:
    dep = f",\n        producer_dependency_per_consumer = {deps}" if deps else ""
    return (f"    %x, %y = ktdp.inter_tile_consume(%f) "
            f"consumer_tiles_per_group = {consumers}{dep}\n"
            f"        : {future(n)} -> {ROLES}\n")


COMBINER = (f"    {{ ^bb0(%l0: {ROW_F}, %l1: {ROW_I}, %r0: {ROW_F}, %r1: {ROW_I}):\n"
            f"        %s0 = arith.addf %l0, %r0 : {ROW_F}\n"
            f"        %s1 = arith.maxsi %l1, %r1 : {ROW_I}\n"
            f"        ktdp.yield_reduced %s0, %s1 : {ROLES} }}\n")


def reduce(n: int, consumers: str, deps: str | None = None) -> str:
    dep = f"producer_dependency_per_consumer = {deps},\n        " if deps else ""
    return (f"    %z0 = arith.constant dense<0.0> : {ROW_F}\n"
            f"    %z1 = arith.constant dense<{INT_MIN}> : {ROW_I}\n"
            f"    %x, %y = ktdp.inter_tile_reduce(%f) consumer_tiles_per_group = {consumers},\n"
            f"        {dep}identity(%z0, %z1 : {ROLES})\n"
            f"        : {future(n)} -> {ROLES}\n" + COMBINER)


def kernel_text(n: int, exchange: str) -> str:
    """Core c posts row c of ``a`` (f32) and of ``b`` (i32) as its two partials; ``exchange``
    delivers %x, %y, which core c stores to row c of ``o`` and ``p``."""
    shape = (n, W)
    body = ("    %pid = ktdp.get_compute_tile_id : index\n"
            + view("va", "a", shape, "f32") + view("vb", "b", shape, "i32")
            + view("vo", "o", shape, "f32") + view("vp", "p", shape, "i32")
            + tile("ta", "va", shape, (1, W), "%pid, %c0", "f32") + load("ra", "ta", (1, W), "f32")
            + tile("tb", "vb", shape, (1, W), "%pid, %c0", "i32") + load("rb", "tb", (1, W), "i32")
            + exchange
            + tile("to", "vo", shape, (1, W), "%pid, %c0", "f32") + store("x", "to", (1, W), "f32")
            + tile("tp", "vp", shape, (1, W), "%pid, %c0", "i32") + store("y", "tp", (1, W), "i32"))
    return ("module {\n  func.func @k(%a: index, %b: index, %o: index, %p: index) "
            f"attributes {{grid = [{n}]}} {{\n    %c0 = arith.constant 0 : index\n{body}"
            "    return\n  }\n}\n")


def run_kernel(n: int, exchange: str, seed: int, **machine):
    """(a, b, o, p): the inputs and what each core stored (``machine``: Machine options). The
    module verifies and is legal."""
    module = ktir.parse_text(kernel_text(n, exchange), "it.mlir")
    ktir.verify(module)
    ktir.check_legality(module)
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000, 1000, (n, W)).astype(np.float32)  # f32 sums of these are exact
    b = rng.integers(-10**6, 10**6, (n, W)).astype(np.int32)
    m = ktir.Machine(**machine)
    ba, bb = m.hbm.allocate_from(a, name="a"), m.hbm.allocate_from(b, name="b")
    bo, bp = m.hbm.allocate((n, W), "float32", name="o"), m.hbm.allocate((n, W), "int32", name="p")
    m.compile(module.function("k")).run([ba.address, bb.address, bo.address, bp.address])
    return a, b, np.asarray(bo.read()), np.asarray(bp.read())


GRIDS = pytest.mark.parametrize("n", [4, 32])


# -- consume -------------------------------------------------------------------------------------

@GRIDS
def test_consume_broadcasts_the_group_leaders_partials(n):
    a, b, o, p = run_kernel(n, produce(n, LEAD) + consume(n, GROUP), seed=n)
    src = [4 * (c // 4) for c in range(n)]
    np.testing.assert_array_equal(o, a[src])
    np.testing.assert_array_equal(p, b[src])


@GRIDS
def test_consume_routes_each_consumer_its_mirror_producer(n):
    a, b, o, p = run_kernel(n, produce(n, GROUP) + consume(n, GROUP, MIRROR), seed=n + 1)
    src = [8 * (c // 4) + 3 - c for c in range(n)]
    np.testing.assert_array_equal(o, a[src])
    np.testing.assert_array_equal(p, b[src])


@GRIDS
def test_consume_routing_with_a_group_independent_dependency_set(n):
    """Tiles 4g+2, 4g+3 receive from 4g, 4g+1; the others consume nothing and hold zeros."""
    a, b, o, p = run_kernel(n, produce(n, FIRST_TWO) + consume(n, LAST_TWO, SHIFT), seed=n + 2)
    for c in range(n):
        want_a, want_b = (a[c - 2], b[c - 2]) if c % 4 >= 2 else (np.zeros(W), np.zeros(W))
        np.testing.assert_array_equal(o[c], want_a, err_msg=f"core {c}")
        np.testing.assert_array_equal(p[c], want_b, err_msg=f"core {c}")


# -- reduce --------------------------------------------------------------------------------------

def group_fold(a, b, members):
    return a[members].sum(0), b[members].max(0)


@GRIDS
def test_two_role_all_reduce_folds_every_producer_of_the_group(n):
    a, b, o, p = run_kernel(n, produce(n, GROUP) + reduce(n, GROUP), seed=n + 3)
    for c in range(n):
        s, mx = group_fold(a, b, list(range(4 * (c // 4), 4 * (c // 4) + 4)))
        np.testing.assert_array_equal(o[c], s, err_msg=f"core {c}")
        np.testing.assert_array_equal(p[c], mx, err_msg=f"core {c}")


@GRIDS
def test_two_role_reduce_with_per_consumer_dependencies_is_a_prefix_fold(n):
    """Consumer c waits for and folds producers 4g .. c only (the others count as identity)."""
    a, b, o, p = run_kernel(n, produce(n, GROUP) + reduce(n, GROUP, PREFIX), seed=n + 4)
    for c in range(n):
        s, mx = group_fold(a, b, list(range(4 * (c // 4), c + 1)))
        np.testing.assert_array_equal(o[c], s, err_msg=f"core {c}")
        np.testing.assert_array_equal(p[c], mx, err_msg=f"core {c}")


@GRIDS
def test_reduce_to_one_gives_other_cores_the_identities(n):
    a, b, o, p = run_kernel(n, produce(n, GROUP) + reduce(n, LEAD), seed=n + 5)
    for c in range(n):
        if c % 4 == 0:
            s, mx = group_fold(a, b, list(range(c, c + 4)))
        else:
            s, mx = np.zeros(W), np.full(W, INT_MIN)
        np.testing.assert_array_equal(o[c], s, err_msg=f"core {c}")
        np.testing.assert_array_equal(p[c], mx, err_msg=f"core {c}")


@pytest.mark.parametrize("exchange", [
    produce(4, FIRST_TWO) + consume(4, LAST_TWO, SHIFT),
    produce(4, GROUP) + reduce(4, GROUP, PREFIX),
    produce(4, GROUP) + reduce(4, LEAD)])
def test_torch_back_end_gives_the_numpy_back_ends_bits(exchange):
    pytest.importorskip("torch")
    *_, o, p = run_kernel(4, exchange, seed=11)
    *_, to, tp = run_kernel(4, exchange, seed=11, backend="torch", device=TORCH_DEVICE)
    assert o.tobytes() == to.tobytes() and p.tobytes() == tp.tobytes()


def test_consume_with_two_sources_faults_at_run_time():
    """The legality pass refuses this program (R8); run unchecked, the consumer faults."""
    n = 4
    two = "affine_set<(p)[c] : (p >= 0, -p + 1 >= 0)>"
    module = ktir.parse_text(kernel_text(n, produce(n, GROUP) + consume(n, GROUP, two)), "t.mlir")
    ktir.verify(module)
    m = ktir.Machine()
    bufs = [m.hbm.allocate_from(np.zeros((n, W), dt), name=nm) for nm, dt in
            (("a", np.float32), ("b", np.int32), ("o", np.float32), ("p", np.int32))]
    with pytest.raises(ktir.EmulationFault, match="has 2 sources"):
        m.compile(module.function("k")).run([x.address for x in bufs])


def test_consume_and_reduce_cost_the_ring_transfer_of_their_results():
    """Either delivery forwards its results' bytes (2 roles x 8 x 4 bytes) over the 3 other
    cores of a 4-core ring."""
    n = 4
    params = HardwareParams()
    want = 2 * W * 4 * (n - 1) / params.ring_bytes_per_cycle
    for exchange in (consume(n, GROUP, MIRROR), reduce(n, GROUP)):
        module = ktir.parse_text(kernel_text(n, produce(n, GROUP) + exchange), "c.mlir")
        ktir.verify(module)
        assert function_latency(module.function("k"), params).comm_cycles == pytest.approx(want)
