"""Last-token prefill: the lm_head over the last row only.

A user who samples only from the last position of a prefill needs one row of logits, and the
lm_head (``[m, hidden] x [hidden, vocab]``) is the widest GEMM of a pass. ``Runner.run(inputs,
last_token=True)`` returns ``[1, vocab]``: the last row of what the all-rows pass returns, bit
for bit.

How: for a program of our emitter whose last node is the lm_head GEMM writing the result,
:func:`last_row_head` compiles a one-row copy of that kernel: the same generator
(``emit.kernels.gemm.gemm_kernel``) with the column chunks and the K block planned for the
program's ``m`` rows (``plan_rows``), so every element is summed over the same K blocks and
rounded to f16 at the same points as in the m-row kernel. The copy is trusted only after the
generator, asked for the m-row kernel, reproduces the program's lm_head file exactly. A pass then
runs every node but the lm_head, copies the lm_head's input row ``m - 1`` into a one-row buffer
and runs the one-row kernel on it.

The one-row kernel is used only on a machine that sums f16 matmuls in the native kernel's order
(sequential over k for every element, whatever the number of rows: docs/backends.md). BLAS
libraries pick another kernel for one row than for many (OpenBLAS's GEMV and GEMM sum in
different orders: measured on the tiny prefill fixture, the last rows differ), so on BLAS, as for
any other program (an external dump, a program whose last node is not its lm_head, a file the
generator no longer reproduces), all rows are computed and the last one returned: the same answer
without the saving; :attr:`LastRowHead.reason` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import ktir
from .config import ModelConfig
from .emitted import emitted_fields, emitted_nodes, is_emitted
from .manifest import MANIFEST_FILE, Manifest


@dataclass
class LastRowHead:
    """How a last-token pass computes its row. ``plan`` is None when all rows are computed
    (``reason`` says why); else node ``node`` (the lm_head) is replaced by ``plan`` run with
    ``args`` on the one-row buffers ``x`` (a copy of row ``m - 1`` of tensor ``source``) and
    ``out``."""

    node: int
    reason: str = ""
    plan: Any = None
    source: int = -1
    x: Any = None
    out: Any = None
    args: dict[str, int] | None = None


def lm_head_text(cfg: ModelConfig, fn: str, plan_rows: int, rows: int) -> str:
    """Our emitter's lm_head kernel ``fn`` over ``rows`` rows, planned for ``plan_rows`` (the
    arguments the emitter's ``LlamaEmitter.build`` gives it)."""
    from .emit.kernels.gemm import gemm_kernel

    return gemm_kernel(fn, m=rows, k=cfg.hidden_size, n=cfg.vocab_size, x="x", weights=["w"],
                       out="out", divisor=cfg.features.logits_scaling, plan_rows=plan_rows).text


def last_row_head(manifest: Manifest, machine: Any, buffers: dict[int, Any]) -> LastRowHead:
    """The one-row lm_head of ``manifest`` compiled on ``machine`` with its two one-row buffers
    allocated in its HBM (``buffers``: the runner's tensor buffers), or a record saying why all
    rows are computed."""
    last = len(manifest.nodes) - 1
    node = manifest.nodes[last]
    if not is_emitted(manifest):
        return LastRowHead(last, "not a program of our emitter: all rows computed")
    if not machine.native_matmul:
        return LastRowHead(last, "matmuls on BLAS (its order depends on the row count): "
                                 "all rows computed")
    outputs = [a.tensor for a in node.args if a.is_output]
    names = [a.name for a in node.args]
    if (emitted_nodes(manifest)[last].kind != "gemm" or not node.fn.endswith("_lm_head")
            or outputs != [manifest.result] or names != ["x", "w", "out"]):
        return LastRowHead(last, "the last node is not the lm_head: all rows computed")
    where = str(manifest.directory / MANIFEST_FILE)
    cfg = ModelConfig.from_hf_dict(manifest.extras["config"], where)
    m = emitted_fields(manifest).m
    written = (manifest.directory / node.mlir).read_text(encoding="utf-8")
    if lm_head_text(cfg, node.fn, m, m) != written:
        return LastRowHead(last, f"{node.mlir} is not the lm_head kernel this version writes: "
                                 "all rows computed")
    module = ktir.parse_text(lm_head_text(cfg, node.fn, m, 1), f"{node.mlir} (last row)")
    ktir.verify(module)
    plan = machine.compile(module.functions[node.fn])
    tensor = {a.name: a.tensor for a in node.args}
    x = machine.hbm.allocate((1, cfg.hidden_size), "float16", name="lm_head last-row input")
    out = machine.hbm.allocate((1, cfg.vocab_size), "float16", name="lm_head last-row logits")
    args = {"x": x.address, "w": buffers[tensor["w"]].address, "out": out.address}
    return LastRowHead(last, plan=plan, source=tensor["x"], x=x, out=out, args=args)
