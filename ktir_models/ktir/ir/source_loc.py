"""MLIR location attributes: where a producer says an op or a value came from (``loc(...)``).

A program lowered from Triton or PyTorch keeps, after each op and argument, the place in the
producer's source that made it: ``loc("kernel.py":42:17)``, ``loc("tmp0"(#loc3))``, ... The
parser keeps them as these records on the :class:`~ktir_models.ktir.ir.errors.Location` of the op
or value (its ``source``); diagnostics and emulation faults name them beside the KTIR position,
and the generic printer writes them back in MLIR's syntax.

Invariants: every record is immutable and holds resolved children only (an alias ``#loc3`` is
replaced by what it stands for once the whole module is read); :meth:`mlir` writes MLIR's
syntax, which the parser reads back to an equal record; :meth:`describe` is the short text a
message shows, or None when the location says nothing (``unknown``).

This module imports nothing of the emulator, so the error types may use it.
"""

from __future__ import annotations

from dataclasses import dataclass


def quote(text: str) -> str:
    """``text`` as an MLIR string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def unquote(literal: str) -> str:
    """The text of an MLIR string literal (quotes included): ``\\n``, ``\\t``, ``\\"``,
    ``\\\\`` and two-digit hexadecimal escapes ``\\XX``."""
    body = literal[1:-1]
    if "\\" not in body:
        return body
    out, k = [], 0
    while k < len(body):
        ch = body[k]
        if ch != "\\" or k + 1 == len(body):
            out.append(ch)
            k += 1
            continue
        nxt = body[k + 1]
        if nxt in "nt":
            out.append("\n" if nxt == "n" else "\t")
            k += 2
        elif body[k + 1:k + 3] and all(c in "0123456789abcdefABCDEF" for c in body[k + 1:k + 3]) \
                and len(body[k + 1:k + 3]) == 2:
            out.append(chr(int(body[k + 1:k + 3], 16)))
            k += 3
        else:
            out.append(nxt)
            k += 2
    return "".join(out)


@dataclass(frozen=True)
class UnknownLoc:
    """``loc(unknown)``: the producer knows nothing."""

    def mlir(self) -> str:
        return "unknown"

    def describe(self) -> str | None:
        return None


@dataclass(frozen=True)
class FileLoc:
    """``"file":line``, ``"file":line:col`` or a range ``"file":line:col to [line]:col``."""

    file: str
    line: int
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None

    def mlir(self) -> str:
        text = f"{quote(self.file)}:{self.line}"
        if self.col is not None:
            text += f":{self.col}"
        if self.end_line is not None or self.end_col is not None:
            end = "" if self.end_line is None else str(self.end_line)
            if self.end_col is not None:
                end += f":{self.end_col}"
            text += f" to {end}"
        return text

    def describe(self) -> str:
        text = f"{self.file}:{self.line}" + ("" if self.col is None else f":{self.col}")
        if self.end_line is not None or self.end_col is not None:
            end_line = self.line if self.end_line is None else self.end_line
            text += f"-{end_line}" + ("" if self.end_col is None else f":{self.end_col}")
        return text


@dataclass(frozen=True)
class NameLoc:
    """``"name"`` or ``"name"(child)``: a named place (the producer's variable), optionally
    with where that name is."""

    name: str
    child: "SourceLoc | None" = None

    def mlir(self) -> str:
        return quote(self.name) + ("" if self.child is None else f"({self.child.mlir()})")

    def describe(self) -> str:
        inner = None if self.child is None else self.child.describe()
        return f"'{self.name}'" + ("" if inner is None else f" at {inner}")


@dataclass(frozen=True)
class CallSiteLoc:
    """``callsite(callee at caller)``: ``callee`` inlined at ``caller``."""

    callee: "SourceLoc"
    caller: "SourceLoc"

    def mlir(self) -> str:
        return f"callsite({self.callee.mlir()} at {self.caller.mlir()})"

    def describe(self) -> str | None:
        callee, caller = self.callee.describe(), self.caller.describe()
        if callee is None or caller is None:
            return callee or caller
        return f"{callee} called from {caller}"


@dataclass(frozen=True)
class FusedLoc:
    """``fused[a, b, ...]`` or ``fused<metadata>[...]``: several places merged into one op
    (``metadata`` is the attribute's text as written)."""

    locs: tuple
    metadata: str | None = None

    def mlir(self) -> str:
        meta = "" if self.metadata is None else f"<{self.metadata}>"
        return f"fused{meta}[{', '.join(x.mlir() for x in self.locs)}]"

    def describe(self) -> str | None:
        parts = [d for d in (x.describe() for x in self.locs) if d is not None]
        return " + ".join(parts) if parts else None


SourceLoc = UnknownLoc | FileLoc | NameLoc | CallSiteLoc | FusedLoc


def described(source: "SourceLoc | None") -> str:
    """`` (source: ...)`` for a message, or nothing when the location says nothing."""
    text = None if source is None else source.describe()
    return "" if text is None else f" (source: {text})"
