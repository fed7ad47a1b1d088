"""Typed reads of config.json fields, each failure one :class:`UserError` naming the field.

Shared by the generic llama fields (``config.py``) and every family's own fields, so all config
errors read the same: ``<where>: field '<name>' ...``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...errors import UserError

_MISSING = object()


@dataclass(frozen=True)
class ConfigFields:
    """A config dict ``d`` and ``where`` it came from (a file or manifest name)."""

    d: dict
    where: str

    def fail(self, name: str, message: str) -> UserError:
        return UserError(f"{self.where}: field '{name}' {message}")

    def get(self, name: str, default: Any = None) -> Any:
        return self.d.get(name, default)

    def positive_int(self, name: str, default: Any = _MISSING) -> int:
        value = self.d.get(name) if default is _MISSING else self.d.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(name, f"must be a positive integer, got {value!r}")
        return value

    def optional_positive_int(self, name: str, absent: int | None = None) -> int | None:
        """``absent`` when the field is missing, None when it is null, else a positive integer
        (a config class with a non-null default tells a missing key from an explicit null)."""
        if name not in self.d:
            return absent
        return None if self.d[name] is None else self.positive_int(name)

    def positive_number(self, name: str, default: Any = _MISSING, source: dict | None = None) -> float:
        src = source if source is not None else self.d
        value = src.get(name) if default is _MISSING else src.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or not math.isfinite(value):
            raise self.fail(name, f"must be a positive number, got {value!r}")
        return float(value)

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.d.get(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {value!r}")
        return value

    def refuse_true(self, name: str, why: str) -> None:
        """A boolean feature we cannot run: true (or any non-false value) is refused."""
        if self.d.get(name, False) not in (False, None):
            raise self.fail(name, f"= {self.d[name]!r} is not supported ({why})")

    def uniform_layer_types(self, allowed: str, why: str) -> None:
        """``layer_types`` (transformers 5 writes it) must be absent or list only ``allowed``:
        a mix of attention kinds per layer is something we do not run."""
        types = self.d.get("layer_types")
        if types is None:
            return
        if not isinstance(types, list) or any(t != allowed for t in types):
            kinds = sorted({str(t) for t in types}) if isinstance(types, list) else [repr(types)]
            raise self.fail("layer_types", f"lists {', '.join(kinds)}; only '{allowed}' layers are "
                            f"supported ({why})")
