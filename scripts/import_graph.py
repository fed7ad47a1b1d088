#!/usr/bin/env python
"""Print the import graph of a package and its import cycles; exit 1 when there is a cycle.

    python scripts/import_graph.py [--root ktir_models] [--edges] [--within PREFIX] [--private]

Every ``import`` and ``from ... import`` statement of every module counts, wherever it stands:
at module level, inside a function or method, inside ``try``. Only imports guarded by
``if TYPE_CHECKING:`` are left out, since they never run. The files are parsed with :mod:`ast`;
nothing is imported.

Edges go to the module actually named: ``from .a import b`` is an edge to ``pkg.a.b`` when that is
a module of the package, else to ``pkg.a``. The implicit import of parent packages'
``__init__`` is not an edge (every module would otherwise depend on its package and the package
on whatever its ``__init__`` re-exports, a cycle by construction). Imports of modules outside the
package are not edges.

A cycle is a strongly connected component of more than one module (or a module importing
itself); each is printed with its members and one closed path through them. With
``--private``, every ``from M import _name`` of a module of the package (another module's
private name) is listed too, and counts as a failure.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

Graph = dict[str, set[str]]


def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under package directory ``root``."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking_guard(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` at any depth, except under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_guard(child):
                stack.extend(child.orelse)  # the else branch does run
                continue
            stack.append(child)
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom,
             known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in known}
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base_parts = package[: len(package) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    out = set()
    for alias in node.names:
        full = f"{base}.{alias.name}"
        if full in known:
            out.add(full)
        elif base in known:
            out.add(base)
    return out


def build_graph(root: Path) -> Graph:
    """Module -> the package's modules it imports (see the module docstring for what counts)."""
    names = module_names(root)
    known = set(names)
    graph: Graph = {}
    for module, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: set[str] = set()
        for node in _imports(tree):
            edges |= _targets(module, path.name == "__init__.py", node, known)
        graph[module] = edges
    return graph


def _all_imports(tree: ast.AST) -> list[ast.ImportFrom]:
    """Every ``from ... import`` statement of ``tree`` at any depth, ``TYPE_CHECKING`` included
    (a type-only import of a private name leans on it as much as a run-time one)."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]


def _from_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The dotted module a ``from`` statement of ``module`` imports from."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base_parts = package[: len(package) - (node.level - 1)]
    return ".".join(base_parts + ([node.module] if node.module else []))


def private_imports(root: Path) -> list[tuple[str, int, str, str]]:
    """(module, line, source module, name) for every import of a ``_private`` name from another
    module of the package under ``root``: a name that starts with ``_`` and is neither a dunder
    (``__version__``) nor a submodule (``from . import _impl`` imports a module, not a name a
    module keeps to itself). ``from __future__`` is outside the package, so never counted."""
    names = module_names(root)
    known = set(names)
    found = []
    for module, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _all_imports(tree):
            base = _from_base(module, path.name == "__init__.py", node)
            if base not in known:
                continue
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
                    continue
                if f"{base}.{name}" in known:
                    continue
                found.append((module, node.lineno, base, name))
    return sorted(found)


def within(graph: Graph, prefix: str) -> Graph:
    """The subgraph of the modules named ``prefix`` or ``prefix.*`` and the edges among them."""
    def inside(name: str) -> bool:
        return name == prefix or name.startswith(prefix + ".")

    return {m: {t for t in targets if inside(t)} for m, targets in graph.items() if inside(m)}


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components that are cycles, each sorted, largest first (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        # Iterative depth-first search: (node, iterator over its successors).
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def closed_path(graph: Graph, component: list[str]) -> list[str]:
    """One path from the component's first module back to itself, inside the component."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth first: the shortest way round
        nxt = []
        for node in frontier:
            for succ in sorted(graph.get(node, ())):
                if succ not in members:
                    continue
                if succ == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = parents[node]
                    return [start] + path[:0:-1] + [start]
                if succ not in parents:
                    parents[succ] = node
                    nxt.append(succ)
        frontier = nxt
    return [start]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO / "ktir_models", help="package directory")
    parser.add_argument("--within", default=None, help="only modules under this dotted prefix")
    parser.add_argument("--edges", action="store_true", help="print every module's imports")
    parser.add_argument("--private", action="store_true",
                        help="also list imports of other modules' _private names (exit 1 if any)")
    args = parser.parse_args(argv)
    graph = build_graph(args.root)
    if args.within:
        graph = within(graph, args.within)
    edge_count = sum(len(t) for t in graph.values())
    if args.edges:
        for module in sorted(graph):
            print(f"{module} -> {', '.join(sorted(graph[module])) or '(none)'}")
    found = cycles(graph)
    print(f"{len(graph)} modules, {edge_count} imports, {len(found)} cycle(s)")
    for i, component in enumerate(found, 1):
        print(f"cycle {i}: {len(component)} modules: {', '.join(component)}")
        print("  e.g. " + " -> ".join(closed_path(graph, component)))
    private = []
    if args.private:
        prefix = args.within
        private = [p for p in private_imports(args.root)
                   if prefix is None or p[0] == prefix or p[0].startswith(prefix + ".")]
        print(f"{len(private)} import(s) of another module's private name")
        for module, line, source, name in private:
            print(f"  {module}:{line}: {name} from {source}")
    return 1 if found or private else 0


if __name__ == "__main__":
    sys.exit(main())
