"""Goldens: the ``.f16.gz`` file format, comparison metrics, and live transformers forwards.

File format: little-endian float16, row-major, no header, gzip-compressed. The shape is not stored;
the reader is told it (from the manifest) and checks the byte count. Files are written atomically
(temporary file + rename) and gzip's timestamp is zeroed, so equal arrays give equal files.

Live goldens run the family's transformers class (``LlamaForCausalLM``, ``GraniteForCausalLM``,
... : ``ModelConfig.family.architecture``) in float32 with eager attention, loaded from the
checkpoint directory with local files only; torch and transformers are imported lazily here.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ktir_models.errors import UserError
from ktir_models.model.inputs.runtime_inputs import golden_token_ids, kv_heads_to_cache


# ---------------------------------------------------------------------------------------- f16.gz I/O


def write_f16_gz(path, array) -> None:
    """Write ``array`` as gzip'd little-endian float16 (rounded once if it is not f16 already)."""
    path = Path(path)
    data = np.ascontiguousarray(np.asarray(array), dtype="<f2").tobytes()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
            gz.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_f16_gz(path, shape) -> np.ndarray:
    """Read a ``.f16.gz`` file as a float16 array of ``shape``; a wrong size is a UserError."""
    path = Path(path)
    shape = tuple(int(n) for n in shape)
    from ktir_models.readers import read_gzip_bytes

    expected = int(np.prod(shape, dtype=np.int64)) * 2
    # At most expected + 1 bytes are inflated: a wrong or hostile file fails on its size alone.
    data = read_gzip_bytes(path, expected, what="f16.gz data")
    if len(data) != expected:
        held = f"more than {expected} bytes" if len(data) > expected else \
            f"{len(data)} bytes ({len(data) / 2:g} float16 values)"
        raise UserError(f"{path}: holds {held}, expected shape {list(shape)} = {expected} bytes")
    return np.frombuffer(data, dtype="<f2").astype(np.float16).reshape(shape)


# ---------------------------------------------------------------------------------------- metrics


@dataclass
class Metrics:
    """How close logits are to a golden. ``top1_rows[i]``: same argmax in row i;
    ``max_abs_rel`` = ``max_abs / max |golden|``; ``cosine`` over all elements (float64).

    ``top1_margin[i]``: how much higher the golden rates its own top-1 than the emulated top-1 of
    row i (``golden[i, argmax golden] - golden[i, argmax logits]``; 0 where they agree, NaN where
    the row holds NaN/Inf); ``emulated_top1[i]`` / ``golden_top1[i]``: the two argmaxes;
    ``golden_scale`` = ``max |golden|``. The pass rule (report.judge) reads these to tell a near-tie
    from a wrong row. ``max_closing``: the most the emulated error raises any logit relative to its
    row's golden top-1, ``max_ij (d_ij - d_i,top_i)`` with ``d = logits - golden``: a golden margin
    below it could have flipped (docs/forward.md compares it with the near-tie band)."""

    top1_agreement: float
    top1_rows: list[bool]
    max_abs: float
    max_abs_rel: float
    cosine: float
    top1_margin: list[float] = field(default_factory=list)
    emulated_top1: list[int] = field(default_factory=list)
    golden_top1: list[int] = field(default_factory=list)
    golden_scale: float = 0.0
    max_closing: float = 0.0

    def summary(self) -> str:
        agree = sum(self.top1_rows)
        return (
            f"top-1 {agree}/{len(self.top1_rows)} ({self.top1_agreement:.1%}), max|d| {self.max_abs:.4g} "
            f"({self.max_abs_rel:.3%} of max|golden|), cosine {self.cosine:.6f}"
        )


def compare(logits, golden, last_token: bool = False) -> Metrics:
    """Metrics of ``logits`` against ``golden``, both ``[m, vocab]`` (any float dtype).
    ``last_token``: ``logits`` is the last row of a pass only (``Runner.run(...,
    last_token=True)``), judged against the golden's last row.

    NaN/Inf in ``logits`` are not hidden: they give NaN/Inf distances and a NaN cosine.
    """
    a = np.asarray(logits, dtype=np.float64)
    g = np.asarray(golden, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if g.ndim == 1:
        g = g[None, :]
    if last_token:
        g = g[-1:]
    if a.shape != g.shape:
        raise UserError(f"logits have shape {list(a.shape)} but the golden has shape {list(g.shape)}")
    # A row holding NaN/Inf never agrees (argmax would just pick the first NaN). Goldens are
    # f16 by convention, so two golden logits equal at f16 resolution are a tie: picking either
    # of them agrees (the golden itself cannot tell them apart).
    g16 = g.astype(np.float16).astype(np.float64)
    picked = np.take_along_axis(g16, np.argmax(a, axis=1)[:, None], axis=1)[:, 0]
    same = (picked == g16.max(axis=1)) & np.isfinite(a).all(axis=1)
    rows = [bool(x) for x in same]
    emulated_top = np.argmax(np.where(np.isnan(a), -np.inf, a), axis=1) if a.size else np.zeros(0, dtype=np.int64)
    golden_top = np.argmax(g, axis=1) if g.size else np.zeros(0, dtype=np.int64)
    margins = [
        0.0 if ok else (float(g[i, golden_top[i]] - g[i, emulated_top[i]]) if np.isfinite(a[i]).all() else float("nan"))
        for i, ok in enumerate(rows)
    ]
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - g)
        max_abs = float(np.max(diff)) if diff.size else 0.0
        if np.isnan(diff).any():
            max_abs = float("nan")
        scale = float(np.max(np.abs(g))) if g.size else 0.0
        max_abs_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
        denom = float(np.linalg.norm(a) * np.linalg.norm(g))
        if not np.isfinite(denom):
            cosine = float("nan")
        elif denom > 0:
            cosine = float(np.sum(a * g) / denom)
        else:  # an all-zero side: equal only if both are zero
            cosine = 1.0 if not a.any() and not g.any() else 0.0
    return Metrics(
        top1_agreement=float(np.mean(rows)) if rows else 1.0,
        top1_rows=rows,
        max_abs=max_abs,
        max_abs_rel=max_abs_rel,
        cosine=cosine,
        top1_margin=margins,
        max_closing=_max_closing(a, g, golden_top),
        emulated_top1=[int(x) for x in emulated_top],
        golden_top1=[int(x) for x in golden_top],
        golden_scale=scale,
    )


