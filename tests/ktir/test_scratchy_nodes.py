"""Every distinct node kind of the three scratchy fixtures, run on the emulator against numpy.

For each fixture (smollm2-135m decode, smollm2-135m-prefill with m = 32 on multi-core grids,
llama-3.2-1b decode with its lm_head in 8 column chunks) we run the 15 nodes of layer 0 (input
RMSNorm, q/k/v GEMMs, RoPE on q and k, attention, o_proj, residual add, post-attention RMSNorm,
gate/up GEMMs, SiLU*mul, down GEMM, residual add) plus the final RMSNorm and the lm_head.

Shapes and argument bindings come from each fixture's manifest.json: ``tensors[]`` rows/cols,
``nodes[].args``; GEMM weights are listed ``[in, out]`` but laid out ``[out, in]`` in memory. Inputs
are random with realistic scales (activations ~N(0, 1), GEMM weights ~N(0, 1/sqrt(in)), norm
weights ~1 + N(0, 0.1), real RoPE tables, a KV-cache prefix ~N(0, 1) whose mask opens only its
first rows) so that the float16 tolerances below mean something. The references
(references/llama.py) are the float64 maths of a llama layer, not a transliteration of the KTIR.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import corpus_missing_reason, corpus_path
from references import llama
from references.tolerance import U16, assert_f16_gemm_close, assert_within

ktir = pytest.importorskip("ktir_models.ktir")


@dataclass(frozen=True)
class ModelShape:
    """What the references need to know about the model (from its HF config, not the MLIR)."""

    hidden: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    rms_eps: float
    rope_theta: float


SMOLLM2 = ModelShape(hidden=576, n_q_heads=9, n_kv_heads=3, head_dim=64, rms_eps=1e-5, rope_theta=100000.0)
LLAMA_1B = ModelShape(hidden=2048, n_q_heads=32, n_kv_heads=8, head_dim=64, rms_eps=1e-5, rope_theta=500000.0)

FIXTURES: dict[str, ModelShape] = {
    "smollm2-135m": SMOLLM2,
    "smollm2-135m-prefill": SMOLLM2,
    "llama-3.2-1b": LLAMA_1B,
}

# Node kinds of one layer, by p = node index mod 15 (corpus/README.md).
LAYER_KINDS = [
    "input_rmsnorm", "q_proj", "k_proj", "v_proj", "rope_q", "rope_k", "attention", "o_proj",
    "residual_attn", "post_attn_rmsnorm", "gate_proj", "up_proj", "silu_mul", "down_proj",
    "residual_mlp",
]
GEMM_KINDS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"}
NORM_KINDS = {"input_rmsnorm", "post_attn_rmsnorm", "final_rmsnorm"}

# Number of prefix rows the mask opens (the rest carry -65504, i.e. masked out).
OPEN_PREFIX_ROWS = 37


@dataclass(frozen=True)
class Manifest:
    """The parts of a fixture manifest.json these tests read."""

    folder: Path
    tensors: dict[int, tuple[int, int]]  # id -> (rows, cols) as listed
    sources: dict[int, dict]  # id -> source record
    nodes: list[dict]
    attn_mask: int
    decode_position: int

    def memory_shape(self, tensor_id: int) -> tuple[int, int]:
        """Shape of the tensor's bytes in HBM: GEMM weights are stored [out, in]."""
        rows, cols = self.tensors[tensor_id]
        source = self.sources.get(tensor_id)
        if source is not None and source.get("is_gemm"):
            return cols, rows
        return rows, cols

    def producer(self, tensor_id: int) -> int:
        """Index of the node that writes ``tensor_id`` (KeyError for sources and host inputs)."""
        for index, node in enumerate(self.nodes):
            if any(a["is_output"] and a["tensor"] == tensor_id for a in node["args"]):
                return index
        raise KeyError(f"no node writes t{tensor_id}")


@functools.cache
def load_manifest(fixture: str) -> Manifest:
    folder = corpus_path() / "scratchy" / fixture
    raw = json.loads((folder / "manifest.json").read_text())
    return Manifest(
        folder=folder,
        tensors={t["id"]: (t["rows"], t["cols"]) for t in raw["tensors"]},
        sources={s["id"]: s for s in raw["sources"]},
        nodes=raw["nodes"],
        attn_mask=raw["attn_mask"],
        decode_position=raw["decode_position"],
    )


