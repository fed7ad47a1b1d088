"""``config_nulls`` in a registry entry: the named [config] fields are null (TOML has no null),
which is not the same as leaving them out (mistral: null is no window, absent is 4096)."""

from __future__ import annotations

import pytest

from ktir_models.errors import UserError
from ktir_models.model.families.mistral import DEFAULT_SLIDING_WINDOW
from ktir_models.model.registry import resolve_model

ENTRY = """repo_id = "org/tiny"
{nulls}
[config]
model_type = "mistral"
hidden_size = 64
intermediate_size = 128
num_hidden_layers = 2
num_attention_heads = 4
vocab_size = 512
{extra}
"""


def _resolve(tmp_path, nulls: str = "", extra: str = ""):
    (tmp_path / "tiny.toml").write_text(ENTRY.format(nulls=nulls, extra=extra), encoding="utf-8")
    return resolve_model("tiny", manifests_dir=tmp_path).config.features.sliding_window


def test_config_nulls_makes_a_field_null_and_absence_keeps_the_default(tmp_path):
    assert _resolve(tmp_path, 'config_nulls = ["sliding_window"]') is None
    assert _resolve(tmp_path) == DEFAULT_SLIDING_WINDOW
    assert _resolve(tmp_path, extra="sliding_window = 8") == 8


@pytest.mark.parametrize("nulls,extra,message", [
    ('config_nulls = "sliding_window"', "", "must be a list of field names"),
    ('config_nulls = ["sliding_window"]', "sliding_window = 8", "which [config] also sets"),
])
def test_malformed_config_nulls_names_the_field(tmp_path, nulls, extra, message):
    with pytest.raises(UserError, match="config_nulls") as exc:
        _resolve(tmp_path, nulls, extra)
    assert message in str(exc.value)
