"""The error every reader raises."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError


class InputFileError(UserError):
    """A file that cannot be read as what it should be; ``str()`` is ``<file>: <reason>``."""

    def __init__(self, path: Path | str, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")