def _max_closing(a: np.ndarray, g: np.ndarray, golden_top: np.ndarray) -> float:
    """``max_ij (d_ij - d_i,top_i)``, ``d = a - g``: how far the error closes a golden top-1 margin."""
    if not a.size:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        d = a - g
        rows = np.arange(d.shape[0])
        closing = d - d[rows, golden_top][:, None]
        return float("nan") if np.isnan(closing).any() else float(np.max(closing))


# ---------------------------------------------------------------------------------------- live forward


@dataclass
class LiveForward:
    """A transformers forward: ``logits [m, vocab]`` float32 and the KV cache after it, per layer,
    as ``[past + m, kv_heads * head_dim]`` float32 (keys after RoPE, as transformers caches them)."""

    logits: np.ndarray
    keys: list[np.ndarray]
    values: list[np.ndarray]


_MODEL_CACHE: dict[str, object] = {}


def load_transformers_model(ckpt):
    """The family's causal-LM class (``ckpt.config.family.architecture``) in float32 with eager
    attention from ``ckpt.directory`` (local files only); the last one loaded is kept for reuse
    within the process."""
    key = str(Path(getattr(ckpt, "path", ckpt.directory)).resolve())
    if key not in _MODEL_CACHE:
        import torch
        import transformers

        _MODEL_CACHE.clear()  # keep at most one model (a 1B model is 5 GB in float32)
        own = getattr(ckpt, "transformers_model", None)  # a GGUF file: model/gguf/golden.py
        if own is not None:
            model = own()
        else:
            model_class = getattr(transformers, ckpt.config.family.architecture)
            model = model_class.from_pretrained(
                key, dtype=torch.float32, attn_implementation="eager", local_files_only=True
            )
        model.eval()
        _MODEL_CACHE[key] = model
    return _MODEL_CACHE[key]


def live_forward(ckpt, token_ids, past: int = 0, prefix_ids=None) -> LiveForward:
    """Run ``token_ids`` at positions ``past .. past+m-1``. With ``past > 0`` the prefix tokens
    (``prefix_ids``, default the golden ids for positions ``0 .. past-1``) run first and the m
    tokens use their KV cache (decode after prefill)."""
    import torch

    model = load_transformers_model(ckpt)
    ids = torch.as_tensor(np.asarray(token_ids, dtype=np.int64).reshape(1, -1))
    m = ids.shape[1]
    cache = None
    with torch.no_grad():
        if past > 0:
            if prefix_ids is None:
                prefix_ids = golden_token_ids(past, ckpt.config.vocab_size)
            prefix = torch.as_tensor(np.asarray(prefix_ids, dtype=np.int64).reshape(1, -1))
            if prefix.shape[1] != past:
                raise UserError(f"prefix has {prefix.shape[1]} tokens, expected past={past}")
            cache = output_cache(model(prefix, use_cache=True))
        positions = torch.arange(past, past + m).reshape(1, -1)
        out = model(ids, position_ids=positions, use_cache=True, **{cache_kwarg(model): cache})
    keys, values = [], []
    for layer in range(ckpt.config.num_hidden_layers):
        k, v = _cache_layer(output_cache(out), layer)
        keys.append(kv_heads_to_cache(k[0].numpy()))
        values.append(kv_heads_to_cache(v[0].numpy()))
    return LiveForward(logits=out.logits[0].float().numpy(), keys=keys, values=values)


def cache_kwarg(model) -> str:
    """transformers 5.x names the KV-cache argument ``cache``; 4.x ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def output_cache(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _cache_layer(cache, layer: int):
    """(keys, values) ``[1, kv_heads, seq, head_dim]`` of one layer of a transformers cache."""
    if hasattr(cache, "layers"):  # transformers >= 4.56 DynamicCache
        return cache.layers[layer].keys, cache.layers[layer].values
    return cache[layer][0], cache[layer][1]


def live_logits(ckpt, token_ids, past: int = 0, prefix_ids=None) -> np.ndarray:
    """float32 logits ``[m, vocab]`` of a transformers forward (see :func:`live_forward`)."""
    return live_forward(ckpt, token_ids, past=past, prefix_ids=prefix_ids).logits
