"""The torch array back end on the cpu reproduces the numpy back end (issue 6).

Three groups, each running the same KTIR twice, once per back end, on identical inputs:

* every node kind of the scratchy fixtures (layer 0, final RMSNorm, lm_head; the picks, inputs and
  float64 references of test_scratchy_nodes.py, imported, not copied): outputs agree within
  ``ULP_TOLERANCE`` f16 ulps of each element's scale (for a GEMM the largest f16 value of its
  K-chain, see ``k_chain_scale``), node kinds without a GEMM (RMSNorm, RoPE, residual adds,
  SiLU*mul) bit for bit, and the torch output also passes the float64 reference check of
  test_scratchy_nodes.py;
* every ktir-examples kernel runner of test_examples.py, with ``ktir.Machine`` building torch
  machines, so each kernel is checked on torch against its own numpy reference and tolerance;
  the kernels that do not run fail the documented way on torch too;
* one program per fault class faults with the very same message on both back ends.

Why a tolerance at all: the f16 roundings are the same on both back ends (torch computes half
arithmetic in f32 and rounds once, as the numpy back end does), but an f32 GEMM sums its products
in the order of the BLAS underneath (OpenBLAS for numpy, torch's own CPU kernels for torch). The
f32 results then differ in their last bits, and where an f32 value lies next to an f16 rounding
boundary the f16 result moves by one ulp; later f16 steps can carry such a one-ulp change on, but
do not grow it beyond a couple of ulps. Measured numbers are in docs/backends.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ktir_models import ktir  # noqa: E402

import test_examples  # noqa: E402
import test_machine  # noqa: E402
import test_scratchy_nodes as nodes  # noqa: E402
from torch_test_device import TORCH_DEVICE, device_for  # noqa: E402

#: Allowed |torch - numpy| per element, in f16 ulps of the element's scale (see ``scale_of``):
#: for a GEMM, the largest f16 value of its K-chain. Each chain value can round one ulp
#: differently; the measured worst case is 2.5 such ulps (docs/backends.md), 4 keeps a margin for
#: other seeds while still failing on any real difference in what is computed (those are
#: hundreds of ulps).
ULP_TOLERANCE = 4
#: Node kinds whose f16 results are bit-identical on both back ends: no GEMM, and their only
#: reductions (the RMSNorm sum of squares) are exact enough in f64/f32 that the order cannot move
#: an f16 rounding.
BIT_EXACT_KINDS = {"input_rmsnorm", "post_attn_rmsnorm", "final_rmsnorm", "rope_q", "rope_k",
                   "residual_attn", "residual_mlp", "silu_mul"}


def torch_machine_factory(separate_mirrors: bool = False):
    """``ktir.Machine`` with the torch back end on the tests' device as its default;
    ``separate_mirrors`` gives the cpu separate device mirrors, copied in and out as on cuda."""
    if separate_mirrors:
        from ktir_models.ktir.backends.torch_backend import TorchBackend

        real = ktir.Machine  # the class itself: the tests patch the name with this factory

        def machine(*args, **kwargs):
            return real(*args, backend=TorchBackend(TORCH_DEVICE, separate_mirrors=True), **kwargs)
        return machine
    return functools.partial(ktir.Machine, backend="torch", device=TORCH_DEVICE)


@dataclass(frozen=True)
class Deviation:
    """How two f16 arrays of the same shape differ."""

    elements: int
    differing: int
    max_abs: float
    max_ulps: float  # max |a - b| / ulp_f16(the element's scale); 0 when identical
    max_own_ulps: float  # max |a - b| / ulp_f16(max(|a|, |b|)): ulps of the element itself

    def __str__(self) -> str:
        return (f"{self.differing}/{self.elements} elements differ, max |diff| {self.max_abs:.3g}"
                f" = {self.max_ulps:g} f16 ulp of the scale, {self.max_own_ulps:g} ulp of the element")


def ulp_f16(x: np.ndarray) -> np.ndarray:
    """The f16 ulp at |x| (subnormals and zero: 2^-24, the subnormal spacing), as float64."""
    return np.spacing(np.abs(np.asarray(x, dtype=np.float16))).astype(np.float64)


def deviation(a: np.ndarray, b: np.ndarray, scale: np.ndarray | None = None) -> Deviation:
    """Element-wise comparison of two f16 arrays; non-finite elements must be identical.
    ``max_ulps`` is in f16 ulps of ``scale`` (default: max(|a|, |b|) element by element)."""
    assert a.shape == b.shape and a.dtype == b.dtype == np.float16, (a.shape, b.shape, a.dtype, b.dtype)
    fa, fb = np.isfinite(a), np.isfinite(b)
    assert np.array_equal(fa, fb), "the back ends disagree on which elements are finite"
    assert np.array_equal(a[~fa], b[~fa], equal_nan=True), "the back ends disagree on a NaN or an inf"
    if scale is None:
        scale = np.maximum(np.abs(a), np.abs(b))
    scale = np.broadcast_to(np.maximum(np.abs(scale), np.maximum(np.abs(a), np.abs(b))), a.shape)
    diff = np.abs(a[fa].astype(np.float64) - b[fa].astype(np.float64))
    ulps = diff / ulp_f16(np.minimum(scale[fa], 65504))
    own = diff / ulp_f16(np.maximum(np.abs(a[fa]), np.abs(b[fa])))
    differing = int(np.count_nonzero(a.view(np.uint16) != b.view(np.uint16)))
    return Deviation(a.size, differing, float(diff.max(initial=0.0)), float(ulps.max(initial=0.0)),
                     float(own.max(initial=0.0)))


def k_chain_scale(x: np.ndarray, w_out_in: np.ndarray, steps: int, columns: int = 4096) -> np.ndarray:
    """Largest magnitude among the f16 values of a K-blocked GEMM's accumulation chain, per output
    element: the partials ``x[:, blk_t] @ w[:, blk_t].T`` and the running sums after each trip.

    Why this scale: each of those values is an f32 result rounded to f16, and a different f32
    summation order moves it by at most one ulp of its own size; the final element carries such a
    change on, so its deviation is a few ulps of the chain's largest value, which can be far above
    the final value when the sum cancels. (f32 arithmetic: only the magnitude matters here.)
    """
    m, k = x.shape
    block = k // steps
    assert block * steps == k, (k, steps)
    xs = x.astype(np.float32).reshape(m, steps, block)
    out = np.empty((m, w_out_in.shape[0]), np.float32)
    for c0 in range(0, w_out_in.shape[0], columns):
        w = w_out_in[c0:c0 + columns].astype(np.float32).reshape(-1, steps, block)
        parts = np.einsum("mtk,ntk->tmn", xs, w)
        sums = np.cumsum(parts, axis=0)
        out[:, c0:c0 + columns] = np.maximum(np.abs(parts).max(0), np.abs(sums).max(0))
    return out


def scale_of(manifest, node: dict, kind: str, inputs: dict, reference: np.ndarray) -> np.ndarray:
    """The magnitude the tolerance of ``kind`` is relative to (see ``deviation``)."""
    if kind in nodes.GEMM_KINDS:
        roles = {t: nodes.input_role(manifest, t) for t in inputs}
        (x_id,) = [t for t, r in roles.items() if r == "activation"]
        (w_id,) = [t for t, r in roles.items() if r == "weight"]
        steps = nodes.k_loop_trips((manifest.folder / node["mlir"]).read_text())
        return k_chain_scale(inputs[x_id], inputs[w_id], steps)
    if kind == "attention":
        # a score one ulp off changes a softmax weight by ~1 ulp relative: the row's output moves
        # by about an ulp of its largest element
        return np.abs(reference).max(axis=1, keepdims=True)
    return np.abs(reference)


def assert_order_deviation(dev: Deviation, kind: str, what: str, differing_per: int) -> None:
    """Two runs of a node that differ only in f32 summation order: kinds without a matmul are
    bit-identical, every element is within ``ULP_TOLERANCE`` ulps of its scale, and at most
    max(8, elements / ``differing_per``) elements differ at all."""
    if kind in BIT_EXACT_KINDS:
        assert dev.differing == 0, f"{what}: expected bit-identical, {dev}"
    assert dev.max_ulps <= ULP_TOLERANCE, f"{what}: {dev} exceeds {ULP_TOLERANCE} ulp"
    assert dev.differing <= max(8, dev.elements // differing_per), f"{what}: {dev}"


# --------------------------------------------------------------------------------------------
# Node kinds of the scratchy fixtures


@pytest.mark.parametrize("fixture,index,kind", nodes.node_cases())
def test_scratchy_node_torch_matches_numpy(fixture: str, index: int, kind: str, monkeypatch) -> None:
    manifest = nodes.load_manifest(fixture)
    node = manifest.nodes[index]
    seed = sum(map(ord, fixture)) * 1000 + index  # the inputs test_scratchy_nodes.py draws
    inputs = {a["tensor"]: nodes.make_input(manifest, nodes.FIXTURES[fixture], a["tensor"], seed)
              for a in node["args"] if not a["is_output"]}
    (out_id,) = [a["tensor"] for a in node["args"] if a["is_output"]]

    # the numpy reference with f32 BLAS: both sides sum matmuls in a BLAS library's blocked order
    # (the native kernel's sequential order is compared with BLAS in test_native_matmul.py)
    with monkeypatch.context() as patch:
        patch.setattr(ktir, "Machine", functools.partial(ktir.Machine, native_matmul=False))
        reference = nodes.run_node(manifest, node, inputs)[out_id]
    with monkeypatch.context() as patch:
        patch.setattr(ktir, "Machine", torch_machine_factory())
        got = nodes.run_node(manifest, node, inputs)[out_id]

    dev = deviation(got, reference, scale_of(manifest, node, kind, inputs, reference))
    what = f"{fixture} node{index} ({kind}, {node['fn']})"
    print(f"\n[deviation] {fixture} {kind}: {dev}")
    # Few elements may differ at all: a one-ulp move needs an f32 result next to an f16 boundary.
    assert_order_deviation(dev, kind, what, differing_per=200)


@pytest.mark.parametrize("fixture,index,kind", [
    p for p in nodes.node_cases() if not p.marks])
def test_scratchy_node_on_torch_passes_the_float64_reference(fixture, index, kind, monkeypatch) -> None:
    """The float64 reference check of test_scratchy_nodes.py, run with torch machines (the big,
    slow lm_heads are left to the torch-vs-numpy comparison above)."""
    monkeypatch.setattr(ktir, "Machine", torch_machine_factory())
    nodes.test_scratchy_node_matches_numpy(fixture, index, kind)


@pytest.mark.parametrize("fixture", nodes.FIXTURES if nodes.corpus_missing_reason() is None else [
    pytest.param(None, marks=pytest.mark.skip(reason=nodes.corpus_missing_reason()))])
def test_attention_with_empty_cache_on_torch(fixture: str, monkeypatch) -> None:
    monkeypatch.setattr(ktir, "Machine", torch_machine_factory())
    nodes.test_attention_with_empty_cache(fixture)


# --------------------------------------------------------------------------------------------
# ktir-examples kernels


@pytest.mark.parametrize("rel_path", test_examples.runner_cases())
def test_example_kernel_on_torch(rel_path: str, monkeypatch) -> None:
    """Each runner builds its machines through ``ktir.Machine``: on torch here. Runners of the
    kernels that do not run assert their documented failure, so those must fail alike."""
    monkeypatch.setattr(ktir, "Machine", torch_machine_factory())
    test_examples.test_example_kernel(rel_path)


@pytest.mark.parametrize("rel_path", test_examples.runner_cases())
def test_example_kernel_with_separate_device_mirrors(rel_path: str, monkeypatch) -> None:
    """The same runners with every region's bytes in a separate device mirror, copied in and out
    as on cuda/mps (on the cpu here unless KTIR_MODELS_TEST_DEVICE names a GPU). The kernels with
    inter-tile ops run their cores as threads that first touch the output's mirror at once: each
    core's writes must land in the one mirror the result is read from."""
    monkeypatch.setattr(ktir, "Machine", torch_machine_factory(separate_mirrors=True))
    test_examples.test_example_kernel(rel_path)


