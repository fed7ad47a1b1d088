#!/usr/bin/env python
"""Write a fixture's golden logits and runtime inputs, by the golden conventions (DESIGN.md).

    python scripts/gen_golden.py FIXTURE_DIR MODEL [--weights hub|synthetic|DIR] [--seed N]
                                 [--out DIR] [--force]

For the fixture's manifest (one pass of m tokens after ``past`` cached ones; ``past`` is 0 for the
external dumps) it writes, into FIXTURE_DIR or ``--out``:

- ``golden.f16.gz``: logits ``[m, vocab]`` of a float32 eager transformers forward on the
  checkpoint, rounded to f16, for token ids ``(1000 + 137*i) % (vocab - 1) + 1``, i = past..past+m-1;
- ``t<id>.f16.gz`` for the sources of roles embed (embedding rows of those ids), cos / sin (RoPE
  tables of positions past..past+m-1), prefix_k / prefix_v (zeros; with past > 0 the first
  ``past`` rows hold the prefix's keys (after RoPE) / values from transformers' KV cache), and the
  ``attn_mask`` tensor (0 over the ``past`` filled cache slots, -65504 elsewhere);
- ``golden.json``: how they were made (model, weights origin, token ids, positions).

Shapes come from the manifest's ``tensors[]``. With ``--out`` the program's files (manifest.json,
node*.mlir) are symlinked next to the outputs, so DIR is a complete fixture. The shared corpus is
never written to, and existing files are never replaced without ``--force``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from ktir_models.errors import UserError
from ktir_models.model.checks.golden import live_forward, write_f16_gz
from ktir_models.model.inputs.runtime_inputs import embedding_rows, golden_token_ids, prefix_mask, rope_tables
from ktir_models.model.registry import resolve_model
from ktir_models.model.weights.checkpoint import get_checkpoint

REPO_ROOT = Path(__file__).resolve().parents[1]
INPUT_ROLES = ("embed", "cos", "sin", "prefix_k", "prefix_v")


def corpus_root() -> Path:
    """The shared corpus (``$KTIR_CORPUS``, default ``<repo>/../shared/corpus``)."""
    configured = os.environ.get("KTIR_CORPUS")
    return Path(configured).expanduser().resolve() if configured else (REPO_ROOT.parent / "shared" / "corpus").resolve()


def _read_manifest(fixture: Path) -> dict:
    path = fixture / "manifest.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read the fixture manifest: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    for field in ("tensors", "sources", "result"):
        if field not in doc:
            raise UserError(f"{path}: field '{field}' is missing")
    return doc


def _int_field(doc: dict, key: str, default: int) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"manifest.json: field '{key}' must be a non-negative integer, got {value!r}")
    return value


def plan_outputs(doc: dict, ckpt, fixture: Path) -> tuple[dict[str, np.ndarray], dict]:
    """File name -> f16 array for every output, and the provenance record."""
    cfg = ckpt.config
    shapes = {t["id"]: (t["rows"], t["cols"]) for t in doc["tensors"]}
    sources = doc["sources"]
    embeds = [s for s in sources if s.get("role") == "embed"]
    m = shapes[embeds[0]["id"]][0] if embeds else shapes[doc["result"]][0]
    past = _int_field(doc, "past", 0)
    ids = golden_token_ids(m, cfg.vocab_size, start=past)
    positions = np.arange(past, past + m)
    if "positions" in doc and list(doc["positions"]) != positions.tolist():
        raise UserError(f"{fixture}/manifest.json: field 'positions' = {doc['positions']!r}; this script "
                        f"writes goldens for positions past..past+m-1 = {positions.tolist()} only")

    live = live_forward(ckpt, ids, past=past)
    result_shape = shapes[doc["result"]]
    if result_shape != (m, cfg.vocab_size):
        raise UserError(f"{fixture}/manifest.json: result tensor {doc['result']} is {list(result_shape)}, "
                        f"expected logits [m={m}, vocab={cfg.vocab_size}]")
    outputs = {"golden.f16.gz": live.logits.astype(np.float16)}

    cos, sin = rope_tables(cfg, positions)
    for index, src in enumerate(sources):
        role = src.get("role")
        if role not in INPUT_ROLES:
            continue
        shape = shapes[src["id"]]
        if role == "embed":
            value = embedding_rows(ckpt, ids)
        elif role in ("cos", "sin"):
            value = cos if role == "cos" else sin
        else:
            value = np.zeros(shape, dtype=np.float16)
            if past:
                layer = src.get("layer")
                if not isinstance(layer, int) or not 0 <= layer < cfg.num_hidden_layers:
                    raise UserError(f"manifest.json: sources[{index}].layer = {layer!r} is not a layer of the model")
                cache = (live.keys if role == "prefix_k" else live.values)[layer][:past]
                if past > shape[0] or cache.shape[1] != shape[1]:
                    raise UserError(f"manifest.json: sources[{index}] ({role}) is {list(shape)}; cannot hold "
                                    f"{past} cached rows of width {cache.shape[1]}")
                value[:past] = cache.astype(np.float16)
        if value.size != shape[0] * shape[1]:
            raise UserError(f"manifest.json: sources[{index}] ({role}, tensor {src['id']}) is {list(shape)}, "
                            f"but the {role} input has shape {list(value.shape)}")
        outputs[f"t{src['id']}.f16.gz"] = np.asarray(value, dtype=np.float16).reshape(shape)
    if doc.get("attn_mask") is not None:
        rows, cols = shapes[doc["attn_mask"]]
        outputs[f"t{doc['attn_mask']}.f16.gz"] = prefix_mask(cols, min(past, cols), rows=rows)

    provenance = {
        "origin": ckpt.origin,
        "model_config": cfg.to_hf_dict(),
        "token_ids": ids.tolist(),
        "positions": positions.tolist(),
        "past": past,
        "forward": "transformers float32, eager attention",
    }
    return outputs, provenance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixture", type=Path, help="fixture directory holding manifest.json")
    parser.add_argument("model", help="registry name, local checkpoint dir or HF repo id")
    parser.add_argument("--weights", default="hub", help="hub (default), synthetic, or a checkpoint dir")
    parser.add_argument("--seed", type=int, default=0, help="seed of --weights synthetic")
    parser.add_argument("--out", type=Path, help="write here instead of the fixture directory")
    parser.add_argument("--force", action="store_true", help="replace existing output files")
    args = parser.parse_args(argv)
    try:
        written = generate(args.fixture, args.model, args.weights, args.seed, args.out, args.force)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files into {written[0].parent}")
    return 0


def generate(fixture: Path, model: str, weights: str = "hub", seed: int = 0, out: Path | None = None,
             force: bool = False) -> list[Path]:
    """Write the goldens (see the module docstring); returns the paths written."""
    fixture = Path(fixture)
    out_dir = Path(out) if out is not None else fixture
    corpus = corpus_root()
    if out_dir.resolve().is_relative_to(corpus):
        raise UserError(f"{out_dir}: refusing to write into the shared corpus {corpus}; use --out DIR")
    doc = _read_manifest(fixture)
    spec = resolve_model(model)
    ckpt = get_checkpoint(spec, weights, seed=seed)
    outputs, provenance = plan_outputs(doc, ckpt, fixture)

    program = []
    if out_dir.resolve() != fixture.resolve():
        program = [fixture / "manifest.json"] + sorted(fixture.glob("node*.mlir"))
    targets = [out_dir / name for name in [*outputs, "golden.json"]] + [out_dir / p.name for p in program]
    clashes = [p for p in targets if p.exists() or p.is_symlink()]
    if clashes and not force:
        raise UserError(f"{clashes[0]}: exists (and {len(clashes) - 1} more); use --force to replace")
    out_dir.mkdir(parents=True, exist_ok=True)
    for src in program:
        link = out_dir / src.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(src.resolve())
    written = []
    for name, array in outputs.items():
        write_f16_gz(out_dir / name, array)
        written.append(out_dir / name)
    (out_dir / "golden.json").write_text(json.dumps(provenance, indent=2) + "\n")
    written.append(out_dir / "golden.json")
    return written


if __name__ == "__main__":
    sys.exit(main())
