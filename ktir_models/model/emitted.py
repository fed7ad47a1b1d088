"""What our emitter adds to a manifest, typed: the fields a session's host reads.

Our programs (``format`` ``ktir-models/1``, docs/emitter.md) carry extra top-level fields, kept
verbatim in :attr:`Manifest.extras`; :func:`emitted_fields` reads the ones the host needs into one
record, so that nothing downstream indexes the raw JSON. External dumps have no such fields
(:func:`is_emitted` is false for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from .manifest import MANIFEST_FILE, Manifest

#: The ``format`` field of our emitter's manifests.
EMITTED_FORMAT = "ktir-models/1"


@dataclass(frozen=True)
class KvLayer:
    """The manifest tensors holding layer ``layer``'s K and V cache (``[C, kv_dim]`` each)."""

    layer: int
    k: int
    v: int


@dataclass(frozen=True)
class EmittedFields:
    """Our emitter's fields of one program. Invariants: ``past + m <= capacity``; with
    ``dynamic_position`` the program runs at any ``past`` (a host scalar ``position``), else only
    at ``past``; ``kv_layers`` lists every layer's cache tensors in layer order."""

    model: str
    m: int
    past: int
    capacity: int
    dynamic_position: bool
    embedding_multiplier: float
    sliding_window: int | None
    kv_layers: tuple[KvLayer, ...]


def read_host_field(host: dict[str, Any]) -> tuple[float, int | None]:
    """(embedding multiplier, sliding window) of a manifest's ``host`` field (defaults 1.0 and
    None), checked: a UserError names the field and the value."""
    mult, window = host.get("embedding_multiplier", 1.0), host.get("sliding_window")
    if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not mult > 0:
        raise UserError(f"{MANIFEST_FILE}: host.embedding_multiplier: expected a positive number, got {mult!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise UserError(f"{MANIFEST_FILE}: host.sliding_window: expected a positive integer or null, got {window!r}")
    return float(mult), window


def is_emitted(manifest: Manifest) -> bool:
    """True for a program of our emitter (its ``format`` field), false for an external dump."""
    return manifest.extras.get("format") == EMITTED_FORMAT


def emitted_fields(manifest: Manifest) -> EmittedFields:
    """The typed fields of our emitter's program; a UserError naming the file for anything else."""
    where = manifest.directory / MANIFEST_FILE
    extras = manifest.extras
    if not is_emitted(manifest):
        raise UserError(f"{where}: not a program of our emitter (format {extras.get('format')!r})")
    host = extras.get("host") or {}
    if not isinstance(host, dict):
        raise UserError(f"{where}: host: expected an object, got {host!r}")
    multiplier, window = read_host_field(host)
    try:
        layers = tuple(KvLayer(int(e["layer"]), int(e["k"]), int(e["v"]))
                       for e in extras.get("kv_cache", {}).get("layers", []))
        fields = EmittedFields(
            model=str(extras.get("model", "model")),
            m=int(extras["m"]),
            past=int(extras["past"]),
            capacity=int(extras["capacity"]),
            dynamic_position=bool(extras.get("dynamic_position", False)),
            embedding_multiplier=multiplier,
            sliding_window=window,
            kv_layers=layers,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{where}: a field of our emitter is missing or malformed ({exc!r})") from None
    if fields.past + fields.m > fields.capacity:
        raise UserError(f"{where}: past {fields.past} + m {fields.m} exceed the capacity {fields.capacity}")
    return fields


@dataclass(frozen=True)
class EmittedNode:
    """Our emitter's plan facts of one node (its manifest record's ``kind``, ``layer``, ``grid``
    and ``lx_estimate``): the cores of its grid and its estimated LX bytes per core."""

    kind: str
    layer: int | None
    cores: int
    lx_estimate: int


def emitted_nodes(manifest: Manifest) -> tuple[EmittedNode, ...]:
    """The plan facts of every node of our emitter's program, in manifest order. The typed
    manifest keeps no per-node fields beyond the external schema, so they are read from the
    program's manifest.json here, the one place that does; a UserError names a malformed one."""
    from ..readers import InputFileError, read_json

    where = manifest.directory / MANIFEST_FILE
    if not is_emitted(manifest):
        raise UserError(f"{where}: not a program of our emitter (format {manifest.extras.get('format')!r})")
    try:
        records = read_json(where, "manifest").get("nodes")
    except InputFileError as exc:
        raise UserError(str(exc)) from None
    if not isinstance(records, list) or len(records) != len(manifest.nodes):
        raise UserError(f"{where}: nodes: the file changed since it was loaded")
    out = []
    for i, r in enumerate(records):
        grid, lx, layer = r.get("grid"), r.get("lx_estimate"), r.get("layer")
        if not (isinstance(grid, list) and grid and _count(grid[0], 1) and _count(lx, 0)
                and (layer is None or _count(layer, 0))):
            raise UserError(f"{where}: nodes[{i}]: grid, lx_estimate or layer is missing or malformed")
        out.append(EmittedNode(str(r.get("kind", "")), layer, grid[0], lx))
    return tuple(out)


def _count(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def host_scalars(manifest: Manifest) -> dict[str, int]:
    """The host scalars of the pass ``manifest`` was made for: ``position`` = ``past`` for our
    dynamic-position programs; none for other programs (their scalars are per call)."""
    if not is_emitted(manifest):
        return {}
    fields = emitted_fields(manifest)
    return {"position": fields.past} if fields.dynamic_position else {}
