"""Seconds per ``execute_function`` of the compat layer on the ktir-examples kernels.

Runs the reference-style harness (tests/compat/reference_suite/suite_examples.py) after
``install_as_ktir_cpu()``; every call of ``KTIRInterpreter.execute_function`` is timed. Each
kernel's harness runs twice in one process: the first pass includes parsing and compiling
(plans are cached per interpreter, and the harness makes a new interpreter per kernel, so the
second pass compiles again: both columns include compilation). Prints one row per kernel:
calls, first-pass seconds, second-pass seconds (the execute_function calls only).

    KTIR_CORPUS=/path/to/corpus python benchmarks/compat_examples.py [--skip-slow]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "ktir"))  # the numpy references the harness imports


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-slow", action="store_true", help="leave out the three large kernels")
    opts = ap.parse_args()
    from ktir_models.compat import KTIRInterpreter, install_as_ktir_cpu

    install_as_ktir_cpu()
    spec = importlib.util.spec_from_file_location(
        "suite_examples", REPO / "tests" / "compat" / "reference_suite" / "suite_examples.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)

    spent: list[float] = []
    plain = KTIRInterpreter.execute_function

    def timed(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return plain(self, *args, **kwargs)
        finally:
            spent.append(time.perf_counter() - t0)

    KTIRInterpreter.execute_function = timed
    print(f"{'kernel':<52} {'calls':>5} {'pass 1 s':>9} {'pass 2 s':>9}")
    for rel in sorted(suite.CASES):
        if opts.skip_slow and rel in suite.SLOW:
            continue
        passes = []
        for _ in range(2):
            spent.clear()
            suite.CASES[rel](rel)
            passes.append((len(spent), sum(spent)))
        print(f"{rel:<52} {passes[0][0]:>5} {passes[0][1]:>9.3f} {passes[1][1]:>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
