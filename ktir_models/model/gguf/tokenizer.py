"""The tokenizer a GGUF file describes in its ``tokenizer.ggml.*`` metadata.

transformers builds it (``AutoTokenizer.from_pretrained(folder, gguf_file=name)``, local files
only, no network): its GGUF converter turns the token list, scores or merges, token types and
special ids into a fast tokenizer of the right kind (sentencepiece-style ``llama``, byte-level
``gpt2``). Invariant: a file without ``tokenizer.ggml.tokens`` has no tokenizer (None), and any
failure to build one is a UserError naming the file and ``tokenizer.ggml.model``.
"""

from __future__ import annotations

from pathlib import Path

from ktir_models.errors import UserError

TOKENS_KEY = "tokenizer.ggml.tokens"
MODEL_KEY = "tokenizer.ggml.model"


def gguf_tokenizer(path: Path, has_tokens: bool, kind: str | None):
    """A transformers fast tokenizer for the GGUF file at ``path``, or None without a vocabulary
    (``has_tokens``: the file holds ``tokenizer.ggml.tokens``; ``kind``: its ``tokenizer.ggml.model``)."""
    if not has_tokens:
        return None
    path = Path(path)
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    except ImportError as exc:
        raise UserError(f"{path}: building the tokenizer from GGUF metadata needs transformers and gguf "
                        f"({exc})") from None
    except Exception as exc:  # noqa: BLE001  the tokenizers library raises bare Exception on bad data
        if isinstance(exc, UserError):
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{path}: cannot build a tokenizer from the metadata ({MODEL_KEY} = {kind!r}; "
                        f"tokenizer.ggml.tokens / merges / scores): {first}") from None
