"""Fixture manifests: the typed schema of ``manifest.json`` and its validation.

A fixture directory holds ``manifest.json`` and the ``node*.mlir`` files it names. The schema is the
one of the external dumps (``tensors``, ``sources``, ``nodes``, ``result``, ``attn_mask``,
``decode_position``, ``num_sources``); every field they carry is read, unknown top-level fields are
kept verbatim in :attr:`Manifest.extras` (that is where our own manifests put ``model``, ``mode``,
``m``, ``past``, ``positions``, ...), unknown per-record fields are tolerated and ignored.

Validation happens in three layers, all before anything runs:

* :func:`load_manifest` checks the structure: types, unique ids, known tensor references, node
  files present, every source tensor declared, every node input produced before it is read, the
  result produced by some node.
* :func:`validate` checks the declared shapes against a :class:`ModelConfig`.
* ``program_checks.parse_and_check`` checks the manifest against the parsed node programs: each
  node file defines the node's function, whose argument names are exactly the node's, in order
  (:func:`check_node_arguments`), and the declared tensors agree with what the functions view
  and store into. Those checks read the parser's IR, never the text.

The checkpoint's real tensor shapes are checked when the weights are bound (``bindings.py``).
Every problem is a :class:`ManifestError` naming the field and the offending value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .config import ModelConfig

MANIFEST_FILE = "manifest.json"

#: Source roles the host knows how to bind.
SOURCE_ROLES = ("embed", "weight", "cos", "sin", "prefix_k", "prefix_v")


class ManifestError(UserError):
    """A fixture manifest that is malformed or does not fit the model (exit code 2)."""


# --------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class TensorDecl:
    """One tensor of the node graph: a 2-d f16 HBM buffer of ``rows x cols`` elements.

    For ``weight`` sources the external dumps list the shape as ``[in, out]`` while the bytes are
    the PyTorch ``[out, in]`` layout, bound verbatim; only the element count of the buffer matters
    to the programs, the orientation is checked against the checkpoint.
    """

    id: int
    rows: int
    cols: int
    is_source: bool

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)


@dataclass(frozen=True)
class SourceDecl:
    """A tensor the host fills before the graph runs (weights, embeddings, RoPE tables, KV prefix)."""

    id: int
    role: str
    disk: str | None = None
    name: str | None = None
    base: str | None = None
    layer: int | None = None
    is_gemm: bool | None = None
    loc: dict[str, Any] | None = None


@dataclass(frozen=True)
class NodeArg:
    """One kernel argument: the ``index`` argument ``name`` receives the address of ``tensor``, or,
    for a host scalar (``scalar``, e.g. ``position``; then ``tensor`` is None), that scalar's value.
    Host scalars appear only in manifests loaded with ``host_scalars=True`` (our emitter's
    dynamic-position programs, run by a session); a forward's manifest has none."""

    name: str
    tensor: int | None
    is_output: bool
    scalar: str | None = None


@dataclass(frozen=True)
class NodeDecl:
    """One node: function ``fn`` defined in file ``mlir``, called with ``args`` in this order."""

    fn: str
    mlir: str
    args: tuple[NodeArg, ...]


@dataclass(frozen=True)
class Manifest:
    """A whole fixture program. Invariants after :func:`load_manifest`: tensor ids are unique,
    every referenced id is declared, node files exist, inputs are produced before they are read."""

    directory: Path
    tensors: tuple[TensorDecl, ...]
    sources: tuple[SourceDecl, ...]
    nodes: tuple[NodeDecl, ...]
    result: int
    attn_mask: int | None
    decode_position: int | None
    num_sources: int | None
    extras: dict[str, Any] = field(default_factory=dict)

    def tensor(self, tensor_id: int) -> TensorDecl:
        return self._tensor_index()[tensor_id]

    def source(self, tensor_id: int) -> SourceDecl | None:
        for src in self.sources:
            if src.id == tensor_id:
                return src
        return None

    def sources_with_role(self, role: str) -> list[SourceDecl]:
        return [s for s in self.sources if s.role == role]

    @property
    def tokens(self) -> int:
        """m, the number of tokens of one pass: the rows of the ``embed`` source tensor."""
        embeds = self.sources_with_role("embed")
        if embeds:
            return self.tensor(embeds[0].id).rows
        return self.tensor(self.result).rows

    @property
    def mode(self) -> str:
        """``decode`` or ``prefill``: our ``mode`` extra if present, else decode iff m == 1."""
        mode = self.extras.get("mode")
        if isinstance(mode, str):
            return mode
        return "decode" if self.tokens == 1 else "prefill"

    def _tensor_index(self) -> dict[int, TensorDecl]:
        # Built lazily; the dataclass is frozen so we stash it through object.__setattr__.
        index = self.__dict__.get("_index")
        if index is None:
            index = {t.id: t for t in self.tensors}
            object.__setattr__(self, "_index", index)
        return index


