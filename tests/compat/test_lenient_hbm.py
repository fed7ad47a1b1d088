"""The opt-in lenient HBM (``Machine(hbm="lenient")``, the reference's memory model) and the
strict default, on a fixed-address seeded ring reduce (ktir-examples' ktir/ring_reduce.mlir:
core c loads row c of a 4x128 f16 view at %in_ptr, the partials are summed around the ring and
core 0 stores the 1x128 sum at %out_ptr)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.compat import KTIRInterpreter
from ktir_models.compat.dtypes import stick_to_elem_idx
from ktir_models.errors import UserError

RING = "ktir/ring_reduce.mlir"
ROW_STICKS = 2  # a row of 128 f16 is 256 bytes
OUT_STICK = 64


def rows() -> np.ndarray:
    return ((np.arange(512).reshape(4, 128) % 13) - 6).astype(np.float16) / 4


def test_seeded_by_address_runs_under_the_compat_layer(corpus_dir: Path) -> None:
    data = rows()
    interp = KTIRInterpreter()
    interp.load(str(corpus_dir / "ktir-examples" / RING))
    prepare = interp._prepare_execution

    def seeded(grid):
        prepare(grid)
        hbm = interp.memory.hbm
        for core in range(4):  # each core's row placed at its own address: four regions
            hbm.write(core * ROW_STICKS, np.full(128, 100.0, np.float16))
        # an overlapping seed across rows 1 and 2 (two existing regions) replaces both
        hbm.write(ROW_STICKS, data[1:3])
        hbm.write(0, data[0])
        hbm.write((3 * ROW_STICKS, 0), data[3])

    interp._prepare_execution = seeded
    assert interp.execute_function("ring_reduce", in_ptr=0,
                                   out_ptr=stick_to_elem_idx(OUT_STICK, "f16")) == {}
    # nothing was placed at the output: the kernel's store mapped it
    out = interp.memory.hbm.read(OUT_STICK, 128, "f16")
    np.testing.assert_array_equal(out, data.astype(np.float64).sum(axis=0).astype(np.float16))
    np.testing.assert_array_equal(interp.memory.hbm.read(0, 512, "f16").reshape(4, 128), data)


def test_the_default_machine_faults_naming_the_store(corpus_dir: Path) -> None:
    fn = ktir.load_module(corpus_dir / "ktir-examples" / RING, reshaping_reduce=True).only_function
    machine = ktir.Machine()
    assert machine.hbm.lenient is False
    data = rows()
    for core in range(4):
        machine.hbm.allocate_from(data[core].copy(), name=f"row{core}",
                                  byte_address=core * ROW_STICKS * 128)
    with pytest.raises(ktir.EmulationFault, match=r"ring_reduce\.mlir:\d+:\d+: emulation fault "
                                                  r"in function @ring_reduce, op ktdp\.store, "
                                                  r"core 0: .*no allocated region covers"):
        machine.compile(fn).run([0, stick_to_elem_idx(OUT_STICK, "f16")])
    # overlapping regions are refused by the strict machine
    with pytest.raises(UserError, match="overlap row1"):
        machine.hbm.allocate_from(data[1:3].copy(), name="rows12", byte_address=ROW_STICKS * 128)


def test_lenient_writes_patch_regions_and_map_the_gaps() -> None:
    hbm = ktir.Machine(hbm="lenient").hbm
    hbm.write_bytes(256, np.arange(10, dtype=np.uint8))  # bytes 256..266 -> stick 2 mapped
    assert [(r.start, r.end) for r in hbm.regions] == [(256, 384)]
    hbm.write_bytes(100, np.full(300, 7, np.uint8))  # 100..400: patches 256..384, maps the rest
    assert [(r.start, r.end) for r in hbm.regions] == [(0, 256), (256, 384), (384, 512)]
    got = hbm.read_bytes(0, 512)
    expected = np.zeros(512, np.uint8)
    expected[100:400] = 7
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(UserError, match="byte 512 is in no region"):
        hbm.read_bytes(500, 20)
    # a sparse scatter maps the sticks it writes, not the span between them
    sparse = ktir.Machine(hbm="lenient").hbm
    sparse.map_stores(np.array([10_000_000, 130, 126, 10_000_002]), 4)
    assert [(r.start, r.end) for r in sparse.regions] == [(0, 256), (10_000_000, 10_000_128)]
    with pytest.raises(UserError, match="only a lenient HBM"):
        ktir.Machine().hbm.map_uncovered(0, 128)
    with pytest.raises(UserError, match="hbm must be 'strict' or 'lenient'"):
        ktir.Machine(hbm="loose")


def test_lenient_hbm_and_lx_through_the_compat_memory() -> None:
    interp = KTIRInterpreter()
    interp._prepare_execution((2, 1, 1))
    mem = interp.memory
    assert mem.num_cores == 2
    stick = mem.hbm.allocate(300)  # zero-filled, stick-padded
    np.testing.assert_array_equal(mem.hbm.read(stick, 150, "f16"), np.zeros(150, np.float16))
    mem.hbm.write((stick, 4), np.array([1.5, 2.5], np.float32))
    np.testing.assert_array_equal(mem.hbm.read((stick, 4), 2, "f32"), [1.5, 2.5])
    mem.get_lx(1).write(64, np.array([3, 4], np.int32))
    np.testing.assert_array_equal(mem.get_lx(1).read(64, 2, "i32"), [3, 4])
    with pytest.raises(ValueError, match="in no region"):
        mem.hbm.read(stick + 100, 1, "f16")
