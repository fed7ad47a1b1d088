"""The import graph (scripts/import_graph.py): the model and cli layers have no cycle among their
own modules, the emulator never imports the model side, and the script finds cycles made by
function-level imports (so a clean result means something)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "import_graph.py"


def _script():
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


graph_tool = _script()
GRAPH = graph_tool.build_graph(REPO / "ktir_models")


def test_model_layer_has_no_cycle():
    assert graph_tool.cycles(graph_tool.within(GRAPH, "ktir_models.model")) == []


def test_cli_layer_has_no_cycle():
    assert graph_tool.cycles(graph_tool.within(GRAPH, "ktir_models.cli")) == []


def test_emulator_never_imports_the_model_side():
    upward = [(m, t) for m, targets in GRAPH.items() if m.startswith("ktir_models.ktir")
              for t in targets if t.startswith(("ktir_models.model", "ktir_models.cli"))]
    assert upward == []


def test_graph_sees_function_level_and_relative_imports():
    # Known edges of the real package, one of each kind the script must parse.
    assert "ktir_models.model.weights.synthetic" in GRAPH["ktir_models.model.weights.checkpoint"]  # inside a function
    assert "ktir_models.model.manifest" in GRAPH["ktir_models.model.runner"]  # `from .manifest import`
    assert "ktir_models.model.weights.checkpoint_shapes" in GRAPH["ktir_models.model.weights.synthetic"]  # absolute


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return pkg


def test_script_fails_on_a_function_level_cycle(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "sub/__init__.py": "",
        "sub/b.py": "",
        "b.py": "def f():\n    from .sub import b\n    from pkg import a\n    return a\n",
    })
    graph = graph_tool.build_graph(pkg)
    assert graph["pkg.b"] == {"pkg.sub.b", "pkg.a"}
    assert graph_tool.cycles(graph) == [["pkg.a", "pkg.b"]]
    run = subprocess.run([sys.executable, str(SCRIPT), "--root", str(pkg)], capture_output=True, text=True)
    assert run.returncode == 1
    assert "1 cycle(s)" in run.stdout and "pkg.a -> pkg.b -> pkg.a" in run.stdout


def test_script_passes_an_acyclic_package_and_ignores_type_checking_imports(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from .b import thing\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\nthing = 1\n",
    })
    assert graph_tool.build_graph(pkg)["pkg.b"] == set()
    run = subprocess.run([sys.executable, str(SCRIPT), "--root", str(pkg)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    assert "0 cycle(s)" in run.stdout
