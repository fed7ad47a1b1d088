"""Errors of the KTIR emulator.

Both error kinds derive from :class:`ktir_models.errors.UserError`: the CLI prints ``str(exc)`` and
exits with code 2, never a traceback.

* :class:`KtirError` -- the program text is wrong (syntax, unknown op, type mismatch, ...). It carries
  every :class:`Diagnostic` found; ``str()`` is one ``file:line:col: error: message`` line each.
* :class:`EmulationFault` -- a well-formed program did something illegal while running (access
  outside its view, LX overflow, read of never-written HBM, ...). ``str()`` names the function, the
  op with its location and the core.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError
from .source_loc import SourceLoc, described


@dataclass(frozen=True)
class Location:
    """A position in a source file; line and col are 1-based. ``source`` is the MLIR location
    the program text gives the op or value (``loc(...)``, resolved), or None when it gives
    none; ``str()`` is the KTIR position only, messages add the source (see ``described``)."""

    file: str
    line: int
    col: int
    source: SourceLoc | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_LOCATION = Location("<unknown>", 0, 0)


@dataclass(frozen=True)
class Diagnostic:
    loc: Location
    message: str

    def __str__(self) -> str:
        return f"{self.loc}: error: {self.message}{described(self.loc.source)}"


class KtirError(UserError):
    """One or more located errors in a KTIR program."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))

    @classmethod
    def at(cls, loc: Location, message: str) -> "KtirError":
        return cls([Diagnostic(loc, message)])


class EmulationFault(UserError):
    """A runtime fault of the emulated program, naming function, op (with location) and core."""

    def __init__(self, message: str, *, function: str = "?", op: str = "?",
                 loc: Location = UNKNOWN_LOCATION, core: int | None = None):
        self.message = message
        self.function = function
        self.op = op
        self.loc = loc
        self.core = core
        core_text = "?" if core is None else str(core)
        super().__init__(
            f"{loc}: emulation fault in function @{function}, op {op}, core {core_text}: {message}"
            f"{described(loc.source)}")

    def located(self, *, function: str, op: str, loc: Location, core: int | None) -> "EmulationFault":
        """A copy of this fault with the missing context filled in (keeps what is already known)."""
        return EmulationFault(
            self.message,
            function=self.function if self.function != "?" else function,
            op=self.op if self.op != "?" else op,
            loc=self.loc if self.loc is not UNKNOWN_LOCATION else loc,
            core=self.core if self.core is not None else core)


class FaultSignal(Exception):
    """Raised by array helpers that do not know which op/core they serve; the plan runner turns it
    into an :class:`EmulationFault` with function, op, location and core filled in."""
