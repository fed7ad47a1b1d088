"""The package's layering (docs/architecture.md): imports only go downwards, so the import graph
of ``ktir_models/`` has no cycle -- function-level imports counted, only ``TYPE_CHECKING`` ones
left out -- and no module imports another module's ``_private`` name (scripts/import_graph.py)."""

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
