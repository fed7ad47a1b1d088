"""``install_as_ktir_cpu()`` and the pytest plugin: the module paths harnesses import, the
refusal to shadow a real ``ktir_cpu``, and the reference-style harness of
reference_suite/suite_examples.py over every runnable ktir-examples kernel, in this process
(after the install) and in a pytest subprocess through ``-p ktir_models.compat.pytest_plugin``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, corpus_missing_reason
from ktir_models import compat
from ktir_models.compat import ShadowingError, install_as_ktir_cpu

SUITE = Path(__file__).resolve().parent / "reference_suite" / "suite_examples.py"
PLUGIN = "ktir_models.compat.pytest_plugin"
REAL_KTIR_CPU = importlib.util.find_spec("ktir_cpu") is not None and "ktir_cpu" not in sys.modules


def test_install_registers_the_module_paths_harnesses_import() -> None:
    assert install_as_ktir_cpu() is compat
    assert install_as_ktir_cpu() is compat  # twice is harmless
    import ktir_cpu
    from ktir_cpu import (ExecutionModel, HardwareConfig, KTIRInterpreter, KTIRParserBase,
                          LatencyReport)
    from ktir_cpu.dtypes import bytes_per_elem, stick_to_elem_idx, to_ktir_dtype, to_np_dtype
    from ktir_cpu.interpreter import KTIRInterpreter as FromInterpreter
    from ktir_cpu.ir_types import KTDP_MEMORY_SPACE_KINDS
    from ktir_cpu.latency import CoreLatencyCounters
    from ktir_cpu.memory import STICK_BYTES, HBMSimulator
    from ktir_cpu.mlir_frontend.parser import MLIRFrontendParser
    from ktir_cpu.parser import KTIRParser

    assert ktir_cpu is compat and FromInterpreter is KTIRInterpreter is compat.KTIRInterpreter
    assert ktir_cpu.latency.CoreLatencyCounters is CoreLatencyCounters
    assert ktir_cpu.mlir_frontend.parser.MLIRFrontendParser is MLIRFrontendParser
    assert issubclass(MLIRFrontendParser, KTIRParserBase) and issubclass(KTIRParser, KTIRParserBase)
    assert (HardwareConfig, LatencyReport, ExecutionModel) == (
        compat.HardwareConfig, compat.LatencyReport, compat.ExecutionModel)
    assert STICK_BYTES == 128 and KTDP_MEMORY_SPACE_KINDS == {"global": "HBM", "ct_local": "LX"}
    assert to_np_dtype("f16") == np.float16 and to_ktir_dtype(np.float32) == "f32"
    assert bytes_per_elem("i32") == 4 and stick_to_elem_idx(2, "f32") == 64
    with pytest.raises(ValueError, match="Unsupported KTIR dtype: 'f7'"):
        to_np_dtype("f7")
    interp = KTIRInterpreter()
    interp._prepare_execution((1, 1, 1))
    assert type(interp.memory.hbm) is HBMSimulator


def test_install_refuses_to_shadow_a_real_ktir_cpu(monkeypatch) -> None:
    real = types.ModuleType("ktir_cpu")
    real.__file__ = "/site-packages/ktir_cpu/__init__.py"
    monkeypatch.setitem(sys.modules, "ktir_cpu", real)
    with pytest.raises(ShadowingError, match=r"a real ktir_cpu is already imported \(from "
                                             r"/site-packages/ktir_cpu/__init__\.py\)"):
        install_as_ktir_cpu()
    assert sys.modules["ktir_cpu"] is real


def suite_module():
    """The harness, imported after the install (it does `from ktir_cpu import ...`)."""
    install_as_ktir_cpu()
    spec = importlib.util.spec_from_file_location("suite_examples", SUITE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def suite_cases() -> list:
    """Every kernel the harness runs (slow ones marked as tests/ktir/test_examples.py does)."""
    reason = corpus_missing_reason()
    if reason is not None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    module = suite_module()
    return [pytest.param(rel, id=rel, marks=[pytest.mark.slow] if rel in module.SLOW else [])
            for rel in sorted(module.CASES)]


def test_the_harness_covers_every_kernel_but_the_documented_four(corpus_dir: Path) -> None:
    module = suite_module()
    root = corpus_dir / "ktir-examples"
    files = [str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in (".mlir", ".ktir")]
    assert len(files) == 33
    assert sorted(module.CASES) == sorted(set(files) - module.NOT_RUN)
    assert len(module.CASES) == 29


@pytest.mark.parametrize("rel", suite_cases())
def test_reference_style_harness_in_process(rel: str) -> None:
    suite_module().CASES[rel](rel)


def run_suite(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           str(SUITE), *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)


def test_the_suite_runs_through_the_plugin(corpus_dir: Path) -> None:
    proc = run_suite("-p", PLUGIN, "-m", "not slow")
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert "ktir_cpu: ktir_models.compat" in proc.stdout  # the plugin's report header
    # 26 kernels that are not slow, the unseeded-kernel error and the stick helper
    assert "28 passed, 3 deselected" in proc.stdout, tail


@pytest.mark.slow
def test_the_slow_kernels_run_through_the_plugin(corpus_dir: Path) -> None:
    proc = run_suite("-p", PLUGIN, "-m", "slow")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "3 passed" in proc.stdout


@pytest.mark.skipif(REAL_KTIR_CPU, reason="the reference interpreter is installed here")
def test_without_the_plugin_the_suite_cannot_import_ktir_cpu(corpus_dir: Path) -> None:
    proc = run_suite("--collect-only")
    assert proc.returncode != 0
    assert "No module named 'ktir_cpu'" in proc.stdout
