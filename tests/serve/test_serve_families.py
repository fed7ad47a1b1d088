"""Issue 29's scenario on every family's tiny config: four requests (prompts of 3, 17, 64 and 130
tokens, 9, 4, 12 and 6 new tokens, arriving at steps 0, 0, 2 and 5) served three at a time with
block size 16 and prefill chunks of 32, every step of every sequence checked against transformers
running that sequence alone, and every sequence's tokens against transformers' greedy generation.

Every family runs on numpy; llama and mistral (the sliding window changes the host mask) also on
torch-cpu, which keeps this file's time reasonable on a shared machine (docs/serving.md)."""

from __future__ import annotations

import json

import pytest

from ktir_models.cli import main
from ktir_models.model.emit.tiling import LX_BYTES

from .conftest import NEW_TOKENS, SERVE_CONFIGS, scenario, serve_scenario, write_requests
from torch_test_device import TORCH_DEVICE

CASES = [(name, "numpy") for name in SERVE_CONFIGS] + [("llama", "torch"), ("mistral", "torch")]
LX_LIMIT = LX_BYTES


def _checked(doc: dict) -> None:
    """What every scenario run must show, read from the JSON report."""
    assert doc["passed"] is True and doc["checked"] is True and doc["failures"] == []
    reqs = {r["id"]: r for r in doc["requests"]}
    for i, new in enumerate(NEW_TOKENS):  # synthetic weights: no EOS, each runs to its length
        r = reqs[f"r{i}"]
        assert r["finish"] == "length" and len(r["tokens"]) == new
        assert len(r["token_steps"]) == new and r["token_steps"][-1] == r["last_step"]
    steps = doc["steps"]
    assert max(len(s["sequences"]) for s in steps) == 3  # --max-seqs 3 is used and respected
    assert all(s["prefill_rows"] <= 32 for s in steps)
    # r2's 64-token prompt takes two chunks; r3's 130 tokens five (4 x 32 + 2)
    r3_chunks = [s["prefill_rows"] for s in steps
                 if s["sequences"][0] == "r3" and s["prefill_rows"]]
    assert r3_chunks == [32, 32, 32, 32, 2]
    # a request that finished early freed blocks a later request holds
    reused = [(a["id"], b["id"]) for a in doc["requests"] for b in doc["requests"]
              if a["last_step"] < b["first_step"] and set(a["blocks"]) & set(b["blocks"])]
    assert reused, "no later request reuses a freed block"
    assert doc["lx_high_water"] <= LX_LIMIT


@pytest.mark.parametrize("family,backend", CASES)
def test_scenario_passes(serve_checkpoints, family, backend):
    ckpt = serve_checkpoints[family]
    report = serve_scenario(ckpt, backend=backend, device=TORCH_DEVICE if backend == "torch" else "auto")
    assert report.passed, report.failures
    _checked(json.loads(json.dumps(report.to_dict())))


def test_cli_json_report(serve_checkpoints, tmp_path, capsys):
    """The command writes the JSON the issue names and prints each request and the step table."""
    ckpt = serve_checkpoints["llama"]
    requests, out = tmp_path / "requests.jsonl", tmp_path / "report.json"
    write_requests(requests, scenario(ckpt.config.vocab_size))
    with pytest.raises(SystemExit) as exc:
        main(["serve", str(ckpt.directory), "--weights", str(ckpt.directory), "--requests",
              str(requests), "--max-seqs", "3", "--block-size", "16", "--chunk", "32",
              "--json", str(out)])
    assert exc.value.code == 0
    doc = json.loads(out.read_text())
    _checked(doc)
    keys = {"id", "prompt_ids", "tokens", "finish", "first_step", "last_step"}
    assert set(doc["requests"][0]) >= keys
    text = capsys.readouterr().out
    assert "check: PASS" in text and "r3: steps" in text and "prefill+decode" in text


def test_a_request_waits_for_a_slot(serve_checkpoints):
    """All four arrive at step 0: the fourth waits until one of the three slots frees."""
    ckpt = serve_checkpoints["llama"]
    report = serve_scenario(ckpt, arrivals=(0, 0, 0, 0), golden="none")
    first = {r.id: r.first_step for r in report.requests}
    last = {r.id: r.last_step for r in report.requests}
    assert first["r3"] > 0 and first["r3"] > min(last[r] for r in ("r0", "r1", "r2"))
    assert all(len(s.sequences) <= 3 for s in report.steps)