@functools.cache
def load_function(mlir_path: Path, fn_name: str):
    return ktir.load_module(mlir_path).function(fn_name)


def node_cases() -> list:
    """(fixture, node index, kind) for layer 0, the final norm and the lm_head of each fixture."""
    reason = corpus_missing_reason()
    if reason is not None:
        return [pytest.param(None, None, None, marks=pytest.mark.skip(reason=reason), id="no-corpus")]
    cases = []
    for fixture in FIXTURES:
        count = len(load_manifest(fixture).nodes)
        picks = [(p, kind) for p, kind in enumerate(LAYER_KINDS)]
        picks += [(count - 2, "final_rmsnorm"), (count - 1, "lm_head")]
        for index, kind in picks:
            # The big lm_heads (and prefill's 32-core lm_head) take seconds: mark them slow.
            slow = kind == "lm_head" and fixture != "smollm2-135m"
            marks = [pytest.mark.slow] if slow else []
            cases.append(pytest.param(fixture, index, kind, marks=marks, id=f"{fixture}-n{index}-{kind}"))
    return cases


# --------------------------------------------------------------------------------------------
# Inputs


def make_input(
    manifest: Manifest, shape: ModelShape, tensor_id: int, seed: int, open_prefix_rows: int = OPEN_PREFIX_ROWS
) -> np.ndarray:
    """A float16 array for one input tensor, drawn according to what the tensor is."""
    rng = np.random.default_rng([seed, tensor_id])
    rows, cols = manifest.memory_shape(tensor_id)
    if tensor_id == manifest.attn_mask:
        mask = np.full((rows, cols), -65504.0)
        mask[:, :open_prefix_rows] = 0.0
        return mask.astype(np.float16)
    source = manifest.sources.get(tensor_id)
    role = source["role"] if source else "activation"
    if role == "weight" and source.get("is_gemm"):
        fan_in = cols  # stored [out, in]
        values = rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(np.sqrt(fan_in))
    elif role == "weight":
        values = 1.0 + 0.1 * rng.standard_normal((rows, cols))
    elif role in ("cos", "sin"):
        positions = [manifest.decode_position] if rows == 1 else range(rows)
        cos, sin = llama.rope_tables(np.asarray(list(positions)), cols, shape.rope_theta)
        values = cos if role == "cos" else sin
    else:  # embed, prefix_k, prefix_v, activations produced by earlier nodes
        values = rng.standard_normal((rows, cols), dtype=np.float32)
    return np.asarray(values).astype(np.float16)


def input_role(manifest: Manifest, tensor_id: int) -> str:
    """weight | cos | sin | prefix_k | prefix_v | mask | activation."""
    if tensor_id == manifest.attn_mask:
        return "mask"
    source = manifest.sources.get(tensor_id)
    if source is None or source["role"] == "embed":
        return "activation"
    return source["role"]


