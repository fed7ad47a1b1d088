"""The tensors a checkpoint of a :class:`ModelConfig` must hold, with their PyTorch shapes.

Shared by every checkpoint reader and writer (``weights.py`` reads safetensors, ``gguf/`` reads
GGUF files, ``synthetic.py`` writes seeded checkpoints); it imports none of them, so they can all
import it without importing each other.
"""

from __future__ import annotations

from ktir_models.model.config import ModelConfig
from ktir_models.model.families.tensors import layer_tensor_shapes

EMBED = "model.embed_tokens.weight"
LM_HEAD = "lm_head.weight"


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint of ``cfg`` must hold, with its PyTorch shape (per-layer names and
    the family's extra tensors: ``families/tensors.py``). A tied checkpoint may also hold
    ``lm_head.weight``; it is checked when present."""
    h = cfg.hidden_size
    shapes: dict[str, tuple[int, ...]] = {EMBED: (cfg.vocab_size, h)}
    for layer in range(cfg.num_hidden_layers):
        shapes.update(layer_tensor_shapes(cfg, layer))
    shapes["model.norm.weight"] = (h,)
    shapes[LM_HEAD] = (cfg.vocab_size, h)
    return shapes
