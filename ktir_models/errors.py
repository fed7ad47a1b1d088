"""The project's error hierarchy.

Every error a user can cause derives from :class:`UserError`; the CLI prints its message (one clear
message with a location) and exits with ``exit_code`` (2), never a traceback. Anything else that
escapes is a bug in ktir-models.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: a file, a flag, a manifest field, a weight. Exit code 2."""

    exit_code = 2


class Mismatch(Exception):
    """A forward ran but did not match its golden. Exit code 1."""

    exit_code = 1
