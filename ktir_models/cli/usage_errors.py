"""Usage errors of the argument parser, as one line each.

typer 0.29 parses arguments with its own copy of click (``typer._click``), whose exceptions are not
``click``'s; older typers use ``click`` itself. Both families are caught, so a range or type error
on any option (``--repeat 0``, ``--tokens abc``) is one line with exit code 2, never a traceback.
The line names the command and the parameter: ``ktir-models forward: --repeat: invalid value ...``.
"""

from __future__ import annotations

import click
import typer


def _family(name: str, *roots: type) -> tuple[type, ...]:
    """The classes called ``name`` in the MROs of ``roots`` (click's and typer's copies)."""
    found: list[type] = []
    for root in roots:
        for cls in root.__mro__:
            if cls.__name__ == name and cls not in found:
                found.append(cls)
    return tuple(found)


USAGE_ERROR_TYPES: tuple[type, ...] = _family("ClickException", click.ClickException, typer.BadParameter)
ABORT_TYPES: tuple[type, ...] = _family("Abort", click.exceptions.Abort, typer.Abort)


def usage_line(exc: Exception, argv: list[str] | None = None) -> str:
    """``<command path>: <message>`` on one line (click's own message, its lines joined), with the
    value the user gave when the error is about one option (``(given: '0')``)."""
    ctx = getattr(exc, "ctx", None)
    where = getattr(ctx, "command_path", None) or "ktir-models"
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    message = "; ".join(line.strip() for line in str(message).splitlines() if line.strip())
    given = _given_value(getattr(exc, "param", None), argv)
    if given is not None:
        message += f" (given: {given!r})"
    return f"{where}: {message}"


def _given_value(param, argv: list[str] | None) -> str | None:
    """The last value passed to option ``param`` in ``argv`` (``--opt V`` or ``--opt=V``)."""
    opts = getattr(param, "opts", None)
    if not opts or not argv or getattr(param, "param_type_name", "") != "option":
        return None
    found = None
    for i, token in enumerate(argv):
        for opt in opts:
            if token == opt and i + 1 < len(argv):
                found = argv[i + 1]
            elif token.startswith(opt + "="):
                found = token[len(opt) + 1:]
    if found is not None and len(found) > 60:
        found = found[:57] + "..."
    return found
