"""The grid as a batch dimension (ktir/exec/stacked.py): one run for all cores must give exactly the
bytes, and the faults, of running the cores one after the other (``grid_batching=False``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import corpus_missing_reason, corpus_path
from test_fastpaths import bind_node
from test_machine import load, program, store, tile, view

from ktir_models import ktir
from ktir_models.ktir.exec.stacked import varying_values

RNG = np.random.default_rng(7)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint16)


def run_both(fn, inputs: list[np.ndarray], out_shape: tuple, stacked_expected: bool = True):
    """Outputs of ``fn`` with stacking and core by core (every input buffer then the output). A
    plan builds its stacked form at its second run, so every plan runs twice."""
    results = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bufs = [m.hbm.allocate_from(x, name=f"in{k}") for k, x in enumerate(inputs)]
        out = m.hbm.allocate_from(np.zeros(out_shape, np.float16), name="out")
        plan = m.compile(fn)
        for _ in range(2):
            out.write(np.zeros(out_shape, np.float16))
            plan.run([b.address for b in bufs] + [out.address])
        if batched:
            assert (plan._c.stacked is not None) == stacked_expected
            if stacked_expected:
                assert plan._c.stacked.native > 0
        results.append(out.read())
    return results


CORE_ROW = tile("t", "vx", (4, 16), (1, 16), "%core, %c0")


def softmax_rows() -> ktir.Function:
    """Core c: softmax of row c (reduce, extract, splat, exp, divide), stored to row c."""
    body = (view("vx", "x", (4, 16)) + view("vo", "o", (4, 16)) +
            "    %core = ktdp.get_compute_tile_id : index\n" + CORE_ROW +
            load("v", "t", (1, 16)) +
            "    %ninf = arith.constant -6.0e4 : f16\n"
            "    %zero = arith.constant 0.0 : f16\n"
            "    %mi = tensor.splat %ninf : tensor<1xf16>\n"
            "    %mx = linalg.reduce { arith.maximumf } ins(%v : tensor<1x16xf16>) "
            "outs(%mi : tensor<1xf16>) dimensions = [1]\n"
            "    %m = tensor.extract %mx[%c0] : tensor<1xf16>\n"
            "    %mb = tensor.splat %m : tensor<1x16xf16>\n"
            "    %sh = arith.subf %v, %mb : tensor<1x16xf16>\n"
            "    %e = math.exp %sh : tensor<1x16xf16>\n"
            "    %zi = tensor.splat %zero : tensor<1xf16>\n"
            "    %su = linalg.reduce { arith.addf } ins(%e : tensor<1x16xf16>) "
            "outs(%zi : tensor<1xf16>) dimensions = [1]\n"
            "    %s = tensor.extract %su[%c0] : tensor<1xf16>\n"
            "    %sb = tensor.splat %s : tensor<1x16xf16>\n"
            "    %w = arith.divf %e, %sb : tensor<1x16xf16>\n" +
            tile("to", "vo", (4, 16), (1, 16), "%core, %c0") + store("w", "to", (1, 16)))
    return program("%x: index, %o: index", body, grid="[4]")


def test_softmax_rows_stacked_is_bit_identical_and_correct():
    x = (RNG.standard_normal((4, 16)) * 3).astype(np.float16)
    stacked, plain = run_both(softmax_rows(), [x], (4, 16))
    np.testing.assert_array_equal(bits(stacked), bits(plain))
    e = np.exp(x.astype(np.float32) - x.max(axis=1, keepdims=True).astype(np.float32))
    np.testing.assert_allclose(stacked.astype(np.float32), e / e.sum(axis=1, keepdims=True),
                               atol=2e-3)


def scaled_store(row_expr: str, pre: str = "") -> ktir.Function:
    """Core c loads row c, adds c (as f16) and stores the row at ``row_expr``."""
    body = (view("vx", "x", (4, 16)) + view("vo", "o", (4, 16)) +
            "    %core = ktdp.get_compute_tile_id : index\n" + pre + CORE_ROW +
            load("v", "t", (1, 16)) +
            "    %ci = arith.index_cast %core : index to i32\n"
            "    %cf = arith.sitofp %ci : i32 to f16\n"
            "    %cb = tensor.splat %cf : tensor<1x16xf16>\n"
            "    %w = arith.addf %v, %cb : tensor<1x16xf16>\n" +
            tile("to", "vo", (4, 16), (1, 16), f"{row_expr}, %c0") + store("w", "to", (1, 16)))
    return program("%x: index, %o: index", body, grid="[4]")


@pytest.mark.parametrize("row_expr,pre,winners", [
    ("%core", "", {0: 0, 1: 1, 2: 2, 3: 3}),  # disjoint rows, one strided store
    ("%half", "    %c2 = arith.constant 2 : index\n    %half = arith.divui %core, %c2 : index\n",
     {0: 1, 1: 3}),  # two cores per row: the later core's bytes stay
    ("%c0", "", {0: 3}),  # every core writes row 0 (a uniform tile): the last core wins
])
def test_overlapping_stores_keep_core_order(row_expr, pre, winners):
    x = RNG.standard_normal((4, 16)).astype(np.float16)
    stacked, plain = run_both(scaled_store(row_expr, pre), [x], (4, 16))
    np.testing.assert_array_equal(bits(stacked), bits(plain))
    for row, core in winners.items():
        np.testing.assert_array_equal(stacked[row], (x[core] + np.float16(core)).astype(np.float16))


def gathered_rows(row_code: str) -> ktir.Function:
    """Core c of 6 loads the 2-row box of x [12, 16] at row %r (``row_code`` computes it from
    %core) and stores it, doubled, at rows 2c, 2c+1 of o [12, 16]."""
    body = (view("vx", "x", (12, 16)) + view("vo", "o", (12, 16)) +
            "    %core = ktdp.get_compute_tile_id : index\n"
            "    %c2 = arith.constant 2 : index\n"
            "    %c3 = arith.constant 3 : index\n" + row_code +
            tile("t", "vx", (12, 16), (2, 16), "%r, %c0") + load("v", "t", (2, 16)) +
            "    %w = arith.addf %v, %v : tensor<2x16xf16>\n"
            "    %o2 = arith.muli %core, %c2 : index\n" +
            tile("to", "vo", (12, 16), (2, 16), "%o2, %c0") + store("w", "to", (2, 16)))
    return program("%x: index, %o: index", body, grid="[6]")


@pytest.mark.parametrize("row_code,rows", [
    # grouped-query pattern: cores 3i..3i+2 share the box at row 3i (a progression of
    # progressions, one gather through a strided view)
    ("    %q = arith.divui %core, %c3 : index\n    %r = arith.muli %q, %c3 : index\n",
     [0, 0, 0, 3, 3, 3]),
    # pairs at rows 2i + j*5: progression over i and over j
    ("    %i = arith.divui %core, %c2 : index\n    %j = arith.remui %core, %c2 : index\n"
     "    %i2 = arith.muli %i, %c2 : index\n    %c5 = arith.constant 5 : index\n"
     "    %j5 = arith.muli %j, %c5 : index\n    %r = arith.addi %i2, %j5 : index\n",
     [0, 5, 2, 7, 4, 9]),
    # no pattern: (c * c) mod 7, box by box
    ("    %sq = arith.muli %core, %core : index\n    %c7 = arith.constant 7 : index\n"
     "    %r = arith.remui %sq, %c7 : index\n", [0, 1, 4, 2, 2, 4]),
])
def test_scattered_stacked_loads_are_bit_identical(row_code, rows):
    x = RNG.standard_normal((12, 16)).astype(np.float16)
    stacked, plain = run_both(gathered_rows(row_code), [x], (12, 16))
    np.testing.assert_array_equal(bits(stacked), bits(plain))
    for c, r in enumerate(rows):
        np.testing.assert_array_equal(stacked[2 * c:2 * c + 2], (x[r:r + 2] * 2).astype(np.float16))


def strided_loop(upper: int) -> ktir.Function:
    """Core c handles rows c, c+4, ... < upper of x [8, 16]: each row doubled into o, and the
    running f16 sum of its rows stored in row c of s [4, 16]."""
    rows = tile("t", "vx", (8, 16), (1, 16), "%i, %c0")
    body = (view("vx", "x", (8, 16)) + view("vo", "o", (8, 16)) + view("vs", "s", (4, 16)) +
            "    %core = ktdp.get_compute_tile_id : index\n"
            "    %c4 = arith.constant 4 : index\n"
            f"    %ub = arith.constant {upper} : index\n"
            "    %z = arith.constant dense<0.0> : tensor<1x16xf16>\n"
            "    %r = scf.for %i = %core to %ub step %c4 iter_args(%acc = %z) -> "
            "(tensor<1x16xf16>) {\n" + rows + load("v", "t", (1, 16)) +
            "    %d = arith.addf %v, %v : tensor<1x16xf16>\n" +
            tile("to", "vo", (8, 16), (1, 16), "%i, %c0") + store("d", "to", (1, 16)) +
            "    %n = arith.addf %acc, %v : tensor<1x16xf16>\n"
            "    scf.yield %n : tensor<1x16xf16>\n    }\n" +
            tile("ts", "vs", (4, 16), (1, 16), "%core, %c0") + store("r", "ts", (1, 16)))
    return program("%x: index, %o: index, %s: index", body, grid="[4]")


@pytest.mark.parametrize("upper", [8, 6])  # 8: two trips on every core; 6: two on cores 0-1 only
def test_strided_core_loop_with_carried_values(upper):
    fn = strided_loop(upper)
    x = RNG.standard_normal((8, 16)).astype(np.float16)
    outs = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bx = m.hbm.allocate_from(x, name="x")
        bo = m.hbm.allocate_from(np.zeros((8, 16), np.float16), name="o")
        bs = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="s")
        plan = m.compile(fn)
        for _ in range(2):  # the second run is stacked
            bo.write(np.zeros((8, 16), np.float16))
            bs.write(np.zeros((4, 16), np.float16))
            plan.run([bx.address, bo.address, bs.address])
        assert (plan._c.stacked is not None) == batched
        outs.append((bo.read(), bs.read()))
    (o1, s1), (o2, s2) = outs
    np.testing.assert_array_equal(bits(o1), bits(o2))
    np.testing.assert_array_equal(bits(s1), bits(s2))
    np.testing.assert_array_equal(o1[:upper], (x[:upper] + x[:upper]).astype(np.float16))
    for c in range(4):
        expect = np.zeros(16, np.float16)
        for i in range(c, upper, 4):
            expect = (expect + x[i]).astype(np.float16)
        np.testing.assert_array_equal(s1[c], expect)


def per_core_gemv() -> ktir.Function:
    """Core c: x [1, 576] (uniform) times its 256 rows of w (f16, widened once into a cached,
    stacked f32 copy), rounded to f16 into o."""
    body = (view("vx", "x", (1, 576)) + view("vw", "w", (1024, 576)) +
            view("vo", "o", (1, 1024)) +
            "    %core = ktdp.get_compute_tile_id : index\n"
            "    %c256 = arith.constant 256 : index\n"
            "    %r = arith.muli %core, %c256 : index\n" +
            tile("tx", "vx", (1, 576), (1, 576), "%c0, %c0") + load("a", "tx", (1, 576)) +
            tile("tw", "vw", (1024, 576), (256, 576), "%r, %c0") + load("b", "tw", (256, 576)) +
            "    %z = arith.constant dense<0.0> : tensor<1x256xf32>\n"
            "    %mm = linalg.matmul_transpose_b ins(%a, %b : tensor<1x576xf16>, "
            "tensor<256x576xf16>) outs(%z : tensor<1x256xf32>) -> tensor<1x256xf32>\n"
            "    %h = arith.truncf %mm : tensor<1x256xf32> to tensor<1x256xf16>\n" +
            tile("to", "vo", (1, 1024), (1, 256), "%c0, %r") + store("h", "to", (1, 256)))
    return program("%x: index, %w: index, %o: index", body, grid="[4]")


def test_stacked_matmul_with_cached_stacked_weights_is_bit_identical(native_matmul):
    x = RNG.standard_normal((1, 576)).astype(np.float16)
    w = (RNG.standard_normal((1024, 576)) * 0.1).astype(np.float16)
    outs = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched, native_matmul=native_matmul)
        bx, bw = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(w, name="w")
        bo = m.hbm.allocate((1, 1024), "float16", name="o")
        plan = m.compile(per_core_gemv())
        for _ in range(3):  # the second run is stacked; the third reads the cached f32 copy
            bo.write(np.zeros((1, 1024), np.float16))
            plan.run([bx.address, bw.address, bo.address])
        assert (plan._c.stacked is not None) == batched
        # the first (core by core) run cached each core's f32 tile; the stacked copy replaces
        # them: the weights are held once. The native kernel reads the f16 in HBM: no copies.
        assert m.f32_cache_used == (0 if native_matmul else (w.size + x.size) * 4)
        outs.append(bo.read())
    np.testing.assert_array_equal(bits(outs[0]), bits(outs[1]))
    ref = (x.astype(np.float64) @ w.astype(np.float64).T).astype(np.float16)
    np.testing.assert_allclose(outs[0].astype(np.float32), ref.astype(np.float32), rtol=2e-3,
                               atol=2e-3)


def test_fault_names_the_first_failing_core_as_core_by_core():
    """Core c reads row 2c of an 8-row view over 4 rows of memory (the last HBM region): cores 2
    and 3 read bytes no region covers; core 2 is reported. (Points outside a view's coordinate
    set are masked, not faults: tests/ktir/test_masked_access.py.)"""
    body = (view("vx", "x", (8, 16)) + view("vo", "o", (4, 16)) +
            "    %core = ktdp.get_compute_tile_id : index\n"
            "    %c2 = arith.constant 2 : index\n"
            "    %r = arith.muli %core, %c2 : index\n" +
            tile("t", "vx", (8, 16), (1, 16), "%r, %c0") + load("v", "t", (1, 16)) +
            tile("to", "vo", (4, 16), (1, 16), "%core, %c0") + store("v", "to", (1, 16)))
    fn = program("%x: index, %o: index", body, grid="[4]")
    messages = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bo = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="o")
        bx = m.hbm.allocate_from(np.ones((4, 16), np.float16), name="x")
        plan = m.compile(fn)
        for _ in range(2):  # the second run is stacked (with grid_batching)
            with pytest.raises(ktir.EmulationFault) as info:
                plan.run([bx.address, bo.address])
            assert info.value.core == 2 and info.value.op == "ktdp.load"
            messages.append(str(info.value))
        assert (plan._c.stacked is not None) == batched
    assert len(set(messages)) == 1


def test_varying_values_follow_the_core_id_only():
    fn = softmax_rows()
    vary = varying_values(fn)
    by_name = {v.name: id(v) in vary for op in fn.walk() for v in op.results}
    assert by_name["%core"] and by_name["%v"] and by_name["%w"] and by_name["%m"]
    assert not by_name["%vx"] and not by_name["%mi"] and not by_name["%zi"]


def test_a_single_core_is_not_stacked():
    fn = softmax_rows()
    fn.grid = (1, 1, 1)
    m = ktir.Machine()
    bx = m.hbm.allocate_from(np.ones((4, 16), np.float16), name="x")
    bo = m.hbm.allocate((4, 16), "float16", name="o")
    plan = m.compile(fn)
    for _ in range(2):
        plan.run([bx.address, bo.address])
    assert plan._c.stacked is None


# ----------------------------------------------------------------------------- corpus nodes

def _node_outputs(directory, node, tensors, inputs, batched, native):
    fn = ktir.load_module(directory / node["mlir"]).function(node["fn"])
    machine = ktir.Machine(grid_batching=batched, native_matmul=native)
    addresses, outputs = bind_node(machine, node, tensors, inputs)
    plan = machine.compile(fn)
    plan.run(addresses)
    plan.run(addresses)  # the second run takes the cached placements and f32 copies
    return plan, {name: buf.read() for name, buf in outputs.items()}


# scratchy smollm2-135m-prefill: node 6 is the 9-core attention (32 unrolled rows per head),
# node 10 a 32-core GEMM (its K-loop runs in its batched form inside the stacked run)
@pytest.mark.parametrize("index", [6, 10])
def test_corpus_prefill_nodes_stacked_are_bit_identical(index, native_matmul):
    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    directory = corpus_path() / "scratchy" / "smollm2-135m-prefill"
    manifest = json.loads((directory / "manifest.json").read_text())
    tensors = {t["id"]: (t["rows"], t["cols"]) for t in manifest["tensors"]}
    node = manifest["nodes"][index]
    inputs = {a["tensor"]: (RNG.standard_normal(tensors[a["tensor"]]) * 0.5).astype(np.float16)
              for a in node["args"] if not a["is_output"]}
    plan, fast = _node_outputs(directory, node, tensors, inputs, True, native_matmul)
    # node 6 on the native kernel runs rerolled (its rows side by side on all cores: reroll.py)
    batched = plan._c.rerolled.plan if plan._c.rerolled is not None else plan._c.stacked
    assert batched is not None and batched.native > 0
    _, slow = _node_outputs(directory, node, tensors, inputs, False, native_matmul)
    assert fast.keys() == slow.keys() and fast
    for name in fast:
        assert np.isfinite(slow[name]).all()
        np.testing.assert_array_equal(bits(fast[name]), bits(slow[name]))



def dealt_gemm(chunks: int, tail: bool) -> ktir.Function:
    """y [2, 16*chunks (+8)] = x [2, 64] @ w^T, w [16*chunks (+8), 64]: chunks of 16 columns
    dealt round-robin to 4 cores (``for j = core to chunks step 4``: uneven counts unless 4
    divides ``chunks``), each a K-loop of 4 blocks of 16 into an f32 accumulator, and a tail
    chunk of 8 columns on core 0 only (``for j = core to 1 step 4``), as the emitter deals an
    lm_head whose columns do not split evenly."""
    n = 16 * chunks + (8 if tail else 0)

    def chunk(size: int, offset: int, count: int) -> str:
        return (
            f"    %cnt{size} = arith.constant {count} : index\n"
            f"    scf.for %j{size} = %core to %cnt{size} step %c4 {{\n"
            f"    %cs{size} = arith.constant {size} : index\n"
            f"    %co{size} = arith.constant {offset} : index\n"
            f"    %jn{size} = arith.muli %j{size}, %cs{size} : index\n"
            f"    %n{size} = arith.addi %jn{size}, %co{size} : index\n"
            f"    %z{size} = arith.constant dense<0.0> : tensor<2x{size}xf32>\n"
            f"    %acc{size} = scf.for %k{size} = %c0 to %c64 step %c16 iter_args(%a{size} = "
            f"%z{size}) -> (tensor<2x{size}xf32>) {{\n" +
            tile(f"tx{size}", "vx", (2, 64), (2, 16), f"%c0, %k{size}") +
            load(f"x{size}", f"tx{size}", (2, 16)) +
            tile(f"tw{size}", "vw", (n, 64), (size, 16), f"%n{size}, %k{size}") +
            load(f"w{size}", f"tw{size}", (size, 16)) +
            f"    %m{size} = linalg.matmul_transpose_b ins(%x{size}, %w{size} : tensor<2x16xf16>, "
            f"tensor<{size}x16xf16>) outs(%a{size} : tensor<2x{size}xf32>) -> tensor<2x{size}xf32>\n"
            f"    scf.yield %m{size} : tensor<2x{size}xf32>\n    }}\n"
            f"    %h{size} = arith.truncf %acc{size} : tensor<2x{size}xf32> to tensor<2x{size}xf16>\n" +
            tile(f"to{size}", "vo", (2, n), (2, size), f"%c0, %n{size}") +
            store(f"h{size}", f"to{size}", (2, size)) + "    }\n")

    body = (view("vx", "x", (2, 64)) + view("vw", "w", (n, 64)) + view("vo", "o", (2, n)) +
            "    %core = ktdp.get_compute_tile_id : index\n"
            "    %c4 = arith.constant 4 : index\n    %c16 = arith.constant 16 : index\n"
            "    %c64 = arith.constant 64 : index\n" + chunk(16, 0, chunks) +
            (chunk(8, 16 * chunks, 1) if tail else ""))
    return program("%x: index, %w: index, %o: index", body, grid="[4]")


@pytest.mark.parametrize("chunks,tail", [(6, True), (7, False), (8, True), (2, False)])
def test_uneven_round_robin_loops_run_stacked_bit_identical(chunks, tail, monkeypatch):
    """Trip counts that differ by core: the trips every core runs run stacked, the later ones
    over the cores that have them (one batched K-loop call per trip), recorded on the tape and
    replayed; the bytes are those of the cores run one after the other."""
    from ktir_models.ktir.backends import seqmm

    if not seqmm.available():
        pytest.skip("the native kernel is not built here")
    n = 16 * chunks + (8 if tail else 0)
    x = RNG.standard_normal((2, 64)).astype(np.float16)
    w = (RNG.standard_normal((n, 64)) * 0.2).astype(np.float16)
    calls = []
    run = seqmm._run
    monkeypatch.setattr(seqmm, "_run", lambda *a: calls.append(1) or run(*a))
    outs = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched, native_matmul=True)
        bx, bw = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(w, name="w")
        bo = m.hbm.allocate((2, n), "float16", name="o")
        plan = m.compile(dealt_gemm(chunks, tail))
        for r in range(5):  # core by core, stacked, recorded, replayed twice
            bo.write(np.zeros((2, n), np.float16))
            calls.clear()
            plan.run([bx.address, bw.address, bo.address])
            outs.append(bo.read())
        assert (plan._c.stacked is not None) == batched
        if batched:
            assert plan.replays >= 2
            # per trip one call for all the cores running it (not one per core and chunk)
            assert len(calls) == -(-chunks // 4) + int(tail), calls
    for o in outs[1:]:
        np.testing.assert_array_equal(bits(o), bits(outs[0]))
    ref = (x.astype(np.float64) @ w.astype(np.float64).T)
    np.testing.assert_allclose(outs[0].astype(np.float64), ref, rtol=3e-3, atol=3e-3)


def test_uneven_loop_fault_in_a_later_trip_names_the_core():
    """Core 1's second chunk (chunk 5 of 6) reads past w's region: the core-by-core run and the
    split stacked run both report core 1 at the same op (the K-loop, run as one step)."""
    fn = dealt_gemm(6, False)
    x = np.ones((2, 64), np.float16)
    w = np.ones((5 * 16, 64), np.float16)  # one chunk short: chunk 5 is outside every region
    messages = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bo = m.hbm.allocate((2, 96), "float16", name="o")
        bx, bw = m.hbm.allocate_from(x, name="x"), m.hbm.allocate_from(w, name="w")
        plan = m.compile(fn)
        for _ in range(3):
            with pytest.raises(ktir.EmulationFault) as info:
                plan.run([bx.address, bw.address, bo.address])
            assert info.value.core == 1 and "coordinate (80, 0)" in str(info.value)
            messages.append(str(info.value))
    assert len(set(messages)) == 1
