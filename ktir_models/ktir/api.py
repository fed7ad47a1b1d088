"""The emulator's public surface (see docs/architecture.md); re-exported by ``ktir_models.ktir``."""

from __future__ import annotations

from pathlib import Path

from . import parser as _parser
from . import verify as _verify
from .ir import Module


def parse_text(text: str, filename: str = "<string>") -> Module:
    """Parse only (no verification). Raises :class:`KtirError` with located diagnostics."""
    return _parser.parse_text(text, filename)


def verify(module: Module) -> None:
    """Raise :class:`KtirError` listing every rule violation of ``module``."""
    _verify.verify(module)


def load_module(path: str | Path) -> Module:
    """Parse and verify a ``.mlir`` / ``.ktir`` file."""
    module = _parser.parse_file(path)
    _verify.verify(module)
    return module
