"""KTIRInterpreter's conventions (the reference interpreter's), checked call by call on the
ktir-examples kernels and on the probe kernel of probe_kernels.py, with numpy as the reference."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

from ktir_models import ktir
from ktir_models.compat import (HardwareConfig, KTIRInterpreter, MLIRFrontendParser, ModuleView)
from ktir_models.compat.memory import HBMSimulator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_kernels import PROBE  # noqa: E402

VECTOR_ADD = "triton-ktir/vector_add_ktir.mlir"


@pytest.fixture
def examples(corpus_dir: Path) -> Path:
    return corpus_dir / "ktir-examples"


def vector_add(examples: Path, **kw) -> KTIRInterpreter:
    interp = KTIRInterpreter(**kw)
    interp.load(str(examples / VECTOR_ADD))
    return interp


def f16_pair(n: int, seed: int = 0):
    r = np.random.default_rng(seed)
    return r.standard_normal(n).astype(np.float16), r.standard_normal(n).astype(np.float16)


def exact_sum(x, y):
    return (x.astype(np.float64) + y.astype(np.float64)).astype(np.float16)


# -- load

def test_load_reads_text_or_a_path(examples: Path) -> None:
    path = examples / VECTOR_ADD
    text = path.read_text()
    by_path, by_text = KTIRInterpreter(), KTIRInterpreter()
    assert by_path.module is None and by_path.memory is None
    by_path.load(str(path))
    by_text.load(text)
    assert by_path.module.filename == str(path) and by_text.module.filename == "<string>"
    one_line = " ".join(line.split("//")[0] for line in text.splitlines())
    assert "\n" not in one_line and one_line.lstrip().startswith("module")
    single = KTIRInterpreter()
    single.load(one_line)  # no newline, but it starts with `module`: text
    assert list(single.module.functions) == ["add_kernel"]
    with pytest.raises(ValueError, match="cannot read KTIR file no/such/kernel.mlir"):
        KTIRInterpreter().load("no/such/kernel.mlir")


def test_a_bad_program_is_a_located_value_error() -> None:
    with pytest.raises(ValueError, match=r"<string>:2:\d+: error: .*"):
        KTIRInterpreter().load("module {\n  func.func @f(%a: index) { bogus.op }\n}\n")


def test_reshaping_reduce_reading_is_on(examples: Path) -> None:
    """ktir-cpu's ring-reduce kernels reshape the partial in inter_tile_reduce: the dialect's
    verifier (our default) refuses them, the compat layer reads them as the reference does."""
    path = examples / "ktir/ring_reduce.mlir"
    with pytest.raises(ktir.KtirError, match="inter_tile_reduce"):
        ktir.load_module(path)
    interp = KTIRInterpreter()
    interp.load(str(path))
    rows = (np.arange(512).reshape(4, 128) % 7).astype(np.float16)
    out = interp.execute_function("ring_reduce", in_ptr=rows,
                                  out_ptr=np.zeros((1, 128), np.float16))
    np.testing.assert_array_equal(out["out_ptr"], rows.sum(axis=0, keepdims=True))


# -- names and sizes

def test_arg_names_and_tensor_sizes(examples: Path) -> None:
    interp = vector_add(examples)
    assert interp.arg_names("add_kernel") == ["x_ptr", "y_ptr", "output_ptr", "BLOCK_SIZE"]
    assert interp.tensor_input_output_sizes("add_kernel") == {
        n: {"shape": (4096,), "dtype": "f16"} for n in ("x_ptr", "y_ptr", "output_ptr")}
    dyn = KTIRInterpreter()
    dyn.load(str(examples / "rfc/distributed-view-copy-dynamic.mlir"))
    sizes = dyn.tensor_input_output_sizes("distributed_view_copy_dynamic")
    # sizes: [64, %s0]: the dynamic dim is None; keyed by each view's base operand
    assert sizes["a0_ptr"] == {"shape": (64, None), "dtype": "f16"}
    assert sizes["b_ptr"]["shape"][0] == 64


# -- execute_function

def test_pointer_and_scalar_binding() -> None:
    """An ndarray's pointer argument receives the element index of its stick-aligned copy; an
    int binds an index argument, a Python float an f32 one."""
    interp = KTIRInterpreter()
    interp.load(PROBE)
    x = np.array([1.5, -2.0, 3.0], np.float16)
    out = interp.execute_function("probe", out_ptr=np.zeros(4, np.float32), x_ptr=x, n=7,
                                  s=0.25)["out_ptr"]
    pointer = int(out[0])
    assert pointer > 0 and pointer * 2 % 128 == 0  # after out's stick: a stick-aligned index
    np.testing.assert_array_equal(out[1:], [7.0, 0.25, 1.5])
    np.testing.assert_array_equal(interp.memory.hbm.read(pointer * 2 // 128, 3, "f16"), x)
    with pytest.raises(ValueError, match=r"argument %n is index but got 2\.5"):
        interp.execute_function("probe", out_ptr=np.zeros(4, np.float32), x_ptr=x, n=2.5, s=1.0)


def test_every_ndarray_comes_back_new_and_shaped_like_its_input(examples: Path) -> None:
    interp = vector_add(examples)
    x, y = f16_pair(4096)
    x2d, out = x.reshape(64, 64), np.zeros((2, 2048), np.float16)
    res = interp.execute_function("add_kernel", x_ptr=x2d, y_ptr=y, output_ptr=out,
                                  BLOCK_SIZE=128)
    assert set(res) == {"x_ptr", "y_ptr", "output_ptr"}
    assert res["x_ptr"].shape == (64, 64) and res["output_ptr"].shape == (2, 2048)
    np.testing.assert_array_equal(res["output_ptr"].reshape(-1), exact_sum(x, y))
    np.testing.assert_array_equal(res["x_ptr"], x2d)
    assert not np.shares_memory(res["x_ptr"], x2d)
    assert not out.any()  # copied in, never adopted: the caller's output array is untouched


def test_undeclared_kwargs_are_ignored(examples: Path) -> None:
    interp = vector_add(examples)
    x, y = f16_pair(4096, seed=1)
    res = interp.execute_function("add_kernel", x_ptr=x, y_ptr=y,
                                  output_ptr=np.zeros(4096, np.float16), BLOCK_SIZE=128,
                                  n_elements=4096, extra=np.ones(3, np.float32))
    np.testing.assert_array_equal(res["output_ptr"], exact_sum(x, y))
    np.testing.assert_array_equal(res["extra"], np.ones(3, np.float32))  # returned, unused


def test_positional_binding_when_no_name_matches(examples: Path) -> None:
    interp = vector_add(examples)
    x, y = f16_pair(4096, seed=2)
    res = interp.execute_function("add_kernel", arg0=x, arg1=y,
                                  arg2=np.zeros(4096, np.float16), arg3=128)
    np.testing.assert_array_equal(res["output_ptr"], exact_sum(x, y))
    # counts differ: no positional binding, the missing arguments are named
    with pytest.raises(ValueError, match=r"missing argument\(s\) x_ptr, y_ptr, output_ptr"):
        interp.execute_function("add_kernel", arg0=x, arg1=y, arg2=np.zeros(4096, np.float16))


def test_error_types_and_messages(examples: Path) -> None:
    fresh = KTIRInterpreter()
    for call in (lambda: fresh.execute_function("add_kernel"),
                 lambda: fresh.arg_names("add_kernel"),
                 lambda: fresh.tensor_input_output_sizes("add_kernel")):
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == "No module loaded. Call load() first."
    interp = vector_add(examples)
    with pytest.raises(ValueError) as info:
        interp.execute_function("no_such_kernel")
    assert str(info.value) == "Function 'no_such_kernel' not found in module"
    # a data error: x, placed last, holds 100 elements (256 bytes with its stick padding);
    # core 1 loads elements 128..255, bytes no region covers -> our located fault
    x, y = f16_pair(4096)
    with pytest.raises(ValueError, match=r"vector_add_ktir\.mlir:\d+:\d+: emulation fault in "
                                         r"function @add_kernel, op ktdp\.load, core 1: .*"
                                         r"no allocated region covers"):
        interp.execute_function("add_kernel", y_ptr=y, output_ptr=np.zeros(4096, np.float16),
                                BLOCK_SIZE=128, x_ptr=x[:100])


def test_memory_is_fresh_at_every_call(examples: Path) -> None:
    interp = vector_add(examples)
    x, y = f16_pair(4096, seed=3)
    interp.execute_function("add_kernel", x_ptr=x, y_ptr=y,
                            output_ptr=np.zeros(4096, np.float16), BLOCK_SIZE=128)
    first = interp.memory
    assert isinstance(first.hbm, HBMSimulator) and first.num_cores == 32
    res = interp.execute_function("add_kernel", x_ptr=y, y_ptr=y,
                                  output_ptr=np.zeros(4096, np.float16), BLOCK_SIZE=128)
    assert interp.memory is not first
    np.testing.assert_array_equal(res["output_ptr"], exact_sum(y, y))


# -- the module view

def test_module_view_fields_and_read_only(examples: Path) -> None:
    interp = vector_add(examples)
    view = interp.module
    assert list(view.functions) == ["add_kernel"]
    fn = view.get_function("add_kernel")
    assert fn.name == "add_kernel" and fn.grid == (32, 1, 1)
    assert fn.arguments == (("%x_ptr", "index"), ("%y_ptr", "index"), ("%output_ptr", "index"),
                            ("%BLOCK_SIZE", "index"))
    assert fn.arg_names == ["x_ptr", "y_ptr", "output_ptr", "BLOCK_SIZE"]
    with pytest.raises(AttributeError):
        fn.name = "other"
    with pytest.raises(AttributeError):
        view._functions = {}
    view.functions.clear()  # a copy: the view keeps its functions
    assert list(view.functions) == ["add_kernel"]
    with pytest.raises(ValueError, match="Function 'nope' not found in module"):
        view.get_function("nope")
    with pytest.raises(TypeError, match="parsed module view"):
        interp.module = "module {}"


def test_a_pickled_module_view_runs_on_a_fresh_interpreter(examples: Path) -> None:
    """Parse once (the reference's frontend parser class), ship the view, set it elsewhere."""
    view = MLIRFrontendParser().parse_module((examples / VECTOR_ADD).read_text())
    assert isinstance(view, ModuleView)
    shipped = pickle.loads(pickle.dumps(view))
    assert shipped.functions == view.functions
    worker = KTIRInterpreter(parser=MLIRFrontendParser())
    worker.module = shipped
    x, y = f16_pair(4096, seed=4)
    res = worker.execute_function("add_kernel", x_ptr=x, y_ptr=y,
                                  output_ptr=np.zeros(4096, np.float16), BLOCK_SIZE=128)
    np.testing.assert_array_equal(res["output_ptr"], exact_sum(x, y))


# -- the latency report

def test_latency_report_only_with_a_config(examples: Path) -> None:
    x, y = f16_pair(4096, seed=5)
    args = dict(x_ptr=x, y_ptr=y, output_ptr=np.zeros(4096, np.float16), BLOCK_SIZE=128)
    plain = vector_add(examples)
    plain.execute_function("add_kernel", **args)
    assert plain.get_latency_report() is None
    timed = vector_add(examples, latency_config=HardwareConfig())
    assert timed.get_latency_report() is None  # before any call
    timed.execute_function("add_kernel", **args)
    report = timed.get_latency_report()
    # per core: 2 loads + 1 store of 128 f16 (2 sticks each) at 128 B/cycle / 32 cores = 4 B
    # per cycle -> 3 * 256 / 4 = 192 memory cycles; one 128-wide addf = 2 cycles
    assert len(report.counters) == 32
    assert all(c.memory_cycles == 192 and c.compute_cycles == 2 for c in report.counters.values())
    assert report.kernel_cycles == 194 and report.bottleneck == "memory"
    assert report.counters[0].trace is None
