"""Fuzzed command lines, and the cases that once hung, run as real processes under a timeout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from .harness import fuzz_case
from .test_fuzz_files import fuzz

INTS = ["0", "1", "2", "-1", "-3", "7", "255", "256", "257", "1000000000000", str(2**64), "abc", "", "1.5", "0x10"]
WORDS = ["decode", "prefill", "none", "live", "vendored", "auto", "numpy", "torch", "cpu", "cuda:7", "synthetic",
         "hub", "", "-", "--", "x" * 300]

#: Per command: its options and the values drawn for each (None: a flag).
OPTIONS = {
    "forward": {"--mode": WORDS, "--tokens": INTS, "--past": INTS, "--repeat": INTS, "--seed": INTS,
                "--golden": WORDS, "--weights": WORDS, "--backend": WORDS, "--device": WORDS, "--json": ["@out"],
                "--force": None, "--latency": None, "--program": ["@program", "@model", "/nonexistent"]},
    "emit": {"--mode": WORDS, "--tokens": INTS, "--past": INTS, "--capacity": INTS, "--out": ["@outdir", "@model"],
             "--force": None},
    "run": {"--fn": WORDS, "--inputs": ["@model", "/nonexistent", "@config"], "--out": ["@out", "@config"],
            "--scalar": ["s=1", "s", "=1", "s=abc", "s=1e300", "zz=2"], "--lx-capacity": INTS,
            "--address-unit": WORDS + INTS, "--backend": WORDS},
    "generate": {"--tokens": INTS, "--steps": ["0", "1", "-1", "abc", "300"], "--golden": WORDS,
                 "--weights": ["@model", "synthetic"], "--seed": INTS},
    "check": {},
    "latency": {},
    # diagnose's real runs load transformers (tens of seconds): only its refusals are fuzzed here
    "diagnose": {"--program": ["@model", "/nonexistent"], "--weights": ["@model", "hub"]},
}
#: (No registry model: --weights synthetic would write a 135M-parameter checkpoint first.)
POSITIONAL = ["@model", "@program", "@kernel", "@config", "/nonexistent", "", "smollm2-999m", "org/not-cached"]


@st.composite
def command_lines(draw):
    command = draw(st.sampled_from(sorted(OPTIONS)))
    argv = [command]
    if draw(st.integers(0, 9)) > 0:
        argv.append(draw(st.sampled_from(POSITIONAL)))
    options = OPTIONS[command]
    for name in draw(st.lists(st.sampled_from(sorted(options) or ["--help"]), max_size=4)):
        argv.append(name)
        values = options.get(name)
        if values is not None:
            argv.append(draw(st.sampled_from(values)))
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(st.sampled_from(["--nope", "-x", "extra", "--tokens"])))
    return argv


@fuzz(200)
@given(argv=command_lines())
def test_command_lines(model, program, kernel, argv):
    with tempfile.TemporaryDirectory() as work:
        config = Path(work) / "config.json"
        shutil.copy(model / "config.json", config)
        names = {"@model": model, "@program": program, "@kernel": kernel, "@config": config,
                 "@out": Path(work) / "out.file", "@outdir": Path(work) / "emitted"}
        if "generate" in argv:  # keep the live golden (transformers) out of this fast suite
            argv = argv + ["--golden", "none"]
        argv = [names.get(a, a) for a in argv]
        fuzz_case("command line", argv, [model, program, kernel, config])


#: Inputs that hung, took tens of seconds or allocated terabytes before they were bounded.
HANG_CASES = [
    ("config", {"vocab_size": 10**12}, []),
    ("config", {"num_attention_heads": 10**9, "num_key_value_heads": 10**9}, []),
    ("manifest", "[" * 200000 + "]" * 200000, []),
    ("option", None, ["--past", "1000000000000"]),
]


def test_former_hangs_end_quickly_in_a_real_process(model, program):
    """Each as its own process (the way a user meets it) with a hard timeout: exit 2, one line."""
    for kind, change, extra in HANG_CASES:
        with tempfile.TemporaryDirectory() as work:
            m = Path(work) / "M"
            shutil.copytree(model, m)
            argv = ["forward", m, "--weights", m, "--golden", "none", "-q", *extra]
            if kind == "config":
                config = json.loads((m / "config.json").read_text())
                config.update(change)
                (m / "config.json").write_text(json.dumps(config))
            elif kind == "manifest":
                p = Path(work) / "p"
                shutil.copytree(program, p)
                (p / "manifest.json").write_text(change)
                argv = ["forward", m, "--program", p, "--weights", m, "--golden", "none", "-q"]
            # the timeout only catches a hang; the verdict is the refusal, whatever the speed
            proc = subprocess.run([sys.executable, "-m", "ktir_models", *map(str, argv)], capture_output=True,
                                  text=True, timeout=600)
            assert proc.returncode == 2, (kind, proc.stderr[-2000:])
            assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
