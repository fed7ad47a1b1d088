"""The `check` and `run` commands on good and bad files, through a real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

GOOD = """module {
  func.func @scale(%x: index, %y: index, %s: f16) {
    %c0 = arith.constant 0 : index
    %vx = ktdp.construct_memory_view %x, sizes: [2, 4], strides: [4, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<2x4xf16>
    %vy = ktdp.construct_memory_view %y, sizes: [2, 4], strides: [4, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      memory_space = #ktdp.memory_space<global>} : memref<2x4xf16>
    %tx = ktdp.construct_access_tile %vx[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<2x4xf16> -> !ktdp.access_tile<2x4xindex>
    %ty = ktdp.construct_access_tile %vy[%c0, %c0] {
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>} : memref<2x4xf16> -> !ktdp.access_tile<2x4xindex>
    %d = ktdp.load %tx : !ktdp.access_tile<2x4xindex> -> tensor<2x4xf16>
    %st = tensor.splat %s : tensor<2x4xf16>
    %r = arith.mulf %d, %st : tensor<2x4xf16>
    ktdp.store %r, %ty : tensor<2x4xf16>, !ktdp.access_tile<2x4xindex>
    return
  }
}
"""


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ktir_models", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_check_clean_file(tmp_path):
    p = write(tmp_path, "good.mlir", GOOD)
    r = cli("check", str(p))
    assert r.returncode == 0, r.stderr
    assert f"{p}: ok (1 function(s): @scale" in r.stdout


def assert_located_error(r, path: Path, line: int, text: str) -> None:
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"{path}:{line}:"), first
    assert ": error: " in first and text in first, first


@pytest.mark.parametrize("name, text, line, message", [
    ("truncated.mlir", GOOD[: GOOD.index("    ktdp.store")], 19, "unexpected end of file"),
    ("unbalanced.mlir", GOOD.replace("strides: [4, 1]", "strides: [4, 1", 1), 4, "expected"),
    ("unknown.mlir", GOOD.replace("arith.mulf", "arith.frobnicate"), 18,
     "unknown operation 'arith.frobnicate'"),
    ("mismatch.mlir", GOOD.replace("%r = arith.mulf %d, %st : tensor<2x4xf16>",
                                   "%r = arith.mulf %d, %st : tensor<2x8xf16>"), 18,
     "but the op says tensor<2x8xf16>"),
    ("undefined.mlir", GOOD.replace("arith.mulf %d, %st", "arith.mulf %d, %zz"), 18,
     "use of undefined value '%zz'"),
], ids=["truncated", "unbalanced", "unknown-op", "type-mismatch", "undefined"])
def test_check_bad_input_is_located_without_traceback(tmp_path, name, text, line, message):
    p = write(tmp_path, name, text)
    r = cli("check", str(p))
    assert_located_error(r, p, line, message)
    assert f"{p}: FAILED" in r.stdout


def test_check_missing_file(tmp_path):
    r = cli("check", str(tmp_path / "nope.mlir"))
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_run_writes_outputs_and_refuses_to_overwrite_inputs(tmp_path):
    p = write(tmp_path, "good.mlir", GOOD)
    x = (np.arange(8).reshape(2, 4) / 3).astype(np.float16)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=x, y=np.zeros((2, 4), np.float16))
    before = inputs.read_bytes()
    out = tmp_path / "out.npz"
    r = cli("run", str(p), "--fn", "scale", "--inputs", str(inputs), "--out", str(out),
            "--scalar", "s=1.5")
    assert r.returncode == 0, r.stderr
    assert "LX high-water" in r.stdout
    got = np.load(out)["y"]
    np.testing.assert_array_equal(got, x * np.float16(1.5))
    r = cli("run", str(p), "--inputs", str(inputs), "--out", str(inputs), "--scalar", "s=2")
    assert r.returncode == 2 and "refusing to overwrite" in r.stderr
    assert inputs.read_bytes() == before


def test_run_fault_is_reported_with_function_op_and_core(tmp_path):
    p = write(tmp_path, "good.mlir", GOOD)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.zeros(4, np.float16), y=np.zeros((2, 4), np.float16))  # x too small
    r = cli("run", str(p), "--inputs", str(inputs), "--scalar", "s=1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{p}:16:5: emulation fault in function @scale, op ktdp.load, core 0" in r.stderr


def test_run_missing_argument_value(tmp_path):
    p = write(tmp_path, "good.mlir", GOOD)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.zeros((2, 4), np.float16))
    r = cli("run", str(p), "--inputs", str(inputs))
    assert r.returncode == 2 and "argument %y" in r.stderr
