"""The layers around the public API (docs/architecture.md): ``cli`` reaches the model layer only
through ``ktir_models.api``; ``api`` never imports ``cli``; ``model`` and ``ktir`` never import
``api`` or ``cli``. Function-level imports count (scripts/import_graph.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _graph_tool():
    path = REPO / "scripts" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


GRAPH_TOOL = _graph_tool()

#: (importing layer, layers it may not import)
FORBIDDEN = (
    ("cli", ("model",)),
    ("api", ("cli",)),
    ("model", ("api", "cli")),
    ("ktir", ("model", "api", "cli")),
)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def violations(package: Path) -> list[tuple[str, str]]:
    """(module, imported module) for every import that crosses a layer the wrong way."""
    graph = GRAPH_TOOL.build_graph(package)
    root = package.name
    found = []
    for module, targets in sorted(graph.items()):
        for layer, banned in FORBIDDEN:
            if _within(module, f"{root}.{layer}"):
                found += [(module, t) for t in sorted(targets)
                          if any(_within(t, f"{root}.{b}") for b in banned)]
    return found


def test_the_cli_reaches_the_model_only_through_the_api():
    graph = GRAPH_TOOL.build_graph(REPO / "ktir_models")
    assert "ktir_models.api" in graph["ktir_models.cli.model_commands"]  # the graph is real
    assert violations(REPO / "ktir_models") == []


def test_a_cli_module_importing_the_model_layer_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    for name, text in {
        "__init__.py": "", "api/__init__.py": "", "model/__init__.py": "", "model/runner.py": "",
        "cli/__init__.py": "", "cli/good.py": "from .. import api\n",
        "cli/bad.py": "def f():\n    from ..model.runner import Runner\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert violations(pkg) == [("pkg.cli.bad", "pkg.model.runner")]
