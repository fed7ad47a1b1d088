"""The emulator's public surface (see docs/architecture.md); re-exported by ``ktir_models.ktir``."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

from .verify import legality as _legality
from .parse import parser as _parser
from .verify import verifier as _verify
from .ir.nodes import Function, Module


def parse_text(text: str, filename: str = "<string>") -> Module:
    """Parse only (no verification). Raises :class:`KtirError` with located diagnostics."""
    return _parser.parse_text(text, filename)


def verify(module: Module, *, reshaping_reduce: bool = False) -> None:
    """Raise :class:`KtirError` listing every rule violation of ``module``.

    ``reshaping_reduce``: accept ``ktdp.inter_tile_reduce`` results that reshape the future's
    partial (ktir-cpu's reading; the dialect's verifier rejects them)."""
    _verify.verify(module, reshaping_reduce=reshaping_reduce)


def check_legality(module: Module) -> None:
    """Raise :class:`KtirError` naming every legality rule a verified ``module`` breaks: what
    the hardware lowering needs beyond valid IR (see ``ktir/verify/legality.py``)."""
    _legality.check_legality(module)


def load_module(path: str | Path, *, reshaping_reduce: bool = False) -> Module:
    """Parse and verify a ``.mlir`` / ``.ktir`` file (``reshaping_reduce``: see :func:`verify`)."""
    module = _parser.parse_file(path)
    _verify.verify(module, reshaping_reduce=reshaping_reduce)
    return module


def estimate_latency(fn: Function, args: dict | None = None, params=None, trace: bool = False):
    """The latency model's figures for one call of ``fn`` (docs/latency.md): a
    :class:`~.latency.NodeLatency` with every core's costs in ``cores``.

    ``args``: the call's arguments by name (integer scalars bound loops and dynamic sizes;
    pointers and floats are not needed). ``params``: a :class:`~.latency.HardwareParams`
    (default: the reference machine). ``trace``: one event per executed op in each core's
    ``events``."""
    from .latency import function_latency

    return function_latency(fn, params, args=args, trace=trace)


@contextlib.contextmanager
def bulk_load():
    """Parse, verify and compile many functions with Python's cyclic garbage collector paused.

    IR graphs (values <-> ops) and plans are cyclic, long-lived and numerous: while hundreds of
    node files load, the collector keeps rescanning the growing heap without freeing anything
    (measured, scratchy smollm2-135m: parse + compile 1.8-4.2 s with it, 1.1-1.2 s without).
    For loads whose results are kept (a program's plans); a loop that discards each module
    should not pause the collector, since discarded IR graphs are cyclic garbage."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
