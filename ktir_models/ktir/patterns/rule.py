"""What a rewrite rule is, the ordered rules of each anchor op, and the switch that turns them off.

A *rewrite rule* replaces a group of ops (anchored at one op, e.g. an ``scf.for`` and its body)
by one fused step. It is a :class:`RewriteRule`: ``match(compiler, op)`` returns what it matched
(a record of the ops and the facts ``build`` needs) or None, and ``build(compiler, op, matched)``
returns the fused step (or None to decline after all). The anchor op's builder calls
:func:`rewrite` before building its plain form; the first rule (in registration order) whose
match and build both succeed wins.

Invariants: a rule is an optimisation, never a meaning: its docstring states the condition under
which its step is bit-identical to the anchor's ops run one by one, and its ``match`` checks that
condition, so running with every rule disabled (:func:`disabled`, ``KTIR_MODELS_REWRITES=0``)
gives the same bits. ``match`` reads the IR and the compiler's constants only; it must not give
slots or compile anything (the anchor has compiled its body before asking). This module imports
nothing of the emulator, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class RewriteRule:
    """One fused form of a group of ops anchored at op kind ``anchor``."""

    name: str
    anchor: str
    match: Callable[[Any, Any], Any]
    build: Callable[[Any, Any, Any], Any]
    doc: str = ""


RULES: dict[str, list[RewriteRule]] = {}  # anchor op name -> rules, in the order they are asked
MATCHED: Counter = Counter()  # rule name -> how many ops it rewrote (observable in tests)
_state = {"enabled": os.environ.get("KTIR_MODELS_REWRITES", "1") != "0"}


def register(rule: RewriteRule) -> RewriteRule:
    """Add ``rule`` after the rules of its anchor registered before it (names are unique)."""
    rules = RULES.setdefault(rule.anchor, [])
    if any(r.name == rule.name for r in rules):
        raise ValueError(f"rewrite rule {rule.name!r} is already registered")
    rules.append(rule)
    return rule


def enabled() -> bool:
    return _state["enabled"]


@contextlib.contextmanager
def disabled():
    """Compile with no rewrite rule inside the block (plans compiled there stay plain)."""
    old = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = old


def rewrite(c, op):
    """The fused step of the first rule of ``op``'s kind that matches and builds, else None.
    The step carries the rule's name as ``step.rewrite``."""
    if not _state["enabled"]:
        return None
    for rule in RULES.get(op.name, ()):
        matched = rule.match(c, op)
        if matched is None:
            continue
        step = rule.build(c, op, matched)
        if step is None:
            continue
        step.rewrite = rule.name
        MATCHED[rule.name] += 1
        return step
    return None
