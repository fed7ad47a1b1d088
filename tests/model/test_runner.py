"""The runner and the role bindings on a tiny hand-written two-node program and a tiny checkpoint
(see test_runner_tiny.py for the program; expected values come from numpy)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_runner_tiny import M, N, H, TINY, expected_logits, write_tiny_checkpoint, write_tiny_program  # noqa: E402

from ktir_models.errors import UserError  # noqa: E402
from ktir_models.model.inputs.bindings import (  # noqa: E402
    MASKED,
    PassSpec,
    attention_mask,
    bind_pass_inputs,
    check_weight_shapes,
    checkpoint_shape_for,
    pass_spec,
    read_vendored_inputs,
)
from ktir_models.model.manifest import load_manifest, validate  # noqa: E402
from ktir_models.model.program_checks import parse_and_check  # noqa: E402
from ktir_models.model.runner import Runner  # noqa: E402


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from ktir_models.model.weights.checkpoint import load_local

    return load_local(write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-ckpt")), TINY)


@pytest.fixture
def tiny_program(tmp_path: Path) -> Path:
    return write_tiny_program(tmp_path / "tiny")


def test_tiny_program_validates(tiny_program: Path) -> None:
    man = load_manifest(tiny_program)
    validate(man, TINY)
    parse_and_check(man)
    assert (man.tokens, man.mode) == (M, "prefill")


def test_runner_two_passes_match_numpy(tiny_program: Path, tiny_checkpoint) -> None:
    man = load_manifest(tiny_program)
    runner = Runner(man, show_progress=False)
    runner.load()
    runner.marshal(tiny_checkpoint)
    plans = list(runner._plans)
    weight_addr = runner._buffers[2].address

    norm = tiny_checkpoint.read_f16("model.norm.weight")
    emb = tiny_checkpoint.read_f16("model.embed_tokens.weight")
    inputs = bind_pass_inputs(man, TINY, tiny_checkpoint, PassSpec(np.array([5, 17]), np.arange(2)))
    np.testing.assert_array_equal(inputs[0], emb[[5, 17]])

    first = runner.run(inputs)
    assert first.result.dtype == np.float16 and first.result.shape == (M, N)
    np.testing.assert_array_equal(first.result, expected_logits(emb[[5, 17]], norm, emb))
    assert len(first.node_seconds) == 2 and first.nonfinite is None

    # A second pass with other tokens reuses plans, weights and activation buffers.
    second = runner.run(bind_pass_inputs(man, TINY, tiny_checkpoint, PassSpec(np.array([200, 3]), np.arange(2))))
    np.testing.assert_array_equal(second.result, expected_logits(emb[[200, 3]], norm, emb))
    assert runner._plans == plans and runner._buffers[2].address == weight_addr
    assert len(runner.timings.execute) == 2
    assert sorted(i for i, _, _ in runner.slowest_nodes(2)) == [0, 1]


def test_runner_flags_first_nonfinite_node(tiny_program: Path, tiny_checkpoint) -> None:
    man = load_manifest(tiny_program)
    runner = Runner(man, show_progress=False)
    runner.load()
    runner.marshal(tiny_checkpoint)
    inputs = bind_pass_inputs(man, TINY, tiny_checkpoint, PassSpec(np.array([1, 2]), np.arange(2)))
    clean = inputs[0]
    inputs[0] = inputs[0].copy()
    inputs[0][1, 7] = np.float16(np.inf)
    out = runner.run(inputs)
    assert out.nonfinite is not None
    assert (out.nonfinite.node, out.nonfinite.tensor, out.nonfinite.first_index) == (0, 3, (1, 7))
    # finite passes, until the nodes run as direct tape replays; then the inf is found again
    for _ in range(5):
        assert runner.run({**inputs, 0: clean}).nonfinite is None
    assert runner.replayed_nodes == len(man.nodes)
    again = runner.run(inputs).nonfinite
    assert (again.node, again.tensor, again.first_index) == (0, 3, (1, 7))


def test_runner_finds_a_nonfinite_value_first_made_by_a_later_node(tiny_program: Path, tiny_checkpoint) -> None:
    """Every output is written by one node, so the runner tests them all after the pass in one
    native scan (in node order); it names the node that made the value first, here the second:
    the first node's output is finite, the logits overflow."""
    man = load_manifest(tiny_program)
    runner = Runner(man, show_progress=False)
    runner.load()
    runner.marshal(tiny_checkpoint)
    norm = tiny_checkpoint.read_f16("model.norm.weight")
    emb = tiny_checkpoint.read_f16("model.embed_tokens.weight")
    inputs = bind_pass_inputs(man, TINY, tiny_checkpoint, PassSpec(np.array([1, 2]), np.arange(2)))
    big = inputs[0].copy()
    # row 1 of the first node's output is +-30000 with the signs of emb[7]: its logit 7 overflows
    scale = np.sign(emb[7].astype(np.float32)) * np.sign(norm.astype(np.float32))
    big[1] = (30000.0 * scale / np.maximum(np.abs(norm.astype(np.float32)), 0.5)).astype(np.float16)
    with np.errstate(over="ignore"):
        want = expected_logits(big, norm, emb)
        y = (big.astype(np.float32) * norm.astype(np.float32)).astype(np.float16)
    assert np.isfinite(y).all() and not np.isfinite(want).all()  # the data does what it says
    for _ in range(4):  # the plain plans, then the tape replays
        out = runner.run({**inputs, 0: big})
        assert runner._finite_scan is not None
        assert out.nonfinite is not None
        got = (out.nonfinite.node, out.nonfinite.tensor, out.nonfinite.first_index)
        row, col = np.argwhere(~np.isfinite(want))[0]
        assert got == (1, man.result, (int(row), int(col)))
        assert out.nonfinite.count == int((~np.isfinite(want)).sum())
        assert runner.run(inputs).nonfinite is None


