"""Run one case in its own process and turn what happened into a :class:`CaseResult`.

The case process is ``python -m ktir_models.sweep.child forward ... --json REPORT`` (or
``generate ...``): the project's own CLI, in a new session (its own process group) so a timeout
or a memory kill takes the whole group down. Exit codes map to verdicts: 0 pass, 1 fail (the
forward ran and did not match), anything else (2 bad input, a traceback, a signal) error, with
the cause recorded. :func:`run_case` never raises for a case's fault: everything that can go wrong
with one case ends up in its result, so one case never stops a sweep.

This function runs in the sweep process (a local-executor thread) or in a Ray worker; it reads
checkpoints and programs by path and returns a small JSON-ready record, never arrays.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .memory import rss_bytes
from .spec import EMIT, WAIT, Case

TAIL_CHARS = 4000
POLL_SECONDS = 0.1

# Case processes of this process now running: on Ctrl-C the sweep kills their groups (they sit
# in sessions of their own, so the terminal's SIGINT never reaches them).
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def kill_running() -> None:
    """SIGKILL the process group of every case this process is running."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass(frozen=True)
class Job:
    """A case ready to run: its key, its effective timeout and its estimated peak memory."""

    case: Case
    key: str
    timeout: float | None
    memory: int


@dataclass
class CaseResult:
    """What one run of one case did. ``verdict`` is pass / fail / error; ``cause`` says why a
    case did not pass (a mismatch's reasons, the error message, the timeout, the signal)."""

    case_id: str
    key: str
    verdict: str
    cause: str | None
    exit_code: int | None
    seconds: float
    expect: str = "pass"
    run_id: str = ""
    host: str = ""
    started: float = 0.0
    peak_rss: int = 0
    argv: list[str] = field(default_factory=list)
    report: dict[str, Any] | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "CaseResult":
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in doc.items() if k in names})

    @property
    def metric(self) -> float | None:
        """max|logits - golden| / max|golden| of a forward with a golden, else None."""
        metrics = (self.report or {}).get("metrics") or {}
        value = metrics.get("max_abs_rel")
        return float(value) if value is not None else None


def case_argv(case: Case, report_path: Path) -> list[str]:
    """The command line of the case process (the project's own CLI; a wait case: child.py's
    wait, which never ends on its own)."""
    if case.kind == WAIT:
        return [sys.executable, "-m", "ktir_models.sweep.child", WAIT]
    argv = [sys.executable, "-m", "ktir_models.sweep.child", case.kind, case.model]
    if case.kind == "generate":
        if case.tokens is not None:
            argv += ["--tokens", str(case.tokens)]
        argv += ["--steps", str(case.steps)]
    else:
        if case.program != EMIT:
            argv += ["--program", case.program]
        if case.mode is not None:
            argv += ["--mode", case.mode]
        if case.tokens is not None:
            argv += ["--tokens", str(case.tokens)]
        if case.past:
            argv += ["--past", str(case.past)]
        argv += ["--repeat", str(case.repeat), "--json", str(report_path)]
    if case.prompt is not None:
        argv += ["--prompt", case.prompt]
    # generate knows live / none only; a sweep checks, so its "auto" is live.
    golden = case.golden if case.kind == "forward" or case.golden != "auto" else "live"
    argv += ["--weights", case.weights, "--golden", golden, "--seed", str(case.seed),
             "--backend", case.backend, "--device", case.device, "--quiet"]
    return argv


def run_case(case: Case, key: str, timeout: float | None, run_id: str = "") -> CaseResult:
    """Run ``case`` once; its fault (raise, non-zero exit, timeout, memory kill) is its result."""
    started = time.time()
    try:
        return _run(case, key, timeout, run_id, started)
    except Exception as exc:  # a fault of this case's launch must not stop the sweep
        return CaseResult(case.id, key, "error", f"the worker raised {type(exc).__name__}: {exc}",
                          None, time.time() - started, case.expect, run_id, os.uname().nodename, started)


