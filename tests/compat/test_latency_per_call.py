"""Latency per call: the cost walker sees the call's scalar arguments, keeps every core's costs
and traces one event per executed op; the compat report is filled from it.

The kernel: ktir-examples' triton-ktir/matmul_fwd_ktir.mlir, a 64x2048 @ 2048x8192 f16 GEMM on a
2x16 grid whose K loop runs ``scf.for %off_k = 0 to %K step %BLOCK_SIZE_K`` (both arguments).
Per core and K step (hand-computed): A tile 32x128 f16 = 32 rows of 256 B = 64 sticks, B tile
128x512 f16 = 128 rows of 1 KiB = 1024 sticks; a 32x128 @ 128x512 matmul = 2*32*512*128 FLOP at
1024 FLOP/cycle = 4096 cycles; a 32x512 addf = 256 cycles. After the loop the 32x512 C tile is
stored (256 sticks). 32 active cores share 128 B/cycle: 4 B/cycle each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.compat import CoreLatencyCounters, ExecutionModel, HardwareConfig, LatencyReport
from ktir_models.compat import KTIRInterpreter

MATMUL = "triton-ktir/matmul_fwd_ktir.mlir"
STICK = 128


def per_core_hbm_bytes(trips: int) -> int:
    return (trips * (64 + 1024) + 256) * STICK


@pytest.fixture(scope="module")
def matmul_fn(corpus_dir: Path):
    return ktir.load_module(corpus_dir / "ktir-examples" / MATMUL).only_function


def executed_ops(fn, trips: int) -> int:
    """Ops one core executes, counted from the IR: every top-level op once, the loop body's ops
    once per trip (the body has no nested regions)."""
    (loop,) = [op for op in fn.body.block.ops if op.name == "scf.for"]
    body = loop.regions[0].block.ops
    assert not any(op.regions for op in body)
    return len(fn.body.block.ops) + trips * len(body)


@pytest.mark.parametrize("k", [2048, 1024])
def test_the_walker_counts_k_over_bk_trips(matmul_fn, k: int) -> None:
    trips = k // 128
    node = ktir.estimate_latency(matmul_fn, {"K": k, "BLOCK_SIZE_K": 128, "BLOCK_SIZE_M": 32,
                                             "BLOCK_SIZE_N": 512})
    assert len(node.cores) == 32
    for core in node.cores:
        assert core.cycles["matmul"] == trips * 4096
        assert core.cycles["vector"] == trips * 256
        assert core.hbm_bytes == per_core_hbm_bytes(trips)
        assert core.cycles["hbm"] == per_core_hbm_bytes(trips) / 4
    assert not any("bounds unknown" in n for n in node.notes)
    # without the call's arguments the bound is unknown: one trip, and a note says so
    static = ktir.estimate_latency(matmul_fn)
    assert static.cores[0].cycles["matmul"] == 4096
    assert any("scf.for bounds unknown before running; one trip assumed" in n
               for n in static.notes)


def test_per_core_figures_sum_to_the_chip_figures(matmul_fn) -> None:
    node = ktir.estimate_latency(matmul_fn, {"K": 2048, "BLOCK_SIZE_K": 128})
    assert node.hbm_bytes == sum(c.hbm_bytes for c in node.cores) == 32 * per_core_hbm_bytes(16)
    assert node.flops == sum(c.flops for c in node.cores)
    assert node.cycles == max(c.total("serial") for c in node.cores)


def test_one_trace_event_per_executed_op(matmul_fn) -> None:
    node = ktir.estimate_latency(matmul_fn, {"K": 2048, "BLOCK_SIZE_K": 128}, trace=True)
    for core in node.cores:
        events = core.events
        assert len(events) == executed_ops(matmul_fn, 16)
        assert all(e.executions == 1 for e in events)
        assert sum(e.op == "linalg.matmul" for e in events) == 16
        # zero-cost ops are there too, and the events add up to the core's cycles
        assert any(e.op == "arith.constant" and e.total == 0 for e in events)
        assert sum(e.total for e in events) == pytest.approx(core.total("serial"))
    assert node.cores[0].events[0].op == "ktdp.get_compute_tile_id"
    assert ktir.estimate_latency(matmul_fn, {"K": 2048, "BLOCK_SIZE_K": 128}).cores[0].events \
        is None


def test_the_compat_report_of_a_call(corpus_dir: Path) -> None:
    """The reference's report, through execute_function with K = 1024 (8 trips)."""
    interp = KTIRInterpreter(latency_config=HardwareConfig(), trace_latency=True)
    interp.load(str(corpus_dir / "ktir-examples" / MATMUL))
    r = np.random.default_rng(0)
    a = r.standard_normal((64, 2048)).astype(np.float16)
    b = (r.standard_normal((2048, 8192)) / 32).astype(np.float16)
    out = interp.execute_function("matmul_kernel", a_ptr=a, b_ptr=b,
                                  c_ptr=np.zeros((64, 8192), np.float16), K=1024,
                                  BLOCK_SIZE_M=32, BLOCK_SIZE_N=512, BLOCK_SIZE_K=128)["c_ptr"]
    ref = a[:, :1024].astype(np.float32) @ b[:1024].astype(np.float32)  # K = 1024: half of A/B
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=0.05, rtol=0.02)
    report = interp.get_latency_report()
    trips = 8
    assert sorted(report.counters) == list(range(32))
    for c in report.counters.values():
        assert c.cycles_by_category["compute_matmul"] == trips * 4096
        assert c.flops_by_category["compute_matmul"] == trips * 2 * 32 * 512 * 128
        assert c.dram_bytes == per_core_hbm_bytes(trips)
        assert c.memory_cycles == per_core_hbm_bytes(trips) / 4
        assert sum(t.op_type == "linalg.matmul" for t in c.trace) == trips
        assert [t.category for t in c.trace if t.op_type == "linalg.matmul"] == \
            ["compute_matmul"] * trips
    chip = report.chip_roofline()
    total_bytes = sum(c.dram_bytes for c in report.counters.values())
    assert total_bytes == 32 * per_core_hbm_bytes(trips)
    systolic_flops = sum(c.flops_by_category["compute_matmul"] for c in report.counters.values())
    assert chip["AI"] == pytest.approx(systolic_flops / total_bytes)
    assert chip["dominant_unit"] == "systolic" and chip["cores_active"] == 32
    assert report.kernel_cycles == max(c.total_cycles for c in report.counters.values())
    assert "Roofline: CHIP-LEVEL" in str(report) and "Roofline: PER-CORE" in str(report)


