"""Spec parsing and expansion: axes, stable ids, path resolution, located errors (fast)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO
from ktir_models.errors import UserError
from ktir_models.sweep import load_spec

FIXTURES = REPO / "fixtures"


def write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_list_values_are_axes_and_expand_to_their_product(tmp_path):
    spec = load_spec(write(tmp_path, f"""
[[matrix]]
model = "{FIXTURES}/models/tiny-mha"
mode = "prefill"
tokens = [4, 8]
weights = ["synthetic", "hub"]
golden = "none"
"""))
    assert [c.id for c in spec.cases] == [
        "tiny-mha.emit-prefill-m4.w-synthetic.g-none", "tiny-mha.emit-prefill-m4.w-hub.g-none",
        "tiny-mha.emit-prefill-m8.w-synthetic.g-none", "tiny-mha.emit-prefill-m8.w-hub.g-none",
    ]
    assert {(c.tokens, c.weights) for c in spec.cases} == {(4, "synthetic"), (4, "hub"), (8, "synthetic"), (8, "hub")}
    assert spec.name == "s"


def test_ids_do_not_depend_on_position_and_defaults_apply(tmp_path):
    a = f'[[matrix]]\nmodel = "stories260k"\nmode = "decode"\n'
    b = f'[[matrix]]\nmodel = "stories260k"\nmode = "prefill"\ntokens = 8\nlabel = "x"\n'
    one = load_spec(write(tmp_path, 'timeout = 9\n[defaults]\ngolden = "live"\n' + a + b, "one.toml"))
    two = load_spec(write(tmp_path, 'timeout = 9\n[defaults]\ngolden = "live"\n' + b + a, "two.toml"))
    assert sorted(c.id for c in one.cases) == sorted(c.id for c in two.cases)
    assert {c.id for c in one.cases} == {"stories260k.emit-decode.w-hub.g-live", "stories260k.emit-prefill-m8.w-hub.g-live.x"}
    assert all(c.golden == "live" and c.timeout == 9.0 for c in one.cases)


def test_paths_resolve_against_the_spec_file_and_names_stay_names(tmp_path):
    sub = tmp_path / "specs"
    sub.mkdir()
    (tmp_path / "prog").mkdir()
    spec = load_spec(write(sub, '[[matrix]]\nmodel = "../m"\nprogram = "../prog"\nweights = "synthetic"\n'
                                '[[matrix]]\nmodel = "org/name"\nweights = "./w"\n'))
    first, second = spec.cases
    assert first.model == str(tmp_path / "m") and first.program == str(tmp_path / "prog")
    assert first.weights == "synthetic"
    assert second.model == "org/name" and second.weights == str(sub / "w") and second.program == "emit"
    assert second.id == "name.emit-decode.w-w.g-auto"


@pytest.mark.parametrize("text, message", [
    ('[[matrix]]\nmodel = "a"\nmodle = 1\n', "[[matrix]] 1: unknown field 'modle'"),
    ('[[matrix]]\nmode = "decode"\n', "[[matrix]] 1: field 'model' is missing"),
    ('[[matrix]]\nmodel = "a"\ntokens = "4"\n', "tokens = '4': expected an int"),
    ('[[matrix]]\nmodel = "a"\nmode = "train"\n', "mode = 'train': expected decode or prefill"),
    ('[[matrix]]\nmodel = "a"\nexpect = "ok"\n', "expect = 'ok'"),
    ('[[matrix]]\nmodel = "a"\nprogram = "nowhere"\n', "program = 'nowhere': no such directory"),
    ('[[matrix]]\nmodel = "a"\n[[matrix]]\nmodel = "a"\n', "[[matrix]] 2: case id 'a.emit-decode.w-hub.g-auto' repeats"),
    ('[[matrix]]\nmodel = "a"\nmemory_limit = "lots"\n', "memory_limit = 'lots': expected a size"),
    ('[[matrix]]\nmodel = "a"\ntokens = []\n', "tokens = []: an axis needs at least one value"),
    ('[[matrix]]\nkind = "generate"\nmodel = "a"\nmode = "decode"\n', "mode: not an option of kind"),
    ('name = 3\n[[matrix]]\nmodel = "a"\n', "name: expected a non-empty string"),
    ('[[matrix]\n', "invalid TOML"),
    ('title = "x"\n', "unknown top-level key 'title'"),
])
def test_bad_specs_are_one_located_message(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as err:
        load_spec(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_only_selects_by_glob_or_substring(tmp_path):
    spec = load_spec(write(tmp_path, '[[matrix]]\nmodel = "stories260k"\nmode = "prefill"\ntokens = [4, 8, 16]\n'))
    assert [c.tokens for c in spec.select("m8")] == [8]
    assert [c.tokens for c in spec.select("*-m1?.*")] == [16]
    assert len(spec.select(None)) == 3


def test_cli_bad_spec_is_exit_2_without_traceback(tmp_path):
    path = write(tmp_path, '[[matrix]]\nmodel = "a"\nmodle = 1\n')
    proc = subprocess.run([sys.executable, "-m", "ktir_models", "sweep", str(path), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert "unknown field 'modle'" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ktir_models", "sweep", str(REPO / "sweeps" / "ci.toml"),
                           "--out", str(tmp_path / "o"), "--only", "no-such-case"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2 and "--only no-such-case: matches none" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ktir_models", "sweep", str(REPO / "sweeps" / "ci.toml"),
                           "--out", str(tmp_path / "o"), "--project-key", "git"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2 and "--project-key git: expected sources or version" in proc.stderr


def test_a_prompt_is_part_of_the_id_and_of_the_command(tmp_path):
    from ktir_models.sweep.worker import case_argv

    spec = load_spec(write(tmp_path, '[[matrix]]\nmodel = "stories260k"\ngolden = "live"\n'
                                     'prompt = ["Once upon a time", "Once upon a time,"]\n'))
    first, second = spec.cases
    assert first.id.startswith("stories260k.emit-p-Once_upon_a_time-") and first.id != second.id
    argv = case_argv(first, tmp_path / "r.json")
    assert argv[argv.index("--prompt") + 1] == "Once upon a time"
    assert argv[argv.index("--golden") + 1] == "live" and argv[argv.index("--json") + 1] == str(tmp_path / "r.json")
