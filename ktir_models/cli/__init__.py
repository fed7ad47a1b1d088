"""Command-line entry point: ``ktir-models``.

Command modules register on the shared typer ``app``. :func:`main` is the one boundary between the
user and the code: every :class:`~ktir_models.errors.UserError` becomes its one-line message on
stderr and exit code 2, a :class:`~ktir_models.errors.Mismatch` exit code 1, and every usage error
of the argument parser (an option out of its range, not a number, unknown, missing) one line naming
the command and the option, exit code 2 (:mod:`.usage_errors`). docs/errors.md lists the classes.
A torch device running out of memory outside a kernel (copying a pass's inputs or result between
host and device) is one line and exit code 2 as well; inside a kernel the emulator already reports
it as a fault naming op, function and core.
"""

from __future__ import annotations

import sys

from ..errors import Mismatch, UserError
from .app import app
from .usage_errors import ABORT_TYPES, USAGE_ERROR_TYPES, usage_line
from . import ktir_commands  # noqa: F401  (registers check, run)
from . import model_commands  # noqa: F401  (registers forward)
from . import emit_commands  # noqa: F401  (registers emit, generate)
from . import diagnose_commands  # noqa: F401  (registers diagnose, latency)
from . import sweep_commands  # noqa: F401  (registers sweep)
from . import serve_commands  # noqa: F401  (registers serve)


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as exc:
        print(str(exc), file=sys.stderr)
        sys.exit(exc.exit_code)
    except Mismatch as exc:
        print(str(exc), file=sys.stderr)
        sys.exit(exc.exit_code)
    except USAGE_ERROR_TYPES as exc:
        print(usage_line(exc, argv), file=sys.stderr)
        sys.exit(2 if exc.exit_code in (None, 1) else exc.exit_code)
    except ABORT_TYPES:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except RuntimeError as exc:
        if not _device_out_of_memory(exc):
            raise  # anything else is a bug: keep its traceback
        first = str(exc).strip().splitlines()[0]
        print(f"the torch device ran out of memory: {first}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


def _device_out_of_memory(exc: RuntimeError) -> bool:
    """torch's CUDA OutOfMemoryError (a RuntimeError) or MPS's "MPS backend out of memory"."""
    return type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()
