"""``forward(..., last_token=True)`` / ``forward --last-token``: the check judges the last row
only, its report says how that row was computed, a planted bug still fails it, and text input
(whose metrics read every row) is refused. The bits of the last row against the all-rows run are
tested in tests/model/test_last_token.py."""

from __future__ import annotations

import pytest

import ktir_models
from ktir_models.cli import main
from ktir_models.errors import UserError

from .conftest import PREFILL, TINY_MODEL


def test_last_token_forward_passes_and_reports_its_rows(capsys):
    full = ktir_models.forward(str(TINY_MODEL), program=PREFILL, weights=str(TINY_MODEL),
                               golden="vendored", quiet=True)
    last = ktir_models.forward(str(TINY_MODEL), program=PREFILL, weights=str(TINY_MODEL),
                               golden="vendored", quiet=True, last_token=True)
    assert full.passed and last.passed
    assert full.to_dict()["last_token"] is None
    assert last.to_dict()["last_token"]  # native kernel off here: the reason all rows ran
    assert "rows     last row only" in last.render()
    assert "last row only" not in full.render()
    with pytest.raises(SystemExit) as exc:
        main(["forward", str(TINY_MODEL), "--program", str(PREFILL), "--weights",
              str(TINY_MODEL), "--golden", "vendored", "-q", "--last-token"])
    assert exc.value.code == 0 and "last row only" in capsys.readouterr().out


def test_a_planted_bug_fails_the_last_row_check(broken_prefill):
    report = ktir_models.forward(str(TINY_MODEL), program=broken_prefill,
                                 weights=str(TINY_MODEL), golden="vendored", quiet=True,
                                 last_token=True)
    assert not report.passed


def test_last_token_with_text_is_refused():
    with pytest.raises(UserError, match="--last-token"):
        ktir_models.forward("stories260k", prompt="Once upon a time", last_token=True)
