"""GGUF checkpoints (llama.cpp's format), read with the ``gguf`` package.

``load_gguf(path)`` gives a checkpoint with the interface of the safetensors one
(:class:`~ktir_models.model.weights.checkpoint.Checkpoint`): config from the metadata, tensors dequantized to
float16 one at a time with llama.cpp's Q/K row order undone. ``gguf_tokenizer(path)`` builds the
tokenizer from the metadata; ``transformers_model(ckpt)`` the live golden's model.
"""

from .checkpoint import GgufCheckpoint, is_gguf_path, load_gguf

__all__ = ["GgufCheckpoint", "is_gguf_path", "load_gguf"]
