"""``serve``: continuous batching of requests over a paged KV cache on the emulator, every
sequence checked against transformers running it alone (docs/serving.md).

```python
from ktir_models.api.serve import serve
report = serve("stories260k", "requests.jsonl", max_seqs=4, block_size=16, chunk=32,
               weights="fixtures/models/stories260k")
report.passed, report.to_dict(), print(report.render())
```
"""

from __future__ import annotations

from json import dumps  # the module name is taken by the ``json`` option
from pathlib import Path
from typing import Any, Callable, Iterable

from ..model.serving import ServeOptions, ServeReport, read_requests, serve_requests
from ..model.serving.requests import Request, parse_requests
from .option_checks import check_seed
from .reports import write_report_json
from .runtime import quiet_transformers

__all__ = ["ServeReport", "serve"]


def serve(model: str, requests: str | Path | Iterable[dict[str, Any] | Request], *,
          max_seqs: int = 4, block_size: int = 16, kv_blocks: int | None = None, chunk: int = 32,
          weights: str = "hub", golden: str = "live", backend: str | Any = "numpy",
          device: str = "auto", seed: int = 0, json: str | Path | None = None,
          force: bool = False, quiet: bool = False,
          rewrite: Callable[[int, str], str] | None = None,
          progress: Callable[[Any], None] | None = None) -> ServeReport:
    """Serve ``requests`` (a JSON Lines file, or request dicts / :class:`Request` records) with
    MODEL (a registry name, a local checkpoint directory or a hub repo id; ``weights``: hub,
    synthetic or a local directory). ``golden``: ``live`` (check against transformers) or ``none``.
    ``backend``: numpy or torch (with ``device``), or a back-end object. Bad input raises a
    UserError (the CLI's exit 2); a failed check is ``report.passed == False``. ``json``: also
    write ``report.to_dict()`` there, atomically (``force`` replaces a file that is not JSON);
    the target is checked before any work. ``quiet``: no transformers loading bars."""
    from ..errors import UserError
    from ..ktir.backends import make_backend
    from ..model.checks.report import check_json_target, json_safe
    from ..model.registry import resolve_model
    from ..model.inputs.tokenizer import eos_token_ids, load_tokenizer
    from ..model.weights.checkpoint import get_checkpoint

    if golden not in ("live", "none"):
        raise UserError(f"--golden {golden}: expected live or none")
    check_seed(seed)
    ServeOptions(max_seqs, block_size, kv_blocks, chunk).check()
    json_path = None if json is None else Path(json)
    if json_path is not None:
        inputs = (Path(requests),) if isinstance(requests, (str, Path)) else ()
        check_json_target(json_path, force=force, inputs=inputs)
    array_backend = make_backend(backend, device) if isinstance(backend, str) else backend
    if quiet and golden == "live":
        quiet_transformers()
    spec = resolve_model(model)
    ckpt = get_checkpoint(spec, weights, seed=seed)
    cfg = ckpt.config
    tokenizer = load_tokenizer(ckpt, spec)
    if isinstance(requests, (str, Path)):
        reqs = read_requests(Path(requests), cfg.vocab_size, cfg.max_position_embeddings, tokenizer)
    else:
        lines = [dumps(_as_dict(r)) for r in requests]
        reqs = parse_requests(lines, "requests", cfg.vocab_size, cfg.max_position_embeddings,
                              tokenizer)
    options = ServeOptions(max_seqs, block_size, kv_blocks, chunk)
    report = serve_requests(ckpt, spec.name, reqs, options, golden == "live",
                            backend=array_backend, eos_ids=frozenset(eos_token_ids(ckpt, tokenizer)),
                            tokenizer=tokenizer, rewrite=rewrite, progress=progress)
    if json_path is not None:
        write_report_json(json_path, json_safe(report.to_dict()))
    return report


def _as_dict(r: dict[str, Any] | Request) -> dict[str, Any]:
    if isinstance(r, Request):
        d: dict[str, Any] = {"id": r.id, "max_new_tokens": r.max_new_tokens, "arrival": r.arrival}
        if r.text is not None:
            d["prompt"] = r.text
        else:
            d["ids"] = list(r.prompt_ids)
        return d
    return r
