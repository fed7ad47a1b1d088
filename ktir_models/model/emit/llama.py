"""LlamaForCausalLM as a KTIR node graph, written top to bottom like transformers' modeling_llama.

One pass processes ``m`` new tokens at positions ``past .. past+m-1`` (decode: m = 1; prefill:
past = 0; decode after a prefill: past = P). Per layer (11 nodes)::

    h     = input_layernorm(x)                      rmsnorm
    q     = q_proj(h)                               gemm
    k     = k_proj(h)                               gemm
    v_cache[past:past+m] = v_proj(h)                gemm, written straight into the cache
    q_rot = rope(q)                                 rope
    k_cache[past:past+m] = rope(k)                  rope, written straight into the cache
    attn  = attention(q_rot, k_cache, v_cache, mask)
    x     = x + o_proj(attn)                        gemm + residual epilogue
    h     = post_attention_layernorm(x)             rmsnorm
    act   = silu(gate_proj(h)) * up_proj(h)         gemm with two weights + silu_mul epilogue
    x     = x + down_proj(act)                      gemm + residual epilogue

then ``logits = lm_head(norm(x))``. All activations between nodes are f16 in HBM; every node
computes in f32 and rounds once (see docs/emitter.md).

The family's :class:`~ktir_models.model.families.Features` change this graph in place, never by
approximation (docs/families.md):

* ``qkv_bias`` (qwen2): q/k/v GEMMs take a ``bias`` epilogue (the bias vectors are weight sources);
* ``qk_norm`` (qwen3): ``q_norm`` / ``k_norm`` nodes — an RMSNorm over each head's ``head_dim``
  columns (the rmsnorm kernel on the ``[m*heads, head_dim]`` view) — between the q/k GEMMs and RoPE;
* ``residual_multiplier`` / ``logits_scaling`` (granite): scalars in the o_proj / down_proj and
  lm_head epilogues; ``attention_multiplier``: the attention's softmax scale;
* ``sliding_window`` (mistral): the attention's fresh causal constant is windowed (the host mask
  windows the cached prefix);
* ``embedding_multiplier`` (granite) scales the host's embedding rows (manifest field ``host``).

The KV cache of layer l is two host-bound source tensors ``[C, kv_heads*head_dim]`` (roles
``prefix_k`` / ``prefix_v``, rows = positions) that this pass reads *and writes*: the host zeroes
them for a first pass and carries them from one pass to the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ModelConfig
from .kernels.attention import attention_kernel
from .kernels.gemm import gemm_kernel
from .kernels.rmsnorm import rmsnorm_kernel
from .kernels.rope import rope_kernel
from .kernels.rows import RowBase
from .program import Arg, ProgramBuilder, Tensor


@dataclass(frozen=True)
class PassShape:
    """The shape of one forward pass: ``m`` new tokens after ``past`` cached ones, a KV cache of
    ``capacity`` rows (>= past + m), and whether the first written cache row is a runtime argument
    (``dynamic_position``: one program serves every decode step) or the constant ``past``."""

    m: int
    past: int
    capacity: int
    dynamic_position: bool = False

    @property
    def row_base(self) -> RowBase:
        return RowBase(arg="pos") if self.dynamic_position else RowBase(static=self.past)


@dataclass
class LayerWeights:
    input_layernorm: Tensor
    q_proj: Tensor
    k_proj: Tensor
    v_proj: Tensor
    o_proj: Tensor
    post_attention_layernorm: Tensor
    gate_proj: Tensor
    up_proj: Tensor
    down_proj: Tensor
    k_cache: Tensor
    v_cache: Tensor
    # family extras (None when the family has none)
    q_bias: Tensor | None = None
    k_bias: Tensor | None = None
    v_bias: Tensor | None = None
    q_norm: Tensor | None = None
    k_norm: Tensor | None = None


class LlamaEmitter:
    """Builds the node graph of one pass of a llama-family model."""

    def __init__(self, cfg: ModelConfig, shape: PassShape, prefix: str) -> None:
        self.cfg = cfg
        self.shape = shape
        self.p = ProgramBuilder(prefix)
        c = cfg
        self.q_dim = c.num_attention_heads * c.head_dim
        self.kv_dim = c.num_key_value_heads * c.head_dim

    # ------------------------------------------------------------------ the model

    def build(self) -> ProgramBuilder:
        c, s, p = self.cfg, self.shape, self.p
        x = p.tensor(s.m, c.hidden_size, role="embed")
        self.cos = p.tensor(s.m, c.head_dim, role="cos")
        self.sin = p.tensor(s.m, c.head_dim, role="sin")
        layers = [self.layer_weights(i) for i in range(c.num_hidden_layers)]
        norm = self.weight("norm", "model.norm", None, 1, c.hidden_size, gemm=False)
        lm_head = self.weight("lm_head", "lm_head", None, c.hidden_size, c.vocab_size, gemm=True)
        self.mask = Tensor(s.m, s.capacity)  # host-bound (attn_mask), not a source: external convention
        p.tensors.append(self.mask)

        for i, w in enumerate(layers):
            x = self.decoder_layer(i, x, w)
        h = self.rmsnorm("norm", None, x, norm)
        logits = self.gemm("lm_head", None, h, [lm_head], c.vocab_size, divisor=c.features.logits_scaling)
        p.finish(result=logits, mask=self.mask)
        self.layers = layers
        return p

    def decoder_layer(self, i: int, x: Tensor, w: LayerWeights) -> Tensor:
        c = self.cfg
        rm = c.features.residual_multiplier
        h = self.rmsnorm("input_layernorm", i, x, w.input_layernorm)
        q_rot = self.attention_inputs(i, h, w)
        attn = self.attention(i, q_rot, w.k_cache, w.v_cache)
        x = self.gemm("o_proj", i, attn, [w.o_proj], c.hidden_size, residual=x, multiplier=rm)
        h = self.rmsnorm("post_attention_layernorm", i, x, w.post_attention_layernorm)
        act = self.gemm("gate_up_silu", i, h, [w.gate_proj, w.up_proj], c.intermediate_size)
        return self.gemm("down_proj", i, act, [w.down_proj], c.hidden_size, residual=x, multiplier=rm)

    def attention_inputs(self, i: int, h: Tensor, w: LayerWeights) -> Tensor:
        """q/k/v projections (with their biases), the per-head q/k norms, RoPE; v and the rotated
        k land in the cache. Returns the rotated q."""
        c = self.cfg
        q = self.gemm("q_proj", i, h, [w.q_proj], self.q_dim, bias=w.q_bias)
        k = self.gemm("k_proj", i, h, [w.k_proj], self.kv_dim, bias=w.k_bias)
        self.gemm("v_proj", i, h, [w.v_proj], self.kv_dim, into_cache=w.v_cache, bias=w.v_bias)
        if w.q_norm is not None and w.k_norm is not None:  # qwen3: before RoPE
            q = self.head_norm("q_norm", i, q, w.q_norm, c.num_attention_heads)
            k = self.head_norm("k_norm", i, k, w.k_norm, c.num_key_value_heads)
        q_rot = self.rope("rope_q", i, q, c.num_attention_heads)
        self.rope("rope_k", i, k, c.num_key_value_heads, into_cache=w.k_cache)
        return q_rot

    # ------------------------------------------------------------------ sources

    def weight(self, base: str, disk: str, layer: int | None, rows: int, cols: int, gemm: bool) -> Tensor:
        """A weight source; GEMM weights are listed ``[in, out]`` (bytes bound ``[out, in]``)."""
        name = base if layer is None else f"{base}_{layer}"
        return self.p.tensor(rows, cols, role="weight", name=name, base=base, disk=disk,
                             layer=layer if layer is not None else 0, is_gemm=gemm)

    def layer_weights(self, i: int) -> LayerWeights:
        c, hs, pre = self.cfg, self.cfg.hidden_size, f"model.layers.{i}."
        f, hd = c.features, c.head_dim
        extras: dict[str, Tensor] = {}
        if f.qkv_bias:
            for proj, n in (("q", self.q_dim), ("k", self.kv_dim), ("v", self.kv_dim)):
                extras[f"{proj}_bias"] = self.weight(f"self_attn_{proj}_proj_bias",
                                                     pre + f"self_attn.{proj}_proj.bias", i, 1, n, False)
        if f.qk_norm:
            for proj in ("q", "k"):
                extras[f"{proj}_norm"] = self.weight(f"self_attn_{proj}_norm", pre + f"self_attn.{proj}_norm",
                                                     i, 1, hd, False)
        return LayerWeights(
            input_layernorm=self.weight("input_layernorm", pre + "input_layernorm", i, 1, hs, False),
            q_proj=self.weight("self_attn_q_proj", pre + "self_attn.q_proj", i, hs, self.q_dim, True),
            k_proj=self.weight("self_attn_k_proj", pre + "self_attn.k_proj", i, hs, self.kv_dim, True),
            v_proj=self.weight("self_attn_v_proj", pre + "self_attn.v_proj", i, hs, self.kv_dim, True),
            o_proj=self.weight("self_attn_o_proj", pre + "self_attn.o_proj", i, self.q_dim, hs, True),
            post_attention_layernorm=self.weight(
                "post_attention_layernorm", pre + "post_attention_layernorm", i, 1, hs, False),
            gate_proj=self.weight("mlp_gate_proj", pre + "mlp.gate_proj", i, hs, c.intermediate_size, True),
            up_proj=self.weight("mlp_up_proj", pre + "mlp.up_proj", i, hs, c.intermediate_size, True),
            down_proj=self.weight("mlp_down_proj", pre + "mlp.down_proj", i, c.intermediate_size, hs, True),
            k_cache=self.p.tensor(self.shape.capacity, self.kv_dim, role="prefix_k", layer=i),
            v_cache=self.p.tensor(self.shape.capacity, self.kv_dim, role="prefix_v", layer=i),
            **extras,
        )

    # ------------------------------------------------------------------ nodes

    def _pos_args(self) -> list[Arg]:
        return [Arg("pos", None, scalar="position")] if self.shape.dynamic_position else []

    def rmsnorm(self, what: str, layer: int | None, x: Tensor, weight: Tensor) -> Tensor:
        c, m = self.cfg, self.shape.m
        out = self.p.tensor(m, c.hidden_size)
        self.p.node(
            what, layer, "rmsnorm", [Arg("x", x), Arg("w", weight), Arg("out", out, True)],
            lambda fn: rmsnorm_kernel(fn, m=m, hidden=c.hidden_size, eps=c.rms_norm_eps,
                                      x="x", weight="w", out="out"),
        )
        return out

    def gemm(self, what: str, layer: int | None, x: Tensor, weights: list[Tensor], n: int,
             residual: Tensor | None = None, into_cache: Tensor | None = None, bias: Tensor | None = None,
             multiplier: float = 1.0, divisor: float = 1.0) -> Tensor:
        """``x @ W^T`` into a new tensor, or into rows ``past..`` of a cache tensor; two weights
        mean ``silu(x @ gate^T) * (x @ up^T)``; ``residual`` or ``bias`` is added before rounding,
        after the accumulator is multiplied by ``multiplier`` and divided by ``divisor``."""
        m, k = self.shape.m, x.cols
        out = into_cache if into_cache is not None else self.p.tensor(m, n)
        wnames = ["w"] if len(weights) == 1 else ["gate", "up"]
        args = [Arg("x", x)] + [Arg(nm, w) for nm, w in zip(wnames, weights)]
        if residual is not None:
            args.append(Arg("res", residual))
        if bias is not None:
            args.append(Arg("bias", bias))
        args.append(Arg("out", out, True))
        base = RowBase()
        if into_cache is not None:
            base = self.shape.row_base
            args += self._pos_args()
        epilogue = "silu_mul" if len(weights) == 2 else \
            ("residual" if residual is not None else ("bias" if bias is not None else "none"))
        self.p.node(
            what, layer, "gemm", args,
            lambda fn: gemm_kernel(fn, m=m, k=k, n=n, x="x", weights=wnames, out="out",
                                   epilogue=epilogue, residual="res" if residual is not None else None,
                                   out_rows=out.rows, out_base=base, bias="bias" if bias is not None else None,
                                   multiplier=multiplier, divisor=divisor),
        )
        return out

    def head_norm(self, what: str, layer: int, x: Tensor, weight: Tensor, heads: int) -> Tensor:
        """RMSNorm of every head of ``x [m, heads*head_dim]`` over its ``head_dim`` columns: the
        rmsnorm kernel on the same bytes viewed as ``[m*heads, head_dim]`` (qwen3's q_norm/k_norm)."""
        c, m = self.cfg, self.shape.m
        out = self.p.tensor(m, heads * c.head_dim)
        self.p.node(
            what, layer, "rmsnorm", [Arg("x", x), Arg("w", weight), Arg("out", out, True)],
            lambda fn: rmsnorm_kernel(fn, m=m * heads, hidden=c.head_dim, eps=c.rms_norm_eps,
                                      x="x", weight="w", out="out"),
        )
        return out

    def rope(self, what: str, layer: int, x: Tensor, heads: int, into_cache: Tensor | None = None) -> Tensor:
        c, m = self.cfg, self.shape.m
        out = into_cache if into_cache is not None else self.p.tensor(m, heads * c.head_dim)
        args = [Arg("x", x), Arg("cos", self.cos), Arg("sin", self.sin), Arg("out", out, True)]
        base = RowBase()
        if into_cache is not None:
            base = self.shape.row_base
            args += self._pos_args()
        self.p.node(
            what, layer, "rope", args,
            lambda fn: rope_kernel(fn, m=m, heads=heads, head_dim=c.head_dim, x="x", cos="cos",
                                   sin="sin", out="out", out_rows=out.rows, out_base=base),
        )
        return out

    def attention(self, layer: int, q: Tensor, k_cache: Tensor, v_cache: Tensor) -> Tensor:
        c, s = self.cfg, self.shape
        out = self.p.tensor(s.m, self.q_dim)
        args = [Arg("q", q), Arg("k_cache", k_cache), Arg("v_cache", v_cache),
                Arg("mask", self.mask), Arg("out", out, True)] + self._pos_args()
        self.p.node(
            "attention", layer, "attention", args,
            lambda fn: attention_kernel(fn, m=s.m, capacity=s.capacity, heads=c.num_attention_heads,
                                        kv_heads=c.num_key_value_heads, head_dim=c.head_dim, q="q",
                                        k_cache="k_cache", v_cache="v_cache", mask="mask", out="out",
                                        fresh=s.row_base, scale=c.features.attention_scale(c.head_dim),
                                        window=c.features.sliding_window),
        )
        return out
