"""A GGUF file as a checkpoint: the interface of :class:`ktir_models.model.weights.checkpoint.Checkpoint`.

Invariants:
- On construction the file has been opened (header only), its config built from the metadata, and
  every tensor the architecture needs checked: present, of a supported element type, with the
  shape the metadata implies (errors name the tensor and the metadata keys the shape comes from).
- ``read_f16`` streams ONE tensor: dequantized from the memory map a row block at a time, rows
  put back in HF order for ``q_proj`` / ``k_proj`` (llama.cpp's permutation undone, :mod:`.permute`),
  rounded once to float16. The whole model is never held twice, and never as float32.
- Names are HF names (``model.layers.0.self_attn.q_proj.weight``); a tied ``lm_head`` (no
  ``output.weight`` in the file) resolves to the embedding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ktir_models.errors import UserError
from ktir_models.model.config import ModelConfig
from ktir_models.model.weights.checkpoint_shapes import EMBED, LM_HEAD, expected_shapes

from . import names
from .config import config_from_gguf
from .dequant import check_supported, rows_to_f16
from .permute import hf_row_order
from .reader import GgufFile, open_gguf


# Which metadata keys each tensor's expected shape comes from (for error messages).
_SHAPE_KEYS = {
    "token_embd": "vocabulary size x llama.embedding_length",
    "output": "vocabulary size x llama.embedding_length",
    "attn_q": "llama.attention.head_count x head size, llama.embedding_length",
    "attn_k": "llama.attention.head_count_kv x head size, llama.embedding_length",
    "attn_v": "llama.attention.head_count_kv x head size, llama.embedding_length",
    "attn_output": "llama.embedding_length, llama.attention.head_count x head size",
    "ffn_gate": "llama.feed_forward_length, llama.embedding_length",
    "ffn_up": "llama.feed_forward_length, llama.embedding_length",
    "ffn_down": "llama.embedding_length, llama.feed_forward_length",
}


def _shape_keys(gguf_name: str) -> str:
    kind = gguf_name.removesuffix(".weight").split(".")[-1]
    return _SHAPE_KEYS.get(kind, "llama.embedding_length")


@dataclass
class GgufCheckpoint:
    """A checked GGUF checkpoint. ``directory`` is the folder holding the file (``path``): a
    tokenizer or ``generation_config.json`` beside a file without a vocabulary is found there, as
    in a checkpoint directory; ``origin`` is ``gguf:<path>``; ``golden_source`` says what a live
    golden runs on."""

    path: Path
    config: ModelConfig = field(init=False)
    origin: str = field(init=False)
    directory: Path = field(init=False)
    golden_source: str = "transformers on the GGUF's dequantized weights"
    _file: GgufFile = field(init=False, repr=False)
    _hf_to_gguf: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path).expanduser().resolve()
        self.directory = self.path.parent
        self.origin = f"gguf:{self.path}"
        self._file = open_gguf(self.path)
        self.config = config_from_gguf(self._file)
        self._hf_to_gguf = {}
        for hf, shape in expected_shapes(self.config).items():
            gg = names.gguf_name(hf)
            if gg is None:
                raise UserError(f"{self.path}: tensor {hf!r} has no GGUF name (only plain llama files are read)")
            entry = self._file.tensors.get(gg)
            if entry is None:
                if hf == LM_HEAD:  # tied: config_from_gguf saw no output.weight
                    continue
                raise UserError(f"{self.path}: tensor {gg!r} ({hf}) is missing (expected shape {list(shape)})")
            check_supported(str(self.path), gg, entry.qtype)
            if entry.shape != shape:
                raise UserError(
                    f"{self.path}: tensor {gg!r} has shape {list(entry.shape)}, but the metadata "
                    f"({_shape_keys(gg)}) implies {list(shape)}"
                )
            self._hf_to_gguf[hf] = gg

    # ------------------------------------------------------------------ Checkpoint interface

    def tensor_names(self) -> list[str]:
        """The HF names of the tensors the file holds, sorted."""
        return sorted(self._hf_to_gguf)

    def tensor_shape(self, hf_name: str) -> tuple[int, ...]:
        return self._entry(hf_name).shape

    def resolve(self, disk: str) -> str:
        """A manifest ``disk`` name (HF name without ``.weight``) -> the HF tensor name to read."""
        name = disk if disk.endswith(".weight") else disk + ".weight"
        if name in self._hf_to_gguf:
            return name
        if name == LM_HEAD and self.config.tie_word_embeddings:
            return EMBED
        raise UserError(f"{self.path}: no tensor for manifest disk name {disk!r} (looked for {name!r})")

    def read_f16(self, hf_name: str) -> np.ndarray:
        """One tensor as a fresh float16 array in HF layout (``[out, in]``)."""
        entry = self._entry(hf_name)
        out = rows_to_f16(str(self.path), entry.name, entry.qtype, entry.data, entry.shape,
                          rows=self._row_order(entry))
        self._file.release(entry)
        return out

    def read_rows_f16(self, hf_name: str, rows: np.ndarray) -> np.ndarray:
        """Selected rows of a 2-D tensor as float16 ``[len(rows), cols]``; only those rows are
        dequantized."""
        entry = self._entry(hf_name)
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        n = entry.shape[0]
        if rows.size and (rows.min() < 0 or rows.max() >= n):
            raise UserError(f"{hf_name}: row index out of range [0, {n}): {rows.min()}..{rows.max()}")
        order = self._row_order(entry)
        stored = rows if order is None else order[rows]
        return rows_to_f16(str(self.path), entry.name, entry.qtype, entry.data, entry.shape, rows=stored)

    def input_files(self) -> list[Path]:
        """The files a run reads weights from: this one file (not its folder's other files)."""
        return [self.path]

    def prepared_tokenizer(self):
        """The tokenizer from the file's ``tokenizer.ggml.*`` metadata (transformers' GGUF
        converter), or None when the file has no vocabulary."""
        from .tokenizer import gguf_tokenizer

        return gguf_tokenizer(self._file)

    def transformers_model(self):
        """The live golden's model: transformers' own GGUF loader, parameters rounded to f16."""
        from .golden import transformers_model

        return transformers_model(self)

    # ------------------------------------------------------------------ helpers

    def _entry(self, hf_name: str):
        if hf_name in self._hf_to_gguf:
            return self._file.tensors[self._hf_to_gguf[hf_name]]
        if hf_name == LM_HEAD and self.config.tie_word_embeddings:
            return self._file.tensors[self._hf_to_gguf[EMBED]]
        raise UserError(f"{self.path}: no tensor named {hf_name!r} in the checkpoint")

    def _row_order(self, entry) -> np.ndarray | None:
        kind = names.permuted_heads(entry.name)
        if kind is None:
            return None
        heads = self.config.num_attention_heads if kind == "q" else self.config.num_key_value_heads
        return hf_row_order(entry.shape[0], heads, f"{self.path}: tensor {entry.name!r}")


_LAST: dict[tuple, GgufCheckpoint] = {}


def load_gguf(path: Path) -> GgufCheckpoint:
    """Open and check a GGUF checkpoint (see :class:`GgufCheckpoint`). A command resolves MODEL and
    then its weights from the same file: the last checkpoint is reused while the file's size and
    modification time are unchanged (a rewritten file is opened again)."""
    path = Path(path).expanduser()
    try:
        st = path.resolve().stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None  # missing: the constructor reports it
    if key is not None and key in _LAST:
        return _LAST[key]
    ckpt = GgufCheckpoint(path)
    _LAST.clear()
    if key is not None:
        _LAST[key] = ckpt
    return ckpt


def is_gguf_path(arg: str | Path) -> bool:
    """A path naming a ``.gguf`` file (existing or not: the loader reports a missing one)."""
    return str(arg).lower().endswith(".gguf")
