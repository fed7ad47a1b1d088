"""`ktir-models emit`'s summary line, read from the typed manifest and our emitter's typed fields
(model/emitted.py), says what the written manifest.json says."""

from __future__ import annotations

import json

import pytest

from ktir_models.cli import main
from ktir_models.errors import UserError
from ktir_models.model.emitted import emitted_nodes
from ktir_models.model.manifest import load_manifest


def test_emit_summary_line_matches_the_written_manifest(tmp_path, capsys):
    out = tmp_path / "prog"
    with pytest.raises(SystemExit) as exc:
        main(["emit", "stories260k", "--out", str(out), "--mode", "prefill", "--tokens", "4", "--past", "2",
              "--capacity", "9"])
    assert exc.value.code == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    doc = json.loads((out / "manifest.json").read_text())
    nodes = doc["nodes"]
    assert line.startswith(f"emit: stories260k prefill m=4 past=2 capacity=9: {len(nodes)} nodes in {out} (")
    grid, lx = max(n["grid"][0] for n in nodes), max(n["lx_estimate"] for n in nodes)
    assert line.endswith(f"; largest grid {grid} cores, largest LX estimate {lx / 1024:.0f} KiB per core")


def test_a_malformed_node_record_is_a_located_error(tmp_path, capsys):
    out = tmp_path / "prog"
    with pytest.raises(SystemExit):
        main(["emit", "stories260k", "--out", str(out)])
    capsys.readouterr()
    manifest = load_manifest(out, host_scalars=True)
    path = out / "manifest.json"
    doc = json.loads(path.read_text())
    doc["nodes"][3]["grid"] = "wide"
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"manifest.json: nodes\[3\]: grid, lx_estimate or layer"):
        emitted_nodes(manifest)
