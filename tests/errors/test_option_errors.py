"""Every range or type error of a CLI option: one located line, exit code 2, no traceback, and
nothing allocated (each case returns within seconds; `--past 10^12` used to try 7.28 TiB)."""

from __future__ import annotations


import pytest

from .cli_harness import assert_user_error, run_cli


@pytest.mark.parametrize("args, fragments", [
    (["--repeat", "0"], ["forward", "--repeat", "greater than or equal to 1", "'0'"]),
    (["--repeat", "-3"], ["--repeat", "'-3'"]),
    (["--past", "-1"], ["--past", "'-1'"]),
    (["--tokens", "abc"], ["--tokens", "valid integer", "'abc'"]),
    (["--seed", "-1"], ["--seed -1", "[0, 4294967295]"]),
    (["--seed", str(2**40)], ["--seed", "[0, 4294967295]"]),
    (["--nonsense"], ["No such option: --nonsense"]),
    (["--mode", "sideways"], ["--mode sideways"]),
], ids=["repeat-0", "repeat-negative", "past-negative", "tokens-not-int", "seed-negative", "seed-huge",
        "unknown-option", "mode"])
def test_forward_option_errors(tiny_model, args, fragments):
    r = run_cli("forward", tiny_model, "--weights", tiny_model, "--golden", "none", "-q", *args)
    assert_user_error(r, *fragments)


@pytest.mark.parametrize("args, total", [
    (["--past", "1000000000000"], "1000000000000 + 1"),
    (["--past", "300"], "300 + 1"),
    (["--past", "256"], "256 + 1"),
    (["--mode", "prefill", "--tokens", "257"], "257"),
    (["--mode", "prefill", "--tokens", "200", "--past", "57"], "57 + 200 = 257"),
], ids=["past-1e12", "past-300", "past-at-limit", "tokens-257", "past-plus-tokens"])
def test_forward_positions_beyond_the_model(tiny_model, args, total):
    r = run_cli("forward", tiny_model, "--weights", tiny_model, "--golden", "none", "-q", *args)
    assert_user_error(r, "--past + --tokens", total, "'max_position_embeddings' = 256")


def test_the_last_position_still_runs(tiny_model):
    """The boundary itself is valid: past 255 + 1 token = position 255, the model's last."""
    r = run_cli("forward", tiny_model, "--weights", tiny_model, "--golden", "none", "-q", "--past", "255")
    assert r.code == 0, r.stderr
    assert "RAN" in r.stdout


def test_emit_and_generate_positions(tiny_model, tmp_path):
    r = run_cli("emit", tiny_model, "--out", tmp_path / "p", "--past", "1000000000")
    assert_user_error(r, "--past + --tokens", "'max_position_embeddings' = 256")
    r = run_cli("emit", tiny_model, "--out", tmp_path / "p", "--capacity", "100000000")
    assert_user_error(r, "--capacity 100000000", "'max_position_embeddings' = 256")
    assert not (tmp_path / "p").exists()  # nothing written
    r = run_cli("generate", tiny_model, "--weights", tiny_model, "--tokens", "250", "--steps", "10",
                "--golden", "none")
    assert_user_error(r, "--tokens + --steps = 260", "'max_position_embeddings' = 256")
    r = run_cli("generate", tiny_model, "--weights", tiny_model, "--steps", "1000000000", "--golden", "none")
    assert_user_error(r, "--tokens + --steps = 1000000008")  # the default 8 prompt tokens
    r = run_cli("generate", tiny_model, "--weights", "synthetic", "--seed", "-5", "--golden", "none")
    assert_user_error(r, "--seed -5")


@pytest.mark.parametrize("argv, fragments", [
    (["forward"], ["forward", "Missing argument"]),
    (["no-such-command"], ["No such command"]),
    (["run", "x.mlir", "--lx-capacity", "lots"], ["run", "--lx-capacity", "'lots'"]),
    (["generate", "m", "--steps", "-1"], ["generate", "--steps", "'-1'"]),
], ids=["missing-argument", "unknown-command", "run-not-int", "generate-steps"])
def test_usage_errors_of_every_command_are_one_line(argv, fragments):
    assert_user_error(run_cli(*argv), *fragments)


def test_help_still_exits_0():
    r = run_cli("forward", "--help")
    assert r.code == 0 and "--repeat" in r.stdout
