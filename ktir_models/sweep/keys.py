"""Result keys: a case's result is reused only when everything that decides it is unchanged.

A key is the sha256 of a canonical JSON record of:

* the program: the content of every file in the program directory (manifest, node*.mlir,
  vendored inputs and golden), or, for an emitted program, the emitter's program key (model
  config, pass shape, emitter version);
* the model and the weights' identity: registry entries and local files by content (files over
  ``CONTENT_LIMIT`` by size and mtime, so multi-GB checkpoints are not re-read on every sweep),
  hub weights by repo id and revision, synthetic weights by seed;
* a golden file by content;
* the case's options (:meth:`Case.options`: mode, tokens, back end, timeout, ...);
* (a wait case reads nothing: its key is its options and the project alone);
* the project: its version and, by default (``project="sources"``), a hash of its own source
  files, so an emulator or emitter edit reruns everything; ``project="version"`` keys on the
  version string only (results survive edits of a checkout); and the versions of numpy /
  ml_dtypes / torch / transformers.

Keys are computed in the sweep process, before any case runs (digests remembered within one sweep,
see :func:`forget`); identical inputs give identical keys on every machine that sees the same files.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from .spec import EMIT, GOLDEN_KEYWORDS, WAIT, Case

CONTENT_LIMIT = 64 << 20
PROJECT_KEYS = ("sources", "version")
_PACKAGE = Path(__file__).resolve().parents[1]


def forget() -> None:
    """Drop the digests remembered so far (a sweep starts with this: files may have changed)."""
    _tree_identity.cache_clear()
    project_identity.cache_clear()


def case_key(case: Case, project: str = "sources") -> str:
    if case.kind == WAIT:
        record = {"wait": case.options(), "project": project_identity(project == "sources")}
        return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()
    record = {
        "program": _program_identity(case),
        "model": _model_identity(case.model),
        "weights": _weights_identity(case.weights, case.seed, case.model),
        "golden": _golden_identity(case.golden),
        "options": case.options(),
        "project": project_identity(project == "sources"),
    }
    blob = json.dumps(record, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@lru_cache(maxsize=None)
def project_identity(sources: bool = True) -> dict[str, Any]:
    """Version of ktir-models, a hash of its sources (if ``sources``), the numeric libraries' versions."""
    from ..version import __version__

    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")) if sources else ():
        if path.suffix in (".py", ".c") and path.is_file():
            digest.update(str(path.relative_to(_PACKAGE)).encode())
            digest.update(path.read_bytes())
    versions = {}
    for dist in ("numpy", "ml_dtypes", "torch", "transformers"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {"version": __version__, "sources": digest.hexdigest() if sources else None, "libraries": versions}


def _program_identity(case: Case) -> Any:
    if case.kind == "generate" or case.program == EMIT:
        return {"emitted": _emitted_key(case)}
    return {"dir": _tree_identity(case.program)}


def _emitted_key(case: Case) -> str:
    """The emitter's own program key (config, shape, emitter version); generate emits two."""
    from ..model.registry import resolve_model

    try:
        from ..model.emit.api import program_key
    except ImportError:  # a build without the emitter: the case itself reports that
        return "no-emitter"
    spec = resolve_model(case.model)
    if case.kind == "generate":
        return f"generate:{spec.name}:{json.dumps(spec.config.to_hf_dict(), sort_keys=True)}"
    return program_key(spec.config, case.mode or "decode", case.tokens, case.past, name=spec.name)


def _model_identity(model: str) -> Any:
    from ..model.registry import MANIFESTS_DIR, registry_names

    if model in registry_names():
        entry = MANIFESTS_DIR / f"{model}.toml"
        return {"registry": model, "entry": file_digest(entry)}
    path = Path(model)
    if path.exists():
        return {"path": _tree_identity(str(path))}
    return {"repo": model}


def _weights_identity(weights: str, seed: int, model: str) -> Any:
    if weights == "synthetic":
        return {"synthetic": seed}
    if weights == "hub":
        # a registry entry's shipped checkpoint by content; else the model's identity (a
        # directory's content, a repo id and revision) already names the weights
        from ..model.registry import MANIFESTS_DIR, load_registry_entry, registry_names

        if model in registry_names():
            local = load_registry_entry(model, MANIFESTS_DIR).local_dir
            if local is not None:
                return {"path": _tree_identity(str(local))}
        return "hub"
    return {"path": _tree_identity(weights)}


def _golden_identity(golden: str) -> Any:
    if golden in GOLDEN_KEYWORDS:
        return golden  # vendored goldens are files of the program directory
    return {"file": file_digest(Path(golden))} if Path(golden).is_file() else golden


@lru_cache(maxsize=None)
def _tree_identity(path: str) -> Any:
    """Content identity of a file or of every file under a directory (sorted, relative names)."""
    root = Path(path)
    if root.is_file():
        return file_digest(root)
    if not root.is_dir():
        return {"missing": path}
    return {str(p.relative_to(root)): file_digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


def file_digest(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return "missing"
    if stat.st_size > CONTENT_LIMIT:
        return f"size:{stat.st_size}:mtime:{stat.st_mtime_ns}"
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