# --------------------------------------------------------------------------------------------
# Loading


_KNOWN_TOP = ("tensors", "sources", "nodes", "result", "attn_mask", "decode_position", "num_sources")


class _Reader:
    """Typed field access with error messages of the form ``manifest.json: <path>: <problem>``."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, problem: str) -> ManifestError:
        return ManifestError(f"{self.where}: {path}: {problem}")

    def obj(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected an object, got {_show(value)}")
        return value

    def lst(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {_show(value)}")
        return value

    def required(self, d: dict[str, Any], key: str, path: str) -> Any:
        if key not in d:
            raise self.fail(f"{path}.{key}" if path else key, "missing")
        return d[key]

    def int_(self, value: Any, path: str, minimum: int = 0) -> int:
        # bool is an int subclass in Python; a JSON true is not a tensor id.
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_show(value)}")
        if value < minimum:
            raise self.fail(path, f"expected an integer >= {minimum}, got {value}")
        return value

    def bool_(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_show(value)}")
        return value

    def str_(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"expected a non-empty string, got {_show(value)}")
        return value

    def opt(self, d: dict[str, Any], key: str, path: str, kind: str) -> Any:
        if d.get(key) is None:
            return None
        conv = {"int": self.int_, "bool": self.bool_, "str": self.str_}[kind]
        return conv(d[key], f"{path}.{key}")


def manifest_reader(where: str = MANIFEST_FILE) -> _Reader:
    """The error helper of this module for another checker of ``where`` (its ``fail(path,
    problem)`` makes a ManifestError ``<where>: <path>: <problem>``)."""
    return _Reader(where)


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_manifest(directory: Path | str, host_scalars: bool = False) -> Manifest:
    """Read ``<directory>/manifest.json`` into a :class:`Manifest` and check its structure.
    ``host_scalars``: accept scalar node arguments (see :class:`NodeArg`)."""
    directory = Path(directory)
    path = directory / MANIFEST_FILE
    if not directory.is_dir():
        raise ManifestError(f"{directory}: program directory not found")
    if not path.is_file():
        raise ManifestError(f"{path}: not found (a fixture directory holds manifest.json and node*.mlir)")
    from ..readers import InputFileError, read_json

    try:
        doc = read_json(path, "manifest")  # bounded: depth, number size, file size
    except InputFileError as exc:
        raise ManifestError(str(exc)) from None
    return manifest_from_dict(doc, directory, where=MANIFEST_FILE, host_scalars=host_scalars)


def manifest_from_dict(doc: Any, directory: Path, where: str = MANIFEST_FILE, host_scalars: bool = False) -> Manifest:
    """Build and structurally check a manifest from its parsed JSON document (``host_scalars``:
    see :func:`load_manifest`)."""
    r = _Reader(where)
    doc = r.obj(doc, "(top level)")

    tensors = []
    for i, t in enumerate(r.lst(r.required(doc, "tensors", ""), "tensors")):
        p = f"tensors[{i}]"
        t = r.obj(t, p)
        tensors.append(
            TensorDecl(
                id=r.int_(r.required(t, "id", p), f"{p}.id"),
                rows=r.int_(r.required(t, "rows", p), f"{p}.rows", minimum=1),
                cols=r.int_(r.required(t, "cols", p), f"{p}.cols", minimum=1),
                is_source=r.bool_(t.get("is_source", False), f"{p}.is_source"),
            )
        )

    sources = []
    for i, s in enumerate(r.lst(doc.get("sources", []), "sources")):
        p = f"sources[{i}]"
        s = r.obj(s, p)
        loc = s.get("loc")
        if loc is not None:
            loc = r.obj(loc, f"{p}.loc")
        sources.append(
            SourceDecl(
                id=r.int_(r.required(s, "id", p), f"{p}.id"),
                role=r.str_(r.required(s, "role", p), f"{p}.role"),
                disk=r.opt(s, "disk", p, "str"),
                name=r.opt(s, "name", p, "str"),
                base=r.opt(s, "base", p, "str"),
                layer=r.opt(s, "layer", p, "int"),
                is_gemm=r.opt(s, "is_gemm", p, "bool"),
                loc=loc,
            )
        )

    nodes = []
    for i, n in enumerate(r.lst(r.required(doc, "nodes", ""), "nodes")):
        p = f"nodes[{i}]"
        n = r.obj(n, p)
        args = []
        for j, a in enumerate(r.lst(r.required(n, "args", p), f"{p}.args")):
            q = f"{p}.args[{j}]"
            a = r.obj(a, q)
            if "scalar" in a and "tensor" not in a and host_scalars:
                args.append(NodeArg(name=r.str_(r.required(a, "name", q), f"{q}.name"), tensor=None,
                                    is_output=False, scalar=r.str_(a["scalar"], f"{q}.scalar")))
                continue
            if "scalar" in a and "tensor" not in a:
                raise r.fail(
                    q, f"scalar argument {a['scalar']!r}: programs with host scalars (dynamic position) "
                    "are run by `generate`, not `forward`; emit the pass with a static position",
                )
            args.append(
                NodeArg(
                    name=r.str_(r.required(a, "name", q), f"{q}.name"),
                    tensor=r.int_(r.required(a, "tensor", q), f"{q}.tensor"),
                    is_output=r.bool_(a.get("is_output", False), f"{q}.is_output"),
                )
            )
        nodes.append(
            NodeDecl(
                fn=r.str_(r.required(n, "fn", p), f"{p}.fn"),
                mlir=r.str_(r.required(n, "mlir", p), f"{p}.mlir"),
                args=tuple(args),
            )
        )

    result = r.int_(r.required(doc, "result", ""), "result")
    attn_mask = r.int_(doc["attn_mask"], "attn_mask") if doc.get("attn_mask") is not None else None
    decode_position = (
        r.int_(doc["decode_position"], "decode_position") if doc.get("decode_position") is not None else None
    )
    num_sources = r.int_(doc["num_sources"], "num_sources") if doc.get("num_sources") is not None else None
    extras = {k: v for k, v in doc.items() if k not in _KNOWN_TOP}

    manifest = Manifest(
        directory=Path(directory),
        tensors=tuple(tensors),
        sources=tuple(sources),
        nodes=tuple(nodes),
        result=result,
        attn_mask=attn_mask,
        decode_position=decode_position,
        num_sources=num_sources,
        extras=extras,
    )
    _check_structure(manifest, r)
    return manifest


def _check_structure(m: Manifest, r: _Reader) -> None:
    by_id: dict[int, TensorDecl] = {}
    for i, t in enumerate(m.tensors):
        if t.id in by_id:
            raise r.fail(f"tensors[{i}].id", f"duplicate tensor id {t.id}")
        by_id[t.id] = t

    def known(tid: int, path: str) -> TensorDecl:
        if tid not in by_id:
            raise r.fail(path, f"unknown tensor id {tid} (not in tensors[])")
        return by_id[tid]

    source_ids: dict[int, int] = {}
    for i, s in enumerate(m.sources):
        p = f"sources[{i}]"
        t = known(s.id, f"{p}.id")
        if not t.is_source:
            raise r.fail(f"{p}.id", f"tensor {s.id} is declared with is_source false")
        if s.id in source_ids:
            raise r.fail(f"{p}.id", f"tensor {s.id} already bound by sources[{source_ids[s.id]}]")
        source_ids[s.id] = i
        if s.role not in SOURCE_ROLES:
            raise r.fail(f"{p}.role", f"unknown role {s.role!r} (known: {', '.join(SOURCE_ROLES)})")
        if s.role == "weight" and s.disk is None:
            raise r.fail(f"{p}.disk", "missing (a weight source names its checkpoint tensor)")
        if s.role in ("prefix_k", "prefix_v") and s.layer is None:
            raise r.fail(f"{p}.layer", f"missing (a {s.role} source names its layer)")
    for i, t in enumerate(m.tensors):
        if t.is_source and t.id not in source_ids:
            raise r.fail(f"tensors[{i}]", f"tensor {t.id} has is_source true but no sources[] entry binds it")
    if m.num_sources is not None and m.num_sources != len(m.sources):
        raise r.fail("num_sources", f"{m.num_sources} but sources[] has {len(m.sources)} entries")
    for role in ("embed", "cos", "sin"):
        found = [i for i, s in enumerate(m.sources) if s.role == role]
        if len(found) > 1:
            raise r.fail(f"sources[{found[1]}].role", f"a second {role!r} source (only one allowed)")

    known(m.result, "result")
    host_inputs = set(source_ids)
    if m.attn_mask is not None:
        mask = known(m.attn_mask, "attn_mask")
        if mask.is_source:
            raise r.fail("attn_mask", f"tensor {mask.id} is a source; the mask is bound by the host")
        host_inputs.add(mask.id)

    cache_ids = {s.id for s in m.sources if s.role in ("prefix_k", "prefix_v")}
    produced: set[int] = set()
    directory = m.directory
    for i, n in enumerate(m.nodes):
        p = f"nodes[{i}]"
        if Path(n.mlir).name != n.mlir:
            raise r.fail(f"{p}.mlir", f"{n.mlir} must be a file name inside the fixture directory")
        if not (directory / n.mlir).is_file():
            raise r.fail(f"{p}.mlir", f"{n.mlir} not found in {directory}")
        names: set[str] = set()
        for j, a in enumerate(n.args):
            q = f"{p}.args[{j}]"
            if a.name in names:
                raise r.fail(f"{q}.name", f"duplicate argument name {a.name!r}")
            names.add(a.name)
            if a.tensor is None:  # a host scalar: no tensor to check
                continue
            known(a.tensor, f"{q}.tensor")
            if a.is_output:
                # KV caches (prefix_k/prefix_v) may be updated in place by our emitted programs.
                if a.tensor in host_inputs and a.tensor not in cache_ids:
                    raise r.fail(f"{q}.tensor", f"node writes tensor {a.tensor}, which the host binds as an input")
            elif a.tensor not in host_inputs and a.tensor not in produced:
                raise r.fail(
                    f"{q}.tensor",
                    f"tensor {a.tensor} is read before any node produces it (not a source or the mask)",
                )
        produced.update(a.tensor for a in n.args if a.is_output and a.tensor is not None)
    if m.result not in produced:
        raise r.fail("result", f"tensor {m.result} is never produced by a node")


# --------------------------------------------------------------------------------------------
# Validation against a model configuration


def expected_weight_shape(disk: str, cfg: ModelConfig) -> tuple[int, int] | None:
    """The ``[rows, cols]`` a manifest declares for checkpoint tensor ``disk`` (``[in, out]`` for
    projections, ``[1, n]`` for norm vectors), or None for a name this function does not know."""
    h, hd = cfg.hidden_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    table = {
        "self_attn.q_proj": (h, q),
        "self_attn.k_proj": (h, kv),
        "self_attn.v_proj": (h, kv),
        "self_attn.o_proj": (q, h),
        "mlp.gate_proj": (h, cfg.intermediate_size),
        "mlp.up_proj": (h, cfg.intermediate_size),
        "mlp.down_proj": (cfg.intermediate_size, h),
        "input_layernorm": (1, h),
        "post_attention_layernorm": (1, h),
    }
    name = disk.removesuffix(".weight")
    if name == "lm_head":
        return (h, cfg.vocab_size)
    if name == "model.norm":
        return (1, h)
    if name == "model.embed_tokens":
        return (cfg.vocab_size, h)
    split = _layer_split(name)
    if split is not None and split[1] in table:
        return table[split[1]]
    return None


def layer_of(disk: str) -> int | None:
    """The layer of ``model.layers.<n>.<...>`` (None for a tensor outside the layers)."""
    split = _layer_split(disk)
    return split[0] if split is not None else None


def _layer_split(name: str) -> tuple[int, str] | None:
    """(n, rest) of ``model.layers.<n>.<rest>`` with n decimal digits and rest non-empty."""
    prefix = "model.layers."
    if not name.startswith(prefix):
        return None
    digits, dot, rest = name[len(prefix):].partition(".")
    if not dot or not rest or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits), rest


def validate(manifest: Manifest, cfg: ModelConfig, where: str = MANIFEST_FILE) -> None:
    """Check every declared shape against the model configuration; raise :class:`ManifestError`."""
    r = _Reader(where)
    m = manifest.tokens
    h = cfg.hidden_size
    kv = cfg.num_key_value_heads * cfg.head_dim
    index = {s.id: i for i, s in enumerate(manifest.sources)}

    def shape_is(tid: int, path: str, want: tuple[int, int], what: str) -> None:
        t = manifest.tensor(tid)
        if t.shape != want:
            raise r.fail(path, f"tensor {tid} ({what}) is {t.rows}x{t.cols}, the model needs {want[0]}x{want[1]}")

    prefix_rows: set[int] = set()
    for s in manifest.sources:
        p = f"sources[{index[s.id]}]"
        if s.role == "embed":
            shape_is(s.id, p, (m, h), "embed rows")
        elif s.role in ("cos", "sin"):
            shape_is(s.id, p, (m, cfg.head_dim), f"RoPE {s.role} table")
        elif s.role in ("prefix_k", "prefix_v"):
            t = manifest.tensor(s.id)
            if t.cols != kv:
                raise r.fail(p, f"tensor {s.id} ({s.role}) has {t.cols} columns, the model needs {kv} (kv heads x head_dim)")
            if s.layer is not None and not 0 <= s.layer < cfg.num_hidden_layers:
                raise r.fail(f"{p}.layer", f"{s.layer} out of range (the model has {cfg.num_hidden_layers} layers)")
            prefix_rows.add(t.rows)
        elif s.role == "weight":
            assert s.disk is not None  # checked at load
            layer = layer_of(s.disk)
            if layer is not None and layer >= cfg.num_hidden_layers:
                raise r.fail(f"{p}.disk", f"{s.disk}: layer {layer} out of range (the model has {cfg.num_hidden_layers} layers)")
            want = expected_weight_shape(s.disk, cfg)
            if want is not None:
                shape_is(s.id, p, want, s.disk)
    shape_is(manifest.result, "result", (m, cfg.vocab_size), "logits")
    if manifest.attn_mask is not None:
        mask = manifest.tensor(manifest.attn_mask)
        if len(prefix_rows) > 1:
            raise r.fail("sources", f"prefix_k/prefix_v tensors disagree on the cache length: {sorted(prefix_rows)}")
        if prefix_rows and mask.cols != next(iter(prefix_rows)) and mask.cols != next(iter(prefix_rows)) + m:
            raise r.fail(
                "attn_mask",
                f"tensor {mask.id} has {mask.cols} columns, the KV prefix has {next(iter(prefix_rows))} rows",
            )
    check_positions(manifest, cfg, r)
    check_tensor_bounds(manifest, cfg, r)


# --------------------------------------------------------------------------------------------
# Node function signatures


@dataclass(frozen=True)
class Signature:
    """A node function's header as the parser read it: its name, argument names (in order) and
    1-based line and column."""

    fn: str
    arg_names: tuple[str, ...]
    line: int
    column: int


def check_node_arguments(
    index: int, node: NodeDecl, signature: Signature | None, path: Path, r: _Reader | None = None
) -> None:
    """Compare one node's declared args with the function's argument names (raises on mismatch)."""
    r = r or _Reader(MANIFEST_FILE)
    p = f"nodes[{index}]"
    if signature is None:
        raise r.fail(f"{p}.fn", f"function @{node.fn} not defined in {path}")
    declared = tuple(a.name for a in node.args)
    if declared != signature.arg_names:
        where = f"{path}:{signature.line}:{signature.column}"
        missing = [n for n in signature.arg_names if n not in declared]
        extra = [n for n in declared if n not in signature.arg_names]
        if missing:
            detail = f"function argument %{missing[0]} is not bound by any of the node's args"
        elif extra:
            detail = f"arg {extra[0]!r} is not an argument of @{node.fn}"
        else:
            detail = f"argument order differs: @{node.fn}({', '.join(signature.arg_names)})"
        raise r.fail(f"{p}.args", f"{detail} ({where})")


# --------------------------------------------------------------------------------------------
# Consistency of the declared graph with the model and with the node programs. Real manifests
# (ours and the external dumps) satisfy each check exactly; a manifest that fails one would
# otherwise allocate what it declares (10^9 elements) or run a program the manifest misdescribes.


def check_positions(manifest: Manifest, cfg: ModelConfig, r: _Reader | None = None) -> None:
    """Every position the pass uses lies inside the model: ``decode_position``, each entry of our
    ``positions`` extra and ``past + m`` are below ``max_position_embeddings``."""
    r = r or _Reader(MANIFEST_FILE)
    limit = cfg.max_position_embeddings
    field_note = f"(the model's config field 'max_position_embeddings' = {limit})"
    if manifest.decode_position is not None and manifest.decode_position >= limit:
        raise r.fail("decode_position", f"{manifest.decode_position} is beyond the model's positions {field_note}")
    positions = manifest.extras.get("positions")
    if isinstance(positions, list):
        for k, p in enumerate(positions):
            if isinstance(p, int) and not isinstance(p, bool) and p >= limit:
                raise r.fail(f"positions[{k}]", f"{p} is beyond the model's positions {field_note}")
    past = manifest.extras.get("past")
    if isinstance(past, int) and not isinstance(past, bool) and past + manifest.tokens > limit:
        raise r.fail("past", f"{past} + m = {past + manifest.tokens} is beyond the model's positions {field_note}")


def tensor_element_bound(manifest: Manifest, cfg: ModelConfig, source: bool) -> int:
    """The most elements a tensor of this pass can need: a weight matrix for a source, else an
    activation of ``max(m, cache rows) x heads`` rows of the widest model dimension."""
    widths = (cfg.vocab_size, cfg.intermediate_size, cfg.hidden_size, cfg.num_attention_heads * cfg.head_dim,
              cfg.num_key_value_heads * cfg.head_dim)
    if source:
        return max(widths) * max(widths[1:])
    cache_rows = max([manifest.tokens] + [manifest.tensor(s.id).rows for s in manifest.sources
                                           if s.role in ("prefix_k", "prefix_v")])
    if manifest.attn_mask is not None:
        cache_rows = max(cache_rows, manifest.tensor(manifest.attn_mask).cols)
    return cache_rows * cfg.num_attention_heads * max(*widths, cache_rows)


def check_tensor_bounds(manifest: Manifest, cfg: ModelConfig, r: _Reader | None = None) -> None:
    """No declared tensor exceeds :func:`tensor_element_bound` (checked before anything is
    allocated: the runner allocates every declared tensor)."""
    r = r or _Reader(MANIFEST_FILE)
    bounds = {flag: tensor_element_bound(manifest, cfg, flag) for flag in (False, True)}
    for i, t in enumerate(manifest.tensors):
        if t.rows * t.cols > bounds[t.is_source]:
            what = "source" if t.is_source else "intermediate"
            raise r.fail(f"tensors[{i}]", f"{what} tensor {t.id} is declared {t.rows}x{t.cols} = {t.rows * t.cols} "
                                          f"elements, more than any tensor of this model needs ({bounds[t.is_source]})")
