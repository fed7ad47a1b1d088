"""The reference interpreter's parser classes (``ktir_cpu.parser``,
``ktir_cpu.mlir_frontend.parser``). They are accepted where the reference takes a parser; every
one parses with ours and returns the read-only :class:`~.module_view.ModuleView`."""

from __future__ import annotations

from pathlib import Path

from .module_view import ModuleView


class KTIRParserBase:
    """A parser: ``parse_module(text)`` and ``parse_file(path)`` return a :class:`ModuleView`.

    The reference's reading of ``inter_tile_reduce`` results that drop the partial's leading
    unit dims is accepted (its examples rely on it)."""

    def parse_module(self, text: str) -> ModuleView:
        return ModuleView(text)

    def parse_file(self, path: str | Path) -> ModuleView:
        return ModuleView.from_file(path)


class KTIRParser(KTIRParserBase):
    """The reference's own-syntax parser: here, ours."""


class MLIRFrontendParser(KTIRParserBase):
    """The reference's MLIR-frontend parser: here, ours (argument names are kept as written)."""
