"""The forward verdict (pass rule), the text report and the JSON report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ktir_models.errors import UserError
from ktir_models.model.checks.golden import compare
from ktir_models.model.checks.report import REL_TOLERANCE, ForwardReport, check_json_target, judge, write_json


def _golden() -> np.ndarray:
    rng = np.random.default_rng(0)
    g = rng.normal(size=(4, 100)).astype(np.float32)
    g[np.arange(4), [3, 50, 7, 99]] = 5.0  # a clear top-1 per row; max|golden| = 5
    return g


def test_identical_logits_pass() -> None:
    g = _golden()
    verdict = judge(compare(g, g))
    assert verdict.passed and verdict.reasons == ()


def test_error_just_inside_and_outside_the_tolerance() -> None:
    g = _golden()
    inside = g.copy()
    inside[0, 0] += 0.99 * REL_TOLERANCE * 5.0
    assert judge(compare(inside, g)).passed
    outside = g.copy()
    outside[0, 0] += 1.01 * REL_TOLERANCE * 5.0
    verdict = judge(compare(outside, g))
    assert not verdict.passed and "exceeds the tolerance" in verdict.reasons[0]


def test_top1_disagreement_fails_even_with_small_error() -> None:
    g = _golden()
    g[2, 8] = 5.0 - 0.1  # row 2's golden margin 0.1: beyond the near-tie band 2^-6 * 5 = 0.078
    ours = g.copy()
    ours[2, 7], ours[2, 8] = 5.0 - 0.06, 4.9 + 0.06  # the argmax moves; max-abs 0.06 is within tolerance
    verdict = judge(compare(ours, g))
    assert not verdict.passed
    assert verdict.reasons == ("top-1 differs on 1 of 4 rows beyond the near-tie band 0.0781 (rows 2: margin 0.1)",)


def test_nan_logits_fail() -> None:
    g = _golden()
    ours = g.copy()
    ours[1, 4] = np.nan
    verdict = judge(compare(ours, g))
    assert not verdict.passed and len(verdict.reasons) == 2


def _report(metrics: dict | None, passed: bool = True) -> ForwardReport:
    return ForwardReport(
        model="m", program="p", mode="decode", tokens=1, weights="synthetic:0", golden="live",
        nodes=3, repeat=2, passed=passed, reasons=[] if passed else ["why"], tolerance=REL_TOLERANCE,
        metrics=metrics, seconds={"parse": 1.0, "compile": 0.5, "marshal": 2.0, "execute": 3.0,
                                  "golden": 4.0, "weights": 0.1},
    )


def test_json_report_has_the_documented_fields(tmp_path: Path) -> None:
    metrics = {"top1_agreement": 1.0, "top1_rows": [True], "max_abs": 0.01, "max_abs_rel": 0.002,
               "cosine": float("nan")}
    path = tmp_path / "r.json"
    write_json(path, _report(metrics))
    doc = json.loads(path.read_text())
    assert doc["pass"] is True
    assert doc["metrics"]["top1_agreement"] == 1.0 and doc["metrics"]["max_abs"] == 0.01
    assert doc["metrics"]["cosine"] is None  # NaN is written as null: strict JSON
    assert (doc["seconds"]["parse"], doc["seconds"]["marshal"], doc["seconds"]["execute"]) == (1.0, 2.0, 3.0)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


def test_text_report_states_the_verdict() -> None:
    assert _report(None).render().endswith("result   RAN (no golden to compare with)")
    metrics = {"top1_agreement": 1.0, "top1_rows": [True], "max_abs": 0.01, "max_abs_rel": 0.002, "cosine": 1.0}
    text = _report(metrics, passed=False).render()
    assert "execute 3.00 (median of 2)" in text and text.endswith("result   FAIL: why")


def test_json_target_checks(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        check_json_target(tmp_path)
    with pytest.raises(UserError, match="does not exist"):
        check_json_target(tmp_path / "missing" / "r.json")
    check_json_target(tmp_path / "r.json")
