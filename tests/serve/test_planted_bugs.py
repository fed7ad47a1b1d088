"""Planted serving mistakes, each caught by the check and named by step and request.

The host tables of each step come from ``tables.step_tables``; each test wraps it to plant one
mistake in one request's tables (or in the plan they are built from) and expects the serve run to
fail at the first step where the mistake reaches that request's logits.
"""

from __future__ import annotations

import dataclasses

from ktir_models.model.serving import tables

from .conftest import serve_scenario

REAL = tables.step_tables


def _serve(ckpt, rewrite=None):
    return serve_scenario(ckpt, rewrite=rewrite)


def _plant(monkeypatch, edit):
    def planted(plan, shape, window=None):
        return edit(plan, shape, window)
    monkeypatch.setattr(tables, "step_tables", planted)


def _failure(report) -> str:
    assert not report.passed
    return report.failures[0]


def _group_of(shape, run) -> int:
    return 0 if run.prefill else shape.groups.first_decode_group + run.slot


def test_block_table_entry_off_by_one(serve_checkpoints, monkeypatch):
    """r1's first block-table entry points at the next block: its keys are read from a block it
    does not hold (its writes, by slot mapping, are right)."""
    def edit(plan, shape, window):
        t = REAL(plan, shape, window)
        for run in plan.runs:
            if run.request == "r1":
                t.block_table[_group_of(shape, run), 0] += 1
        return t
    _plant(monkeypatch, edit)
    failure = _failure(_serve(serve_checkpoints["llama"]))
    assert failure.startswith("step 1, request 'r1'"), failure
    assert "ours token" in failure and "transformers token" in failure and "golden logit" in failure


def test_slot_mapping_writes_the_neighbouring_slot(serve_checkpoints, monkeypatch):
    """r1's rows write their k and v one slot further on."""
    def edit(plan, shape, window):
        t = REAL(plan, shape, window)
        if "r1" in t.rows_of:
            first, n = t.rows_of["r1"]
            t.slots[first:first + n] += 1
        return t
    _plant(monkeypatch, edit)
    failure = _failure(_serve(serve_checkpoints["llama"]))
    assert failure.startswith("step 1, request 'r1'"), failure


def test_mask_shows_another_sequences_keys(serve_checkpoints, monkeypatch):
    """r1 (2 blocks) also sees the columns of its third block-table entry, padding that points at
    block 0, r0's block: r1 attends to r0's keys."""
    seen = []

    def edit(plan, shape, window):
        t = REAL(plan, shape, window)
        for run in plan.runs:
            if run.request == "r1":
                first, n = t.rows_of["r1"]
                bs = shape.block_size
                assert len(run.blocks) == 2 and t.block_table[_group_of(shape, run), 2] == 0
                holders = [r.request for r in plan.runs if 0 in r.blocks]
                seen.append(holders)
                t.mask[first:first + n, 2 * bs:3 * bs] = 0.0
        return t
    _plant(monkeypatch, edit)
    failure = _failure(_serve(serve_checkpoints["llama"]))
    assert seen and seen[0] == ["r0"]  # in that step block 0 is r0's
    assert failure.startswith("step 1, request 'r1'"), failure


def test_chunk_restarts_positions_at_zero(serve_checkpoints, monkeypatch):
    """r2's second prefill chunk (prompt tokens 32..63, step 3) runs at positions 0..31."""
    def edit(plan, shape, window):
        p = plan.prefill
        if p is not None and p.request == "r2" and p.positions[0] > 0:
            p = dataclasses.replace(p, positions=tuple(range(len(p.ids))))
            plan = dataclasses.replace(plan, prefill=p)
        return REAL(plan, shape, window)
    _plant(monkeypatch, edit)
    failure = _failure(_serve(serve_checkpoints["llama"]))
    assert failure.startswith("step 3, request 'r2'"), failure


def test_program_text_reads_the_neighbouring_slot(serve_checkpoints):
    """A mistake in the emitted program rather than the host tables: the paged attention gathers
    key and value ``p`` of a block from slot ``p + 1`` (mod the block size). The first step
    already fails (r0's prefill)."""
    def rewrite(index, text):
        if "_paged_attention(" not in text:
            return text
        return text.replace("(%p0 mod 16)", "((%p0 + 1) mod 16)")

    failure = _failure(_serve(serve_checkpoints["llama"], rewrite))
    assert failure.startswith("step 0, request 'r0'"), failure
