"""``emit_program`` and ``cached_program``: from a config and a pass shape to a fixture directory."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from ...errors import UserError
from ...cache_entries import cache_base, cache_folder, ensure_entry
from ..config import ModelConfig
from .host import MASKED
from .llama import LlamaEmitter, PassShape

#: Bumped whenever the emitted text or manifest can change; part of the cache key.
EMITTER_VERSION = "5"
MODES = ("decode", "prefill")
FORMAT = "ktir-models/1"
DEFAULT_PREFILL_TOKENS = 32
PROGRAMS_FOLDER = "programs"  # below the cache root


def pass_shape(mode: str, tokens: int | None, past: int, capacity: int | None,
               dynamic_position: bool = False) -> PassShape:
    """Check the pass arguments (UserError naming the option) and return the pass shape."""
    if mode not in MODES:
        raise UserError(f"--mode: {mode!r} is not a mode (choose one of: {', '.join(MODES)})")
    if tokens is None:
        tokens = 1 if mode == "decode" else DEFAULT_PREFILL_TOKENS
    if tokens < 1:
        raise UserError(f"--tokens: must be at least 1, got {tokens}")
    if mode == "decode" and tokens != 1:
        raise UserError(f"--tokens: decode processes one token, got {tokens} (use --mode prefill)")
    if past < 0:
        raise UserError(f"--past: must be >= 0, got {past}")
    if capacity is None:
        capacity = past + tokens
    if capacity < past + tokens:
        raise UserError(f"capacity {capacity} is smaller than past + tokens = {past + tokens}")
    return PassShape(m=tokens, past=past, capacity=capacity, dynamic_position=dynamic_position)


def _symbol(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def host_fields(cfg: ModelConfig) -> dict[str, Any]:
    """What the host applies for the family when it builds a pass's inputs (manifest ``host``):
    ``embedding_multiplier`` scales the embedding rows (f32 product, rounded once to f16) and
    ``sliding_window`` (or null) hides mask columns ``j <= position - window``. Empty for a
    family with neither (llama programs stay byte for byte what they were)."""
    f = cfg.features
    host: dict[str, Any] = {}
    if f.embedding_multiplier != 1.0:
        host["embedding_multiplier"] = f.embedding_multiplier
    if f.sliding_window is not None:
        host["sliding_window"] = f.sliding_window
    return host


def _extras(cfg: ModelConfig, mode: str, shape: PassShape, name: str, emitter: LlamaEmitter) -> dict[str, Any]:
    s = shape
    window = cfg.features.sliding_window
    rule = "mask[i][j] = 0 if j < past else hidden (fresh tokens: causal inside the program)"
    if window is not None:
        rule = (f"mask[i][j] = 0 if j < past and (past + i) - j < {window} else hidden "
                "(sliding window; fresh tokens: causal and windowed inside the program)")
    return {
        "format": FORMAT,
        "emitter_version": EMITTER_VERSION,
        "model": name,
        "config": cfg.to_hf_dict(),
        "mode": mode,
        "m": s.m,
        "past": s.past,
        "capacity": s.capacity,
        "positions": list(range(s.past, s.past + s.m)),
        "dynamic_position": s.dynamic_position,
        "scalars": {"position": s.past},
        "kv_cache": {
            "capacity": s.capacity,
            "valid_before": s.past,
            "written_rows": [s.past, s.past + s.m],
            "layers": [{"layer": i, "k": w.k_cache.id, "v": w.v_cache.id}
                       for i, w in enumerate(emitter.layers)],
        },
        "attn_mask_layout": {
            "rows": s.m,
            "cols": s.capacity,
            "visible": 0.0,
            "hidden": MASKED,
            "rule": rule,
        },
        **({"host": host_fields(cfg)} if host_fields(cfg) else {}),
        "dtypes": {"hbm": "f16", "compute": "f32"},
    }


def _build(cfg: ModelConfig, mode: str, shape: PassShape, name: str,
           emitter_class: type[LlamaEmitter] = LlamaEmitter):
    """The whole program in memory (every error surfaces here, before any file is touched)."""
    emitter = emitter_class(cfg, shape, prefix=f"ktir_{mode}_{_symbol(name)}")
    program = emitter.build()
    return program, _extras(cfg, mode, shape, name, emitter)


def _write(cfg: ModelConfig, mode: str, shape: PassShape, out_dir: Path, name: str) -> None:
    program, extras = _build(cfg, mode, shape, name)
    program.write(out_dir, extras)


def emit_program(cfg: ModelConfig, mode: str, tokens: int | None, past: int, out_dir: Path, name: str,
                 *, capacity: int | None = None, dynamic_position: bool = False,
                 force: bool = False, emitter_class: type[LlamaEmitter] = LlamaEmitter) -> Path:
    """Write the fixture of one pass into ``out_dir`` and return it.

    A non-empty ``out_dir`` is refused unless ``force``; with ``force`` only a previous emission's
    files (``manifest.json``, ``node*.mlir``) are removed, anything else is left alone.
    ``emitter_class`` builds the graph (a subclass of the emitter; the tests plant mistakes so).
    """
    shape = pass_shape(mode, tokens, past, capacity, dynamic_position)
    program, extras = _build(cfg, mode, shape, name, emitter_class)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not force:
            raise UserError(f"--out {out_dir}: directory is not empty (use --force to replace an emitted program)")
        for old in [out_dir / "manifest.json", *out_dir.glob("node*.mlir")]:
            if old.is_file():
                old.unlink()
    out_dir.mkdir(parents=True, exist_ok=True)
    program.write(out_dir, extras)
    return out_dir


def cache_root() -> Path:
    """``$KTIR_MODELS_CACHE/programs`` (default ``~/.cache/ktir-models/programs``)."""
    return cache_base() / PROGRAMS_FOLDER


def program_key(cfg: ModelConfig, mode: str, tokens: int | None, past: int, *, capacity: int | None = None,
                dynamic_position: bool = False, name: str = "model") -> str:
    """A stable key of everything that determines an emission (config, pass shape, version)."""
    shape = pass_shape(mode, tokens, past, capacity, dynamic_position)
    blob = json.dumps({
        "config": cfg.to_hf_dict(), "mode": mode, "m": shape.m, "past": shape.past,
        "capacity": shape.capacity, "dynamic": shape.dynamic_position, "name": name,
        "version": EMITTER_VERSION,
    }, sort_keys=True)
    return f"{_symbol(name)}-{mode}-m{shape.m}-p{shape.past}-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def cached_program(cfg: ModelConfig, mode: str, tokens: int | None, past: int, *, capacity: int | None = None,
                   dynamic_position: bool = False, name: str = "model") -> Path:
    """The fixture directory of this pass from the program cache, emitting it on a miss.

    The directory is a digest-verified cache entry (:mod:`ktir_models.cache_entries`): emitted
    into a temporary sibling renamed into place with its digest, so a reader never sees a
    half-written program and concurrent emitters do not collide, and checked before every use, so
    a damaged program (an edited op, a truncated node file) is moved aside and emitted again.
    """
    key = program_key(cfg, mode, tokens, past, capacity=capacity, dynamic_position=dynamic_position, name=name)
    shape = pass_shape(mode, tokens, past, capacity, dynamic_position)
    folder = cache_folder(PROGRAMS_FOLDER)
    return ensure_entry(folder, key, lambda tmp: _write(cfg, mode, shape, tmp, name))
