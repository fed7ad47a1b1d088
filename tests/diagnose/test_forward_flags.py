"""`forward --latency --diagnose`: the per-node latency table and, on a golden mismatch, the
diagnosis, printed after the forward report and added to its JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broken_programs import broken_copy  # noqa: E402


@pytest.mark.slow
def test_forward_latency_and_diagnose_on_a_failing_program(corpus_dir, tmp_path, capsys):
    from ktir_models.cli import main

    node = broken_copy(corpus_dir / "scratchy" / "smollm2-135m", tmp_path / "prog", "k_bound")
    out = tmp_path / "forward.json"
    with pytest.raises(SystemExit) as exc:
        main(["forward", "smollm2-135m", "--program", str(tmp_path / "prog"), "--weights", "synthetic",
              "-q", "--latency", "--diagnose", "--json", str(out)])
    assert exc.value.code == 1  # the golden mismatch still decides the exit code
    text = capsys.readouterr().out
    assert "total: 452 nodes" in text and "bottlenecks:" in text
    assert f"first node out of its f16 band: node {node} " in text
    data = json.loads(out.read_text())
    assert data["pass"] is False
    assert len(data["latency"]["nodes"]) == 452 and data["latency"]["nodes"][1]["cycles"] == 5931
    assert data["diagnose"]["culprit"]["node"] == node
