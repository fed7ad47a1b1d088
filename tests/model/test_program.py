"""The loaded-program object (model/program.py) and the typed fields of our emitter's manifests
(model/emitted.py): one forward reads its manifest and parses each node file once, --latency and
the diagnosis reuse that parse, node functions and arguments are checked, host scalars bind."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_runner_tiny import write_tiny_program  # noqa: E402

from ktir_models import ktir, readers  # noqa: E402
from ktir_models.errors import UserError  # noqa: E402
from ktir_models.ktir.exec.twins import TwinLoader  # noqa: E402
from ktir_models.model import manifest as manifest_mod  # noqa: E402
from ktir_models.model.emitted import emitted_fields, is_emitted  # noqa: E402
from ktir_models.model.manifest import ManifestError, load_manifest  # noqa: E402
from ktir_models.model.program import load_program, parse_program  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


@pytest.fixture
def counted(monkeypatch):
    """Counts of manifest reads (by directory) and of node-file loads (by path: parsed, or
    derived from a twin's parse, ktir/exec/twins.py)."""
    manifests: Counter = Counter()
    parses: Counter = Counter()
    real_read_json, real_load_module = readers.read_json, TwinLoader.load

    def read_json(path, *args, **kwargs):
        if Path(path).name == manifest_mod.MANIFEST_FILE:
            manifests[Path(path).parent.resolve()] += 1
        return real_read_json(path, *args, **kwargs)

    def load_module(loader, path, *args, **kwargs):
        parses[Path(path).resolve()] += 1
        return real_load_module(loader, path, *args, **kwargs)

    monkeypatch.setattr(readers, "read_json", read_json)
    monkeypatch.setattr(TwinLoader, "load", load_module)
    return manifests, parses


def _forward(capsys, *argv: str) -> tuple[int, str]:
    from ktir_models.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["forward", *argv, "-q"])
    return exc.value.code, capsys.readouterr().out


def test_forward_with_latency_reads_the_manifest_and_each_node_file_once(counted, capsys):
    manifests, parses = counted
    program = FIXTURES / "tiny-mha-decode"
    code, out = _forward(capsys, str(FIXTURES / "models" / "tiny-mha"), "--program", str(program),
                         "--weights", str(FIXTURES / "models" / "tiny-mha"), "--latency")
    assert code == 0 and "PASS" in out and "total: 24 nodes" in out
    assert manifests == {program.resolve(): 1}
    node_files = {(program / n["mlir"]).resolve()
                  for n in json.loads((program / "manifest.json").read_text())["nodes"]}
    assert set(parses) == node_files and set(parses.values()) == {1}


def test_decode_after_prefill_forward_reads_its_manifest_once(counted, capsys):
    manifests, _ = counted
    program = FIXTURES / "tiny-gqa4-llama3-decode-p31"
    model = str(FIXTURES / "models" / "tiny-gqa4-llama3")
    code, out = _forward(capsys, model, "--program", str(program), "--weights", model)
    assert code == 0 and "PASS" in out
    # The measured program once; our prefill program (another directory) once, by its session.
    assert manifests[program.resolve()] == 1
    assert sorted(manifests.values()) == [1, 1]


def test_diagnosis_compiles_a_given_parse_without_parsing_again(counted):
    from ktir_models.model.checks.diagnose import diagnose
    from ktir_models.model.weights.checkpoint import load_local

    _, parses = counted
    program = FIXTURES / "tiny-mha-decode"
    ckpt = load_local(FIXTURES / "models" / "tiny-mha")
    parsed = parse_program(load_manifest(program))
    assert sum(parses.values()) == len(parsed.modules)
    report = diagnose(parsed.manifest, ckpt.config, ckpt, parsed=parsed)
    assert sum(parses.values()) == len(parsed.modules)  # nothing parsed by the diagnosis
    assert report.ok and report.as_dict()["nodes"] == len(parsed.nodes)


def test_parse_checks_each_node_function_and_its_argument_names(tmp_path):
    directory = write_tiny_program(tmp_path / "tiny")
    parsed = parse_program(load_manifest(directory))
    assert [n.function.name for n in parsed.nodes] == [n.fn for n in parsed.manifest.nodes]
    assert parsed.named_functions()[1] == ("node1", parsed.nodes[1].function)

    node1 = directory / "node1.mlir"
    first_arg = parsed.nodes[1].decl.args[0].name
    node1.write_text(node1.read_text().replace(f"%{first_arg}", "%renamed"))
    with pytest.raises(ManifestError, match=rf"nodes\[1\]\.args: .*%renamed.*node1\.mlir:\d+:\d+"):
        parse_program(load_manifest(directory))
    # The roofline reads functions only: it does not need the argument names to agree.
    assert len(parse_program(load_manifest(directory), check_arguments=False).nodes) == 2

    doc = json.loads((directory / "manifest.json").read_text())
    doc["nodes"][0]["fn"] = "absent"
    (directory / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match=r"nodes\[0\]\.fn: function @absent not defined in .*node0\.mlir"):
        parse_program(load_manifest(directory), check_arguments=False)


def test_bind_gives_tensor_addresses_and_host_scalars(tmp_path):
    from ktir_models.model.emit import emit_program
    from ktir_models.model.registry import resolve_model

    cfg = resolve_model(str(FIXTURES / "models" / "tiny-mha")).config
    directory = emit_program(cfg, "decode", 1, 5, tmp_path / "p", "t", capacity=9, dynamic_position=True)
    with pytest.raises(UserError, match="host scalars"):
        load_manifest(directory)  # a forward's manifest has none
    manifest = load_manifest(directory, host_scalars=True)
    program = load_program(manifest, ktir.Machine())
    assert len(program.plans) == len(manifest.nodes)
    addresses = {t.id: 1000 + 10 * t.id for t in manifest.tensors}
    bound = program.bind(addresses, {"position": 7})
    raw = json.loads((directory / "manifest.json").read_text())["nodes"]
    for args, node in zip(bound, raw):
        assert list(args) == [a["name"] for a in node["args"]]
        for a in node["args"]:
            assert args[a["name"]] == (7 if "scalar" in a else 1000 + 10 * a["tensor"])
    with pytest.raises(UserError, match="no value for host scalar 'position'"):
        program.bind(addresses)


def test_emitted_fields_are_the_manifest_fields(tmp_path):
    program = FIXTURES / "tiny-gqa4-llama3-decode-p31"
    doc = json.loads((program / "manifest.json").read_text())
    fields = emitted_fields(load_manifest(program))
    assert (fields.model, fields.m, fields.past, fields.capacity) == (doc["model"], doc["m"], doc["past"], doc["capacity"])
    assert not fields.dynamic_position and fields.embedding_multiplier == 1.0 and fields.sliding_window is None
    assert [(e.layer, e.k, e.v) for e in fields.kv_layers] == \
        [(e["layer"], e["k"], e["v"]) for e in doc["kv_cache"]["layers"]]

    external = write_tiny_program(tmp_path / "external")
    assert not is_emitted(load_manifest(external))
    with pytest.raises(UserError, match="not a program of our emitter"):
        emitted_fields(load_manifest(external))
    copy = tmp_path / "copy"
    shutil.copytree(program, copy)
    doc["capacity"] = doc["past"]  # no row left for the pass
    (copy / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"past 31 \+ m 1 exceed the capacity 31"):
        emitted_fields(load_manifest(copy))
    doc["capacity"], doc["host"] = doc["past"] + 1, {"embedding_multiplier": 0}
    (copy / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"host\.embedding_multiplier: expected a positive number, got 0"):
        emitted_fields(load_manifest(copy))
