"""The op registry: everything the emulator knows about one op kind, in one record.

Each op kind has one :class:`OpDef`, filled by its dialect module (``dialects/<dialect>.py``) when
that module is imported. Its parts are the jobs the drivers do with an op:

* ``syntax``  -- the custom-syntax parse handler ``handler(parser, op) -> result types``
  (parse/); ops without one are read in MLIR's generic form only;
* ``verify``  -- the verification :class:`~ktir_models.ktir.verify.rules.Rule` (verify.py);
* ``build``   -- the plain builder ``build(compiler, op) -> step | None`` (compile.py): folds the
  op when its inputs are compile-time constants (None), else returns the closure ``step(env)``;
* ``stacked`` -- the stacked-step maker ``maker(builder, op, plain) -> step | None`` that runs the
  op once for all cores of a grid (stacked.py), optional;
* ``cost``    -- the latency handler ``handler(walker, op, scale)`` (latency/), or the name of a
  generic rule: "free", "scalar", "vector", "transcendental", "layout" (docs/latency.md), optional.

Invariants: the registry imports nothing of the emulator but the IR, so every layer may read it;
a part is set once (setting it again raises, so two modules cannot silently disagree on what an op
means); drivers look parts up by op name at build time, never by importing a dialect's helpers.
The dialect modules are imported (and so registered) by :mod:`ktir_models.ktir.dialects`.
The ragged forms (reroll.py's repeats of unequal static extents) are not a part yet: they are
written per op kind in ragged_steps.py, which the batched drivers call directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

PARTS = ("syntax", "verify", "build", "stacked", "cost")


@dataclass
class OpDef:
    """What the emulator knows about op kind ``name`` (see the module docstring for each part)."""

    name: str
    syntax: Callable | None = None
    verify: Any = None
    build: Callable | None = None
    stacked: Callable | None = None
    cost: Callable | str | None = None


REGISTRY: dict[str, OpDef] = {}


def lookup(name: str) -> OpDef | None:
    """The op kind ``name``, or None when nothing registered it."""
    return REGISTRY.get(name)


def define(name: str) -> OpDef:
    """The record of ``name``, created empty on first use."""
    d = REGISTRY.get(name)
    if d is None:
        d = REGISTRY[name] = OpDef(name)
    return d


def set_part(part: str, name: str, value) -> None:
    """Give op ``name`` its ``part``; a part is set once (a second, different value raises)."""
    if part not in PARTS:
        raise ValueError(f"unknown op part {part!r} (parts: {', '.join(PARTS)})")
    d = define(name)
    old = getattr(d, part)
    # category strings (cost) compare by value; functions and rules by identity
    if old is not None and old is not value and not (isinstance(old, str) and old == value):
        raise ValueError(f"{name}: its {part} is already registered ({old!r})")
    setattr(d, part, value)


def implements(part: str, *names: str):
    """Decorator: the function is op kinds ``names``' ``part``."""
    def deco(fn):
        for n in names:
            set_part(part, n, fn)
        return fn
    return deco


def part(part: str, name: str):
    """Op ``name``'s ``part``, or None."""
    d = REGISTRY.get(name)
    return None if d is None else getattr(d, part)
