"""The latency model: a hand-computed GEMM node, small kernels with known costs, parameters, the
whole scratchy smollm2-135m decode report and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.latency import HardwareParams, function_latency

DECODE = "scratchy/smollm2-135m"


def test_q_projection_node_matches_the_hand_computed_figure(corpus_dir):
    """node1 (layer 0 q_proj, grid 1x1): 9 K-blocks of 64; per block it loads x[1, 64]
    (128 B = 1 stick) and W[576 rows, 64 cols] (each 128-byte row segment is stick aligned: 576
    sticks), runs a 1x64 @ 64x576 matmul and a 576-wide addf; then stores 576 f16 (9 sticks).

    HBM: one active core gets the chip's 128 B/cycle -> (9 * (1 + 576) + 9) sticks = 5202 cycles.
    matmul: 9 * 2*1*576*64 / 1024 = 648 cycles. addf: 9 * 576/64 = 81 cycles.
    serial total = 5202 + 648 + 81 = 5931 cycles = 5.931 us at 1 GHz; memory-bound.
    """
    fn = ktir.load_module(corpus_dir / DECODE / "node1.mlir").only_function
    r = function_latency(fn)
    assert r.category_cycles["hbm"] == 5202
    assert r.category_cycles["matmul"] == 648
    assert r.category_cycles["vector"] == 81
    assert r.cycles == 5931 and r.time_us == pytest.approx(5.931)
    assert r.hbm_bytes == (9 * 577 + 9) * 128
    assert r.bottleneck == "memory" and r.dominant == "hbm" and r.roofline_bound == "memory"
    assert r.top_ops[0].op == "ktdp.load" and r.top_ops[0].executions == 9
    # LX peak: the emulator's own accounting, the same figure its run reports as high-water mark
    machine = ktir.Machine()
    bufs = {n: machine.hbm.allocate_from(np.zeros(s, np.float16), name=n).address
            for n, s in (("t335_ptr", (1, 576)), ("t2_ptr", (576, 576)), ("t336_ptr", (1, 576)))}
    assert machine.compile(fn).run(bufs).lx_high_water == [r.lx_peak_bytes]
    # overlapped pipeline: the larger of memory and compute
    assert function_latency(fn, HardwareParams(pipeline="overlapped")).cycles == 5202
    # twice the bandwidth halves the memory part only
    fast = function_latency(fn, HardwareParams(hbm_tb_per_s=0.256))
    assert fast.category_cycles["hbm"] == 2601 and fast.category_cycles["matmul"] == 648


VECTOR_ADD = """module {
  func.func @vadd(%a_ptr: index, %b_ptr: index, %c_ptr: index) attributes {grid = [32, 1]} {
    %t = ktdp.get_compute_tile_id : index
    %n = arith.constant 128 : index
    %off = arith.muli %t, %n : index
    %va = ktdp.construct_memory_view %a_ptr, sizes: [4096], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 4095 >= 0)>, memory_space = #ktdp.memory_space<global>
    } : memref<4096xf16>
    %vb = ktdp.construct_memory_view %b_ptr, sizes: [4096], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 4095 >= 0)>, memory_space = #ktdp.memory_space<global>
    } : memref<4096xf16>
    %vc = ktdp.construct_memory_view %c_ptr, sizes: [4096], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 4095 >= 0)>, memory_space = #ktdp.memory_space<global>
    } : memref<4096xf16>
    %ta = ktdp.construct_access_tile %va[%off] {
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 127 >= 0)>, access_tile_order = affine_map<(d0) -> (d0)>
    } : memref<4096xf16> -> !ktdp.access_tile<128xindex>
    %tb = ktdp.construct_access_tile %vb[%off] {
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 127 >= 0)>, access_tile_order = affine_map<(d0) -> (d0)>
    } : memref<4096xf16> -> !ktdp.access_tile<128xindex>
    %tc = ktdp.construct_access_tile %vc[%off] {
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 127 >= 0)>, access_tile_order = affine_map<(d0) -> (d0)>
    } : memref<4096xf16> -> !ktdp.access_tile<128xindex>
    %x = ktdp.load %ta : !ktdp.access_tile<128xindex> -> tensor<128xf16>
    %y = ktdp.load %tb : !ktdp.access_tile<128xindex> -> tensor<128xf16>
    %s = arith.addf %x, %y : tensor<128xf16>
    %e = math.exp %s : tensor<128xf16>
    ktdp.store %e, %tc : tensor<128xf16>, !ktdp.access_tile<128xindex>
    return
  }
}
"""


def test_vector_add_on_32_cores():
    """32 cores share 128 B/cycle (4 B/cycle each): 3 moves of 256 B = 192 cycles; addf 128/64 = 2
    cycles; exp 2 * 4 (transcendental penalty) = 8 cycles; 202 cycles, memory-bound."""
    fn = ktir.parse_text(VECTOR_ADD, "vadd.mlir").only_function
    r = function_latency(fn)
    assert r.category_cycles["hbm"] == 192
    assert r.category_cycles["vector"] == 2 and r.category_cycles["transcendental"] == 8
    assert r.cycles == 202 and r.bottleneck == "memory"
    assert r.hbm_bytes == 32 * 3 * 256


def test_misaligned_rows_touch_more_sticks():
    """A 4x64 f16 tile whose rows start 2 elements into a stick touches 2 sticks per row."""
    kernel = """module {
  func.func @k(%a_ptr: index) attributes {grid = [1, 1]} {
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %v = ktdp.construct_memory_view %a_ptr, sizes: [4, 128], strides: [128, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 127 >= 0)>, memory_space = #ktdp.memory_space<global>
    } : memref<4x128xf16>
    %t = ktdp.construct_access_tile %v[%c0, %cX] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 63 >= 0)>, access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
    } : memref<4x128xf16> -> !ktdp.access_tile<4x64xindex>
    %x = ktdp.load %t : !ktdp.access_tile<4x64xindex> -> tensor<4x64xf16>
    return
  }
}
"""
    aligned = function_latency(ktir.parse_text(kernel.replace("%cX", "%c0"), "a.mlir").only_function)
    shifted = function_latency(ktir.parse_text(kernel.replace("%cX", "%c2"), "b.mlir").only_function)
    assert aligned.hbm_bytes == 4 * 128 and shifted.hbm_bytes == 4 * 2 * 128


def test_parameters_are_checked():
    with pytest.raises(ValueError):
        HardwareParams(pipeline="parallel")
    with pytest.raises(ValueError):
        HardwareParams(hbm_tb_per_s=0)
    p = HardwareParams()
    assert p.hbm_bytes_per_cycle == 128 and p.ring_bytes_per_cycle == 64
    assert p.hbm_bytes_per_cycle_per_core(32) == 4


def test_scratchy_decode_report_and_cli(corpus_dir, tmp_path, capsys):
    import ktir_models.cli.diagnose_commands  # noqa: F401  (registers the command)
    from ktir_models.cli import main
    from ktir_models.cli.diagnose_commands import program_latency

    result = program_latency(corpus_dir / DECODE)
    assert len(result.nodes) == 452
    assert all(n.bottleneck in ("memory", "compute") for n in result.nodes)
    assert result.nodes[1].cycles == 5931
    assert result.cycles == pytest.approx(sum(n.cycles for n in result.nodes))
    # the lm_head (K-blocks of 2 columns: one 128-byte stick per 4-byte row segment) dominates
    lm_head = result.nodes[-1]
    assert lm_head.bottleneck == "memory" and lm_head.cycles > 0.5 * result.cycles
    assert lm_head.hbm_bytes == 288 * 49152 * 128 + 288 * 128 + 49152 * 2

    out = tmp_path / "lat.json"
    with pytest.raises(SystemExit) as exc:
        main(["latency", str(corpus_dir / DECODE), "--top", "3", "--json", str(out)])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "total: 452 nodes" in text and "bottlenecks:" in text
    data = json.loads(out.read_text())["latency"]
    assert data["nodes"][1]["cycles"] == 5931 and data["nodes"][1]["bottleneck"] == "memory"
    assert data["params"]["hbm_tb_per_s"] == 0.128 and len(data["nodes"]) == 452


def test_cli_refuses_bad_input_and_program_files(corpus_dir, tmp_path, capsys):
    import ktir_models.cli.diagnose_commands  # noqa: F401  (registers the command)
    from ktir_models.cli import main

    # a --json naming a file of the program would overwrite the user's program: refused
    prog = tmp_path / "prog"
    prog.mkdir()
    for entry in (corpus_dir / DECODE).iterdir():
        (prog / entry.name).symlink_to(entry)
    with pytest.raises(SystemExit) as exc:
        main(["latency", str(prog), "--json", str(prog / "manifest.json")])
    assert exc.value.code == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["latency", str(prog), "--pipeline", "parallel"])
    assert exc.value.code == 2 and "pipeline" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["latency", str(tmp_path / "missing")])
    assert exc.value.code == 2 and "Traceback" not in capsys.readouterr().err


def test_an_ops_cost_is_its_registry_part(monkeypatch):
    """The walker charges each op by its ``cost`` part: a handler is called, a category name runs
    that generic rule (arith.addf declared "vector": 128 elements / 64 lanes = 2 cycles; made
    "layout" it moves to the layout column, unchanged), an unknown category is refused by name,
    and an op kind without a cost part is free with a note."""
    from ktir_models.ktir.ir import registry
    from ktir_models.ktir.latency.walker import GENERIC_RULES

    for name, opdef in registry.REGISTRY.items():
        assert opdef.cost is None or callable(opdef.cost) or opdef.cost in GENERIC_RULES, name
    addf = registry.lookup("arith.addf")
    assert addf.cost == "vector"
    fn = ktir.parse_text(VECTOR_ADD, "vadd.mlir").only_function
    monkeypatch.setattr(addf, "cost", "layout")
    r = function_latency(fn)
    assert r.category_cycles["vector"] == 0 and r.category_cycles["layout"] == 2
    monkeypatch.setattr(addf, "cost", "bogus")
    with pytest.raises(ValueError, match="arith.addf: unknown cost category 'bogus'"):
        function_latency(fn)
    monkeypatch.setattr(addf, "cost", None)
    r = function_latency(fn)
    assert r.category_cycles["vector"] == 0 and r.category_cycles["layout"] == 0
    assert any("arith.addf is not in the cost table; counted as free" in n for n in r.notes)