def test_example_runners_really_build_torch_machines(monkeypatch, corpus_dir) -> None:
    """Guard for the test above: the patched name is the one the runners use."""
    made = []
    factory = torch_machine_factory()

    def recording(*args, **kwargs):
        machine = factory(*args, **kwargs)
        made.append(machine.backend.name)
        return machine

    monkeypatch.setattr(ktir, "Machine", recording)
    test_examples.test_example_kernel("triton-ktir/vector_add_ktir.mlir")
    assert made == ["torch"]


# --------------------------------------------------------------------------------------------
# Faults


def _fault_message(backend: str, make_and_run) -> str:
    machine_kwargs = {"backend": backend, "device": device_for(backend)}
    with pytest.raises(ktir.EmulationFault) as info:
        make_and_run(machine_kwargs)
    return str(info.value)


def _outside_memory(kw):
    m = ktir.Machine(**kw)
    a = m.hbm.allocate_from(np.zeros((4, 16), np.float16), name="a")
    o = m.hbm.allocate((4, 16), "float16", name="o")
    test_machine.run(test_machine.fault_prog(), m, a.address, o.address)  # core 1 reads row 5 of 4


def _lx_overflow(kw):
    T = test_machine
    body = (T.view("va", "a", (256, 256)) + T.tile("ta", "va", (256, 256), (256, 256), "%c0, %c0")
            + T.load("v", "ta", (256, 256)) + "    %w = arith.mulf %v, %v : tensor<256x256xf16>\n"
            + "    %z = arith.addf %w, %v : tensor<256x256xf16>\n")  # v lives on: w is a new buffer
    m = ktir.Machine(lx_capacity=200 * 1024, **kw)
    a = m.hbm.allocate_from(np.ones((256, 256), np.float16), name="a")
    T.run(T.program("%a: index", body), m, a.address)


