"""The package's layering (docs/architecture.md): imports only go downwards, so the import graph
of ``ktir_models/`` has no cycle -- function-level imports counted, only ``TYPE_CHECKING`` ones
left out -- and no module imports another module's ``_private`` name; and the layers around the
public API: ``cli`` reaches the model layer only through ``ktir_models.api``, ``api`` never
imports ``cli``, ``model`` and ``ktir`` never import ``api`` or ``cli`` (scripts/import_graph.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "ktir_models"


def _script():
    path = REPO / "scripts" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


GRAPH = _script()

#: (importing layer, layers it may not import)
FORBIDDEN = (
    ("cli", ("model",)),
    ("api", ("cli",)),
    ("model", ("api", "cli")),
    ("ktir", ("model", "api", "cli")),
)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations(package: Path) -> list[tuple[str, str]]:
    """(module, imported module) for every import that crosses a layer the wrong way."""
    graph = GRAPH.build_graph(package)
    root = package.name
    found = []
    for module, targets in sorted(graph.items()):
        for layer, banned in FORBIDDEN:
            if _within(module, f"{root}.{layer}"):
                found += [(module, t) for t in sorted(targets)
                          if any(_within(t, f"{root}.{b}") for b in banned)]
    return found


def test_the_import_graph_has_no_cycle():
    graph = GRAPH.build_graph(PACKAGE)
    assert "ktir_models.ktir.exec.compile" in graph  # the graph is the package's
    found = GRAPH.cycles(graph)
    paths = [" -> ".join(GRAPH.closed_path(graph, c)) for c in found]
    assert not found, "import cycles:\n" + "\n".join(paths)


def test_no_module_imports_a_private_name_of_another():
    found = GRAPH.private_imports(PACKAGE)
    assert not found, "private names imported:\n" + "\n".join(
        f"{module}:{line}: {name} from {source}" for module, line, source, name in found)


def test_the_checks_see_function_level_imports(tmp_path):
    """A cycle closed by an import inside a function is a cycle; one under TYPE_CHECKING is not;
    ``from M import _x`` is found at any depth, dunders and submodules excepted."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_impl.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n_hidden = 1\n__version__ = '1'\n")
    (pkg / "b.py").write_text("def f():\n    from .a import _hidden, __version__\n"
                              "    from . import _impl\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from . import d\n")
    (pkg / "d.py").write_text("from . import c\n")
    graph = GRAPH.build_graph(pkg)
    assert GRAPH.cycles(graph) == [["pkg.a", "pkg.b"]]
    assert GRAPH.private_imports(pkg) == [("pkg.b", 2, "pkg.a", "_hidden")]


def test_the_cli_reaches_the_model_only_through_the_api():
    graph = GRAPH.build_graph(PACKAGE)
    assert "ktir_models.api" in graph["ktir_models.cli.model_commands"]  # the graph is real
    assert layer_violations(PACKAGE) == []


def test_a_cli_module_importing_the_model_layer_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    for name, text in {
        "__init__.py": "", "api/__init__.py": "", "model/__init__.py": "", "model/runner.py": "",
        "cli/__init__.py": "", "cli/good.py": "from .. import api\n",
        "cli/bad.py": "def f():\n    from ..model.runner import Runner\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert layer_violations(pkg) == [("pkg.cli.bad", "pkg.model.runner")]
