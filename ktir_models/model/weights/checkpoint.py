"""Checkpoints: a directory with ``config.json`` and safetensors files, read tensor by tensor.

Invariants:
- A :class:`Checkpoint` has been checked on construction: every safetensors file opens, every name
  in ``model.safetensors.index.json`` lives in the file it names, and every tensor the architecture
  needs is present with the shape the config implies (headers only; no tensor data is read).
- :meth:`Checkpoint.read_f16` streams ONE tensor (``safe_open``), converts it to float16 with
  ml_dtypes for bf16 and keeps the PyTorch layout verbatim (``[out, in]`` for projections). The
  whole model is never held twice.
- A tied ``lm_head`` (no ``lm_head.weight`` in the files) resolves to ``model.embed_tokens.weight``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy, which safe_open needs)
import numpy as np

from ktir_models.errors import UserError
from ktir_models.ktir.exec.machine import f16_all_finite
from ktir_models.model.weights.checkpoint_shapes import EMBED, LM_HEAD, expected_shapes  # noqa: F401  (re-exported)
from ktir_models.model.config import ModelConfig

INDEX_FILE = "model.safetensors.index.json"
# Element types we convert to f16; anything else (int8, f8 ...) is not a plain llama checkpoint.
CONVERTIBLE = {"F16", "BF16", "F32", "F64"}


def _safe_open(path: Path):
    from safetensors import safe_open

    try:
        return safe_open(str(path), framework="numpy")
    except Exception as exc:  # SafetensorError, OSError: a corrupt or unreadable file
        raise UserError(f"{path}: not a readable safetensors file ({exc})") from None


def _index_tensors(directory: Path) -> dict[str, tuple[Path, tuple[int, ...]]]:
    """Map each tensor name to the file holding it and its shape (headers only): through
    ``model.safetensors.index.json`` when present, else every ``*.safetensors`` in the directory."""
    index_path = directory / INDEX_FILE
    if index_path.is_file():
        from ktir_models.readers import read_json

        try:
            weight_map = read_json(index_path, "safetensors index")["weight_map"]
            if not all(isinstance(k, str) and isinstance(v, str) and v and "\0" not in v and Path(v).name == v
                       for k, v in weight_map.items()):
                raise TypeError("'weight_map' must map tensor names to shard file names in its directory")
            shards = sorted(set(weight_map.values()))
        except (KeyError, TypeError, AttributeError) as exc:
            raise UserError(f"{index_path}: not a safetensors index (needs 'weight_map'): {exc}") from None
        for shard in shards:
            if not (directory / shard).is_file():
                raise UserError(f"{index_path}: shard {shard!r} is missing from {directory}")
    else:
        shards = sorted(p.name for p in directory.glob("*.safetensors"))
        if not shards:
            raise UserError(f"{directory}: no *.safetensors files (and no {INDEX_FILE})")
        weight_map = None
    found: dict[str, tuple[Path, tuple[int, ...]]] = {}
    from ktir_models.readers import check_safetensors_header

    for shard in shards:
        path = directory / shard
        check_safetensors_header(path)  # a located reason before the library maps the file
        with _safe_open(path) as f:
            for name in f.keys():
                if weight_map is None or weight_map.get(name) == shard:
                    found[name] = (path, tuple(f.get_slice(name).get_shape()))
    if weight_map is not None:
        for name, shard in weight_map.items():
            if name not in found:
                raise UserError(f"{index_path}: tensor {name!r} is not in shard {shard!r}")
    return found


@dataclass
class Checkpoint:
    """A checked checkpoint directory; ``origin`` says where it came from
    (``hub:<repo>@<rev>``, ``local:<path>`` or ``synthetic:<seed>``)."""

    directory: Path
    config: ModelConfig
    origin: str
    _files: dict[str, Path] = field(init=False, repr=False)
    _shapes: dict[str, tuple[int, ...]] = field(init=False, repr=False)
    # map_f16's: per file, its checked header entries and the offset where its data starts
    _headers: dict[Path, tuple[dict, int]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        found = _index_tensors(self.directory)
        self._files = {name: path for name, (path, _) in found.items()}
        self._shapes = {name: shape for name, (_, shape) in found.items()}
        for name, shape in expected_shapes(self.config).items():
            if name not in self._shapes:
                if name == LM_HEAD and self.config.tie_word_embeddings:
                    continue
                raise UserError(f"{self.directory}: tensor {name!r} is missing (expected shape {list(shape)})")
            if self._shapes[name] != shape:
                raise UserError(
                    f"{self._files[name]}: tensor {name!r} has shape {list(self._shapes[name])}, "
                    f"expected {list(shape)} from the config"
                )

    def tensor_names(self) -> list[str]:
        """All tensor names in the checkpoint files, sorted."""
        return sorted(self._files)

    def tensor_shape(self, hf_name: str) -> tuple[int, ...]:
        """The stored shape of one tensor (after :meth:`resolve`, if given a manifest name)."""
        return self._shapes[self._known(hf_name)]

    def resolve(self, disk: str) -> str:
        """A manifest ``disk`` name (HF name without ``.weight``; biases keep ``.bias``) -> the HF tensor name."""
        name = disk if disk.endswith((".weight", ".bias")) else disk + ".weight"
        if name in self._files:
            return name
        if name == LM_HEAD and self.config.tie_word_embeddings:
            return EMBED
        raise UserError(f"{self.directory}: no tensor for manifest disk name {disk!r} (looked for {name!r})")

    def read_f16(self, hf_name: str) -> np.ndarray:
        """One tensor as a fresh, writable float16 array in its stored layout."""
        name = self._known(hf_name)
        path = self._files[name]
        with _safe_open(path) as f:
            dtype = f.get_slice(name).get_dtype()
            if dtype not in CONVERTIBLE:
                raise UserError(f"{path}: tensor {name!r} has element type {dtype}; expected F16/BF16/F32")
            try:
                raw = f.get_tensor(name)
            except Exception as exc:  # truncated data
                raise UserError(f"{path}: cannot read tensor {name!r} ({exc})") from None
        # Into memory numpy allocates (it asks the kernel for huge pages from 4 MB on), not the
        # reader's own buffer: the weights are streamed once per pass, and with 4 KB pages a large
        # model's passes take a TLB miss every 4 KB.
        out = np.empty(raw.shape, dtype=np.float16)
        with np.errstate(over="ignore"):  # overflow is reported below, with the tensor's name
            np.copyto(out, raw, casting="unsafe")
        del raw
        if not f16_all_finite(out):
            raise UserError(
                f"{path}: tensor {name!r} ({dtype}) has values that are NaN or outside the float16 range"
            )
        return out

    def map_f16(self, hf_name: str) -> np.ndarray | None:
        """One tensor stored as F16, as a read-only array over its bytes in the file (a
        read-only mapping: the page cache holds those pages and may drop them under memory
        pressure and read them back; nothing can write to the file through it), or None where
        it is stored otherwise (BF16/F32: :meth:`read_f16` converts them), holds no element, or
        its data starts at an odd byte. Checked all finite, as :meth:`read_f16` does."""
        import struct

        name = self._known(hf_name)
        path = self._files[name]
        from ktir_models.readers import check_safetensors_header

        if path not in self._headers:
            entries = check_safetensors_header(path)  # checked: the 8-byte length is readable
            try:
                with open(path, "rb") as f:
                    (length,) = struct.unpack("<Q", f.read(8))
            except (OSError, struct.error) as exc:
                raise UserError(f"{path}: cannot read tensor {name!r} ({exc})") from None
            self._headers[path] = (entries, 8 + length)
        entries, data_start = self._headers[path]
        entry = entries[name]
        if entry["dtype"] != "F16" or not all(entry["shape"]) or sys.byteorder != "little":
            return None
        start = data_start + entry["data_offsets"][0]
        if start % 2:
            return None
        try:
            mapped = np.memmap(path, dtype=np.float16, mode="r", offset=start, shape=tuple(entry["shape"]))
        except (OSError, ValueError) as exc:
            raise UserError(f"{path}: cannot map tensor {name!r} ({exc})") from None
        out = np.asarray(mapped)  # a plain read-only ndarray; the mapping lives on as its base
        if not f16_all_finite(out):
            raise UserError(f"{path}: tensor {name!r} (F16) has values that are NaN or outside the float16 range")
        return out

    def read_rows_f16(self, hf_name: str, rows: np.ndarray) -> np.ndarray:
        """Selected rows of a 2-D tensor as float16 ``[len(rows), cols]`` (e.g. embedding rows),
        reading only those rows from the file."""
        name = self._known(hf_name)
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        n = self._shapes[name][0]
        if rows.size and (rows.min() < 0 or rows.max() >= n):
            raise UserError(f"{name}: row index out of range [0, {n}): {rows.min()}..{rows.max()}")
        with _safe_open(self._files[name]) as f:
            view = f.get_slice(name)
            picked = [np.asarray(view[int(r) : int(r) + 1]) for r in rows]
        cols = self._shapes[name][1]
        if not picked:
            return np.zeros((0, cols), dtype=np.float16)
        return np.concatenate(picked).astype(np.float16)

    def _known(self, hf_name: str) -> str:
        if hf_name in self._files:
            return hf_name
        if hf_name == LM_HEAD and self.config.tie_word_embeddings:
            return EMBED
        raise UserError(f"{self.directory}: no tensor named {hf_name!r} in the checkpoint")


def _same_architecture(expected: ModelConfig, found: ModelConfig, where: str) -> None:
    """A UserError naming the first field where a checkpoint's config.json differs."""
    for f in fields(ModelConfig):
        a, b = getattr(expected, f.name), getattr(found, f.name)
        if a != b:
            raise UserError(f"{where}: config field '{f.name}' is {b!r}, but the model expects {a!r}")