def test_runner_tests_after_each_node_where_a_tensor_has_two_writers(tiny_program: Path, tiny_checkpoint) -> None:
    """The after-the-pass scan is taken only where it finds what testing after each node finds:
    not where a tensor is written by two nodes (a later write may hide an earlier inf) or is
    also a pass input (written by the host before the nodes)."""
    man = load_manifest(tiny_program)
    runner = Runner(man, show_progress=False)
    runner.load()
    runner.marshal(tiny_checkpoint)
    inputs = bind_pass_inputs(man, TINY, tiny_checkpoint, PassSpec(np.array([1, 2]), np.arange(2)))
    runner.run(inputs)
    assert runner._deferred_finite_scan() is not None
    runner.manifest = dataclasses.replace(man, nodes=(man.nodes[0], *man.nodes))  # written twice
    assert runner._deferred_finite_scan() is None
    runner.manifest = man
    ids = runner._input_ids
    try:
        runner._input_ids = [*ids, man.result]
        assert runner._deferred_finite_scan() is None
    finally:
        runner._input_ids = ids


def test_weight_shape_checked_against_checkpoint(tiny_program: Path, tiny_checkpoint) -> None:
    doc = json.loads((tiny_program / "manifest.json").read_text())
    # Declared [in, out] = [64, 64]: model.norm is stored as a [64] vector, not a [64, 64] matrix.
    doc["tensors"][1].update(rows=H, cols=H)
    doc["sources"][1]["is_gemm"] = True
    (tiny_program / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(UserError) as info:
        check_weight_shapes(load_manifest(tiny_program), tiny_checkpoint)
    assert str(info.value) == (
        "manifest.json: sources[1] (model.norm, tensor 1): checkpoint tensor model.norm.weight has "
        "shape 64, expected 64x64 (manifest declares 64x64 as [in, out])"
    )


def test_transposed_weight_is_rejected(tiny_program: Path, tiny_checkpoint) -> None:
    doc = json.loads((tiny_program / "manifest.json").read_text())
    # The lm_head declared [out, in] (the bytes' layout) instead of [in, out]: same element count.
    doc["tensors"][2].update(rows=N, cols=H)
    (tiny_program / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"sources\[2\] \(lm_head, tensor 2\): checkpoint tensor "
                       r"model.embed_tokens.weight has shape 256x64, expected 64x256"):
        check_weight_shapes(load_manifest(tiny_program), tiny_checkpoint)


def test_unknown_checkpoint_tensor_names_the_source(tiny_program: Path, tiny_checkpoint) -> None:
    doc = json.loads((tiny_program / "manifest.json").read_text())
    doc["sources"][1]["disk"] = "model.final_norm"
    (tiny_program / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"sources\[1\] \(model.final_norm, tensor 1\): .*model.final_norm"):
        check_weight_shapes(load_manifest(tiny_program), tiny_checkpoint)


def test_checkpoint_layout_of_declared_shapes(tiny_program: Path) -> None:
    man = load_manifest(tiny_program)
    assert checkpoint_shape_for(man, man.sources[1]) == (H,)
    assert checkpoint_shape_for(man, man.sources[2]) == (N, H)


def test_attention_mask_layout() -> None:
    mask = attention_mask(1, 64, past=0)
    assert mask.dtype == np.float16 and (mask == MASKED).all() and float(MASKED) == -65504.0
    mask = attention_mask(2, 8, past=3)
    assert (mask[:, :3] == 0).all() and (mask[:, 3:] == MASKED).all()


def test_pass_spec_follows_golden_conventions(tiny_program: Path) -> None:
    man = load_manifest(tiny_program)
    spec = pass_spec(man, TINY)
    vocab = TINY.vocab_size
    assert spec.token_ids.tolist() == [(1000 + 137 * i) % (vocab - 1) + 1 for i in range(M)]
    assert spec.positions.tolist() == [0, 1] and spec.past == 0


def test_vendored_input_overrides_and_size_checked(tiny_program: Path, tiny_checkpoint) -> None:
    from ktir_models.model.checks.golden import write_f16_gz

    man = load_manifest(tiny_program)
    given = np.arange(M * H, dtype=np.float16).reshape(M, H) / 64
    write_f16_gz(tiny_program / "t0.f16.gz", given)
    inputs = bind_pass_inputs(man, TINY, tiny_checkpoint, pass_spec(man, TINY), read_vendored_inputs(man, [0]))
    np.testing.assert_array_equal(inputs[0], given)
    write_f16_gz(tiny_program / "t0.f16.gz", given[:1])
    with pytest.raises(UserError):
        read_vendored_inputs(man, [0])


def test_emulation_fault_names_the_node(tiny_program: Path, tiny_checkpoint) -> None:
    # node1 reads the lm_head from row 8 on: its last 8 rows lie past the buffer, a fault in node 1.
    text = (tiny_program / "node1.mlir").read_text()
    text = text.replace(f"memref<{N}x{H}xf16>", f"memref<{N + 8}x{H}xf16>")
    text = text.replace(f"sizes: [{N}, {H}]", f"sizes: [{N + 8}, {H}]")
    text = text.replace(
        f"coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + {N - 1} >= 0",
        f"coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + {N + 7} >= 0",
    )
    text = text.replace("%aw = ktdp.construct_access_tile %vw[%c0, %c0]", "%aw = ktdp.construct_access_tile %vw[%c8, %c0]")
    text = text.replace("%c0 = arith.constant 0 : index\n", "%c0 = arith.constant 0 : index\n    %c8 = arith.constant 8 : index\n")
    (tiny_program / "node1.mlir").write_text(text)
    man = load_manifest(tiny_program)
    runner = Runner(man, show_progress=False)
    runner.load()
    runner.marshal(tiny_checkpoint)
    with pytest.raises(UserError) as info:
        runner.run(bind_pass_inputs(man, TINY, tiny_checkpoint, PassSpec(np.array([1, 2]), np.arange(2))))
    assert str(info.value).startswith("manifest.json: nodes[1] (node1.mlir): ")
    assert "tiny_n1" in str(info.value)
