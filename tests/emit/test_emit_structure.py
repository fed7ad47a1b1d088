"""Emitted programs are well-formed: manifests load and fit the model, every node parses and
verifies, signatures match, plans fit the machine, emission is deterministic, and the
option checks and the output-directory rules hold."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ktir_models import ktir
from ktir_models.errors import UserError
from ktir_models.model.emit import EMITTER_VERSION, cached_program, emit_program
from ktir_models.model.manifest import load_manifest, validate
from ktir_models.model.program_checks import parse_and_check
from ktir_models.model.emit.tiling import LX_BYTES, MAX_CORES

from .configs import llama_3b_config, registry_configs, tiny_configs

TINY = tiny_configs()
SHAPES = [("decode", 1, 0), ("prefill", 7, 0), ("prefill", 32, 0), ("decode", 1, 31)]


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("name", sorted(TINY))
@pytest.mark.parametrize("mode,m,past", SHAPES)
def test_tiny_programs_load_validate_and_verify(tmp_path, name, mode, m, past):
    cfg = TINY[name]
    out = emit_program(cfg, mode, m, past, tmp_path / "p", name)
    manifest = load_manifest(out)
    validate(manifest, cfg)
    parse_and_check(manifest)
    assert manifest.tokens == m and manifest.mode == mode
    assert manifest.extras["format"] == "ktir-models/1"
    assert manifest.extras["positions"] == list(range(past, past + m))
    assert len(manifest.nodes) == 11 * cfg.num_hidden_layers + 2
    for node in manifest.nodes:
        module = ktir.load_module(out / node.mlir)  # parse + verify, raises on any problem
        fn = module.function(node.fn)
        assert list(fn.arg_names) == [a.name for a in node.args]
        assert 1 <= fn.grid[0] <= MAX_CORES


@pytest.mark.parametrize("name", ["smollm2-135m", "llama-3.2-1b"])
@pytest.mark.parametrize("mode,m,past", [("decode", 1, 0), ("prefill", 32, 0), ("decode", 1, 31)])
def test_registry_programs_fit_the_machine(tmp_path, name, mode, m, past):
    cfg = registry_configs()[name]
    out = emit_program(cfg, mode, m, past, tmp_path / "p", name)
    manifest = load_manifest(out)
    validate(manifest, cfg)
    parse_and_check(manifest)
    doc = json.loads((out / "manifest.json").read_text())
    for node in doc["nodes"]:
        assert node["lx_estimate"] <= LX_BYTES * 3 // 4, node["fn"]
        assert 1 <= node["grid"][0] <= MAX_CORES
    # The big GEMMs really are spread over the whole grid.
    lm_head = doc["nodes"][-1]
    assert lm_head["kind"] == "gemm" and lm_head["grid"] == [MAX_CORES, 1]
    kv = doc["kv_cache"]
    assert kv["capacity"] == past + m and kv["valid_before"] == past
    assert len(kv["layers"]) == cfg.num_hidden_layers


@pytest.mark.parametrize("name", ["smollm2-135m", "llama-3.2-1b"])
@pytest.mark.parametrize("mode,m,past", [("decode", 1, 0), ("prefill", 32, 0), ("decode", 1, 31)])
def test_emulator_lx_peak_of_every_node_fits(tmp_path, name, mode, m, past):
    """The emulator's LX accounting (static peak per core, what a run reports as its high-water
    mark) stays within 2 MiB for every node, and within our own conservative estimate."""
    cfg = registry_configs()[name]
    out = emit_program(cfg, mode, m, past, tmp_path / "p", name)
    doc = json.loads((out / "manifest.json").read_text())
    machine = ktir.Machine()
    for node in doc["nodes"]:
        plan = machine.compile(ktir.load_module(out / node["mlir"]).function(node["fn"]))
        assert plan.lx_peak <= LX_BYTES, (node["fn"], plan.lx_peak)
        assert plan.lx_peak <= node["lx_estimate"], (node["fn"], plan.lx_peak, node["lx_estimate"])


def test_smollm2_nodes_verify_with_the_emulator_parser(tmp_path):
    cfg = registry_configs()["smollm2-135m"]
    out = emit_program(cfg, "prefill", 32, 0, tmp_path / "p", "smollm2-135m")
    manifest = load_manifest(out)
    for node in manifest.nodes[:11] + manifest.nodes[-2:]:  # one layer + the head cover every kernel
        ktir.load_module(out / node.mlir)


def test_emission_is_deterministic(tmp_path):
    cfg = TINY["tiny-gqa4-untied-llama3"]
    a = emit_program(cfg, "prefill", 7, 3, tmp_path / "a", "t")
    b = emit_program(cfg, "prefill", 7, 3, tmp_path / "b", "t")
    assert _files(a) == _files(b)


def test_dynamic_position_adds_pos_scalar_args(tmp_path):
    cfg = TINY["tiny-mha"]
    out = emit_program(cfg, "decode", 1, 5, tmp_path / "p", "t", capacity=9, dynamic_position=True)
    doc = json.loads((out / "manifest.json").read_text())
    with_pos = [n for n in doc["nodes"] if any(a.get("scalar") == "position" for a in n["args"])]
    # v_proj, rope_k and attention of every layer take the cache row as an argument
    assert len(with_pos) == 3 * cfg.num_hidden_layers
    assert {n["fn"].rsplit("_", 2)[-1] for n in with_pos} >= {"attention"}
    for node in with_pos:
        ktir.load_module(out / node["mlir"])
    assert doc["capacity"] == 9 and doc["scalars"] == {"position": 5}


def test_refuses_non_empty_out_dir_unless_forced(tmp_path):
    cfg = TINY["tiny-mha"]
    out = tmp_path / "p"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        emit_program(cfg, "decode", 1, 0, out, "t")
    emit_program(cfg, "decode", 1, 0, out, "t", force=True)
    assert (out / "notes.txt").read_text() == "mine"  # force replaces only program files
    emit_program(TINY["tiny-mqa-hd80"], "decode", 1, 0, out, "t", force=True)
    manifest = load_manifest(out)
    names = {p.name for p in out.glob("node*.mlir")}
    assert names == {n.mlir for n in manifest.nodes}  # no stale node files of the old program


@pytest.mark.parametrize(
    "mode,tokens,past,capacity,message",
    [
        ("train", None, 0, None, "--mode"),
        ("decode", 2, 0, None, "--tokens"),
        ("prefill", 0, 0, None, "--tokens"),
        ("decode", 1, -1, None, "--past"),
        ("prefill", 8, 4, 10, "capacity"),
    ],
)
def test_bad_pass_options(tmp_path, mode, tokens, past, capacity, message):
    with pytest.raises(UserError, match=message):
        emit_program(TINY["tiny-mha"], mode, tokens, past, tmp_path / "p", "t", capacity=capacity)


def test_cached_program_reuses_and_keys_on_the_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    cfg = TINY["tiny-mha"]
    a = cached_program(cfg, "prefill", 4, 0)
    os.utime(a / "manifest.json", ns=(10**9, 10**9))  # a rewrite would bear a new mtime
    assert cached_program(cfg, "prefill", 4, 0) == a
    assert (a / "manifest.json").stat().st_mtime_ns == 10**9  # reused, not rewritten
    b = cached_program(cfg, "prefill", 5, 0)
    c = cached_program(cfg, "decode", 1, 4)
    d = cached_program(TINY["tiny-mqa-hd80"], "prefill", 4, 0)
    assert len({a, b, c, d}) == 4
    assert json.loads((a / "manifest.json").read_text())["emitter_version"] == EMITTER_VERSION
    leftovers = [p for p in (tmp_path / "cache" / "programs").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_unsupported_sizes_name_the_config_field_and_write_nothing(tmp_path):
    from ktir_models.model.weights.synthetic import tiny_config

    cfg = tiny_config(hidden_size=60000, num_attention_heads=4, num_key_value_heads=4, head_dim=16)
    with pytest.raises(UserError, match="hidden_size"):
        emit_program(cfg, "decode", 1, 0, tmp_path / "p", "huge")
    assert not (tmp_path / "p").exists()
    with pytest.raises(UserError, match="tokens"):  # the fresh block alone exceeds LX
        emit_program(llama_3b_config(), "prefill", 20000, 0, tmp_path / "q", "t")
    assert not (tmp_path / "q").exists()


def test_long_cache_streams_attention_in_key_blocks(tmp_path):
    """A cache too long for one pass is emitted with key blocks; every node still fits LX."""
    cfg = registry_configs()["llama-3.2-1b"]
    out = emit_program(cfg, "decode", 1, 8000, tmp_path / "p", "llama-3.2-1b")
    doc = json.loads((out / "manifest.json").read_text())
    node = next(n for n in doc["nodes"] if n["kind"] == "attention")
    text = (out / node["mlir"]).read_text()
    assert "iter_args(" in text and "step %c1024" in text
    plan = ktir.Machine().compile(ktir.load_module(out / node["mlir"]).function(node["fn"]))
    assert plan.lx_peak <= min(LX_BYTES, node["lx_estimate"])


@pytest.mark.parametrize("mode,m,past", [("decode", 1, 0), ("prefill", 32, 0), ("decode", 1, 31)])
def test_llama_3b_architecture_fits_the_machine(tmp_path, mode, m, past):
    out = emit_program(llama_3b_config(), mode, m, past, tmp_path / "p", "llama-3.2-3b")
    doc = json.loads((out / "manifest.json").read_text())
    assert len(doc["nodes"]) == 11 * 28 + 2
    machine = ktir.Machine()
    for node in doc["nodes"][:11] + doc["nodes"][-2:]:  # one layer and the head: every kernel shape
        plan = machine.compile(ktir.load_module(out / node["mlir"]).function(node["fn"]))
        assert plan.lx_peak <= min(LX_BYTES, node["lx_estimate"]), (node["fn"], plan.lx_peak)
