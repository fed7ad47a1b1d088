"""Text, tokenizer files and chat templates that enter as user input: each bad case is exit 2 with
one line naming the option or the file, never a traceback, a hang or an abort; a valid chat
template renders to the ids transformers gives."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fuzz.harness import time_limit

from .cli_harness import REPO_ROOT, assert_user_error, run_cli

pytest.importorskip("transformers")

STORIES = REPO_ROOT / "fixtures" / "models" / "stories260k"
PROMPT = "Once upon a time"


@pytest.fixture
def stories(tmp_path) -> Path:
    """A private copy of the stories260k checkpoint with its tokenizer files."""
    target = tmp_path / "S"
    shutil.copytree(STORIES, target)
    return target


def forward_text(model: Path, *text: str):
    return run_cli(
        "forward", model, "--weights", model, "--mode", "prefill", "--golden", "none", "-q", *text
    )


def generate_chat(model: Path, prompt: str = PROMPT):
    return run_cli(
        "generate",
        model,
        "--weights",
        model,
        "--prompt",
        prompt,
        "--chat",
        "--steps",
        "1",
        "--golden",
        "none",
        "-q",
    )


# ------------------------------------------------------------------ --text and --prompt


def test_text_file_over_the_bound_is_refused_before_reading(stories, tmp_path):
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(50 << 20)  # 50 MB, sparse: nothing is written, nothing needs to be read
    assert_user_error(
        forward_text(stories, "--text", big), f"--text {big}", "52428800 bytes, more than"
    )


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
def test_text_that_is_not_a_regular_file_is_refused_by_stat(kind, stories, tmp_path):
    path = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "pipe", "directory": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # no writer: opening it for reading would block
    with time_limit(120):  # a case that would block forever fails instead
        result = forward_text(stories, "--text", path)
    assert_user_error(result, f"--text {path}", "not a regular file")


def test_lone_surrogate_prompt_is_exit_2(stories):
    bad = "Once \udcff upon"  # what Python makes of an argv byte that is not UTF-8
    assert_user_error(
        forward_text(stories, "--prompt", bad), "--prompt: not valid Unicode text", "character 5"
    )
    result = run_cli(
        "generate",
        stories,
        "--weights",
        stories,
        "--prompt",
        bad,
        "--steps",
        "1",
        "--golden",
        "none",
        "-q",
    )
    assert_user_error(result, "--prompt: not valid Unicode text")


def test_prompt_over_the_bound_is_exit_2(stories):
    from ktir_models.model.inputs.text import MAX_TEXT_BYTES

    assert_user_error(
        forward_text(stories, "--prompt", "a" * (MAX_TEXT_BYTES + 1)), "--prompt:", "more than"
    )


# ------------------------------------------------------------------ tokenizer files

TOKENIZER_JSON_CASES = {
    "a list": (lambda doc: [doc], "expected a JSON object (a tokenizers file), got a list"),
    "wrong model type": (
        lambda doc: {**doc, "model": {**doc["model"], "type": "Transformer"}},
        "model.type: 'Transformer' is not a tokenizers model type",
    ),
    "no vocab": (
        lambda doc: {**doc, "model": {k: v for k, v in doc["model"].items() if k != "vocab"}},
        "model.vocab: missing",
    ),
    "vocab of the wrong shape": (
        lambda doc: {**doc, "model": {**doc["model"], "vocab": ["a", "b"]}},
        "model.vocab: expected an object of tokens for model type BPE",
    ),
    "model not an object": (
        lambda doc: {**doc, "model": "BPE"},
        "model: expected an object, got a string",
    ),
}


@pytest.mark.parametrize("case", sorted(TOKENIZER_JSON_CASES))
def test_malformed_tokenizer_json_names_the_file(case, stories):
    edit, fragment = TOKENIZER_JSON_CASES[case]
    path = stories / "tokenizer.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    assert_user_error(forward_text(stories, "--prompt", PROMPT), f"{path}: {fragment}")


def test_deeply_nested_tokenizer_json_names_the_file(stories):
    path = stories / "tokenizer.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert_user_error(
        forward_text(stories, "--prompt", PROMPT), f"{path}: invalid JSON: nested deeper than"
    )


CONFIG_CASES = {
    "bos_token": (
        5,
        "bos_token: expected a string or an object with a string 'content', got a number",
    ),
    "chat_template": (
        5,
        "chat_template: expected a string (or a list of named templates), got a number",
    ),
    "model_max_length": ("long", "model_max_length: expected a positive number, got 'long'"),
    "added_tokens_decoder": ([1, 2], "added_tokens_decoder: expected an object, got a list"),
    "add_bos_token": ("yes", "add_bos_token: expected true or false, got a string"),
    "tokenizer_class": (["x"], "tokenizer_class: expected a string, got a list"),
}


@pytest.mark.parametrize("key", sorted(CONFIG_CASES))
def test_bad_tokenizer_config_entry_names_the_file_and_key(key, stories):
    value, fragment = CONFIG_CASES[key]
    path = stories / "tokenizer_config.json"
    doc = json.loads(path.read_text())
    doc[key] = value
    path.write_text(json.dumps(doc))
    assert_user_error(forward_text(stories, "--prompt", PROMPT), f"{path}: {fragment}")


def test_tokenizer_config_that_is_not_an_object(stories):
    path = stories / "tokenizer_config.json"
    path.write_text("[1, 2]")
    assert_user_error(
        forward_text(stories, "--prompt", PROMPT), f"{path}: expected a JSON object, got a list"
    )


# ------------------------------------------------------------------ chat templates

# block tags on lines of their own: the output depends on trim_blocks / lstrip_blocks as set
CHATML = (
    "{% for m in messages %}\n  {{ '<|' + m['role'] + '|>' }}"
    "{{ m['content'] | trim | tojson }}{{ eos_token }}\n"
    "  {% endfor %}\n{% if add_generation_prompt %}{{ bos_token + '<|assistant|>' }}{% endif %}"
)

TEMPLATE_CASES = {
    "syntax error": (
        "{% for m in messages %}{{ m.content }}",
        "chat template line 1: syntax error",
    ),
    "raises": (
        "{{ raise_exception('this template refuses every conversation') }}",
        "chat template line 1 failed: this template refuses every conversation",
    ),
    "undefined attribute": (
        "{{ messages[0].content.words.first }}",
        "chat template line 1 failed:",
    ),
    "nested loops": (
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        "ran past 1000000 template steps",
    ),
    "1.6 GB output": (
        "{% for a in range(100000) %}{% for b in range(1000) %}{{ 'x' * 16 }}{% endfor %}"
        "{% endfor %}",
        "the rendered text passed",
    ),
    "huge repetition": ("{{ 'ab' * 800000000 }}", "a repetition of 2 x 800000000"),
    "doubling by ~": (  # 2^25 characters built and never printed: only its length is
        "{% set ns = namespace(s='ab') %}{% for i in range(24) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s | length }}",
        "a concatenation (~) of",
    ),
    "unsafe attribute": ("{{ messages.__class__.__mro__ }}", "is unsafe"),
    "break outside a loop": (
        "{% break %}",
        "chat template does not compile",
    ),  # found by the fuzz suite
}


def _set_template(model: Path, template) -> Path:
    path = model / "tokenizer_config.json"
    doc = json.loads(path.read_text())
    doc["chat_template"] = template
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("case", sorted(TEMPLATE_CASES))
def test_bad_chat_template_is_one_line_naming_its_file(case, stories):
    template, fragment = TEMPLATE_CASES[case]
    path = _set_template(stories, template)
    with time_limit(120):  # a case that would block forever fails instead
        result = generate_chat(stories)
    assert_user_error(result, f"{path}: ", fragment)


def test_chat_template_file_is_named(stories):
    path = stories / "chat_template.jinja"
    path.write_text("{% if %}")
    assert_user_error(generate_chat(stories), f"{path}: chat template line 1: syntax error")


def test_valid_chat_template_gives_the_ids_transformers_gives(stories):
    """The bounded renderer is transformers' environment: the same text, so the same ids as
    ``apply_chat_template`` (the independent reference) for a ChatML-like template."""
    from ktir_models.model.registry import resolve_model
    from ktir_models.model.inputs.tokenizer import load_tokenizer
    from ktir_models.model.weights.checkpoint import get_checkpoint

    _set_template(stories, CHATML)
    tok = load_tokenizer(get_checkpoint(resolve_model(str(stories)), str(stories)))
    assert tok.has_chat_template
    text = "  Lily liked to play. "
    ours = tok.encode(text, chat=True)
    want = tok.hf.apply_chat_template(
        [{"role": "user", "content": text}],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    assert ours == [int(i) for i in want]
    assert '<|user|>"Lily liked to play."</s>' in tok.hf.decode(ours)
