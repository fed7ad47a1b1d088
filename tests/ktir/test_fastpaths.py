"""Fast paths give bit-identical results to the plain plan.

* ``backends.f16_chain.chain_add_f16``: the torch path against the plain numpy loop, on random
  values, exact ties, f16 subnormals and sums that overflow to infinity.
* Whole corpus nodes (scratchy smollm2-135m): every node whose K-loop takes a fast path, run with
  the fast path and with the plain per-trip loop (the batched K-loop builder switched off), on the
  same random inputs; the outputs must agree bit for bit.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import corpus_missing_reason, corpus_path

from ktir_models import ktir
from ktir_models.ktir.backends import f16_chain

RNG = np.random.default_rng(7)


def plain_chain(acc, parts):
    with np.errstate(over="ignore"):  # some sums overflow to ±inf on purpose
        total = np.asarray(acc, dtype=np.float16)
        for p in np.asarray(parts).astype(np.float16):
            total = np.add(total, p, dtype=np.float32).astype(np.float16)
    return total


def bits(x):
    return np.asarray(x, dtype=np.float16).view(np.uint16)


def edge_parts(trips: int, width: int) -> np.ndarray:
    """f32 partials mixing ordinary values, f16 ties, subnormals and overflowing magnitudes."""
    parts = RNG.standard_normal((trips, width)).astype(np.float32) * 8
    f16_tiny = np.float32(2.0**-24)
    parts[:, 0::7] = RNG.integers(-40, 40, (trips, len(range(0, width, 7)))) * f16_tiny * 0.5  # subnormal ties
    parts[:, 1::7] = np.float32(1.0) + np.float32(2.0**-11)  # exactly halfway between two f16 values
    parts[:, 2::7] = np.float32(30000.0)  # the running sum overflows to +inf after a few trips
    parts[:, 3::7] = -np.float32(65519.0)  # rounds to -65504, not to -inf
    parts[:, 4::7] = np.float32(1e-9)  # below half the smallest subnormal: rounds to zero
    return parts


@pytest.mark.skipif(not f16_chain.torch_available(), reason="torch is not installed")
@pytest.mark.parametrize("shape", [(3, 1, 11), (40, 1, 5000), (9, 4, 700)])
def test_chain_add_f16_torch_matches_numpy(shape):
    trips, rows, cols = shape
    parts = edge_parts(trips, rows * cols).reshape(trips, rows, cols)
    acc = (RNG.standard_normal((rows, cols)) * 4).astype(np.float16)
    flat = acc.reshape(-1)
    flat[0::7] = 0  # subnormal sums stay subnormal
    flat[4::7] = 0  # sums of values below half the smallest subnormal stay zero
    expected = plain_chain(acc, parts)
    tiny = (np.abs(expected) < 2.0**-14) & (expected != 0)
    assert tiny.any()
    got_torch = f16_chain.chain_add_f16(acc, parts, use_torch=True)
    got_numpy = f16_chain.chain_add_f16(acc, parts, use_torch=False)
    assert np.isinf(expected).any() and (expected == 0).any()
    np.testing.assert_array_equal(bits(got_torch), bits(expected))
    np.testing.assert_array_equal(bits(got_numpy), bits(expected))
    assert got_torch.dtype == np.float16 and got_torch.shape == (rows, cols)


def test_chain_add_f16_does_not_modify_its_inputs():
    acc = np.ones((1, 8), np.float16)
    parts = np.full((4, 1, 8), 0.5, np.float32)
    out = f16_chain.chain_add_f16(acc, parts)
    np.testing.assert_array_equal(acc, np.ones((1, 8), np.float16))
    np.testing.assert_array_equal(out, np.full((1, 8), 3.0, np.float16))


# ------------------------------------------------------------------------------- corpus nodes

def _smollm2_dir(fixture: str = "smollm2-135m"):
    reason = corpus_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return corpus_path() / "scratchy" / fixture


def bind_node(machine, node: dict, tensors: dict, inputs: dict) -> tuple[dict, dict]:
    """A corpus node's arguments on ``machine``: its outputs allocated (f16, shape from
    ``tensors``), its inputs placed from ``inputs`` (by tensor id). Returns the addresses and the
    output buffers, both by argument name."""
    addresses, outputs = {}, {}
    for a in node["args"]:
        if a["is_output"]:
            buf = machine.hbm.allocate(tensors[a["tensor"]], "float16", name=a["name"])
            outputs[a["name"]] = buf
        else:
            buf = machine.hbm.allocate_from(inputs[a["tensor"]], name=a["name"])
        addresses[a["name"]] = buf.address
    return addresses, outputs


def _run_node(directory, node: dict, tensors: dict, inputs: dict, batched: bool, native: bool,
              monkeypatch):
    from ktir_models.ktir import patterns

    with monkeypatch.context() as patch:
        if not batched:
            patch.setitem(patterns.RULES, "scf.for", [])  # no K-loop rule: the plain loop
        fn = ktir.load_module(directory / node["mlir"]).function(node["fn"])
        # plain: core after core, per-trip loop
        machine = ktir.Machine(grid_batching=batched, native_matmul=native)
        addresses, outputs = bind_node(machine, node, tensors, inputs)
        machine.compile(fn).run(addresses)
        return {name: buf.read() for name, buf in outputs.items()}


# q_proj (576 -> 576), gate (576 -> 1536), down (1536 -> 576), lm_head (576 -> 49152, 288 trips);
# in the prefill program each of 32 cores computes one row (the grid-batched K-loop stacks them)
@pytest.mark.parametrize("fixture,index", [
    ("smollm2-135m", 1), ("smollm2-135m", 11), ("smollm2-135m", 13), ("smollm2-135m", 451),
    ("smollm2-135m-prefill", 1), ("smollm2-135m-prefill", 2), ("smollm2-135m-prefill", 13),
    pytest.param("smollm2-135m-prefill", 451, marks=pytest.mark.slow),
])
def test_corpus_gemm_node_fast_path_is_bit_identical(fixture, index, native_matmul, monkeypatch):
    directory = _smollm2_dir(fixture)
    manifest = json.loads((directory / "manifest.json").read_text())
    tensors = {t["id"]: (t["rows"], t["cols"]) for t in manifest["tensors"]}
    node = manifest["nodes"][index]
    if "scf.for" not in (directory / node["mlir"]).read_text():
        pytest.fail(f"node {index} has no K-loop: the corpus changed, pick another node")
    inputs = {}
    for a in node["args"]:
        if not a["is_output"]:
            rows, cols = tensors[a["tensor"]]
            inputs[a["tensor"]] = (RNG.standard_normal((rows, cols)) * 0.5).astype(np.float16)
    fast = _run_node(directory, node, tensors, inputs, True, native_matmul, monkeypatch)
    plain = _run_node(directory, node, tensors, inputs, False, native_matmul, monkeypatch)
    assert fast.keys() == plain.keys() and fast
    for name in fast:
        assert np.isfinite(plain[name]).all()
        np.testing.assert_array_equal(bits(fast[name]), bits(plain[name]))