def _run(case: Case, key: str, timeout: float | None, run_id: str, started: float) -> CaseResult:
    # The case id is in the scratch directory's name, so the process is findable by its id.
    scratch = Path(tempfile.mkdtemp(prefix=f"ktir-sweep-{case.id}-"))
    try:
        report_path = scratch / "report.json"
        argv = case_argv(case, report_path)
        env = _case_env(case)
        with open(scratch / "stdout", "wb") as out, open(scratch / "stderr", "wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                    start_new_session=True)
            with _running_lock:
                _running.add(proc)
            try:
                killed, peak = _watch(proc, timeout, case.memory_limit)
            finally:
                with _running_lock:
                    _running.discard(proc)
        seconds = time.time() - started
        stdout = _tail(scratch / "stdout")
        stderr = _tail(scratch / "stderr")
        report = None
        if report_path.is_file():
            try:
                report = json.loads(report_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                report = None
        crashed = _mentions(scratch / "stderr", b"Traceback (most recent call last)")
        verdict, cause = _verdict(proc.returncode, killed, report, stderr, case, timeout, crashed)
        return CaseResult(case.id, key, verdict, cause, proc.returncode, seconds, case.expect, run_id,
                          os.uname().nodename, started, peak, argv, report, stdout, stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _case_env(case: Case) -> dict[str, str]:
    env = dict(os.environ)
    env["KTIR_SWEEP_PARENT"] = str(os.getpid())
    env["KTIR_SWEEP_CASE"] = case.id
    # A case gets `cpus` threads of BLAS / OpenMP, so a pool of cases does not oversubscribe.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, str(case.cpus))
    return env


def _watch(proc: subprocess.Popen, timeout: float | None, memory_limit: int | None) -> tuple[str | None, int]:
    """Wait for ``proc``; kill its process group on timeout or when its tree's RSS passes
    ``memory_limit``. Returns what killed it (None, "timeout", "memory: ...") and the peak RSS."""
    deadline = None if timeout is None else time.monotonic() + timeout
    peak = 0
    while True:
        try:
            proc.wait(timeout=POLL_SECONDS)
            return None, peak
        except subprocess.TimeoutExpired:
            pass
        rss = rss_bytes(proc.pid)
        peak = max(peak, rss)
        if memory_limit is not None and rss > memory_limit:
            _kill_group(proc)
            return f"memory: resident {rss >> 20} MiB passed its memory_limit of {memory_limit >> 20} MiB", peak
        if deadline is not None and time.monotonic() > deadline:
            _kill_group(proc)
            return "timeout", peak


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _verdict(code: int, killed: str | None, report: dict | None, stderr: str, case: Case,
             timeout: float | None, crashed: bool = False) -> tuple[str, str | None]:
    """Verdict and cause of a finished case process; ``crashed``: its stderr holds a traceback."""
    last = _last_line(stderr)
    if killed == "timeout":
        return "error", f"timed out after {timeout:g} s (process group killed)"
    if killed is not None:
        return "error", f"killed for {killed}"
    if code == 0:
        if case.kind == "forward" and report is None:
            return "error", "exited 0 but wrote no report"
        return "pass", None
    if code == 1:
        # Python exits 1 on an uncaught exception too: that is a crash, not a mismatch. A
        # forward's mismatch always leaves its report (pass: false) before exiting.
        if crashed or (case.kind == "forward" and (report or {}).get("pass") is not False):
            return "error", f"crashed (exit code 1): {last}" if last else "crashed (exit code 1)"
        reasons = (report or {}).get("reasons") or []
        return "fail", "; ".join(reasons) if reasons else (last or "mismatch (exit code 1)")
    if code == 2:
        return "error", f"bad input (exit code 2): {last}" if last else "bad input (exit code 2)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        hint = " (out of memory, the OOM killer, or another process)" if -code == signal.SIGKILL else ""
        return "error", f"killed by signal {name}{hint}"
    return "error", f"exited with code {code}: {last}" if last else f"exited with code {code}"


def _mentions(path: Path, needle: bytes) -> bool:
    try:
        return needle in path.read_bytes()
    except OSError:
        return False


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-TAIL_CHARS:].decode("utf-8", errors="replace")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
