"""notebooks/walkthrough.ipynb runs top to bottom (so it cannot rot)."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "walkthrough.ipynb"


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
    assert "top-1 1/1" in text
    assert "every compared node is within its f16 band" in text
    assert "first node out of its f16 band: node 115" in text
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if "image/png" in o.get("data", {}))
    assert images == 3
