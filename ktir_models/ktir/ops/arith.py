"""Moved to :mod:`ktir_models.ktir.dialects.arith`; these names stay importable from here until
their last importer uses the new module."""
from ..dialects.arith import INT_BINARY as _INT_BINARY, NP, coerce, make_unary, to_scalar  # noqa: F401
