"""Fuzzed user inputs that are not checkpoints or programs -- tokenizer files, chat templates, text
(``--prompt`` / ``--text``) -- and a damaged cache, each case run through the CLI under the
error contract of harness.py (derandomized: the same cases on every run). Besides the contract,
a failed run leaves no ``--json`` report (not even a partial one), and a damaged cache entry never
fails a run: it is rebuilt, and every entry verifies afterwards."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from errors.cli_harness import REPO_ROOT, run_cli
from ktir_models.cache_entries import DAMAGED_MARK, DIGEST_FILE, verify_entry

from .harness import fuzz_case
from .mutations import mutate_bytes, mutate_json
from .test_fuzz_files import fuzz

STORIES = REPO_ROOT / "fixtures" / "models" / "stories260k"


@pytest.fixture(scope="module")
def stories(tmp_path_factory):
    pytest.importorskip("transformers")
    target = tmp_path_factory.mktemp("fuzz-stories") / "S"
    shutil.copytree(STORIES, target)
    return target


def _forward_text(model: Path, report: Path, *text) -> list:
    return [
        "forward",
        model,
        "--weights",
        model,
        "--mode",
        "prefill",
        "--golden",
        "none",
        "-q",
        "--json",
        report,
        *text,
    ]


def _no_partial_output(result, report: Path) -> None:
    """A run that failed wrote no report and left no temporary file next to where it would be."""
    if result.code != 0:
        assert not report.exists(), report
        assert not [p for p in report.parent.iterdir() if p.name.startswith(f".{report.name}")]


@fuzz(30)
@given(data=st.data())
def test_tokenizer_files(stories, data):
    name = data.draw(st.sampled_from(["tokenizer.json", "tokenizer_config.json"]), label="file")
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "S"
        shutil.copytree(stories, copy)
        path = copy / name
        if data.draw(st.integers(0, 4), label="raw?") == 0:
            path.write_bytes(mutate_bytes(data, path.read_bytes()))
        else:
            path.write_text(
                json.dumps(mutate_json(data, json.loads(path.read_text()), max_edits=2))
            )
        report = Path(work) / "r.json"
        result = fuzz_case(
            "tokenizer files", _forward_text(copy, report, "--prompt", "Once upon a time"), [copy]
        )
        _no_partial_output(result, report)


TEMPLATE_PIECES = [
    "{% for m in messages %}",
    "{% endfor %}",
    "{{ m.content }}",
    "{{ m['role'] | upper }}",
    "{% if add_generation_prompt %}",
    "{% endif %}",
    "{% else %}",
    "{{ bos_token }}",
    "{{ eos_token }}",
    "{{ raise_exception('refused') }}",
    "{{ undefined_name.attr }}",
    "{{ messages[0].nope.deeper }}",
    "{% for i in range(100000) %}",
    "{{ 'x' * 100000 }}",
    "{{ 'ab' * 900000000 }}",
    "{{ 10 ** 999999 }}",
    "{{ 1 / 0 }}",
    "{{ messages | tojson }}",
    "{{ messages.__class__ }}",
    "{{ range(5) | join(',') }}",
    "{{ 'a' | center(99999999) }}",
    "{% set ns = namespace(s='') %}",
    "{% set ns.s = ns.s ~ 'yy' %}",
    "{{ ns.s }}",
    "{% break %}",
    "{% generation %}",
    "{% endgeneration %}",
    "<|user|>",
    "\n",
    "{{",
    "{%",
    "}}",
    "{# note #}",
    "{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}",
]


@st.composite
def chat_templates(draw):
    """Mostly Jinja built from pieces (loops, bombs, errors, text), some non-string values."""
    if draw(st.integers(0, 9)) == 0:
        return draw(
            st.sampled_from(
                [
                    5,
                    None,
                    ["x"],
                    [{"name": "default", "template": "{{ bos_token }}"}],
                    {"template": 1},
                    True,
                ]
            )
        )
    return "".join(draw(st.lists(st.sampled_from(TEMPLATE_PIECES), min_size=1, max_size=8)))


@fuzz(40)
@given(template=chat_templates())
def test_chat_templates(stories, template):
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "S"
        shutil.copytree(stories, copy)
        config = copy / "tokenizer_config.json"
        doc = json.loads(config.read_text())
        doc["chat_template"] = template
        config.write_text(json.dumps(doc))
        fuzz_case(
            "chat templates",
            [
                "generate",
                copy,
                "--weights",
                copy,
                "--prompt",
                "Once",
                "--chat",
                "--steps",
                "0",
                "--golden",
                "none",
                "-q",
            ],
            [copy],
        )


@fuzz(30)
@given(data=st.data())
def test_text_inputs(stories, data):
    kind = data.draw(st.sampled_from(["file", "file", "prompt", "prompt", "special"]), label="kind")
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        inputs = [stories]
        if kind == "file":
            path = work / "t.txt"
            path.write_bytes(
                data.draw(
                    st.one_of(
                        st.binary(max_size=40),
                        st.text(max_size=30).map(lambda t: t.encode("utf-8")),
                    ),
                    label="bytes",
                )
            )
            inputs.append(path)
            text = ["--text", path]
        elif kind == "prompt":
            alphabet = st.characters(codec=None, exclude_categories=())  # lone surrogates included
            text = ["--prompt", data.draw(st.text(alphabet, max_size=30), label="prompt")]
        else:
            special = data.draw(
                st.sampled_from(["/dev/zero", "/dev/null", "fifo", "dir", "missing"]), label="path"
            )
            path = {"fifo": work / "pipe", "dir": work, "missing": work / "absent.txt"}.get(
                special, Path(special)
            )
            if special == "fifo":
                os.mkfifo(path)
            text = ["--text", path]
        report = work / "r.json"
        result = fuzz_case("text inputs", _forward_text(stories, report, *text), inputs)
        _no_partial_output(result, report)


@pytest.fixture(scope="module")
def clean_cache(model, tmp_path_factory):
    """A cache holding the tiny model's synthetic weights and decode program, and what a forward
    from it prints."""
    root = tmp_path_factory.mktemp("fuzz-clean-cache") / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KTIR_MODELS_CACHE", str(root))
        result = run_cli("forward", model, "--weights", "synthetic", "--golden", "none", "-q")
    assert result.code == 0, result.stderr
    return root, _verdict(result.stdout)


def _verdict(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("result"))


def _damage(data, root: Path, work: Path) -> Path | None:
    """Damage one entry (or the layout) of the cache copy ``root``: the entry, or None when the
    damage is to the cache's folders (then exit 2 is right; after an entry's, the run succeeds)."""
    entries = sorted(p for kind in ("synthetic", "programs") for p in (root / kind).iterdir())
    entry = data.draw(st.sampled_from(entries), label="entry")
    files = sorted(entry.iterdir())
    target = data.draw(st.sampled_from(files), label="file")
    action = data.draw(
        st.sampled_from(
            [
                "bytes",
                "bytes",
                "truncate",
                "delete",
                "add",
                "digest junk",
                "entry is a file",
                "entry is a symlink",
                "folder is a file",
            ]
        ),
        label="action",
    )
    if action == "bytes":
        target.write_bytes(mutate_bytes(data, target.read_bytes()))
    elif action == "truncate":
        target.write_bytes(target.read_bytes()[: data.draw(st.integers(0, 64), label="keep")])
    elif action == "delete":
        target.unlink()
    elif action == "add":
        (entry / "extra.bin").write_bytes(b"\0")
    elif action == "digest junk":
        (entry / DIGEST_FILE).write_text(
            data.draw(st.sampled_from(["", "[]", "{", '{"format": 1}']), label="junk")
        )
    elif action in ("entry is a file", "entry is a symlink"):
        shutil.rmtree(entry)
        if action == "entry is a file":
            entry.write_text("x")
        else:
            elsewhere = work / "elsewhere"
            elsewhere.mkdir()
            entry.symlink_to(elsewhere)
    else:
        folder = entry.parent
        shutil.rmtree(folder)
        folder.write_text("x")
        return None
    return entry


@fuzz(20)
@given(data=st.data())
def test_caches(model, clean_cache, data):
    clean_root, clean_verdict = clean_cache
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        root = work / "cache"
        shutil.copytree(clean_root, root, symlinks=True)
        entry = _damage(data, root, work)
        problem = verify_entry(entry) if entry is not None else None
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KTIR_MODELS_CACHE", str(root))
            result = fuzz_case(
                "caches",
                ["forward", model, "--weights", "synthetic", "--golden", "none", "-q"],
                [model],
            )
        if problem is None:  # the damage reached the cache's folders: refused, by name
            assert result.code == 2 and "KTIR_MODELS_CACHE" in result.stderr, result.stderr
            return
        assert result.code == 0, result.stderr
        assert _verdict(result.stdout) == clean_verdict
        assert f"is damaged ({problem}" in result.stderr
        for kind in ("synthetic", "programs"):
            for entry in (root / kind).iterdir():
                if DAMAGED_MARK not in entry.name:
                    assert verify_entry(entry) is None, entry
        if (work / "elsewhere").exists():
            assert list((work / "elsewhere").iterdir()) == []  # nothing written through the symlink
