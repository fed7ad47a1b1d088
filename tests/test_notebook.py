"""notebooks/walkthrough.ipynb runs top to bottom (so it cannot rot), and uses only the public API
(``ktir_models`` and ``ktir_models.ktir``), as a user outside the project would."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "walkthrough.ipynb"
PUBLIC = {"ktir_models", "ktir_models.ktir"}


def project_imports(sources: list[str]) -> set[str]:
    """The ``ktir_models`` modules the code cells import (IPython magics left out)."""
    found = set()
    for source in sources:
        code = "\n".join(line for line in source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found.update(n for n in names if n == "ktir_models" or n.startswith("ktir_models."))
    return found


def test_walkthrough_imports_only_the_public_api():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    used = project_imports(sources)
    assert "ktir_models" in used and used <= PUBLIC, used
    internal = project_imports(["from ktir_models.model.runner import Runner"])
    assert internal == {"ktir_models.model.runner"}


@pytest.mark.slow
def test_walkthrough_notebook_runs(corpus_dir, monkeypatch):
    import nbclient  # the [test] extra: nbclient, nbformat, ipykernel, matplotlib
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    monkeypatch.setenv("KTIR_CORPUS", str(corpus_dir))  # the kernel inherits the environment
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                     for o in c.get("outputs", []))
    assert "top-1    1.0000 of rows agree" in text and "result   PASS" in text
    assert "every compared node is within its f16 band" in text
    assert "diagnose: node 115 (@" in text and "is out of its f16 band" in text
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if "image/png" in o.get("data", {}))
    assert images == 3
