"""Host values for a manifest's source tensors, bound by role.

* ``weight``   -> the checkpoint tensor named by ``disk`` (``.weight`` added; a tied ``lm_head``
  falls back to ``model.embed_tokens``), f16, bytes in the checkpoint's own ``[out, in]`` layout.
  Its real shape is checked: a projection declared ``[in, out]`` must be stored ``[out, in]``, a
  norm vector declared ``[1, n]`` must be stored ``[n]``.
* ``embed``    -> embedding rows of the pass's token ids, f16 ``[m, hidden]``.
* ``cos``/``sin`` -> RoPE tables for the pass's positions, f16 ``[m, head_dim]`` (HF layout).
* ``prefix_k``/``prefix_v`` -> zeros (the external dumps' KV cache is empty), unless the fixture
  directory carries ``t<id>.f16.gz`` for that tensor.
* the ``attn_mask`` tensor (not a source, bound by the host) -> columns ``< past`` visible (0),
  the rest masked (-65504). With ``past == 0`` (the external dumps) it is all -65504: the empty
  prefix cache is fully masked; the fresh tokens' causal structure is in the program itself
  (prefill nodes slice the fresh keys per row, so the same 1 x P mask serves every row).

Any source can be overridden by a ``t<id>.f16.gz`` file in the fixture directory (vendored
inputs); its size must match the tensor's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UserError
from ..config import ModelConfig
from ..manifest import MANIFEST_FILE, Manifest, SourceDecl

#: The f16 value the hosts use for a masked attention score (largest finite negative f16).
MASKED = np.float16(-65504.0)


@dataclass(frozen=True)
class PassSpec:
    """What one forward pass feeds the program: token ids and their positions; ``past`` earlier
    tokens (``prefix_ids``) are assumed to sit in the KV cache."""

    token_ids: np.ndarray  # int64 [m]
    positions: np.ndarray  # int64 [m]
    past: int = 0
    prefix_ids: np.ndarray | None = None


def pass_spec(manifest: Manifest, cfg: ModelConfig) -> PassSpec:
    """The golden-convention pass of a manifest: ids ``(1000 + 137 i) % (vocab - 1) + 1`` for
    ``i`` in ``past .. past+m-1`` at positions ``past .. past+m-1`` (our ``positions`` extra wins)."""
    from .runtime_inputs import golden_token_ids

    m = manifest.tokens
    past = _int_extra(manifest, "past", 0)
    ids = np.asarray(golden_token_ids(m, cfg.vocab_size, start=past), dtype=np.int64)
    prefix = np.asarray(golden_token_ids(past, cfg.vocab_size), dtype=np.int64) if past else None
    positions = manifest.extras.get("positions")
    if positions is None:
        pos = np.arange(past, past + m, dtype=np.int64)
    else:
        if not isinstance(positions, list) or len(positions) != m or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in positions
        ):
            raise UserError(f"{MANIFEST_FILE}: positions: expected {m} non-negative integers, got {positions!r}")
        pos = np.asarray(positions, dtype=np.int64)
    return PassSpec(token_ids=ids, positions=pos, past=past, prefix_ids=prefix)


def _int_extra(manifest: Manifest, key: str, default: int) -> int:
    value = manifest.extras.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{MANIFEST_FILE}: {key}: expected a non-negative integer, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------
# Weights


def source_label(manifest: Manifest, src: SourceDecl) -> str:
    index = manifest.sources.index(src)
    what = src.disk or src.role + (f" layer {src.layer}" if src.layer is not None else "")
    return f"{MANIFEST_FILE}: sources[{index}] ({what}, tensor {src.id})"


def checkpoint_shape_for(manifest: Manifest, src: SourceDecl) -> tuple[int, ...]:
    """The shape the checkpoint must store for weight source ``src``: ``[out, in]`` for a declared
    ``[in, out]`` matrix, ``[n]`` for a declared ``[1, n]`` vector."""
    t = manifest.tensor(src.id)
    if t.rows == 1 and not src.is_gemm:
        return (t.cols,)
    return (t.cols, t.rows)


def check_weight_shapes(manifest: Manifest, ckpt: Any) -> None:
    """Every weight source exists in the checkpoint with its real shape; raise UserError naming the
    source, the checkpoint tensor and expected/actual shapes. Reads headers only."""
    for src in manifest.sources:
        if src.role != "weight":
            continue
        hf_name = _resolve(ckpt, src, manifest)
        actual = tuple(int(d) for d in ckpt.tensor_shape(hf_name))
        want = checkpoint_shape_for(manifest, src)
        if actual != want and not (len(want) == 1 and actual == (1, want[0])):
            t = manifest.tensor(src.id)
            raise UserError(
                f"{source_label(manifest, src)}: checkpoint tensor {hf_name} has shape "
                f"{_fmt(actual)}, expected {_fmt(want)} (manifest declares {t.rows}x{t.cols} as [in, out])"
            )


def _resolve(ckpt: Any, src: SourceDecl, manifest: Manifest) -> str:
    assert src.disk is not None
    try:
        return ckpt.resolve(src.disk)
    except UserError as exc:
        raise UserError(f"{source_label(manifest, src)}: {exc}") from None


def _fmt(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def load_weight(manifest: Manifest, ckpt: Any, src: SourceDecl) -> np.ndarray:
    """One weight source as an f16 array in checkpoint layout, 2-d (a vector becomes ``[1, n]``)."""
    hf_name = _resolve(ckpt, src, manifest)
    array = np.asarray(ckpt.read_f16(hf_name))
    want = checkpoint_shape_for(manifest, src)
    if array.size != int(np.prod(want)):
        raise UserError(
            f"{source_label(manifest, src)}: checkpoint tensor {hf_name} has shape {_fmt(array.shape)}, "
            f"expected {_fmt(want)}"
        )
    if array.dtype != np.float16:
        raise UserError(f"{source_label(manifest, src)}: {hf_name} read as {array.dtype}, expected float16")
    return _two_d(array, want)


def _two_d(array: np.ndarray, want: tuple) -> np.ndarray:
    """A weight as HBM holds it: 2-d, a vector as ``[1, n]``."""
    return array.reshape(-1, want[-1]) if array.ndim != 2 else array


def map_weight(manifest: Manifest, ckpt: Any, src: SourceDecl) -> np.ndarray | None:
    """One weight source as :func:`load_weight` gives it, but over its bytes in the checkpoint
    file (read-only, ``Checkpoint.map_f16``), or None where it is not stored as F16 there."""
    hf_name = _resolve(ckpt, src, manifest)
    array = ckpt.map_f16(hf_name)
    if array is None:
        return None
    want = checkpoint_shape_for(manifest, src)
    if array.size != int(np.prod(want)):
        return None  # load_weight says what is wrong
    return _two_d(array, want)


def weight_source_bytes(manifest: Manifest) -> int:
    """The f16 bytes of every weight source of ``manifest``."""
    return sum(2 * manifest.tensor(s.id).rows * manifest.tensor(s.id).cols
               for s in manifest.sources if s.role == "weight")


# --------------------------------------------------------------------------------------------
# Per-pass inputs


def vendored_input_path(manifest: Manifest, tensor_id: int) -> Path:
    return manifest.directory / f"t{tensor_id}.f16.gz"


def read_vendored_inputs(manifest: Manifest, tensor_ids: list[int]) -> dict[int, np.ndarray]:
    """``t<id>.f16.gz`` files present in the fixture directory, for the given tensors."""
    from ..checks.golden import read_f16_gz

    found: dict[int, np.ndarray] = {}
    for tid in tensor_ids:
        path = vendored_input_path(manifest, tid)
        if path.is_file():
            t = manifest.tensor(tid)
            found[tid] = np.asarray(read_f16_gz(path, (t.rows, t.cols)), dtype=np.float16).reshape(t.rows, t.cols)
    return found


def input_tensor_ids(manifest: Manifest) -> list[int]:
    """Tensors that change from pass to pass: every non-weight source, plus the mask."""
    ids = [s.id for s in manifest.sources if s.role != "weight"]
    if manifest.attn_mask is not None:
        ids.append(manifest.attn_mask)
    return ids


def attention_mask(rows: int, cols: int, past: int, window: int | None = None) -> np.ndarray:
    """``[rows, cols]`` f16: columns ``< past`` (filled cache slots) 0, the rest -65504; with a
    sliding ``window`` also the filled columns outside row i's window (query position past + i)."""
    from .runtime_inputs import hide_outside_window

    mask = np.full((rows, cols), MASKED, dtype=np.float16)
    mask[:, : min(past, cols)] = 0
    return hide_outside_window(mask, past, window)


