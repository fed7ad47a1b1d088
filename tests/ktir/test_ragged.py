"""Ragged repeats (ktir/exec/reroll.py, ktir/exec/ragged_steps.py): unrolled rows whose tiles grow with the
row, run side by side on padded values, bit-identical to the plain plan; declined where padding
could change a result."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scratchy_program
from test_machine import load, program, store, tile, view

from ktir_models import ktir
from ktir_models.ktir.backends import f16_convert
from ktir_models.ktir.exec.reroll import find_repeats

RNG = np.random.default_rng(5)
D = 16  # head dim


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint16)


def ty(*shape) -> str:
    return "x".join(map(str, shape)) + "xf16"


def row(r: int, R: int, cores: int, keys: str = "causal", ragged_store: bool = False) -> str:
    """Row r of causal attention for the core's head: scores of q[r] against keys 0..r
    (``keys="tail"``: keys r..R-1), softmax, weighted sum of the same rows of v, stored to o[r]."""
    n = r + 1 if keys == "causal" else R - r
    first = "%c0" if keys == "causal" else f"%q{r}"
    W = cores * D
    text = (f"    %q{r} = arith.constant {r} : index\n" +
            tile(f"tq{r}", "vq", (R, W), (1, D), f"%q{r}, %col") + load(f"x{r}", f"tq{r}", (1, D)) +
            tile(f"tk{r}", "vk", (R, W), (n, D), f"{first}, %col") + load(f"k{r}", f"tk{r}", (n, D)) +
            f"    %ke{r} = tensor.empty() : tensor<{ty(D, n)}>\n"
            f"    %kt{r} = linalg.transpose ins(%k{r} : tensor<{ty(n, D)}>) "
            f"outs(%ke{r} : tensor<{ty(D, n)}>) permutation = [1, 0]\n"
            f"    %si{r} = arith.constant dense<0.0> : tensor<{ty(1, n)}>\n"
            f"    %s{r} = linalg.matmul ins(%x{r}, %kt{r} : tensor<{ty(1, D)}>, tensor<{ty(D, n)}>) "
            f"outs(%si{r} : tensor<{ty(1, n)}>) -> tensor<{ty(1, n)}>\n"
            f"    %sp{r} = tensor.splat %scale : tensor<{ty(1, n)}>\n"
            f"    %ss{r} = arith.mulf %s{r}, %sp{r} : tensor<{ty(1, n)}>\n"
            f"    %mi{r} = tensor.splat %ninf : tensor<1xf16>\n"
            f"    %mx{r} = linalg.reduce {{ arith.maximumf }} ins(%ss{r} : tensor<{ty(1, n)}>) "
            f"outs(%mi{r} : tensor<1xf16>) dimensions = [1]\n"
            f"    %m{r} = tensor.extract %mx{r}[%c0] : tensor<1xf16>\n"
            f"    %mb{r} = tensor.splat %m{r} : tensor<{ty(1, n)}>\n"
            f"    %sh{r} = arith.subf %ss{r}, %mb{r} : tensor<{ty(1, n)}>\n"
            f"    %e{r} = math.exp %sh{r} : tensor<{ty(1, n)}>\n"
            f"    %zi{r} = tensor.splat %zero : tensor<1xf16>\n"
            f"    %su{r} = linalg.reduce {{ arith.addf }} ins(%e{r} : tensor<{ty(1, n)}>) "
            f"outs(%zi{r} : tensor<1xf16>) dimensions = [1]\n"
            f"    %sm{r} = tensor.extract %su{r}[%c0] : tensor<1xf16>\n"
            f"    %sb{r} = tensor.splat %sm{r} : tensor<{ty(1, n)}>\n"
            f"    %w{r} = arith.divf %e{r}, %sb{r} : tensor<{ty(1, n)}>\n" +
            tile(f"tv{r}", "vv", (R, W), (n, D), f"{first}, %col") + load(f"v{r}", f"tv{r}", (n, D)) +
            f"    %oi{r} = arith.constant dense<0.0> : tensor<{ty(1, D)}>\n"
            f"    %ov{r} = linalg.matmul ins(%w{r}, %v{r} : tensor<{ty(1, n)}>, tensor<{ty(n, D)}>) "
            f"outs(%oi{r} : tensor<{ty(1, D)}>) -> tensor<{ty(1, D)}>\n" +
            tile(f"to{r}", "vo", (R, W), (1, D), f"%q{r}, %col") + store(f"ov{r}", f"to{r}", (1, D)))
    if ragged_store:  # the row's weights, a ragged tile, stored to row r of %p
        text += tile(f"tp{r}", "vp", (R, R), (1, n), f"%q{r}, %c0") + store(f"w{r}", f"tp{r}", (1, n))
    return text


def attention(R: int, cores: int, **kw) -> ktir.Function:
    W = cores * D
    prefix = (view("vq", "q", (R, W)) + view("vk", "k", (R, W)) + view("vv", "v", (R, W)) +
              view("vo", "o", (R, W)) + view("vp", "p", (R, R)) +
              "    %scale = arith.constant 0.25 : f16\n"
              "    %ninf = arith.constant -1.0e38 : f16\n"
              "    %zero = arith.constant 0.0 : f16\n"
              "    %pid = ktdp.get_compute_tile_id : index\n"
              f"    %dc = arith.constant {D} : index\n"
              "    %col = arith.muli %pid, %dc : index\n")
    return program("%q: index, %k: index, %v: index, %o: index, %p: index",
                   prefix + "".join(row(r, R, cores, **kw) for r in range(R)),
                   grid=f"[{cores}, 1]")


def run_both(fn, inputs: dict, R: int, cores: int, native_matmul: bool = True, runs: int = 4):
    """Outputs (o, p) per run with fresh inputs, batched (rerolled where it can) and core after
    core without tapes; and the batched plan."""
    machines = [ktir.Machine(native_matmul=native_matmul),
                ktir.Machine(grid_batching=False, tapes=False, native_matmul=native_matmul)]
    bound = []
    for m in machines:
        bufs = {name: m.hbm.allocate_from(a.copy(), name=name) for name, a in inputs.items()}
        bufs["o"] = m.hbm.allocate((R, cores * D), "float16", name="o")
        bufs["p"] = m.hbm.allocate((R, R), "float16", name="p")
        bound.append((m.compile(fn), bufs))
    out = []
    for k in range(runs):
        fresh = {name: (a if k == 0 else np.roll(a, k, axis=1)) for name, a in inputs.items()}
        per = []
        for plan, bufs in bound:
            for name, a in fresh.items():
                bufs[name].write(a)
            bufs["o"].write(np.zeros((R, cores * D), np.float16))
            bufs["p"].write(np.zeros((R, R), np.float16))
            plan.run([bufs[n].address for n in ("q", "k", "v", "o", "p")])
            per.append((bufs["o"].read(), bufs["p"].read()))
        out.append(per)
    return out, bound[0][0]


def qkv(R: int, cores: int) -> dict:
    return {n: (RNG.standard_normal((R, cores * D)) * 0.7).astype(np.float16) for n in "qkv"}


def reference(x: dict, R: int, cores: int) -> np.ndarray:
    """Causal attention per head in float64 (an independent check of what the program computes)."""
    q, k, v = (x[n].astype(np.float64) for n in "qkv")
    out = np.zeros((R, cores * D))
    for h in range(cores):
        cols = slice(h * D, (h + 1) * D)
        for r in range(R):
            s = q[r, cols] @ k[:r + 1, cols].T * 0.25
            w = np.exp(s - s.max())
            out[r, cols] = (w / w.sum()) @ v[:r + 1, cols]
    return out


def assert_same(runs):
    for k, ((o1, p1), (o2, p2)) in enumerate(runs):
        np.testing.assert_array_equal(bits(o1), bits(o2), err_msg=f"run {k}")
        np.testing.assert_array_equal(bits(p1), bits(p2), err_msg=f"run {k}")


@pytest.mark.parametrize("cores", [1, 3])
def test_ragged_rows_are_rerolled_and_bit_identical(cores):
    R = 12  # sums over up to 12 entries: numpy's f32 order changes with the length past 8
    fn = attention(R, cores)
    rep = find_repeats(fn)
    assert rep is not None and rep.count == R and rep.template == R - 1 and rep.ragged
    x = qkv(R, cores)
    runs, plan = run_both(fn, x, R, cores)
    assert plan._c.rerolled is not None and plan.replays >= 1
    assert_same(runs)
    np.testing.assert_allclose(runs[0][0][0].astype(np.float64), reference(x, R, cores),
                               atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("cores", [1, 2])
def test_inf_and_nan_beyond_a_rows_keys_stay_out_of_its_result(cores):
    """The last key and value rows hold inf/NaN: only the last row reads them; every other row's
    padded matmuls and reductions must not let them in (0 * inf would be NaN)."""
    R = 10
    fn = attention(R, cores)
    x = qkv(R, cores)
    x["k"][R - 1, :] = np.nan
    x["v"][R - 1, 1] = np.inf
    x["v"][R - 1, 2] = -np.inf
    runs, plan = run_both(fn, x, R, cores)
    assert plan._c.rerolled is not None
    assert_same(runs)
    o = runs[0][0][0]
    assert np.isfinite(o[:R - 1].astype(np.float32)).all()
    assert np.isnan(o[R - 1].astype(np.float32)).any()


def test_a_padded_tile_past_its_view_runs_plainly():
    """Row r reads keys r..R-1: the template (row 0) box placed at row r runs past the view, so the
    side-by-side run faults and the plain run gives the results."""
    R, cores = 8, 2
    fn = attention(R, cores, keys="tail")
    assert find_repeats(fn).template == 0
    runs, plan = run_both(fn, qkv(R, cores), R, cores)
    assert plan._c.rerolled is not None
    assert_same(runs)


def test_a_store_of_a_ragged_tile_is_not_rerolled():
    R, cores = 6, 1
    fn = attention(R, cores, ragged_store=True)
    assert find_repeats(fn) is not None
    runs, plan = run_both(fn, qkv(R, cores), R, cores)
    assert plan._c.rerolled is None
    assert_same(runs)
    assert np.count_nonzero(runs[0][0][1]) > 0


def test_a_ragged_k_off_the_native_kernel_is_not_rerolled():
    """BLAS sums in its own order, so padding k with zeros could change the last bits."""
    R, cores = 6, 2
    fn = attention(R, cores)
    runs, plan = run_both(fn, qkv(R, cores), R, cores, native_matmul=False)
    assert plan._c.rerolled is None
    assert_same(runs)


def test_the_scratchy_prefill_attention_node_is_rerolled(native_matmul):
    """The 9-head, 32-row attention of the scratchy prefill program: rerolled on the native
    kernel (bit-identity on fresh inputs: test_tape.py's corpus nodes)."""
    directory, nodes, tensors = scratchy_program("smollm2-135m-prefill")
    node = nodes[6]
    fn = ktir.load_module(directory / node["mlir"]).function(node["fn"])
    rep = find_repeats(fn)
    assert rep is not None and rep.count == 32 and rep.ragged
    m = ktir.Machine(native_matmul=native_matmul)
    addresses = {a["name"]: m.hbm.allocate_from(np.zeros(tensors[a["tensor"]], np.float16),
                                                 name=a["name"]).address for a in node["args"]}
    plan = m.compile(fn)
    for _ in range(2):
        plan.run(addresses)
    assert (plan._c.rerolled is not None) == native_matmul


@pytest.mark.parametrize("R", [20, 64])
def test_ragged_sums_keep_each_rows_own_summation_order(R, monkeypatch):
    """Row r sums x[r, 0..r] in f32 and rounds to f16. The data are chosen so that the order
    decides the last bit: 1 + 2^-11 is a tie in f16, and whether the 2^-24 terms reach it before
    the tie is rounded depends on numpy's order for that length (sequential below 8 terms,
    pairwise above); summing zero-padded rows would round some rows differently. At R = 64 the
    stacked rows are big enough to be widened once natively (reduce.widened_rows) before the
    per-row f32 sums."""
    from ktir_models.ktir.dialects.linalg import reduce as reduce_mod

    widened = []
    real = reduce_mod.widened_rows

    def spy(x, dims, acc_t):
        out = real(x, dims, acc_t)
        widened.append(out is not None)
        return out

    monkeypatch.setattr(reduce_mod, "widened_rows", spy)
    body = view("vx", "x", (R, R)) + (
        "    %zero = arith.constant 0.0 : f16\n"
        f"    %ov = ktdp.construct_memory_view %o, sizes: [{R}], strides: [1] {{coordinate_set = "
        f"affine_set<(d0) : (d0 >= 0, -d0 + {R - 1} >= 0)>, "
        f"memory_space = #ktdp.memory_space<global>}} : memref<{R}xf16>\n")
    for r in range(R):
        n = r + 1
        body += (f"    %q{r} = arith.constant {r} : index\n" +
                 tile(f"t{r}", "vx", (R, R), (1, n), f"%q{r}, %c0") + load(f"x{r}", f"t{r}", (1, n)) +
                 f"    %zi{r} = tensor.splat %zero : tensor<1xf16>\n"
                 f"    %s{r} = linalg.reduce {{ arith.addf }} ins(%x{r} : tensor<{ty(1, n)}>) "
                 f"outs(%zi{r} : tensor<1xf16>) dimensions = [1]\n"
                 f"    %to{r} = ktdp.construct_access_tile %ov[%q{r}] {{access_tile_set = "
                 "affine_set<(d0) : (d0 >= 0, -d0 >= 0)>, access_tile_order = "
                 f"affine_map<(d0) -> (d0)>}} : memref<{R}xf16> -> !ktdp.access_tile<1xindex>\n"
                 f"    ktdp.store %s{r}, %to{r} : tensor<1xf16>, !ktdp.access_tile<1xindex>\n")
    fn = program("%x: index, %o: index", body)
    assert find_repeats(fn).ragged
    x = np.full((R, R), 2.0 ** -24, np.float16)
    x[:, 1] = 1.0
    x[:, 2] = 2.0 ** -11
    outs, plans = [], []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bx = m.hbm.allocate_from(x, name="x")
        bo = m.hbm.allocate((R,), "float16", name="o")
        plans.append(m.compile(fn))
        for _ in range(3):
            plans[-1].run([bx.address, bo.address])
        outs.append(bo.read())
    assert plans[0]._c.rerolled is not None
    np.testing.assert_array_equal(bits(outs[0]), bits(outs[1]))
    padded = np.zeros((R, R), np.float32)
    for r in range(R):
        padded[r, :r + 1] = x[r, :r + 1]
    zero_padded = padded.sum(axis=1, dtype=np.float32).astype(np.float16)
    assert (bits(zero_padded) != bits(outs[1])).any(), "the data no longer tell the orders apart"
    start = f16_convert.native_from()  # where the native widening takes a conversion
    assert any(widened) == (start is not None and R * R >= start)


def test_a_grid_whose_output_aliases_an_input_runs_stacked():
    """Rows store o[r] into the buffer q is read from: the rerolled run needs its loads and
    stores apart, so that run builds and takes the stacked form, with the plain plan's bytes."""
    R, cores = 6, 2
    fn = attention(R, cores)
    x = qkv(R, cores)
    results, plans = [], []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bufs = {n: m.hbm.allocate_from(a.copy(), name=n) for n, a in x.items()}
        bp = m.hbm.allocate((R, R), "float16", name="p")
        plan = m.compile(fn)
        for _ in range(3):
            bufs["q"].write(x["q"])
            plan.run([bufs["q"].address, bufs["k"].address, bufs["v"].address,
                      bufs["q"].address, bp.address])
        results.append(bufs["q"].read())
        plans.append(plan)
    assert plans[0]._c.rerolled is not None and plans[0]._c.stacked is not None
    np.testing.assert_array_equal(bits(results[0]), bits(results[1]))


def test_a_fault_in_a_rerolled_grid_is_located_as_in_the_plain_run():
    """The value buffer was never written: the fault names the same op and core either way."""
    R, cores = 5, 3
    fn = attention(R, cores)
    x = qkv(R, cores)
    messages = []
    for batched in (True, False):
        m = ktir.Machine(grid_batching=batched)
        bufs = {n: m.hbm.allocate_from(x[n].copy(), name=n) for n in "qk"}
        bufs["v"] = m.hbm.allocate((R, cores * D), "float16", name="v")
        bufs["o"] = m.hbm.allocate((R, cores * D), "float16", name="o")
        bufs["p"] = m.hbm.allocate((R, R), "float16", name="p")
        plan = m.compile(fn)
        for _ in range(3):  # plain, then rerolled (which fails and hands over), then again
            with pytest.raises(ktir.EmulationFault) as info:
                plan.run([bufs[n].address for n in ("q", "k", "v", "o", "p")])
            messages.append(str(info.value))
        assert (plan._c.rerolled is not None) == batched
    assert len(set(messages)) == 1 and "never-written" in messages[0], messages
