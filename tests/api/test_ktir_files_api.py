"""``ktir_models.check`` and ``ktir_models.run`` on single KTIR files: a clean and a broken file,
a run checked against numpy, the CLI printing the reports, bad input as UserError."""

from __future__ import annotations

import numpy as np
import pytest

import ktir_models
from ktir_models.cli import main
from ktir_models.errors import UserError

VIEW = """ktdp.construct_memory_view %{0}, sizes: [2, 4], strides: [4, 1] {{
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      memory_space = #ktdp.memory_space<global>}} : memref<2x4xf16>"""
TILE = """ktdp.construct_access_tile %{0}[%c0, %c0] {{
      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 1 >= 0, d1 >= 0, -d1 + 3 >= 0)>,
      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>}}
      : memref<2x4xf16> -> !ktdp.access_tile<2x4xindex>"""
SCALE = f"""module {{
  func.func @scale(%x: index, %y: index, %s: f16) {{
    %c0 = arith.constant 0 : index
    %vx = {VIEW.format("x")}
    %vy = {VIEW.format("y")}
    %tx = {TILE.format("vx")}
    %ty = {TILE.format("vy")}
    %d = ktdp.load %tx : !ktdp.access_tile<2x4xindex> -> tensor<2x4xf16>
    %st = tensor.splat %s : tensor<2x4xf16>
    %r = arith.mulf %d, %st : tensor<2x4xf16>
    ktdp.store %r, %ty : tensor<2x4xf16>, !ktdp.access_tile<2x4xindex>
    return
  }}
}}
"""


def test_check_reports_clean_and_broken_files_as_the_cli_prints_them(tmp_path, capsys):
    good, bad = tmp_path / "good.mlir", tmp_path / "bad.mlir"
    good.write_text(SCALE)
    bad.write_text(SCALE.replace("arith.mulf", "arith.frobnicate"))
    report = ktir_models.check([good, bad])
    assert [f.passed for f in report.files] == [True, False] and not report.passed
    assert report.files[0].functions == ("scale",)
    errors = report.files[1].errors
    assert errors.startswith(f"{bad}:") and "arith.frobnicate" in errors
    assert report.mismatch == "1 of 2 file(s) have errors"
    with pytest.raises(SystemExit) as exc:
        main(["check", str(good), str(bad)])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and err.strip().splitlines()[-1] == report.mismatch
    assert [line.split(" (")[0] for line in out.splitlines()] == \
        [line.split(" (")[0] for line in report.render().splitlines()]  # but for the milliseconds


def test_run_computes_what_numpy_computes(tmp_path):
    path = tmp_path / "scale.mlir"
    path.write_text(SCALE)
    x = np.arange(8, dtype=np.float16).reshape(2, 4)
    report = ktir_models.run(path, inputs={"x": x, "y": np.zeros((2, 4), np.float16)},
                             scalar={"s": 1.5}, out=tmp_path / "out.npz")
    expected = (x.astype(np.float32) * np.float32(1.5)).astype(np.float16)
    np.testing.assert_array_equal(report.buffers["y"], expected)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], expected)
    assert report.render().endswith(f"wrote 2 buffer(s) to {tmp_path / 'out.npz'}")
    with pytest.raises(UserError, match="has no argument"):
        ktir_models.run(path, inputs={"z": x})
    with pytest.raises(UserError, match="needs an array in --inputs or a --scalar value"):
        ktir_models.run(path, inputs={"x": x, "y": x})