def family_host_fields(manifest: Manifest, cfg: ModelConfig) -> tuple[float, int | None]:
    """(embedding multiplier, sliding window) the host applies: our programs state them in their
    ``host`` manifest field (so a program is bound as it was emitted); others follow the config."""
    host = manifest.extras.get("host")
    if isinstance(host, dict):
        from ..emitted import read_host_field

        return read_host_field(host)
    return cfg.features.embedding_multiplier, cfg.features.sliding_window


def bind_pass_inputs(
    manifest: Manifest,
    cfg: ModelConfig,
    ckpt: Any,
    spec: PassSpec,
    vendored: dict[int, np.ndarray] | None = None,
) -> dict[int, np.ndarray]:
    """f16 host arrays, shaped like their manifest tensors, for every per-pass input tensor."""
    from .runtime_inputs import rope_tables, scaled_embedding_rows

    vendored = vendored or {}
    multiplier, window = family_host_fields(manifest, cfg)
    out: dict[int, np.ndarray] = {}
    cos = sin = None
    for src in manifest.sources:
        if src.role == "weight":
            continue
        t = manifest.tensor(src.id)
        if src.id in vendored:
            value = vendored[src.id]
        elif src.role == "embed":
            value = scaled_embedding_rows(ckpt, spec.token_ids, multiplier)
        elif src.role in ("cos", "sin"):
            if cos is None:
                cos, sin = rope_tables(cfg, spec.positions)
            value = cos if src.role == "cos" else sin
        elif src.role in ("prefix_k", "prefix_v"):
            if spec.past:
                raise UserError(
                    f"{source_label(manifest, src)}: the program expects {spec.past} cached tokens; "
                    f"put their values in {vendored_input_path(manifest, src.id).name}"
                )
            value = np.zeros(t.shape, dtype=np.float16)
        else:  # pragma: no cover - roles are checked at load
            raise UserError(f"{source_label(manifest, src)}: unknown role {src.role!r}")
        out[src.id] = _as_tensor(value, t.shape, source_label(manifest, src))
    if manifest.attn_mask is not None:
        t = manifest.tensor(manifest.attn_mask)
        if manifest.attn_mask in vendored:
            out[t.id] = _as_tensor(vendored[t.id], t.shape, f"{MANIFEST_FILE}: attn_mask (tensor {t.id})")
        else:
            out[t.id] = attention_mask(t.rows, t.cols, spec.past, window)
    return out


def _as_tensor(value: np.ndarray, shape: tuple[int, int], label: str) -> np.ndarray:
    value = np.asarray(value)
    if value.size != shape[0] * shape[1]:
        raise UserError(f"{label}: host value has shape {_fmt(value.shape)}, the tensor is {_fmt(shape)}")
    return np.ascontiguousarray(value, dtype=np.float16).reshape(shape)
