"""Bad requests files and pools: one message with the file's line (or the request), exit 2, no
traceback; plus the reader's and the pool's own rules."""

from __future__ import annotations

import json

import pytest

from ktir_models.cli import main
from ktir_models.model.serving.pool import BlockPool, PoolExhausted
from ktir_models.model.serving.requests import RequestsError, parse_requests

GOOD = {"id": "a", "ids": [1, 2, 3], "max_new_tokens": 2}

BAD = [
    ('{"id": "b", "ids": [1, 2], "max_new_tokens": 2', "not valid JSON"),
    ({"id": "b", "ids": [1, 2]}, '"max_new_tokens": missing'),
    ({"ids": [1, 2], "max_new_tokens": 2}, '"id": expected a non-empty string'),
    ({"id": "b", "max_new_tokens": 2}, 'exactly one of "prompt"'),
    ({"id": "b", "ids": [1, 2], "max_new_tokens": -1}, '"max_new_tokens" = -1'),
    ({"id": "b", "ids": [1, 2], "max_new_tokens": 10**12}, '"max_new_tokens" = 1000000000000'),
    ({"id": "b", "ids": [1, 2], "max_new_tokens": 2, "arrival": -3}, '"arrival" = -3'),
    ({"id": "b", "ids": [1, 2], "max_new_tokens": 2, "arrival": 10**9}, '"arrival" = 1000000000'),
    ({"id": "b", "ids": [1, 512], "max_new_tokens": 2}, '"ids"[1] = 512'),
    ({"id": "b", "ids": [1, -4], "max_new_tokens": 2}, '"ids"[1] = -4'),
    ({"id": "b", "ids": [1, 2.5], "max_new_tokens": 2}, '"ids"[1] = 2.5'),
    ({"id": "b", "ids": [1, 2], "max_new_tokens": True}, '"max_new_tokens" = true'),
    ({"id": "a", "ids": [1, 2], "max_new_tokens": 2}, "already used on line 1"),
    ({"id": "b", "ids": [1, 2], "max_new_tokens": 2, "top_k": 1}, "unknown field 'top_k'"),
    ('{"id": "b", "ids": [1], "max_new_tokens": NaN}', "NaN is not a number"),
    ("[1, 2]", "expected a JSON object"),
]


@pytest.mark.parametrize("line,message", BAD, ids=[m for _, m in BAD])
def test_bad_line_names_its_line(line, message):
    text = line if isinstance(line, str) else json.dumps(line)
    with pytest.raises(RequestsError) as exc:
        parse_requests([json.dumps(GOOD), "", text], "reqs.jsonl", vocab_size=512,
                       max_positions=256)
    assert str(exc.value).startswith("reqs.jsonl:3"), str(exc.value)
    assert message in str(exc.value)


def test_prompt_longer_than_the_model_positions():
    line = json.dumps({"id": "x", "ids": [1] * 250, "max_new_tokens": 10})
    with pytest.raises(RequestsError, match=r"reqs.jsonl:1 .* = 10: expected an integer in \[1, 6"):
        parse_requests([line], "reqs.jsonl", 512, 256)


def test_cli_exit_2_with_the_line(serve_checkpoints, tmp_path, capsys):
    ckpt = serve_checkpoints["llama"]
    path = tmp_path / "r.jsonl"
    bad = {"id": "b", "ids": [1, 9999], "max_new_tokens": 2}
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(["serve", str(ckpt.directory), "--weights", str(ckpt.directory),
              "--requests", str(path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"{path}:2" in err and "Traceback" not in err, err


def test_cli_request_larger_than_the_pool(serve_checkpoints, tmp_path, capsys):
    """A 130-token prompt with 6 new tokens needs 9 blocks of 16; a pool of 4 can never hold it."""
    ckpt = serve_checkpoints["llama"]
    path = tmp_path / "r.jsonl"
    big = {"id": "big", "ids": [5] * 130, "max_new_tokens": 6}
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(big) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(["serve", str(ckpt.directory), "--weights", str(ckpt.directory),
              "--requests", str(path), "--kv-blocks", "4", "--golden", "none"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert "line 2: request 'big' needs 9 KV blocks" in err and "can never run" in err


def test_missing_file_and_bad_options(serve_checkpoints, tmp_path, capsys):
    ckpt = serve_checkpoints["llama"]
    for args, words in ((["--requests", str(tmp_path / "none.jsonl")], "no such requests file"),
                        (["--requests", str(tmp_path), "--max-seqs", "0"], "--max-seqs 0")):
        with pytest.raises(SystemExit) as exc:
            main(["serve", str(ckpt.directory), "--weights", str(ckpt.directory), *args])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and words in err, err


def test_pool_hands_out_lowest_free_blocks_and_reuses_freed_ones():
    pool = BlockPool(6, 16)
    a, b = pool.allocate("a", 2), pool.allocate("b", 3)
    assert (a, b, pool.free_count) == ([0, 1], [2, 3, 4], 1)
    with pytest.raises(PoolExhausted):
        pool.allocate("c", 2)
    pool.free("a", a)
    assert pool.allocate("c", 3) == [0, 1, 5]  # not contiguous once others came and went
    with pytest.raises(AssertionError):
        pool.free("a", [2])  # b's block


def test_scheduler_admits_by_arrival_then_file_order():
    """A request later in the file but arriving earlier is not held back by an earlier line."""
    from ktir_models.model.serving.requests import Request
    from ktir_models.model.serving.scheduler import Scheduler

    late = Request("late", (1, 2), 2, arrival=5, line=1)
    early = Request("early", (1, 2, 3), 2, arrival=0, line=2)
    sched = Scheduler([late, early], max_seqs=1, pool=BlockPool(4, 16), chunk=32)
    plan = sched.plan()
    assert plan is not None and plan.step == 0 and plan.prefill is not None
    assert plan.prefill.request == "early" and plan.prefill.positions == (0, 1, 2)
