"""Which node of a program goes wrong, and where: node-by-node comparison with transformers.

1. :func:`map_nodes` gives each node of a manifest the step of the llama forward it computes
   (``q`` projection of layer 3, RoPE on k, attention, residual add, ...). The mapping comes from
   the manifest alone: the weight a node consumes (its ``disk`` name) and the node graph (which
   node consumes which node's output, which node consumes cos/sin, the KV prefix or the mask) --
   never from node indices, so external dumps and our emitted programs map the same way.
2. :func:`diagnose` runs the program on the emulator, captures the matching transformers tensors
   (:mod:`ktir_models.model.checks.capture`) for the same weights and pass, and compares every mapped
   node output (relative L2 error ``|out - ref| / |ref|``).
3. The *first* node whose error jumps beyond its expected f16 band is the culprit. The band of a
   node is ``max(FLOOR, GROWTH * upstream)``, where ``upstream`` is the largest error among the
   compared tensors it (transitively) reads: f16 rounding adds about 2^-11 relative error per op
   and a node may amplify what it is given, but a bug (a wrong offset, loop bound or mask) makes
   a node's error jump far above both. The report names the node, its function and file, the
   store that wrote the worst element, the op that computed that value and a short excerpt.

An emulation fault (out-of-bounds access, LX overflow, read of uninitialised memory, ...) stops
the run; the report then names the faulting node and carries the fault's message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UserError
from ..manifest import Manifest

#: relative L2 error every node may have regardless of its inputs (~30 f16 ulps)
FLOOR = 2.0 ** -5
#: how much a correct node may amplify the relative error of what it reads
GROWTH = 8.0

_LAYER_WEIGHTS = {
    "input_layernorm": "input_norm",
    "self_attn.q_proj": "q",
    "self_attn.k_proj": "k",
    "self_attn.v_proj": "v",
    "self_attn.q_norm": "q_norm",  # qwen3's per-head norms (before RoPE)
    "self_attn.k_norm": "k_norm",
    "self_attn.o_proj": "o_proj",
    "post_attention_layernorm": "post_norm",
    "mlp.gate_proj": "gate",
    "mlp.up_proj": "up",
    "mlp.down_proj": "down",
}
_LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.(.+)$")

DESCRIPTIONS = {
    "input_norm": "input RMSNorm", "q": "q projection", "k": "k projection",
    "v": "v projection", "q_norm": "per-head q RMSNorm", "k_norm": "per-head k RMSNorm",
    "rope_q": "RoPE on q", "rope_k": "RoPE on k", "attention": "attention",
    "o_proj": "o projection", "attn_residual": "residual add (attention)",
    "post_norm": "post-attention RMSNorm", "gate": "gate projection", "up": "up projection",
    "act_mul": "SiLU(gate) * up", "down": "down projection",
    "layer_output": "residual add (MLP)", "final_norm": "final RMSNorm", "logits": "lm_head",
}


@dataclass(frozen=True)
class NodeRole:
    """What node ``node`` computes: ``kind`` (a key of capture's KINDS/MODEL_KINDS) of ``layer``,
    written to manifest tensor ``tensor``."""

    node: int
    kind: str
    layer: int | None
    tensor: int

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.kind, self.layer)

    def describe(self) -> str:
        what = DESCRIPTIONS.get(self.kind, self.kind)
        return what if self.layer is None else f"layer {self.layer} {what}"


def _weight_kind(disk: str) -> tuple[str, int | None] | None:
    m = _LAYER_RE.match(disk)
    if m:
        kind = _LAYER_WEIGHTS.get(m.group(2))
        return (kind, int(m.group(1))) if kind else None
    if disk == "model.norm":
        return ("final_norm", None)
    if disk in ("lm_head", "model.embed_tokens"):
        return ("logits", None)
    return None


def map_nodes(manifest: Manifest) -> list[NodeRole | None]:
    """The role of every node (None when the node matches no step of the llama forward).

    Rules, in order: a node reading layer weights computes that weight's step, except fused
    forms -- gate and up weights together give ``act_mul`` (SiLU(gate) * up), and an o/down
    projection that also reads a second activation (the residual) gives the residual sum
    ``attn_residual`` / ``layer_output``. A node without weights is RoPE when it reads cos/sin
    (on q or k by what it reads), attention when it reads the KV prefix, the mask or rotated q,
    a residual add after o_proj / down, SiLU(gate) * up after gate and up. The role's tensor is
    the node's output; a node that writes into a source in place (our KV cache) has that source
    as its output.
    """
    sources = {s.id: s for s in manifest.sources}
    producer: dict[int, int] = {}
    roles: list[NodeRole | None] = []
    for i, node in enumerate(manifest.nodes):
        inputs = [a.tensor for a in node.args if not a.is_output]
        outputs = [a.tensor for a in node.args if a.is_output]
        in_roles = {sources[t].role for t in inputs if t in sources}
        weights = [sources[t] for t in inputs if t in sources and sources[t].role == "weight"]
        activations = [t for t in inputs if t not in sources or sources[t].role == "embed"]
        upstream = [roles[producer[t]] for t in inputs if t in producer and roles[producer[t]]]
        up_kinds = {r.kind for r in upstream}
        layers = [r.layer for r in upstream if r.layer is not None]
        layer = max(layers) if layers else None
        kind = None
        found = [f for f in (_weight_kind(w.disk or "") for w in weights) if f is not None]
        if found:
            kinds = {k for k, _ in found}
            kind, layer = found[0]
            if {"gate", "up"} <= kinds:
                kind = "act_mul"
            elif kind == "o_proj" and len(activations) >= 2:
                kind = "attn_residual"
            elif kind == "down" and len(activations) >= 2:
                kind = "layer_output"
        elif not weights:
            if in_roles & {"cos", "sin"}:
                kind = "rope_q" if up_kinds & {"q", "q_norm"} else ("rope_k" if up_kinds & {"k", "k_norm"} else None)
            elif in_roles & {"prefix_k", "prefix_v"} or manifest.attn_mask in inputs \
                    or "rope_q" in up_kinds:
                kind = "attention"
            elif "o_proj" in up_kinds:
                kind = "attn_residual"
            elif {"gate", "up"} <= up_kinds:
                kind = "act_mul"
            elif "down" in up_kinds:
                kind = "layer_output"
        role = None
        if kind is not None and outputs:
            fresh = [t for t in outputs if t not in sources]
            role = NodeRole(i, kind, layer, (fresh or outputs)[0])
        roles.append(role)
        for t in outputs:
            producer[t] = i
    return roles


# ----------------------------------------------------------------------------------- comparison


@dataclass
class NodeError:
    """One compared node output."""

    node: int
    fn: str
    mlir: str
    role: str
    kind: str
    layer: int | None
    tensor: int
    rel_error: float       # |out - ref|_2 / |ref|_2 (inf when the output is not finite)
    max_abs: float
    worst: tuple[int, int]  # (row, col) of the largest absolute difference
    upstream: float        # largest error among the compared tensors this node reads
    band: float            # max(FLOOR, GROWTH * upstream)

    @property
    def jumped(self) -> bool:
        return not (self.rel_error <= self.band)


@dataclass
class Culprit:
    """The first node out of its band, with the place in its program that wrote the worst value."""

    node: int
    fn: str
    file: str
    role: str
    rel_error: float
    band: float
    worst: tuple[int, int]
    store_loc: str | None
    op: str | None
    op_loc: str | None
    excerpt: str

    def render(self) -> str:
        lines = [f"first node out of its f16 band: node {self.node} @{self.fn} ({self.file}), "
                 f"{self.role}: relative error {self.rel_error:.3g} > band {self.band:.3g}"]
        if self.op_loc:
            lines.append(f"largest error at output[{self.worst[0]}, {self.worst[1]}], computed by "
                         f"{self.op} at {self.op_loc}, stored at {self.store_loc}")
        elif self.store_loc is None:
            lines.append(f"largest error at output[{self.worst[0]}, {self.worst[1]}]: no store of "
                         f"this node writes that element (a wrong offset or bound leaves it unwritten)")
        if self.excerpt:
            lines.append(self.excerpt)
        return "\n".join(lines)


@dataclass
class DiagnoseReport:
    program: str
    nodes: int
    compared: list[NodeError]
    unmapped: list[int]
    culprit: Culprit | None
    fault: str | None = None
    fault_node: int | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # emulator checking mode, "node N: ..."

    @property
    def ok(self) -> bool:
        return self.culprit is None and self.fault is None

    def headline(self) -> str:
        """One line naming what went wrong first."""
        if self.culprit is not None:
            c = self.culprit
            return f"node {c.node} (@{c.fn}, {c.role}) is out of its f16 band"
        if self.fault is not None:
            return f"emulation fault in node {self.fault_node}"
        return "every compared node is within its f16 band"

    def render(self, table: bool = False) -> str:
        out = [f"program  {self.program}  ({self.nodes} nodes, {len(self.compared)} compared with "
               f"transformers, {len(self.unmapped)} unmapped)"]
        if table:
            out.append(f"{'node':>5} {'role':<34} {'rel.err':>9} {'band':>9}")
            for e in self.compared:
                flag = "  <-- out of band" if e.jumped else ""
                out.append(f"{e.node:>5} {e.role[:34]:<34} {e.rel_error:>9.2e} {e.band:>9.2e}{flag}")
        if self.culprit is not None:  # it ran before any fault: the root cause comes first
            out.append(self.culprit.render())
        if self.fault is not None:
            later = " (after the node above)" if self.culprit is not None else ""
            out.append(f"fault    node {self.fault_node}{later}: {self.fault}")
        if self.culprit is None and self.fault is None:
            worst = max(self.compared, key=lambda e: e.rel_error, default=None)
            tail = f" (largest relative error {worst.rel_error:.3g} at node {worst.node}, {worst.role})" \
                if worst else ""
            out.append(f"result   every compared node is within its f16 band{tail}")
        out.extend(f"warning  {w}" for w in self.warnings[:20])
        if len(self.warnings) > 20:
            out.append(f"warning  ... and {len(self.warnings) - 20} more (see the JSON report)")
        out.extend(f"note     {n}" for n in self.notes)
        return "\n".join(out)

    def as_dict(self) -> dict:
        c = self.culprit
        return {
            "program": self.program, "nodes": self.nodes, "ok": self.ok,
            "fault": self.fault, "fault_node": self.fault_node, "unmapped": self.unmapped,
            "culprit": None if c is None else {
                "node": c.node, "fn": c.fn, "file": c.file, "role": c.role,
                "rel_error": c.rel_error, "band": c.band, "worst": list(c.worst),
                "store_loc": c.store_loc, "op": c.op, "op_loc": c.op_loc, "excerpt": c.excerpt},
            "compared": [{"node": e.node, "fn": e.fn, "role": e.role, "tensor": e.tensor,
                          "rel_error": e.rel_error, "max_abs": e.max_abs, "band": e.band,
                          "upstream": e.upstream, "jumped": e.jumped} for e in self.compared],
            "notes": list(self.notes), "warnings": list(self.warnings),
        }


def relative_error(out: np.ndarray, ref: np.ndarray) -> tuple[float, float, tuple[int, int]]:
    """(relative L2 error, max abs difference, (row, col) of that difference); non-finite
    outputs give inf."""
    a = np.asarray(out, dtype=np.float64).reshape(ref.shape)
    r = np.asarray(ref, dtype=np.float64)
    diff = np.abs(a - r)
    diff = np.where(np.isfinite(diff), diff, np.inf)
    flat = int(np.argmax(diff))
    cols = r.shape[-1]
    max_abs = float(diff.reshape(-1)[flat])
    norm = float(np.linalg.norm(r))
    if not np.isfinite(diff).all():
        rel = float("inf")
    else:
        rel = float(np.linalg.norm(a - r) / norm) if norm > 0 else (0.0 if max_abs == 0 else float("inf"))
    return rel, max_abs, (flat // cols, flat % cols)


def compare_nodes(manifest: Manifest, roles: list[NodeRole | None], outputs: dict[int, np.ndarray],
                  reference: dict, notes: list[str], past: int = 0) -> list[NodeError]:
    """Errors of every mapped node output, with the band each must stay in (see module doc).
    An output with more rows than the reference (a KV cache written in place) is compared on
    its rows ``past .. past+m-1``, the ones this pass writes."""
    err_of_tensor: dict[int, float] = {}  # tensors written by nodes (host inputs count as exact)
    result: list[NodeError] = []
    for i, node in enumerate(manifest.nodes):
        inputs = [a.tensor for a in node.args if not a.is_output]
        upstream = max([err_of_tensor.get(t, 0.0) for t in inputs], default=0.0)
        outs = [a.tensor for a in node.args if a.is_output]
        role = roles[i]
        node_err = upstream  # an uncompared node passes its inputs' error on
        if role is not None and role.key in reference and role.tensor in outputs:
            ref = reference[role.key]
            out = outputs[role.tensor]
            if out.ndim == 2 and out.shape[1] == ref.shape[-1] and out.shape[0] >= past + ref.shape[0] \
                    and out.shape[0] != ref.shape[0]:
                out = out[past:past + ref.shape[0]]
            if out.size != ref.size:
                notes.append(f"node {i} ({role.describe()}): output has {out.shape} elements, "
                             f"transformers {ref.shape}; not compared")
            else:
                rel, max_abs, worst = relative_error(out, ref)
                band = max(FLOOR, GROWTH * upstream)
                result.append(NodeError(i, node.fn, node.mlir, role.describe(), role.kind,
                                        role.layer, role.tensor, rel, max_abs, worst, upstream, band))
                node_err = rel
        for t in outs:
            err_of_tensor[t] = node_err
    return result


# ----------------------------------------------------------------------------------- locating


def _excerpt(path: Path, lines: list[int], context: int = 2) -> str:
    try:
        text = path.read_text().splitlines()
    except OSError:
        return ""
    keep: set[int] = set()
    for ln in lines:
        keep.update(range(max(1, ln - context), min(len(text), ln + context) + 1))
    out, prev = [], None
    for ln in sorted(keep):
        if prev is not None and ln != prev + 1:
            out.append("      ...")
        mark = ">" if ln in lines else " "
        out.append(f"  {mark}{ln:>4} | {text[ln - 1]}")
        prev = ln
    return "\n".join(out)


def locate(manifest: Manifest, error: NodeError, module: Any) -> Culprit:
    """Name the store that wrote the worst output element and the op that computed it."""
    from ...ktir.latency import store_footprints

    node = manifest.nodes[error.node]
    path = manifest.directory / node.mlir
    fn = module.function(node.fn)
    out_arg = next(a.name for a in node.args if a.tensor == error.tensor and a.is_output)
    t = manifest.tensor(error.tensor)
    flat = error.worst[0] * t.cols + error.worst[1]
    store = None
    for fp in store_footprints(fn):
        if fp.arg == out_arg and fp.offsets is not None and np.any(fp.offsets == flat):
            store = fp.op  # the last store covering the element wins
    store_loc = op_name = op_loc = None
    lines: list[int] = []
    if store is None:
        # nothing wrote the element: show every store into this output and where its tile is placed
        for fp in store_footprints(fn):
            if fp.arg == out_arg and fp.op.loc.line not in lines:
                lines.append(fp.op.loc.line)
                tile_op = fp.op.operands[1].owner
                if tile_op is not None:
                    lines.append(tile_op.loc.line)
                    lines += [v.owner.loc.line for v in tile_op.operands[1:] if v.owner is not None]
    else:
        store_loc = str(store.loc)
        lines.append(store.loc.line)
        value = store.operands[0]
        producer = value.owner
        if producer is not None:
            op_name, op_loc = producer.name, str(producer.loc)
            lines.append(producer.loc.line)
            for operand in producer.operands:  # one step further up: what fed that op
                if operand.owner is not None and operand.owner.loc.line not in lines:
                    lines.append(operand.owner.loc.line)
    return Culprit(error.node, node.fn, str(path), error.role, error.rel_error, error.band,
                   error.worst, store_loc, op_name, op_loc, _excerpt(path, sorted(set(lines))))


# ----------------------------------------------------------------------------------- entry point


def first_jump(errors: list[NodeError]) -> NodeError | None:
    return next((e for e in errors if e.jumped), None)


def diagnose(manifest: Manifest, cfg: Any, ckpt: Any, *, checks: Any | None = None,
             reference: dict | None = None, show_progress: bool = False,
             backend: Any = None, lx_model: str = "allocator", parsed: Any = None,
             pass_: Any = None) -> DiagnoseReport:
    """Run ``manifest``'s program on ``ckpt`` and compare every mapped node with transformers.

    ``checks`` (optional) is passed to the emulator's machine as its checking mode (its warnings,
    masked accesses included, are reported per node); ``reference``
    (optional) reuses captured tensors (tests and notebooks diagnosing several copies);
    ``backend`` (optional) is the emulator's array back end (default numpy; see ktir.backends);
    ``lx_model`` how the machine counts LX (docs/emulator.md, "LX accounting"); ``parsed``
    (optional) is ``manifest``'s program already parsed (``program.ParsedProgram``, e.g. the
    forward's), compiled here on the diagnosis's own machine without parsing it again; ``pass_``
    (optional, a ``bindings.PassSpec``) is the pass to diagnose, e.g. a forward's over a text's
    token ids: the emulator and the reference both run exactly its ids and positions, and the
    fixture's stored host inputs (``t<id>.f16.gz``, made for the fixture's own ids) are not read.
    Without it the manifest's golden-convention pass runs, with the stored inputs where present.
    """
    from ... import ktir
    from ..inputs.bindings import bind_pass_inputs, input_tensor_ids, pass_spec, read_vendored_inputs
    from .capture import capture_reference
    from ..runner import Runner

    roles = map_nodes(manifest)
    notes: list[str] = []
    spec = pass_ if pass_ is not None else pass_spec(manifest, cfg)
    machine = ktir.Machine(backend=backend if backend is not None else "numpy", lx_model=lx_model)
    if checks is not None:
        machine.checks = checks
    runner = Runner(manifest, machine=machine, show_progress=show_progress)
    parsed = runner.load(parsed).parsed
    runner.marshal(ckpt)
    vendored = read_vendored_inputs(manifest, input_tensor_ids(manifest)) if pass_ is None else {}
    inputs = bind_pass_inputs(manifest, cfg, ckpt, spec, vendored)
    fault = fault_node = None
    try:
        runner.run(inputs)
    except UserError as exc:
        fault = str(exc)
        m = re.search(r"nodes\[(\d+)\]", fault)
        fault_node = int(m.group(1)) if m else None
    if reference is None:
        reference = capture_reference(ckpt, spec.token_ids, spec.positions, spec.past, spec.prefix_ids)
    ran = len(manifest.nodes) if fault_node is None else fault_node
    outputs = {}
    for role in roles[:ran]:
        if role is not None:
            outputs[role.tensor] = runner.tensor(role.tensor)
    errors = compare_nodes(manifest, roles[:ran] + [None] * (len(roles) - ran), outputs, reference,
                           notes, spec.past)
    culprit = None
    bad = first_jump(errors)
    if bad is not None:
        culprit = locate(manifest, bad, parsed.module(bad.node))
    unmapped = [i for i, r in enumerate(roles) if r is None]
    node_of = {}
    for i, node in enumerate(manifest.nodes):
        node_of.setdefault(node.fn, i)
    warnings = [f"node {node_of.get(w.function, '?')}: {w}" for w in getattr(checks, "warnings", [])]
    return DiagnoseReport(str(manifest.directory), len(manifest.nodes), errors, unmapped, culprit,
                          fault, fault_node, notes, warnings)
