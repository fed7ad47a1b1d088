"""Unknown families and features we cannot run faithfully: one located exit-2 message naming the
config field, from the CLI (``forward`` and ``emit`` on a local directory), never a traceback."""

from __future__ import annotations

import json

import pytest

from ktir_models.cli import main
from ktir_models.model.weights.synthetic import tiny_config

REFUSED = [
    ({"model_type": "granitemoehybrid"}, "model_type", "Mamba"),
    ({"model_type": "mixtral"}, "model_type", "mixture of experts"),
    ({"model_type": "qwen3_moe"}, "model_type", "mixture of experts"),
    ({"model_type": "gpt2"}, "model_type", "not supported"),
    ({"model_type": "qwen2", "use_sliding_window": True}, "use_sliding_window", "max_window_layers"),
    ({"model_type": "qwen3", "attention_bias": True}, "attention_bias", "not supported"),
    ({"model_type": "granite", "mlp_bias": True}, "mlp_bias", "not supported"),
    ({"model_type": "granite", "residual_multiplier": -0.5}, "residual_multiplier", "positive number"),
    ({"model_type": "mistral", "sliding_window": 0}, "sliding_window", "positive integer"),
    ({"model_type": "mistral", "sliding_window": 8,
      "layer_types": ["sliding_attention", "full_attention"]}, "layer_types", "full_attention"),
    ({"model_type": "llama", "attention_bias": True}, "attention_bias", "not supported"),
]


@pytest.mark.parametrize("command", ["forward", "emit"])
@pytest.mark.parametrize("change,field,reason", REFUSED, ids=[f"{c.get('model_type')}-{f}" for c, f, _ in REFUSED])
def test_refused_config_is_one_exit_2_message(tmp_path, capsys, monkeypatch, command, change, field, reason):
    monkeypatch.setenv("KTIR_MODELS_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    config = {**tiny_config().to_hf_dict(), **change}
    (model / "config.json").write_text(json.dumps(config))
    args = [command, str(model)] + (["--weights", "synthetic", "--golden", "none"] if command == "forward"
                                    else ["--mode", "decode", "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    text = (out.out + out.err).strip()
    assert exc.value.code == 2, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    assert f"{model / 'config.json'}: field '{field}'" in text and reason in text, text
    assert not (tmp_path / "out").exists()
