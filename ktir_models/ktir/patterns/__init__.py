"""Rewrite rules: cross-op patterns run as one fused step (rule.py says what a rule is).

Each module here holds the rules of one pattern, registered at import; an anchor op's builder
(e.g. ``scf.for`` in dialects/scf.py) asks :func:`rewrite` before building its plain form.

* :mod:`.gemm_kloop` -- the K-blocked GEMM loop (``scf.for`` of loads, a matmul and an add):
  on the native kernel, or one batched BLAS matmul and the f16 chain.
"""

from __future__ import annotations

from .rule import MATCHED, RULES, RewriteRule, disabled, enabled, register, rewrite  # noqa: F401
from . import gemm_kloop  # noqa: E402,F401  (registration)