def run_node(manifest: Manifest, node: dict, inputs: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Run one node on a fresh machine; return its outputs by tensor id."""
    fn = load_function(manifest.folder / node["mlir"], node["fn"])
    machine = ktir.Machine()
    buffers = {}
    bindings = {}
    for arg in node["args"]:
        tid = arg["tensor"]
        if arg["is_output"]:
            buf = machine.hbm.allocate(manifest.memory_shape(tid), "float16", name=f"t{tid}")
        else:
            buf = machine.hbm.allocate_from(inputs[tid], name=f"t{tid}")
        buffers[tid] = buf
        bindings[arg["name"]] = buf.address
    machine.compile(fn).run(bindings)
    return {a["tensor"]: buffers[a["tensor"]].array.copy() for a in node["args"] if a["is_output"]}


# --------------------------------------------------------------------------------------------
# Comparison


def k_loop_trips(mlir_text: str) -> int:
    """Number of f16 accumulation steps of a K-blocked GEMM node (``K / KB`` of its loops)."""
    ks = [int(v) for v in re.findall(r"%K\d+ = arith\.constant (\d+) : index", mlir_text)]
    kbs = [int(v) for v in re.findall(r"%KB\d+ = arith\.constant (\d+) : index", mlir_text)]
    assert ks and kbs, "GEMM node without a K loop"
    return max(k // kb for k, kb in zip(ks, kbs))


# --------------------------------------------------------------------------------------------
# The test


@pytest.mark.parametrize("fixture,index,kind", node_cases())
def test_scratchy_node_matches_numpy(fixture: str, index: int, kind: str) -> None:
    manifest = load_manifest(fixture)
    shape = FIXTURES[fixture]
    node = manifest.nodes[index]
    in_args = [a for a in node["args"] if not a["is_output"]]
    out_args = [a for a in node["args"] if a["is_output"]]
    assert len(out_args) == 1, f"{node['fn']}: expected one output, found {len(out_args)}"
    out_id = out_args[0]["tensor"]

    seed = sum(map(ord, fixture)) * 1000 + index
    inputs = {a["tensor"]: make_input(manifest, shape, a["tensor"], seed) for a in in_args}
    got = run_node(manifest, node, inputs)[out_id]
    assert got.shape == manifest.memory_shape(out_id)

    # Sort the inputs by what they are: weights, tables (cos/sin/prefix/mask) and activations
    # (the embedding rows count as an activation: they are layer 0's residual stream).
    role_of = {a["tensor"]: input_role(manifest, a["tensor"]) for a in in_args}
    weights = [t for t, r in role_of.items() if r == "weight"]
    tables = {r: t for t, r in role_of.items() if r not in ("weight", "activation")}
    activations = [t for t, r in role_of.items() if r == "activation"]
    what = f"{fixture} node{index} ({kind}, {node['fn']})"

    if kind in NORM_KINDS:
        # Output = f16(f16(x * f16(1/rms)) * w): three f16 roundings of a value of size |ref|, and
        # the f32 sum of squares is exact to ~1e-7. So |err| <= 3u|ref| (+ a subnormal floor).
        (x_id,), (w_id,) = activations, weights
        ref = llama.rms_norm(inputs[x_id], inputs[w_id], shape.rms_eps)
        assert_within(got, ref, 3.5 * U16 * np.abs(ref) + 1e-6, what)

    elif kind in GEMM_KINDS:
        # K-blocked GEMM with an f16 accumulator over n K-steps: see the error model in
        # references/tolerance.py (bulk rms check plus a per-element 10 sigma bound).
        (x_id,), (w_id,) = activations, weights
        ref = llama.linear(inputs[x_id], inputs[w_id])
        steps = k_loop_trips((manifest.folder / node["mlir"]).read_text())
        assert_f16_gemm_close(got, ref, steps, f"{what} [{steps} K-steps]")

    elif kind in ("rope_q", "rope_k"):
        # out = x1*c - x2*s (and x1*s + x2*c): two f16 products and one f16 add/sub, each rounded:
        # |err| <= u(|x1 c| + |x2 s|) + u(1 + u)(|x1 c| + |x2 s|) < 2.01u(|x1 c| + |x2 s|), a hard
        # bound computed per element (the tables are f16 inputs, so exact for the reference).
        (x_id,) = activations
        x, cos, sin = inputs[x_id], inputs[tables["cos"]], inputs[tables["sin"]]
        ref = llama.rope(x, cos, sin, shape.head_dim)
        tokens = x.shape[0]
        heads = np.abs(x.astype(np.float64)).reshape(tokens, -1, shape.head_dim)
        c = np.abs(cos.astype(np.float64))[:, None, :]
        s = np.abs(sin.astype(np.float64))[:, None, :]
        # |x1 c| + |x2 s| per output element (rotate_half only moves halves and flips a sign).
        magnitude = (heads * c + np.abs(llama.rotate_half(heads)) * s).reshape(tokens, -1)
        assert_within(got, ref, 2.01 * U16 * magnitude + 1e-7, what)

    elif kind == "attention":
        by_layer_node = {manifest.producer(t) % 15: t for t in activations}
        q, k_new, v_new = (inputs[by_layer_node[p]] for p in (4, 5, 3))
        assert "mask" in tables, f"{what}: the attention node does not read attn_mask"
        ref = llama.attention_with_prefix(
            q, k_new, v_new, inputs[tables["prefix_k"]], inputs[tables["prefix_v"]],
            inputs[tables["mask"]], shape.n_q_heads, shape.n_kv_heads, shape.head_dim,
            causal=q.shape[0] > 1,
        )
        # Scores q.k/8 (|s| <~ 4) are rounded to f16 twice (matmul, scale): <= 2u|s| <= 4e-3
        # absolute, so each exp(s - max) is off by <= 0.4% relative (typically ~0.1%); the f16
        # exp, the f16 sum of <= 97 weights and the divide add a few u; the output is a convex
        # combination of values ~N(0, 1) whose weight errors have random signs, so its error is
        # ~1e-3 (observed max 1.6e-3 over all heads and rows). 6e-3 + 0.6% keeps ~4x margin and
        # still catches a wrong head, kv group, mask row, scale or causal row (errors ~0.1-1).
        assert_within(got, ref, 6e-3 + 6e-3 * np.abs(ref), what)

    elif kind in ("residual_attn", "residual_mlp"):
        # A single f16 add of two f16 values, correctly rounded, is exactly f16(a + b): bit-exact.
        a, b = (inputs[t] for t in activations)
        ref = (a.astype(np.float64) + b.astype(np.float64)).astype(np.float16)
        np.testing.assert_array_equal(got, ref, err_msg=what)

    elif kind == "silu_mul":
        # g / (1 + exp(-g)) * up as five f16 ops (neg is exact): four roundings, each relative
        # u, and exp's argument is exact, so |err| <= 4u|ref| (+ a subnormal floor).
        by_layer_node = {manifest.producer(t) % 15: t for t in activations}
        gate_id, up_id = by_layer_node[10], by_layer_node[11]
        ref = llama.silu_mul(inputs[gate_id], inputs[up_id])
        assert_within(got, ref, 4.5 * U16 * np.abs(ref) + 1e-6, what)

    else:  # pragma: no cover - the case list only holds the kinds above
        raise AssertionError(f"unknown node kind {kind}")


@pytest.mark.parametrize("fixture", list(FIXTURES) if corpus_missing_reason() is None else [
    pytest.param(None, marks=pytest.mark.skip(reason=corpus_missing_reason()))])
def test_attention_with_empty_cache(fixture: str) -> None:
    """The goldens' convention: an all -65504 mask (empty KV cache). Every prefix weight is then
    exp(-65504 - max) = 0 exactly, so decode attention returns the fresh value row of each head's
    kv group bit for bit, and prefill row i is causal attention over fresh rows 0..i only."""
    manifest = load_manifest(fixture)
    shape = FIXTURES[fixture]
    node = manifest.nodes[6]
    in_ids = [a["tensor"] for a in node["args"] if not a["is_output"]]
    inputs = {t: make_input(manifest, shape, t, seed=11, open_prefix_rows=0) for t in in_ids}
    (out_id,) = [a["tensor"] for a in node["args"] if a["is_output"]]
    got = run_node(manifest, node, inputs)[out_id]
    by_layer_node = {manifest.producer(t) % 15: t for t in in_ids if input_role(manifest, t) == "activation"}
    q, k_new, v_new = (inputs[by_layer_node[p]] for p in (4, 5, 3))
    group, d = shape.n_q_heads // shape.n_kv_heads, shape.head_dim
    if q.shape[0] == 1:
        expected = np.concatenate([v_new[:, (h // group) * d : (h // group + 1) * d] for h in range(shape.n_q_heads)], 1)
        np.testing.assert_array_equal(got, expected)
    else:
        empty = np.zeros((0, v_new.shape[1]))
        ref = llama.attention_with_prefix(
            q, k_new, v_new, empty, empty, np.zeros((1, 0)), shape.n_q_heads, shape.n_kv_heads, d, causal=True
        )
        # Same error budget as the attention nodes above (here over <= 32 fresh keys).
        assert_within(got, ref, 6e-3 + 6e-3 * np.abs(ref), f"{fixture} node6, empty cache")


# --------------------------------------------------------------------------------------------
# The references themselves agree with transformers' modeling_llama (no emulator involved), so a
# failure above points at the emulator, not at the yardstick.


def test_references_agree_with_transformers() -> None:
    torch = pytest.importorskip("torch")
    ml = pytest.importorskip("transformers.models.llama.modeling_llama")
    rng = np.random.default_rng(7)
    shape = SMOLLM2
    m, prefix, d = 5, 6, shape.head_dim

    x = rng.standard_normal((m, shape.hidden))
    w = 1.0 + 0.1 * rng.standard_normal(shape.hidden)
    norm = ml.LlamaRMSNorm(shape.hidden, eps=shape.rms_eps).double()
    with torch.no_grad():
        norm.weight.copy_(torch.from_numpy(w))
        hf = norm(torch.from_numpy(x)).numpy()
    # LlamaRMSNorm normalises in float32 whatever the input dtype: compare at f32 level.
    np.testing.assert_allclose(llama.rms_norm(x, w, shape.rms_eps), hf, rtol=1e-5, atol=1e-6)

    q = rng.standard_normal((m, shape.n_q_heads * d))
    k = rng.standard_normal((m, shape.n_kv_heads * d))
    v = rng.standard_normal((m, shape.n_kv_heads * d))
    cos, sin = llama.rope_tables(np.arange(prefix, prefix + m), d, shape.rope_theta)
    to_heads = lambda a, h: torch.from_numpy(a).reshape(1, m, h, d).transpose(1, 2)  # noqa: E731
    hq, hk = ml.apply_rotary_pos_emb(
        to_heads(q, shape.n_q_heads), to_heads(k, shape.n_kv_heads),
        torch.from_numpy(cos)[None], torch.from_numpy(sin)[None],
    )
    from_heads = lambda t: t.transpose(1, 2).reshape(m, -1).numpy()  # noqa: E731
    np.testing.assert_allclose(llama.rope(q, cos, sin, d), from_heads(hq), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(llama.rope(k, cos, sin, d), from_heads(hk), rtol=1e-12, atol=1e-12)

    # Attention over a cache prefix (3 open rows) plus the m fresh rows, causal, with GQA.
    pk = rng.standard_normal((prefix, shape.n_kv_heads * d))
    pv = rng.standard_normal((prefix, shape.n_kv_heads * d))
    mask_row = np.where(np.arange(prefix) < 3, 0.0, -np.inf)[None]
    ours = llama.attention_with_prefix(
        q, k, v, pk, pv, mask_row, shape.n_q_heads, shape.n_kv_heads, d, causal=True
    )
    full_mask = np.concatenate([np.repeat(mask_row, m, 0), np.triu(np.full((m, m), -np.inf), 1)], 1)

    class Module(torch.nn.Module):
        num_key_value_groups = shape.n_q_heads // shape.n_kv_heads

    keys = np.concatenate([pk, k]).reshape(1, prefix + m, shape.n_kv_heads, d)
    values = np.concatenate([pv, v]).reshape(1, prefix + m, shape.n_kv_heads, d)
    hf_out, _ = ml.eager_attention_forward(
        Module().eval(),
        torch.from_numpy(q).reshape(1, m, shape.n_q_heads, d).transpose(1, 2),
        torch.from_numpy(keys).transpose(1, 2),
        torch.from_numpy(values).transpose(1, 2),
        torch.from_numpy(full_mask)[None, None],
        scaling=d**-0.5,
    )
    # transformers runs its softmax in float32 whatever the input dtype: compare at f32 level.
    np.testing.assert_allclose(ours, hf_out.reshape(m, -1).numpy(), rtol=1e-5, atol=1e-6)

    gate, up = rng.standard_normal((2, m, 64))
    act = torch.nn.functional.silu(torch.from_numpy(gate)) * torch.from_numpy(up)
    np.testing.assert_allclose(llama.silu_mul(gate, up), act.numpy(), rtol=1e-12, atol=1e-12)
