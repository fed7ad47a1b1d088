"""The checkpoint's own tokenizer (model/inputs/tokenizer.py) and text as a forward's input
(model/inputs/text.py, `forward --prompt/--text`): offline, on the shipped stories260k."""

from __future__ import annotations

import pytest

from ktir_models.errors import UserError
from ktir_models.model.registry import resolve_model
from ktir_models.model.inputs.text import TextInput, encode_text, read_text
from ktir_models.model.inputs.tokenizer import eos_token_ids, from_prepared, load_tokenizer
from ktir_models.model.weights.checkpoint import get_checkpoint

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def stories():
    spec = resolve_model("stories260k")
    return spec, get_checkpoint(spec, "hub")


def test_stories260k_is_shipped_and_offline(stories, monkeypatch):
    spec, ckpt = stories
    assert spec.local_dir is not None and (spec.local_dir / "model.safetensors").is_file()
    assert ckpt.origin.startswith("local:")
    assert ckpt.config.vocab_size == 512 and ckpt.config.num_hidden_layers == 5


def test_encodes_as_llama2c(stories):
    _, ckpt = stories
    tok = load_tokenizer(ckpt)
    assert tok is not None
    # the ids llama2.c's own encoder gives (the model's README)
    assert tok.encode("Once upon a time") == [1, 403, 407, 261, 378]
    assert tok.decode([1, 403, 407, 261, 378]) == "Once upon a time"
    assert eos_token_ids(ckpt, tok) == {2}
    assert not tok.has_chat_template
    with pytest.raises(UserError, match="no chat template"):
        tok.encode("hi", chat=True)
    with pytest.raises(UserError, match="empty"):
        tok.encode("")


def test_stream_pieces_add_up_to_the_decoded_text(stories):
    _, ckpt = stories
    tok = load_tokenizer(ckpt)
    prompt = tok.encode("Once upon a time")
    rest = tok.encode("Once upon a time, there was a little girl named Lily. She said: \"Hi!\"")[5:]
    stream = tok.stream(prompt)
    pieces = [stream.push(t) for t in rest]
    assert stream.shown == tok.decode(prompt + rest)
    assert "".join(pieces) == tok.decode(prompt + rest)[len("Once upon a time"):]
    assert pieces[0] == ","  # no space before the comma; the next word gets its space
    assert pieces[1] == " there"


def test_prepared_tokenizer_hook(stories):
    """A checkpoint that builds its own tokenizer (GGUF metadata) hands over a tokenizers object."""
    from tokenizers import Tokenizer

    _, ckpt = stories
    raw = Tokenizer.from_file(str(ckpt.directory / "tokenizer.json"))
    wrapped = from_prepared(raw, "test", 512)
    assert wrapped.encode("Once upon a time") == [1, 403, 407, 261, 378]

    class Prepared:
        config = ckpt.config
        origin = "gguf:test"
        directory = None

        def prepared_tokenizer(self):
            return raw

    tok = load_tokenizer(Prepared())
    assert tok is not None and tok.source == "gguf:test metadata"
    assert tok.decode(tok.encode("Lily")) == "Lily"


def test_synthetic_checkpoint_has_no_tokenizer(tmp_path):
    from ktir_models.model.emit.fixtures import FIXTURES_DIR

    spec = resolve_model(str(FIXTURES_DIR / "models" / "tiny-mha"))
    ckpt = get_checkpoint(spec, "hub")
    assert load_tokenizer(ckpt, spec) is None
    with pytest.raises(UserError, match="has no tokenizer"):
        encode_text(ckpt, spec, "hello", "--prompt")


def test_ids_outside_the_model_vocabulary_are_refused(stories):
    _, ckpt = stories
    tok = from_prepared(load_tokenizer(ckpt).hf, "small", 300)
    with pytest.raises(UserError, match="outside the model's vocabulary of 300"):
        tok.encode("Once upon a time")  # 'upon' is 403


def test_text_input_slices_and_refuses_short_text(tmp_path):
    text = TextInput(tuple(range(1, 11)), "--prompt", "tok")
    ids, prefix = text.pass_ids(past=3, m=4, program="P")
    assert ids.tolist() == [4, 5, 6, 7] and prefix.tolist() == [1, 2, 3]
    with pytest.raises(UserError, match="encodes to 10 tokens, but the program in P runs m=32"):
        text.pass_ids(past=0, m=32, program="P")
    f = tmp_path / "t.txt"
    f.write_bytes(b"\xff\xfe")
    with pytest.raises(UserError, match="not UTF-8"):
        read_text(None, f)
    with pytest.raises(UserError, match="give one of them"):
        read_text("a", f)


def test_chat_template_wraps_the_prompt(stories, tmp_path):
    """--chat: the checkpoint's own template, rendered by the bounded renderer (chat_template.py)
    and tokenised by transformers; here a copy of stories260k whose tokenizer_config.json carries
    a small template."""
    import json
    import shutil

    _, ckpt = stories
    copy = tmp_path / "chatty"
    shutil.copytree(ckpt.directory, copy)
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config["chat_template"] = "{{ bos_token }}{% for m in messages %}Q: {{ m['content'] }}{% endfor %} A:"
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    from ktir_models.model.weights.checkpoint import load_local

    tok = load_tokenizer(load_local(copy))
    assert tok.has_chat_template
    plain = load_tokenizer(ckpt)
    expected = [1] + plain.hf("Q: Lily and Tom A:", add_special_tokens=False)["input_ids"]
    assert tok.encode("Lily and Tom", chat=True) == expected
    assert tok.encode("Lily and Tom") == plain.encode("Lily and Tom")
