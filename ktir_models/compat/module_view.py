"""The reference interpreter's view of a parsed module: ``interp.module`` and what
``MLIRFrontendParser().parse_module(text)`` returns.

A :class:`ModuleView` is read-only and picklable: it keeps the source text and rebuilds our
parsed (and verified) :class:`~ktir_models.ktir.Module` from it on first use after unpickling, so
a harness can parse once, ship the view to worker processes and set it on a fresh interpreter
(``interp.module = view``).

Invariants: a view's functions and their fields never change after construction; the parsed
module is never pickled (only the text, file name and the reshaping-reduce reading).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import ktir
from ..errors import UserError


@dataclass(frozen=True)
class FunctionView:
    """One ``func.func``: its name, grid (x, y, z), ``arguments`` as ``[("%name", type_text)]``
    in declaration order and ``arg_names`` (the same names without ``%``)."""

    name: str
    grid: tuple[int, int, int]
    arguments: tuple[tuple[str, str], ...]

    @property
    def arg_names(self) -> list[str]:
        return [n.lstrip("%") for n, _ in self.arguments]


class ModuleView:
    """A parsed module, read-only: ``functions`` (name -> :class:`FunctionView`) and
    :meth:`get_function`."""

    __slots__ = ("_text", "_filename", "_reshaping_reduce", "_functions", "_module")

    def __init__(self, text: str, filename: str = "<string>", reshaping_reduce: bool = True):
        module = parse_verified(text, filename, reshaping_reduce)
        self._text = text
        self._filename = filename
        self._reshaping_reduce = reshaping_reduce
        self._module = module
        self._functions = {name: FunctionView(name, tuple(fn.grid),
                                              tuple((a.name, str(a.type)) for a in fn.args))
                           for name, fn in module.functions.items()}

    @classmethod
    def from_file(cls, path: str | Path, reshaping_reduce: bool = True) -> "ModuleView":
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise ValueError(f"cannot read KTIR file {p}: {e.strerror or e}") from e
        return cls(text, str(p), reshaping_reduce)

    @property
    def functions(self) -> dict[str, FunctionView]:
        return dict(self._functions)

    @property
    def filename(self) -> str:
        return self._filename

    def get_function(self, name: str) -> FunctionView:
        fv = self._functions.get(name)
        if fv is None:
            raise ValueError(f"Function '{name}' not found in module")
        return fv

    def parsed(self) -> ktir.Module:
        """Our parsed, verified module (rebuilt from the text after unpickling)."""
        if self._module is None:
            self._module = parse_verified(self._text, self._filename, self._reshaping_reduce)
        return self._module

    def __getstate__(self):
        return {"text": self._text, "filename": self._filename,
                "reshaping_reduce": self._reshaping_reduce, "functions": self._functions}

    def __setstate__(self, state) -> None:
        self._text = state["text"]
        self._filename = state["filename"]
        self._reshaping_reduce = state["reshaping_reduce"]
        self._functions = state["functions"]
        self._module = None

    def __setattr__(self, name, value):
        if name in ModuleView.__slots__ and not hasattr(self, name) or name == "_module":
            object.__setattr__(self, name, value)
            return
        raise AttributeError(f"the module view is read-only (cannot set {name!r})")

    def __repr__(self) -> str:
        return f"ModuleView({self._filename!r}, functions={list(self._functions)})"


def parse_verified(text: str, filename: str, reshaping_reduce: bool) -> ktir.Module:
    """Parse and verify; a bad program is a ``ValueError`` carrying our located diagnostics."""
    try:
        module = ktir.parse_text(text, filename)
        ktir.verify(module, reshaping_reduce=reshaping_reduce)
    except UserError as e:
        raise ValueError(str(e)) from e
    return module
