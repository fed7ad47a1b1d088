"""Reading a sweep spec is bounded: size, encoding, nesting, case count, file type, timeouts.

Each bad spec is one located UserError (exit 2 through the CLI), never a traceback or a hang.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO
from errors.cli_harness import assert_user_error, run_cli
from ktir_models.errors import UserError
from ktir_models.sweep import load_spec, spec as spec_module
from ktir_models.sweep.spec import MAX_CASES
from ktir_models.sweep.spec_reader import MAX_SPEC_BYTES, MAX_SPEC_DEPTH


def write(tmp_path, data: bytes | str, name="s.toml"):
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def refused(path, *fragments):
    with pytest.raises(UserError) as err:
        load_spec(path)
    message = str(err.value)
    assert str(path) in message and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def test_non_utf8_spec_is_located(tmp_path):
    path = write(tmp_path, b'name = "ci"\n[[matrix]]\nmodel = "caf\xe9"\n')
    refused(path, f"{path}:3:13: not UTF-8 (byte 0xe9)")
    assert_user_error(run_cli("sweep", path, "--out", tmp_path / "o"), "not UTF-8")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text, line", [
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", 1),
    ("a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n", 1),
    ("[[matrix]]\nmodel = " + "[" * (MAX_SPEC_DEPTH + 1) + '"m"' + "]" * (MAX_SPEC_DEPTH + 1) + "\n", 2),
    ("a" + ".a" * 5000 + " = 1\n", None),  # dotted keys nest without a bracket
    ("[" + ".".join(["t"] * 5000) + "]\n", None),
], ids=["arrays-5000", "inline-tables-5000", "just-over", "dotted-keys-5000", "table-header-5000"])
def test_deep_toml_is_refused_before_it_recurses(tmp_path, text, line):
    """Brackets are counted on the text (the line is named) before the parser recurses; dotted
    keys and headers, which nest without recursion, on the parsed document."""
    path = write(tmp_path, text)
    where = f"{path}:{line}: " if line else f"{path}: "
    refused(path, f"{where}nested more than {MAX_SPEC_DEPTH} levels deep")
    assert_user_error(run_cli("sweep", path, "--out", tmp_path / "o"), "nested more than")


def test_brackets_in_strings_and_comments_do_not_count(tmp_path):
    deep = "[" * 50
    spec = load_spec(write(tmp_path, f'# {deep}\n[[matrix]]\nmodel = "m"\nlabel = "{deep}"\n'
                                     f"id = '''{deep}'''\n"))
    assert len(spec.cases) == 1 and spec.cases[0].label == deep and spec.cases[0].id == "_"


def test_oversized_spec_is_refused(tmp_path):
    path = write(tmp_path, "# " + "x" * MAX_SPEC_BYTES + "\n")
    refused(path, f"larger than {MAX_SPEC_BYTES} bytes")


def test_a_trillion_cases_are_counted_and_refused_before_any_is_built(tmp_path, monkeypatch):
    axis = "[" + ", ".join(str(i + 1) for i in range(1000)) + "]"
    path = write(tmp_path, f'[[matrix]]\nmodel = "stories260k"\ntokens = {axis}\npast = {axis}\n'
                           f"seed = {axis}\nrepeat = {axis}\n")
    built = []
    monkeypatch.setattr(spec_module, "_case", lambda *a: built.append(a))
    monkeypatch.setattr(spec_module, "_expand", lambda *a: built.append(a) or [])
    refused(path, f"more than {MAX_CASES} cases", "(1000000000000 up to this entry)")
    assert built == []
    # the count runs over all entries before the first is expanded
    path = write(tmp_path, '[[matrix]]\nmodel = "n"\n'
                           f'[[matrix]]\nmodel = "m"\ntokens = {axis}\nseed = {axis}\n', "two.toml")
    refused(path, "[[matrix]] 2: the spec expands to more than", "(1000001 up to this entry)")
    assert built == []


def test_the_case_bound_itself_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setattr(spec_module, "MAX_CASES", 6)
    spec = load_spec(write(tmp_path, '[[matrix]]\nmodel = "m"\ntokens = [1, 2, 3]\n'
                                     'past = [1, 2]\n'))
    assert len(spec.cases) == 6


def test_a_fifo_spec_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    refused(fifo, "the sweep spec is a FIFO")
    # as a real process, in case a regression blocks: the timeout only keeps the suite alive
    argv = [sys.executable, "-m", "ktir_models", "sweep", str(fifo), "--out", str(tmp_path / "o")]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and "is a FIFO" in proc.stderr and "Traceback" not in proc.stderr


def test_a_device_or_directory_spec_is_refused(tmp_path):
    refused_dev = pytest.raises(UserError, match="the sweep spec is a device")
    with refused_dev:
        load_spec("/dev/zero")
    refused(tmp_path, "the sweep spec is a directory")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "0.0", "-1", "-0.5"])
def test_timeouts_must_be_finite_and_positive(tmp_path, value):
    entry = write(tmp_path, f'[[matrix]]\nmodel = "m"\ntimeout = {value}\n', "entry.toml")
    refused(entry, f"timeout = {value}", "expected a finite, positive number of seconds")
    top = write(tmp_path, f'timeout = {value}\n[[matrix]]\nmodel = "m"\n', "top.toml")
    refused(top, "expected a finite, positive number of seconds")
    ok = write(tmp_path, '[[matrix]]\nmodel = "no-such-model"\n', "ok.toml")
    r = run_cli("sweep", ok, "--out", tmp_path / "o", "--timeout", value)
    assert_user_error(r, "--timeout", "expected a finite, positive number of seconds")
    assert not (tmp_path / "o").exists()


def test_a_wait_case_takes_only_its_own_fields(tmp_path):
    refused(write(tmp_path, '[[matrix]]\nkind = "wait"\nmodel = "m"\n'),
            'model: not an option of kind = "wait"')
    refused(write(tmp_path, '[[matrix]]\nkind = ["wait", "forward"]\nmodel = "m"\n'),
            "model: not an option")
    spec = write(tmp_path, '[[matrix]]\nkind = "wait"\ntimeout = 2\nmemory_limit = "1MiB"\n')
    case = load_spec(spec).cases[0]
    assert (case.id, case.timeout, case.memory_limit) == ("wait", 2.0, 1 << 20)


def test_long_values_are_abridged_in_messages(tmp_path):
    path = write(tmp_path, f'[[matrix]]\nmodel = "m"\nmode = "{"x" * 100_000}"\n')
    message = refused(path, "mode = ")
    assert len(message) < 400
