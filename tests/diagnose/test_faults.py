"""Each fault class, triggered by a small program, reported with function, op location and core.

Numeric faults (NaN/Inf from finite inputs, f16 overflow/underflow on narrowing, two cores storing
the same HBM element) come from the emulator's optional checking mode (ktir/exec/checks.py): collected
as warnings, or raised at once with ``strict``. Out-of-bounds accesses, LX overflow and reads of
never-written HBM are always faults of the emulator itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.ktir.exec.checks import NumericChecks
from ktir_models.ktir.ir.errors import EmulationFault
from torch_test_device import device_for


def _view(name, ptr, rows, cols, elem="f16"):
    return (f"    %{name} = ktdp.construct_memory_view %{ptr}, sizes: [{rows}, {cols}], strides: [{cols}, 1] {{\n"
            f"      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + {rows - 1} >= 0, d1 >= 0, -d1 + {cols - 1} >= 0)>,\n"
            f"      memory_space = #ktdp.spyre_memory_space<HBM>\n"
            f"    }} : memref<{rows}x{cols}x{elem}>\n")


def _tile(name, view, rows, cols, vrows, vcols, row="%c0", elem="f16"):
    return (f"    %{name} = ktdp.construct_access_tile %{view}[{row}, %c0] {{\n"
            f"      access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + {rows - 1} >= 0, d1 >= 0, -d1 + {cols - 1} >= 0)>,\n"
            f"      access_tile_order = affine_map<(d0, d1) -> (d0, d1)>\n"
            f"    }} : memref<{vrows}x{vcols}x{elem}> -> !ktdp.access_tile<{rows}x{cols}xindex>\n")


def _kernel(body: str, grid="[1, 1]", args="%x_ptr: index, %y_ptr: index") -> str:
    return ("module {\n"
            f"  func.func @k({args}) attributes {{grid = {grid}}} {{\n"
            "    %c0 = arith.constant 0 : index\n" + body + "    return\n  }\n}\n")


def _unary_kernel(compute: str) -> str:
    """y[4x8] = compute(x[4x8]); ``compute`` maps %x to %r (f16 tensors)."""
    return _kernel(_view("vx", "x_ptr", 4, 8) + _view("vy", "y_ptr", 4, 8)
                   + _tile("ax", "vx", 4, 8, 4, 8) + _tile("ay", "vy", 4, 8, 4, 8)
                   + "    %x = ktdp.load %ax : !ktdp.access_tile<4x8xindex> -> tensor<4x8xf16>\n"
                   + compute
                   + "    ktdp.store %r, %ay : tensor<4x8xf16>, !ktdp.access_tile<4x8xindex>\n")


def _run(text, x, checks=None, out_shape=(4, 8), initialised_out=False, backend="numpy"):
    machine = ktir.Machine(backend=backend, device=device_for(backend))
    if checks is not None:
        machine.checks = checks
    fn = ktir.parse_text(text, "fault.mlir").only_function
    ktir.verify(fn.module)
    bx = machine.hbm.allocate_from(np.asarray(x, dtype=np.float16), name="x")
    by = machine.hbm.allocate(out_shape, "float16", name="y")
    machine.compile(fn).run({"x_ptr": bx.address, "y_ptr": by.address})
    return by.read()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


DIV = "    %r = arith.divf %x, %x : tensor<4x8xf16>\n"
TRUNC_BIG = ("    %w = arith.extf %x : tensor<4x8xf16> to tensor<4x8xf32>\n"
             "    %s = arith.constant dense<100000.0> : tensor<4x8xf32>\n"
             "    %p = arith.mulf %w, %s : tensor<4x8xf32>\n"
             "    %r = arith.truncf %p : tensor<4x8xf32> to tensor<4x8xf16>\n")
TRUNC_SMALL = TRUNC_BIG.replace("100000.0", "1.0e-9")


def test_nan_from_finite_inputs_is_reported_with_op_and_core():
    x = np.ones((4, 8), np.float16)
    x[1, 2] = 0  # 0/0 = NaN from finite inputs
    text = _unary_kernel(DIV)
    checks = NumericChecks()
    out = _run(text, x, checks)
    assert np.isnan(out[1, 2]) and np.isfinite(np.delete(out.reshape(-1), 10)).all()
    [w] = checks.warnings
    assert w.kind == "nonfinite" and w.function == "k" and w.op == "arith.divf" and w.core == 0
    assert w.loc.line == _line_of(text, "arith.divf") and "1 NaN/Inf" in w.message
    assert str(w).startswith(f"fault.mlir:{w.loc.line}:")


def test_nan_propagated_from_nan_inputs_is_not_reported():
    x = np.ones((4, 8), np.float16)
    x[0, 0] = np.nan  # already non-finite on input: not this op's fault
    checks = NumericChecks()
    _run(_unary_kernel(DIV), x, checks)
    assert checks.warnings == []


def test_overflow_on_narrowing_warns_and_strict_fails():
    x = np.ones((4, 8), np.float16)  # 1 * 1e5 = 100000 > 65504: inf in f16
    text = _unary_kernel(TRUNC_BIG)
    checks = NumericChecks()
    out = _run(text, x, checks)
    assert np.isinf(out).all()
    kinds = [w.kind for w in checks.warnings]
    assert kinds == ["overflow"], checks.warnings
    assert checks.warnings[0].loc.line == _line_of(text, "arith.truncf")
    assert "32 finite value(s) became inf" in checks.warnings[0].message
    with pytest.raises(EmulationFault) as exc:
        _run(text, x, NumericChecks(strict=True))
    e = exc.value
    assert e.function == "k" and e.op == "arith.truncf" and e.core == 0
    assert e.loc.line == _line_of(text, "arith.truncf") and "overflow" in str(e)


def test_underflow_on_narrowing_is_reported():
    x = np.ones((4, 8), np.float16)
    checks = NumericChecks()
    out = _run(_unary_kernel(TRUNC_SMALL), x, checks)
    assert (out == 0).all()
    assert [w.kind for w in checks.warnings] == ["underflow"]


def test_clean_kernel_has_no_warnings():
    x = np.full((4, 8), 2.0, np.float16)
    checks = NumericChecks(strict=True)
    out = _run(_unary_kernel(DIV), x, checks)
    assert (out == 1).all() and checks.warnings == []


def _two_core_store(row_expr: str) -> str:
    """grid [2]: core c loads row c of x and stores it to row ``row_expr`` of y."""
    body = ("    %t = ktdp.get_compute_tile_id : index\n" + _view("vx", "x_ptr", 2, 8)
            + _view("vy", "y_ptr", 2, 8) + _tile("ax", "vx", 1, 8, 2, 8, row="%t")
            + row_expr + _tile("ay", "vy", 1, 8, 2, 8, row="%row")
            + "    %r = ktdp.load %ax : !ktdp.access_tile<1x8xindex> -> tensor<1x8xf16>\n"
            + "    ktdp.store %r, %ay : tensor<1x8xf16>, !ktdp.access_tile<1x8xindex>\n")
    return _kernel(body, grid="[2, 1]")


def test_two_cores_writing_the_same_element_is_a_write_conflict():
    x = np.arange(16, dtype=np.float16).reshape(2, 8)
    text = _two_core_store("    %row = arith.constant 0 : index\n")  # both cores -> row 0
    checks = NumericChecks()
    _run(text, x, checks, out_shape=(2, 8))
    [w] = checks.warnings
    assert w.kind == "write-conflict" and w.op == "ktdp.store" and w.core == 1
    assert w.loc.line == _line_of(text, "ktdp.store") and "core 0" in w.message
    # partitioned rows: no conflict, and a second run of the same plan starts afresh
    ok = _two_core_store("    %row = arith.addi %t, %c0 : index\n")
    checks = NumericChecks(strict=True)
    out = _run(ok, x, checks, out_shape=(2, 8))
    assert (out == x).all() and checks.warnings == []


def test_out_of_bounds_access_names_op_and_core():
    # a 4x8 tile read at row 2 of an 8x8 view over 4 rows of memory runs past the memory (rows
    # outside a view's coordinate set would be masked instead: tests/ktir/test_masked_access.py)
    text = _kernel(_view("vx", "x_ptr", 8, 8) + _view("vy", "y_ptr", 4, 8)
                   + "    %c2 = arith.constant 2 : index\n"
                   + _tile("ax", "vx", 4, 8, 8, 8, row="%c2") + _tile("ay", "vy", 4, 8, 4, 8)
                   + "    %r = ktdp.load %ax : !ktdp.access_tile<4x8xindex> -> tensor<4x8xf16>\n"
                   + "    ktdp.store %r, %ay : tensor<4x8xf16>, !ktdp.access_tile<4x8xindex>\n")
    with pytest.raises(EmulationFault) as exc:
        _run(text, np.ones((4, 8)))
    e = exc.value
    assert e.op == "ktdp.load" and e.core == 0 and e.loc.line == _line_of(text, "ktdp.load")


def test_lx_overflow_names_op_and_core():
    rows, cols = 1024, 1536  # 3 MiB of f16 > 2 MiB of LX
    text = _kernel(_view("vx", "x_ptr", rows, cols) + _view("vy", "y_ptr", rows, cols)
                   + _tile("ax", "vx", rows, cols, rows, cols) + _tile("ay", "vy", rows, cols, rows, cols)
                   + f"    %r = ktdp.load %ax : !ktdp.access_tile<{rows}x{cols}xindex> -> tensor<{rows}x{cols}xf16>\n"
                   + f"    ktdp.store %r, %ay : tensor<{rows}x{cols}xf16>, !ktdp.access_tile<{rows}x{cols}xindex>\n")
    with pytest.raises(EmulationFault) as exc:
        _run(text, np.zeros((rows, cols)), out_shape=(rows, cols))
    e = exc.value
    assert e.op == "ktdp.load" and e.core == 0 and "LX" in str(e)


def test_read_of_never_written_memory_names_op_and_core():
    text = _unary_kernel("    %r = arith.addf %x, %x : tensor<4x8xf16>\n")
    machine = ktir.Machine()
    fn = ktir.parse_text(text, "fault.mlir").only_function
    bx = machine.hbm.allocate((4, 8), "float16", name="never_written")
    by = machine.hbm.allocate((4, 8), "float16", name="y")
    with pytest.raises(EmulationFault) as exc:
        machine.compile(fn).run({"x_ptr": bx.address, "y_ptr": by.address})
    e = exc.value
    assert e.op == "ktdp.load" and e.core == 0 and "never_written" in str(e)


NUMERIC_CASES = {  # kernel, input, output shape: one case per numeric check
    "nonfinite": (lambda: _unary_kernel(DIV), lambda: np.where(np.eye(4, 8) > 0, 0, 1), (4, 8)),
    "overflow": (lambda: _unary_kernel(TRUNC_BIG), lambda: np.ones((4, 8)), (4, 8)),
    "underflow": (lambda: _unary_kernel(TRUNC_SMALL), lambda: np.ones((4, 8)), (4, 8)),
    "write-conflict": (lambda: _two_core_store("    %row = arith.constant 0 : index\n"),
                       lambda: np.arange(16).reshape(2, 8), (2, 8)),
}


def _nan_as_one(out: np.ndarray) -> np.ndarray:
    """``out`` with every NaN replaced by one and the same NaN (f16 0x7E00)."""
    return np.where(np.isnan(out), np.float16(np.nan), out).astype(out.dtype)


@pytest.mark.parametrize("kind", sorted(NUMERIC_CASES))
def test_numeric_checks_report_the_same_on_the_torch_backend(kind):
    """The checking mode inspects values of any back end: torch finds exactly what numpy finds,
    with the same op, location, core and message, and the same output bits. A NaN compares as
    any NaN: its sign and payload are the hardware's choice (x86 makes f16 0xFE00 for 0/0, a
    CUDA GPU 0x7FFF), not a rounding (docs/backends.md)."""
    pytest.importorskip("torch")
    make_text, make_x, shape = NUMERIC_CASES[kind]
    text, x = make_text(), make_x()
    found = {}
    for backend in ("numpy", "torch"):
        checks = NumericChecks()
        out = _run(text, x, checks, out_shape=shape, backend=backend)
        found[backend] = ([(w.kind, w.op, w.loc.line, w.core, w.message) for w in checks.warnings],
                          _nan_as_one(out).view(np.uint16).tolist())
    assert [w[0] for w in found["numpy"][0]] == [kind]
    assert found["torch"] == found["numpy"]
