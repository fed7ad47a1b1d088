"""``ktir_cpu.mlir_frontend`` and its ``parser`` submodule: :class:`MLIRFrontendParser`."""

from .parser import KTIRParserBase, MLIRFrontendParser

__all__ = ["KTIRParserBase", "MLIRFrontendParser"]
