"""Serving programs: one step of continuous batching over a paged KV cache.

A step runs ``rows = prefill_rows + decode_slots`` token rows through the model at once: an
optional prefill chunk of one sequence (``prefill_rows`` rows, the chunk size) and one row per
decode slot. Every GEMM, RMSNorm and RoPE node is the one-sequence node of :mod:`.llama` over all
the step's rows (RoPE reads the host's cos/sin row of each row's own position). What changes is
the KV cache:

* the cache of each layer is a pool of blocks (``[num_blocks * block_size, kv_dim]`` per k|v,
  roles ``kv_k`` / ``kv_v``), the last block a scratch block padding rows write to;
* the rotated k and the v of the step's rows go to fresh tensors, and one ``cache_write`` node per
  layer scatters them into the pool by the host's slot mapping;
* the ``paged_attention`` node reads each group's keys through its block table, under the host's
  mask ``[rows, max_blocks * block_size]`` (kernels/paged.py).

Per layer: 12 nodes (14 with qwen3's q/k norms). The program is specialised on the step shape
(:class:`ServingShape`) only: positions, context lengths, block tables and slots are host data, so
one program serves every step of its shape. docs/serving.md has the layout and the host contract.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...errors import UserError
from ..config import ModelConfig
from .api import host_fields
from .kernels.paged import RowGroups, cache_write_kernel, paged_attention_kernel
from .llama import LayerWeights, LlamaEmitter, PassShape
from .program import Arg, ProgramBuilder, Tensor

#: Bumped whenever the emitted serving text or its manifest can change.
SERVING_VERSION = "1"


@dataclass(frozen=True)
class ServingShape:
    """The shape of one serving step: ``prefill_rows`` (the chunk; 0 = a decode-only step),
    ``decode_slots`` one-row groups, the pool (``num_blocks`` blocks of ``block_size`` slots,
    the scratch block included) and the block-table width ``max_blocks`` per sequence."""

    prefill_rows: int
    decode_slots: int
    block_size: int
    num_blocks: int
    max_blocks: int

    def __post_init__(self) -> None:
        if min(self.prefill_rows, self.decode_slots) < 0 or self.rows < 1:
            raise UserError(f"serving step: {self.prefill_rows} prefill rows and "
                            f"{self.decode_slots} decode slots: need at least one row")
        if self.block_size < 1 or self.num_blocks < 2 or self.max_blocks < 1:
            raise UserError(f"serving step: block size {self.block_size}, {self.num_blocks} "
                            f"blocks, {self.max_blocks} blocks per sequence: need >= 1, >= 2 "
                            "and >= 1")

    @property
    def groups(self) -> RowGroups:
        return RowGroups(self.prefill_rows, self.decode_slots)

    @property
    def rows(self) -> int:
        return self.prefill_rows + self.decode_slots

    @property
    def context(self) -> int:
        """Mask columns: the positions a block table can address."""
        return self.max_blocks * self.block_size

    @property
    def slots(self) -> int:
        return self.num_blocks * self.block_size


class ServingEmitter(LlamaEmitter):
    """The llama-family graph of :class:`LlamaEmitter` with a paged cache (module docstring)."""

    def __init__(self, cfg: ModelConfig, shape: ServingShape, prefix: str) -> None:
        # The base graph sees a pass of ``rows`` tokens whose mask has ``context`` columns.
        super().__init__(cfg, PassShape(m=shape.rows, past=0, capacity=shape.context), prefix)
        self.serving = shape
        self.fresh: dict[tuple[int, str], Tensor] = {}
        self.slots: Tensor | None = None
        self.block_table: Tensor | None = None

    def layer_weights(self, i: int) -> LayerWeights:
        """The base layer's tensors; its cache tensors become the layer's block pool."""
        w = super().layer_weights(i)
        for tensor, role in ((w.k_cache, "kv_k"), (w.v_cache, "kv_v")):
            tensor.rows = self.serving.slots
            tensor.source = {"role": role, "layer": i}
        return w

    def gemm(self, what: str, layer: int | None, x: Tensor, weights: list[Tensor], n: int,
             residual: Tensor | None = None, into_cache: Tensor | None = None, **kw: Any) -> Tensor:
        """v_proj writes a fresh tensor; ``cache_write`` moves it into the pool."""
        out = super().gemm(what, layer, x, weights, n, residual=residual, **kw)
        if into_cache is not None:
            assert layer is not None
            self.fresh[(layer, "v")] = out
        return out

    def rope(self, what: str, layer: int, x: Tensor, heads: int,
             into_cache: Tensor | None = None) -> Tensor:
        """RoPE of k writes a fresh tensor; ``cache_write`` moves it into the pool."""
        out = super().rope(what, layer, x, heads)
        if into_cache is not None:
            self.fresh[(layer, "k")] = out
        return out

    def attention(self, layer: int, q: Tensor, k_cache: Tensor, v_cache: Tensor) -> Tensor:
        c, s = self.cfg, self.serving
        if self.slots is None:
            self.slots = self.p.tensor(s.rows, 1, role="slot_mapping", dtype="i32")
            self.block_table = self.p.tensor(s.groups.count, s.max_blocks, role="block_table",
                                             dtype="i32")
        assert self.block_table is not None
        k_new, v_new = self.fresh[(layer, "k")], self.fresh[(layer, "v")]
        self.p.node(
            "cache_write", layer, "cache_write",
            [Arg("k_new", k_new), Arg("v_new", v_new), Arg("slots", self.slots),
             Arg("k_cache", k_cache, True), Arg("v_cache", v_cache, True)],
            lambda fn: cache_write_kernel(fn, rows=s.rows, slots_total=s.slots, kv_dim=self.kv_dim,
                                          k_new="k_new", v_new="v_new", slots="slots",
                                          k_cache="k_cache", v_cache="v_cache"),
        )
        out = self.p.tensor(s.rows, self.q_dim)
        self.p.node(
            "paged_attention", layer, "attention",
            [Arg("q", q), Arg("k_cache", k_cache), Arg("v_cache", v_cache),
             Arg("block_table", self.block_table), Arg("mask", self.mask), Arg("out", out, True)],
            lambda fn: paged_attention_kernel(
                fn, groups=s.groups, heads=c.num_attention_heads, kv_heads=c.num_key_value_heads,
                head_dim=c.head_dim, block_size=s.block_size, num_blocks=s.num_blocks,
                max_blocks=s.max_blocks, q="q", k_cache="k_cache", v_cache="v_cache",
                block_table="block_table", mask="mask", out="out",
                scale=c.features.attention_scale(c.head_dim)),
        )
        return out


@dataclass(frozen=True)
class ServingProgram:
    """An emitted serving step: the program (nodes, tensors with ids) and its shape."""

    shape: ServingShape
    program: ProgramBuilder
    name: str

    def tensor_of(self, role: str, layer: int | None = None) -> Tensor:
        """The source tensor of ``role`` (and ``layer``)."""
        for t in self.program.tensors:
            src = t.source or {}
            if src.get("role") == role and (layer is None or src.get("layer") == layer):
                return t
        raise KeyError((role, layer))

    def manifest(self, cfg: ModelConfig) -> dict[str, Any]:
        """The manifest dict: the emitter's fields plus the serving shape and tensor dtypes."""
        extras = {
            "format": "ktir-models/serving-1",
            "emitter_version": SERVING_VERSION,
            "model": self.name,
            "config": cfg.to_hf_dict(),
            "past": 0,
            "serving": asdict(self.shape),
            **({"host": host_fields(cfg)} if host_fields(cfg) else {}),
        }
        return self.program.manifest(extras)

    def write(self, out_dir: Path, cfg: ModelConfig) -> Path:
        """``manifest.json`` and one ``node<i>.mlir`` per node into ``out_dir`` (created)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        for n in self.program.nodes:
            (out_dir / n.mlir).write_text(n.text, encoding="utf-8")
        (out_dir / "manifest.json").write_text(json.dumps(self.manifest(cfg), indent=1) + "\n",
                                               encoding="utf-8")
        return out_dir


def build_serving_program(cfg: ModelConfig, shape: ServingShape,
                          name: str = "model") -> ServingProgram:
    """The serving step program of ``shape`` in memory (node texts, tensors with ids)."""
    kind = f"p{shape.prefill_rows}d{shape.decode_slots}"
    symbol = re.sub(r"[^A-Za-z0-9_]", "_", name)
    emitter = ServingEmitter(cfg, shape, prefix=f"ktir_serve_{kind}_{symbol}")
    return ServingProgram(shape, emitter.build(), name)
