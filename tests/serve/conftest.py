"""Synthetic checkpoints of every family's tiny config (made once per session) and the issue's
four-request scenario."""

from __future__ import annotations

import json

import pytest

from ktir_models.model.inputs.runtime_inputs import golden_token_ids
from ktir_models.model.weights.synthetic import ensure_synthetic, tiny_config
from ktir_models.model.weights.checkpoint import Checkpoint

from families.configs import FAMILY_CONFIGS

#: Every family we emit: llama and the four whose differences tests/families/configs.py sets.
SERVE_CONFIGS = {"llama": tiny_config(), **FAMILY_CONFIGS}

#: The scenario: prompt lengths, max_new_tokens, arrivals (issue 29).
PROMPTS = (3, 17, 64, 130)
NEW_TOKENS = (9, 4, 12, 6)
ARRIVALS = (0, 0, 2, 5)


@pytest.fixture(autouse=True)
def _program_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path_factory.getbasetemp() / "serve-cache"))


@pytest.fixture(scope="session")
def serve_checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-synthetic")
    return {name: Checkpoint(ensure_synthetic(name, cfg, seed=0, cache_root=root), cfg,
                             "synthetic:0") for name, cfg in SERVE_CONFIGS.items()}


def scenario(vocab: int, arrivals=ARRIVALS) -> list[dict]:
    """The four requests as dicts (ids: the golden convention, each prompt from its own start)."""
    return [{"id": f"r{i}", "ids": [int(t) for t in golden_token_ids(n, vocab, start=11 * i)],
             "max_new_tokens": new, "arrival": arr}
            for i, (n, new, arr) in enumerate(zip(PROMPTS, NEW_TOKENS, arrivals))]


def serve_scenario(ckpt, arrivals=ARRIVALS, **options):
    """``serve`` of the scenario on ``ckpt`` with --max-seqs 3, block size 16, chunk 32."""
    from ktir_models.api.serve import serve

    options = {"golden": "live", **options}
    return serve(str(ckpt.directory), scenario(ckpt.config.vocab_size, arrivals), max_seqs=3,
                 block_size=16, chunk=32, weights=str(ckpt.directory), **options)


def write_requests(path, docs) -> None:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