def test_a_user_built_report() -> None:
    """LatencyReport is constructible from counters; the pipeline decides how parts combine."""
    cores = {0: CoreLatencyCounters(), 1: CoreLatencyCounters()}
    cores[0].record("memory", 300.0, "ktdp.load", nbytes=1200)
    cores[0].record("compute_float", 100.0, "arith.addf", flops=6400)
    cores[1].record("compute_matmul", 250.0, "linalg.matmul", flops=256000)
    cores[1].record("comm", 100.0, "ktdp.inter_tile_reduce", nbytes=6400)
    config = HardwareConfig(num_cores=2)
    serial = LatencyReport(config, cores)
    assert serial.kernel_cycles == 400 and serial.bottleneck == "memory"
    assert [row["total_cycles"] for row in serial.per_core_summary()] == [400, 350]
    three_way = LatencyReport(config, cores, ExecutionModel(pipeline="overlapped_3way"))
    assert three_way.kernel_cycles == 300  # core 0: max(100, 300, 0)
    overlapped = LatencyReport(config, cores, ExecutionModel(pipeline="overlapped"))
    assert overlapped.kernel_cycles == 300  # core 0: max(100, 300 + 0); core 1: max(250, 100)
    rf = serial.roofline()
    assert rf["dominant_unit"] == rf["core_dominant_unit"] == "systolic"  # 250 > 100 cycles
    assert rf["AI"] == pytest.approx(256000 / 1200)  # systolic FLOPs over HBM bytes, chip-wide
    assert cores[0].trace is None and cores[1].comm_bytes == 6400
    with pytest.raises(ValueError, match="pipeline"):
        ExecutionModel(pipeline="parallel")
    with pytest.raises(NotImplementedError):
        ExecutionModel(bw_sharing="static")
    assert HardwareConfig().to_params().systolic_flops_per_cycle == 1024


def test_every_example_kernel_is_costed(corpus_dir: Path) -> None:
    """The walker runs on all 33 kernels; paged_attention (an i32 constant written in hex, a
    loop bounded by its arguments) counts its 8 KV tiles when given the call's arguments."""
    root = corpus_dir / "ktir-examples"
    files = sorted(p for p in root.rglob("*") if p.suffix in (".mlir", ".ktir"))
    assert len(files) == 33
    for path in files:
        fn = ktir.load_module(path, reshaping_reduce=True).only_function
        assert ktir.estimate_latency(fn).cycles >= 0, path
    fn = ktir.load_module(root / "triton-ktir/paged_attention.mlir").only_function
    args = dict(zip(fn.arg_names[5:], (0, 0, 8, 120, 0.088)))
    node = ktir.estimate_latency(fn, args, trace=True)
    assert not node.notes
    static = ktir.estimate_latency(fn)
    assert any("bounds unknown" in n for n in static.notes)
    matmuls = [e for e in node.cores[0].events if e.op.startswith("linalg.matmul")]
    static_matmuls = [o for o in static.cores[0].ops.values() if o.op.startswith("linalg.matmul")]
    assert len(matmuls) == 8 * sum(o.executions for o in static_matmuls)


def test_a_program_of_calls_costs_each_with_its_arguments(matmul_fn) -> None:
    """model_latency takes (label, fn, args) items: the same kernel at two K values."""
    from ktir_models.ktir.latency import model_latency

    model = model_latency([("k2048", matmul_fn, {"K": 2048, "BLOCK_SIZE_K": 128}),
                           ("k1024", matmul_fn, {"K": 1024, "BLOCK_SIZE_K": 128}),
                           ("again", matmul_fn, {"K": 2048, "BLOCK_SIZE_K": 128}),
                           ("static", matmul_fn)])
    cycles = [n.cycles for n in model.nodes]
    per_trip = (64 + 1024) * STICK / 4 + 4096 + 256
    store = 256 * STICK / 4
    assert cycles == [16 * per_trip + store, 8 * per_trip + store, 16 * per_trip + store,
                      per_trip + store]
    assert model.cycles == sum(cycles)