def _never_written(kw):
    T = test_machine
    body = T.view("va", "a", (2, 8)) + T.tile("ta", "va", (2, 8), (2, 8), "%c0, %c0") + T.load("v", "ta", (2, 8))
    m = ktir.Machine(**kw)
    a = m.hbm.allocate((2, 8), "float16", name="activations")
    T.run(T.program("%a: index", body), m, a.address)


def _read_only_store(kw):
    T = test_machine
    weights = np.arange(16, dtype=np.float16).reshape(2, 8)
    weights.flags.writeable = False
    body = (T.view("va", "a", (2, 8)) + T.tile("ta", "va", (2, 8), (2, 8), "%c0, %c0")
            + "    %x = arith.constant dense<1.0> : tensor<2x8xf16>\n" + T.store("x", "ta", (2, 8)))
    m = ktir.Machine(**kw)
    w = m.hbm.allocate_from(weights, name="w")
    T.run(T.program("%a: index", body), m, w.address)


@pytest.mark.parametrize("make_and_run, fragment", [
    (_outside_memory, "read of never-written HBM in region 'o'"),
    (_lx_overflow, "LX scratchpad overflow"),
    (_never_written, "read of never-written HBM in region 'activations'"),
    (_read_only_store, "read-only"),
], ids=["outside-memory", "lx-overflow", "never-written", "read-only-store"])
def test_fault_message_is_the_same_on_torch(make_and_run, fragment) -> None:
    on_numpy = _fault_message("numpy", make_and_run)
    on_torch = _fault_message("torch", make_and_run)
    assert fragment in on_numpy
    assert on_torch == on_numpy