def load_local(directory: Path, expected: ModelConfig | None = None, origin: str | None = None) -> Checkpoint:
    """A local checkpoint directory; with ``expected``, its config.json must match it."""
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise UserError(f"{directory}: weights directory does not exist")
    config = ModelConfig.from_json(directory / "config.json")
    if expected is not None:
        _same_architecture(expected, config, str(directory / "config.json"))
    return Checkpoint(directory, config, origin or f"local:{directory.resolve()}")


def get_checkpoint(spec, weights: str, cache_dir: Path | None = None, seed: int = 0) -> Checkpoint:
    """The checkpoint for a resolved MODEL (:class:`~ktir_models.model.registry.ModelSpec`).

    ``weights``: ``"hub"`` (the spec's repo at its revision, cache first; for a MODEL that is a
    local directory, that directory), ``"synthetic"`` (seeded, generated once into a cache), or a
    local directory, or a ``.gguf`` file (its metadata must match the architecture; for a MODEL
    that is a GGUF file, ``"hub"`` means that file). ``cache_dir`` overrides the hub cache, or the
    synthetic cache root.
    """
    if weights == "synthetic":
        from ktir_models.model.weights.synthetic import ensure_synthetic

        directory = ensure_synthetic(spec.name, spec.config, seed=seed, cache_root=cache_dir)
        return Checkpoint(directory, spec.config, f"synthetic:{seed}")
    from ktir_models.model.gguf import is_gguf_path, load_gguf

    if weights == "hub" and getattr(spec, "weights_file", None) is not None:
        return load_gguf(spec.weights_file)  # MODEL was a GGUF file: its own tensors
    if is_gguf_path(weights):
        from ktir_models.model.gguf.config import file_tying

        ckpt = load_gguf(Path(weights))
        # the file says whether its lm_head is the embedding (transformers' GGUF loader: tied iff
        # no output.weight); the rest of the architecture must match the MODEL's
        _same_architecture(file_tying(spec.config, ckpt.config), ckpt.config, f"{ckpt.path} [metadata]")
        return ckpt
    if weights == "hub":
        if spec.local_dir is not None:
            return load_local(spec.local_dir, spec.config)
        if spec.repo_id is None:
            raise UserError(f"model {spec.name!r} has no hub repo id; use --weights synthetic or a directory")
        from ktir_models.model.weights.hub import snapshot_dir

        directory = snapshot_dir(spec.repo_id, spec.revision, cache_dir)
        return load_local(directory, spec.config, f"hub:{spec.repo_id}@{spec.revision or 'main'}")
    return load_local(Path(weights), spec.config)
