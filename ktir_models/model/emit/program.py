"""The records of an emitted program and how they are written as a fixture directory.

A :class:`ProgramBuilder` collects tensors, host-bound sources and nodes in model order. Tensor ids
are assigned when the program is written: sources first (ids ``0 .. num_sources-1``, the
convention of the external dumps), then intermediates in creation order, then the attention mask.
Kernel arguments are named after their role in the kernel (``x``, ``w``, ``out``, ...), not after
tensor ids, so the kernel text never depends on the numbering.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .ktir_text import KernelText


@dataclass(eq=False)
class Tensor:
    """A 2-d f16 HBM tensor ``rows x cols``; ``source`` describes how the host fills it, if it does."""

    rows: int
    cols: int
    source: dict[str, Any] | None = None
    id: int = -1  # assigned by ProgramBuilder.finish


@dataclass(frozen=True)
class Arg:
    """Kernel argument ``name`` receives the address of ``tensor`` (or, for ``scalar``, the value of
    the named host scalar, e.g. ``position``)."""

    name: str
    tensor: Tensor | None
    is_output: bool = False
    scalar: str | None = None


@dataclass
class Node:
    """One kernel: its function name, file, arguments in signature order, text and plan facts."""

    fn: str
    mlir: str
    args: list[Arg]
    text: str
    kind: str
    layer: int | None
    grid: int
    lx_estimate: int


@dataclass
class ProgramBuilder:
    """Accumulates one program; see the module docstring for the id convention."""

    prefix: str
    tensors: list[Tensor] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)

    def tensor(self, rows: int, cols: int, **source: Any) -> Tensor:
        """A new tensor; keyword arguments (``role=...``) make it a host-bound source."""
        t = Tensor(rows, cols, dict(source) if source else None)
        self.tensors.append(t)
        return t

    def node(self, what: str, layer: int | None, kind: str, args: list[Arg],
             kernel: Callable[[str], KernelText]) -> None:
        """Add node number ``len(nodes)``; ``kernel(fn)`` builds the kernel named ``fn``."""
        i = len(self.nodes)
        where = f"l{layer}_" if layer is not None else ""
        fn = f"{self.prefix}_n{i}_{where}{what}"
        k = kernel(fn)
        self.nodes.append(Node(fn, f"node{i}.mlir", args, k.text, kind, layer, k.grid, k.lx_estimate))

    def finish(self, result: Tensor, mask: Tensor) -> None:
        """Assign ids: sources, then intermediates, the mask last."""
        order = [t for t in self.tensors if t.source is not None]
        order += [t for t in self.tensors if t.source is None and t is not mask]
        order.append(mask)
        for i, t in enumerate(order):
            t.id = i
        self.tensors = order
        self.result = result
        self.mask = mask

    def manifest(self, extras: dict[str, Any]) -> dict[str, Any]:
        """The manifest dict: the external fields first, then ours (``extras``)."""
        sources = []
        for t in self.tensors:
            if t.source is not None:
                sources.append({"id": t.id, **t.source})
        nodes = []
        for n in self.nodes:
            args = []
            for a in n.args:
                if a.scalar is not None:
                    args.append({"name": a.name, "scalar": a.scalar, "is_output": False})
                else:
                    assert a.tensor is not None
                    args.append({"name": a.name, "tensor": a.tensor.id, "is_output": a.is_output})
            nodes.append({
                "fn": n.fn, "mlir": n.mlir, "args": args,
                "kind": n.kind, "layer": n.layer, "grid": [n.grid, 1], "lx_estimate": n.lx_estimate,
            })
        manifest: dict[str, Any] = {
            "result": self.result.id,
            "num_sources": len(sources),
            "decode_position": extras["past"],
            "attn_mask": self.mask.id,
            "tensors": [
                {"id": t.id, "rows": t.rows, "cols": t.cols, "is_source": t.source is not None}
                for t in self.tensors
            ],
            "sources": sources,
            "nodes": nodes,
        }
        manifest.update(extras)
        return manifest

    def write(self, out_dir: Path, extras: dict[str, Any]) -> None:
        """Write ``manifest.json`` and one ``node<i>.mlir`` per node into ``out_dir`` (exists)."""
        for n in self.nodes:
            (out_dir / n.mlir).write_text(n.text, encoding="utf-8")
        text = json.dumps(self.manifest(extras), indent=1)
        (out_dir / "manifest.json").write_text(text + "\n", encoding="utf-8")
