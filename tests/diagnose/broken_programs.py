"""Deliberately broken copies of the scratchy smollm2-135m decode program (made in a temporary
directory: every file is a symlink to the corpus except the one edited node)."""

from __future__ import annotations

import os
from pathlib import Path

# node index = 15 * layer + position (corpus README): 4 = RoPE on q, 10 = gate, 6 = attention
ROPE_Q_LAYER5 = 15 * 5 + 4
GATE_LAYER7 = 15 * 7 + 10
ATTENTION_LAYER12 = 15 * 12 + 6

# (node, text to find, replacement, what the edit breaks)
BREAKS = {
    # the second half of each head is read from column 31 instead of 32 (a wrong RoPE offset)
    "rope_offset": (ROPE_Q_LAYER5, "%half0 = arith.constant 32 : index",
                    "%half0 = arith.constant 31 : index"),
    # the K-blocked GEMM loop stops at 512 instead of 576 (a wrong K-block bound)
    "k_bound": (GATE_LAYER7, "%K3 = arith.constant 576 : index", "%K3 = arith.constant 512 : index"),
    # the first head adds the negated mask: masked prefix slots become the most visible ones
    "swapped_mask": (ATTENTION_LAYER12, "%scm30 = arith.addf %sc29, %v4", "%scm30 = arith.subf %sc29, %v4"),
}


def broken_copy(source: Path, dest: Path, which: str) -> int:
    """Make ``dest`` a copy of fixture ``source`` with break ``which`` applied; return the node."""
    node, old, new = BREAKS[which]
    dest.mkdir(parents=True, exist_ok=True)
    target = f"node{node}.mlir"
    for entry in source.iterdir():
        if entry.name != target:
            os.symlink(entry, dest / entry.name)
    text = (source / target).read_text()
    assert text.count(old) >= 1, f"{target}: {old!r} not found"
    (dest / target).write_text(text.replace(old, new, 1))
    return node
