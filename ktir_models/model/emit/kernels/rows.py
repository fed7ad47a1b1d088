"""Where a kernel's output rows start: a fixed row, or a runtime ``index`` argument (``pos``).

KV-cache writes land at rows ``past .. past + m - 1`` of the cache. With a static position the row
is a constant; with a dynamic one it is the kernel argument named here, bound by the host on each
pass (see docs/emitter.md, "Host contract").
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ktir_text import Kernel, Val


@dataclass(frozen=True)
class RowBase:
    """``static`` rows, or the value of kernel argument ``arg`` when ``arg`` is set."""

    static: int = 0
    arg: str | None = None

    def value(self, k: Kernel) -> Val:
        return k.arg(self.arg) if self.arg is not None else k.index(self.static)

    def plus(self, k: Kernel, offset: int | Val) -> Val:
        """``base + offset`` as an index value."""
        if self.arg is None:
            if isinstance(offset, int):
                return k.index(self.static + offset)
            return offset if self.static == 0 else k.addi(offset, k.index(self.static))
        base = k.arg(self.arg)
        if isinstance(offset, int):
            return base if offset == 0 else k.addi(base, k.index(offset))
        return k.addi(base, offset)

    def args(self) -> list[str]:
        return [self.arg] if self.arg is not None else []
