"""The serving step programs of every family are ordinary KTIR that ``ktir-models check``
accepts, with the paged cache read and written through indirect access tiles."""

from __future__ import annotations

import pytest

from ktir_models.cli import main
from ktir_models.model.emit.serving import ServingShape, build_serving_program
from ktir_models.model.emit.tiling import LX_BUDGET

from .conftest import SERVE_CONFIGS

SHAPES = {"prefill+decode": ServingShape(32, 3, 16, 17, 9), "decode": ServingShape(0, 3, 16, 17, 9)}


@pytest.mark.parametrize("family", list(SERVE_CONFIGS))
@pytest.mark.parametrize("kind", list(SHAPES))
def test_check_accepts_every_node(family, kind, tmp_path, capsys):
    cfg = SERVE_CONFIGS[family]
    program = build_serving_program(cfg, SHAPES[kind], family)
    out = program.write(tmp_path / "p", cfg)
    nodes = program.program.nodes
    per_layer = 14 if cfg.features.qk_norm else 12
    assert len(nodes) == per_layer * cfg.num_hidden_layers + 2
    kinds = [n.kind for n in nodes]
    assert kinds.count("cache_write") == kinds.count("attention") == cfg.num_hidden_layers
    for n in nodes:
        assert n.lx_estimate <= LX_BUDGET
        if n.kind in ("cache_write", "attention"):
            assert "ktdp.construct_indirect_access_tile" in n.text
    with pytest.raises(SystemExit) as exc:
        main(["check", *[str(out / n.mlir) for n in nodes]])
    assert exc.value.code == 0, capsys.readouterr()


def test_long_contexts_stream_key_blocks():
    """A table of 64 blocks of 64 slots (4096 positions) does not fit one gather with a 32-row
    chunk: the attention loops over key blocks (an scf.for carrying the online softmax)."""
    cfg = SERVE_CONFIGS["llama"]
    program = build_serving_program(cfg, ServingShape(32, 4, 64, 300, 64), "llama")
    attn = next(n for n in program.program.nodes if n.kind == "attention")
    assert "iter_args" in attn.text and attn.lx_estimate <= LX_BUDGET


def test_key_block_loop_passes_the_check(serve_checkpoints, monkeypatch):
    """The online-softmax loop over key blocks (one pool block per step, as long contexts take
    it) gives the same answers as transformers on the scenario."""
    from ktir_models.model.emit.kernels import paged

    from .conftest import serve_scenario

    monkeypatch.setattr(paged, "key_blocks", lambda *args: 1)
    program = build_serving_program(SERVE_CONFIGS["llama"], SHAPES["decode"], "llama")
    assert "iter_args" in next(n for n in program.program.nodes if n.kind == "attention").text
    report = serve_scenario(serve_checkpoints["llama"])
    assert report.passed, report.failures
