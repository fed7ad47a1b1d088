"""diagnose: node roles from the manifest graph; three deliberately broken copies of the scratchy
smollm2-135m decode program, each named exactly; a faulting copy; the CLI."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broken_programs import BREAKS, broken_copy  # noqa: E402

from ktir_models.model.checks.diagnose import FLOOR, diagnose, map_nodes, relative_error  # noqa: E402
from ktir_models.model.manifest import load_manifest  # noqa: E402

LAYER_STEPS = ["input_norm", "q", "k", "v", "rope_q", "rope_k", "attention", "o_proj",
               "attn_residual", "post_norm", "gate", "up", "act_mul", "down", "layer_output"]


@pytest.mark.parametrize("name,layers", [("smollm2-135m", 30), ("smollm2-135m-prefill", 30),
                                         ("llama-3.2-1b", 16)])
def test_every_scratchy_node_gets_its_llama_step(corpus_dir, name, layers):
    roles = map_nodes(load_manifest(corpus_dir / "scratchy" / name))
    assert len(roles) == 15 * layers + 2 and all(r is not None for r in roles)
    # the corpus README documents node = 15 * layer + step; the mapping never used that rule
    for i, role in enumerate(roles[:-2]):
        assert (role.kind, role.layer) == (LAYER_STEPS[i % 15], i // 15), i
    assert [(r.kind, r.layer) for r in roles[-2:]] == [("final_norm", None), ("logits", None)]


def test_roles_follow_the_graph_not_the_order(corpus_dir, tmp_path):
    """Swap the q and k projection nodes of layer 0 in the manifest: roles move with them."""
    src = corpus_dir / "scratchy" / "smollm2-135m"
    data = json.loads((src / "manifest.json").read_text())
    data["nodes"][1], data["nodes"][2] = data["nodes"][2], data["nodes"][1]
    for entry in src.iterdir():
        if entry.name != "manifest.json":
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    roles = map_nodes(load_manifest(tmp_path))
    assert (roles[1].kind, roles[2].kind, roles[4].kind, roles[5].kind) == ("k", "q", "rope_q", "rope_k")


def test_relative_error_and_worst_element():
    import numpy as np

    ref = np.array([[3.0, 4.0], [0.0, 0.0]])
    out = np.array([[3.0, 4.0], [0.0, 0.5]], dtype=np.float16)
    rel, max_abs, worst = relative_error(out, ref)
    assert rel == pytest.approx(0.1) and max_abs == pytest.approx(0.5) and worst == (1, 1)
    out[0, 0] = np.nan
    assert relative_error(out, ref)[0] == float("inf")


@pytest.fixture(scope="module")
def smollm(corpus_dir):
    from ktir_models.model.inputs.bindings import pass_spec
    from ktir_models.model.checks.capture import capture_reference
    from ktir_models.model.registry import resolve_model
    from ktir_models.model.weights.checkpoint import get_checkpoint

    src = corpus_dir / "scratchy" / "smollm2-135m"
    spec = resolve_model("smollm2-135m")
    ckpt = get_checkpoint(spec, "synthetic")
    p = pass_spec(load_manifest(src), spec.config)
    reference = capture_reference(ckpt, p.token_ids, p.positions, p.past, p.prefix_ids)
    return src, spec.config, ckpt, reference


@pytest.mark.slow
def test_clean_program_stays_in_band(smollm):
    src, cfg, ckpt, reference = smollm
    report = diagnose(load_manifest(src), cfg, ckpt, reference=reference)
    assert report.ok and report.culprit is None and len(report.compared) == 452
    worst = max(e.rel_error for e in report.compared)
    assert 0 < worst < FLOOR / 3  # f16 rounding only, with margin below the band


@pytest.mark.slow
@pytest.mark.parametrize("which", list(BREAKS))
def test_broken_copy_is_named_exactly(smollm, tmp_path, which):
    src, cfg, ckpt, reference = smollm
    node = broken_copy(src, tmp_path / which, which)
    report = diagnose(load_manifest(tmp_path / which), cfg, ckpt, reference=reference)
    c = report.culprit
    assert c is not None and c.node == node, report.render()
    assert c.fn == f"ktir_decode_smollm2_135m_n{node}" and c.file.endswith(f"node{node}.mlir")
    assert c.rel_error > c.band
    # every node before the culprit is within its band
    assert all(not e.jumped for e in report.compared if e.node < node)
    assert c.excerpt and f"node{node}.mlir" in report.render()
    if which == "k_bound":  # the worst element's store and its loop are shown
        assert c.op == "scf.for" and "arith.constant 512" in c.excerpt
    if which == "swapped_mask":  # the first head's store (line 140) wrote the worst value
        assert c.worst[1] < 64 and c.store_loc.endswith(":140:5")
    if which == "rope_offset":  # column 63 of a head is never stored by the broken node ...
        assert c.store_loc is None and "no store of this node writes" in c.render()
        # ... so the attention node after it reads never-written memory: a fault, named second
        assert report.fault_node == node + 2 and "never-written" in report.fault
        text = report.render()
        assert text.index("first node out of its f16 band") < text.index("fault    node")
    else:
        assert report.fault is None


def _copy_with_node(src, dest, node: int, old: str, new: str) -> None:
    dest.mkdir()
    for entry in src.iterdir():
        if entry.name != f"node{node}.mlir":
            (dest / entry.name).symlink_to(entry)
    text = (src / f"node{node}.mlir").read_text()
    assert old in text
    (dest / f"node{node}.mlir").write_text(text.replace(old, new))


@pytest.mark.slow
def test_k_loop_past_the_view_is_masked_not_a_fault(smollm, tmp_path):
    """A K loop running past the weight view's columns (640 > 576) reads only points outside the
    view's coordinate set there: they load as padding zeros (masked access), so the product is
    unchanged and the program stays in band."""
    src, cfg, ckpt, reference = smollm
    node = 15 * 3 + 1  # layer 3 q projection
    _copy_with_node(src, tmp_path / "masked", node, "%K3 = arith.constant 576", "%K3 = arith.constant 640")
    report = diagnose(load_manifest(tmp_path / "masked"), cfg, ckpt, reference=reference)
    assert report.fault is None and report.ok


@pytest.mark.slow
def test_faulting_copy_names_the_node(smollm, tmp_path):
    """A weight view whose row stride runs past every HBM region is an out-of-bounds fault."""
    src, cfg, ckpt, reference = smollm
    dest = tmp_path / "oob"
    node = 15 * 3 + 1  # layer 3 q projection
    _copy_with_node(src, dest, node, "sizes: [576, 576], strides: [576, 1]",
                    "sizes: [576, 576], strides: [1000000000, 1]")
    report = diagnose(load_manifest(dest), cfg, ckpt, reference=reference)
    assert report.fault_node == node and not report.ok
    assert f"nodes[{node}]" in report.fault and f"node{node}.mlir:" in report.fault
    assert "no allocated region covers" in report.fault and "core 0" in report.fault
    assert all(e.node < node for e in report.compared)


@pytest.mark.slow
def test_cli_diagnose_names_the_node_and_writes_json(smollm, tmp_path, capsys):
    import ktir_models.cli.diagnose_commands  # noqa: F401  (registers the command)
    from ktir_models.cli import main

    src = smollm[0]
    node = broken_copy(src, tmp_path / "prog", "swapped_mask")
    out_json = tmp_path / "d.json"
    with pytest.raises(SystemExit) as exc:
        main(["diagnose", "smollm2-135m", "--program", str(tmp_path / "prog"), "--weights",
              "synthetic", "--checks", "--json", str(out_json)])
    assert exc.value.code == 1
    text = capsys.readouterr().out
    assert f"node {node} @ktir_decode_smollm2_135m_n{node}" in text
    data = json.loads(out_json.read_text())["diagnose"]
    assert data["culprit"]["node"] == node and data["ok"] is False
    assert isinstance(data["warnings"], list)


# ----------------------------------------------------------------------------------- our emitter

EMITTED_STEPS = ["input_norm", "q", "k", "v", "rope_q", "rope_k", "attention", "attn_residual",
                 "post_norm", "act_mul", "layer_output"]


@pytest.fixture(scope="module")
def emitted_decode(tmp_path_factory):
    from ktir_models.model.emit import emit_program
    from ktir_models.model.registry import resolve_model

    spec = resolve_model("smollm2-135m")
    out = tmp_path_factory.mktemp("emitted") / "decode"
    return emit_program(spec.config, "decode", 1, 0, out, spec.name)


def test_emitted_program_nodes_get_their_steps(emitted_decode):
    """Our emitter fuses the residual into o_proj/down and SiLU*up into gate/up, and writes k/v
    into the KV cache in place: the roles follow (11 nodes per layer)."""
    manifest = load_manifest(emitted_decode)
    roles = map_nodes(manifest)
    assert len(roles) == 11 * 30 + 2 and all(r is not None for r in roles)
    for i, role in enumerate(roles[:-2]):
        assert (role.kind, role.layer) == (EMITTED_STEPS[i % 11], i // 11), i
    caches = {s.id for s in manifest.sources if s.role in ("prefix_k", "prefix_v")}
    assert roles[3].tensor in caches and roles[5].tensor in caches  # v and rotated k, in place


@pytest.mark.slow
def test_emitted_program_broken_residual_is_named(smollm, emitted_decode, tmp_path):
    """Clean emitted program: in band. A subtracted residual in layer 4's fused down projection:
    that node is named, with the op that computed the worst value."""
    _, cfg, ckpt, reference = smollm
    clean = diagnose(load_manifest(emitted_decode), cfg, ckpt, reference=reference)
    assert clean.ok, clean.render()
    node = 11 * 4 + 10
    dest = tmp_path / "broken"
    dest.mkdir()
    for entry in Path(emitted_decode).iterdir():
        if entry.name != f"node{node}.mlir":
            (dest / entry.name).symlink_to(entry)
    text = (Path(emitted_decode) / f"node{node}.mlir").read_text()
    # the residual sum: `%eN = arith.addf %loopN, %fN` (the K loop's result plus the residual)
    broken, count = re.subn(r"(%e\d+ = )arith\.addf( %loop\d+, %f\d+)", r"\1arith.subf\2", text)
    assert count == 1
    (dest / f"node{node}.mlir").write_text(broken)
    report = diagnose(load_manifest(dest), cfg, ckpt, reference=reference)
    c = report.culprit
    assert c is not None and c.node == node and c.role == "layer 4 residual add (MLP)", report.render()
    assert c.op == "arith.truncf" and "arith.subf" in c.excerpt


@pytest.mark.slow
def test_checking_mode_names_the_overflowing_node(smollm, tmp_path):
    """Layer 2's input RMSNorm computes 1e9 / rms in f32 and narrows it to f16: an overflow.
    With checks it is a warning naming node, function, op location and core (and the node is the
    culprit); with strict checks the run stops there as a fault."""
    from ktir_models.ktir.exec.checks import NumericChecks

    src, cfg, ckpt, reference = smollm
    node = 15 * 2
    dest = tmp_path / "overflow"
    dest.mkdir()
    for entry in src.iterdir():
        if entry.name != f"node{node}.mlir":
            (dest / entry.name).symlink_to(entry)
    text = (src / f"node{node}.mlir").read_text()
    old = "%one15 = arith.constant 1.0 : f32"
    assert old in text
    (dest / f"node{node}.mlir").write_text(text.replace(old, "%one15 = arith.constant 1.0e9 : f32"))
    truncf_line = next(i for i, line in enumerate(text.splitlines(), 1) if "arith.truncf" in line)

    checks = NumericChecks()
    report = diagnose(load_manifest(dest), cfg, ckpt, checks=checks, reference=reference)
    assert report.culprit is not None and report.culprit.node == node
    [warning] = [w for w in report.warnings if "overflow" in w]
    assert warning.startswith(f"node {node}: ") and f"node{node}.mlir:{truncf_line}:" in warning
    assert f"@ktir_decode_smollm2_135m_n{node}" in warning and "core 0" in warning

    strict = diagnose(load_manifest(dest), cfg, ckpt, checks=NumericChecks(strict=True),
                      reference=reference)
    assert strict.fault_node == node and "overflow" in strict.fault and "arith.truncf" in strict.fault


def test_cli_bad_input_is_one_line_and_exit_2(corpus_dir, tmp_path, capsys):
    import ktir_models.cli.diagnose_commands  # noqa: F401  (registers the command)
    from ktir_models.cli import main

    cases = [
        (["--program", str(tmp_path / "missing")], "not found"),
        # a SmolLM2 program against the Llama-1B architecture: caught before any weights load
        (["--program", str(corpus_dir / "scratchy" / "smollm2-135m")], "the model needs"),
    ]
    for args, text in cases:
        model = "llama-3.2-1b" if "the model needs" in text else "smollm2-135m"
        with pytest.raises(SystemExit) as exc:
            main(["diagnose", model, *args, "--weights", "synthetic"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and text in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
