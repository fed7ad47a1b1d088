"""One fuzz case: run the CLI in-process under a time limit and check the error contract.

The contract, for every case: exit code 0, 1 or 2; no Python traceback (an exception escaping
``main`` is a bug and fails the case with it); exit 2 prints at least one line, at most a few,
on stderr; every input file is byte-identical afterwards (sha256); the case ends within
:data:`CASE_LIMIT_S` seconds (SIGALRM interrupts a hang; the limit is a safety net, never a
measure of speed).
"""

from __future__ import annotations

import collections
import contextlib
import signal
import time
from pathlib import Path

from errors.cli_harness import CliResult, run_cli, tree_digest

CASE_LIMIT_S = 300  # catches a hang; far above any case's time on a loaded machine
CASES: collections.Counter = collections.Counter()
OUTCOMES: collections.Counter = collections.Counter()
SLOWEST: list[tuple[float, str]] = []  # (seconds, argv) of the slowest cases, for tuning the budget


class CaseTimeout(Exception):
    """A case ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float):
    def expire(signum, frame):
        raise CaseTimeout(f"case ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_contract(result: CliResult, argv) -> None:
    where = f"argv {[str(a) for a in argv]}"
    assert result.code in (0, 1, 2), (where, result.code, result.stderr[-3000:])
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, (where, result.stderr[-3000:])
    if result.code == 2:
        assert 1 <= len(result.error_lines) <= 20, (where, result.stderr[-3000:])


def fuzz_case(kind: str, argv, inputs: list[Path], limit: float = CASE_LIMIT_S) -> CliResult:
    """Run one case of class ``kind``; the inputs must come out unchanged."""
    before = tree_digest(*inputs)
    start = time.perf_counter()
    with time_limit(limit):
        result = run_cli(*argv)
    SLOWEST.append((time.perf_counter() - start, " ".join(map(str, argv))[:200]))
    SLOWEST.sort(reverse=True)
    del SLOWEST[5:]
    check_contract(result, argv)
    assert tree_digest(*inputs) == before, f"{kind}: an input changed (argv {argv})"
    CASES[kind] += 1
    OUTCOMES[(kind, result.code)] += 1
    return result
