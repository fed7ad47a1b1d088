"""Entry point of one case process: ``python -m ktir_models.sweep.child forward|generate ...``.

It is the project's CLI (``ktir_models.cli.main``) with one addition: on Linux the process asks
the kernel to SIGKILL it when its parent (the sweep, or a Ray worker) dies, so a sweep killed with
SIGKILL leaves no case running on behind it. ``KTIR_SWEEP_PARENT`` holds the parent's pid, which
closes the race where the parent dies before the request is made.

``python -m ktir_models.sweep.child wait`` is a wait case (spec.py): it blocks reading a pipe
whose only writer is itself, so no byte ever comes and it ends only when killed (its timeout,
its memory limit, a kill by hand). A sweep's timeout and kill handling are checked with it,
whatever the machine's speed.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    expected = os.environ.get("KTIR_SWEEP_PARENT")
    if expected and expected.isdigit() and os.getppid() != int(expected):
        os._exit(137)  # the parent is already gone


def wait_forever() -> None:
    """Block until killed: a read of a pipe no one else can write (its write end is ours)."""
    read_end, _write_end = os.pipe()
    while True:
        os.read(read_end, 1)


def main() -> None:
    _die_with_parent()
    if sys.argv[1:] == ["wait"]:
        wait_forever()
    from ..cli import main as cli_main

    cli_main(sys.argv[1:])


if __name__ == "__main__":
    main()
