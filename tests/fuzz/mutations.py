"""Hypothesis strategies that damage JSON documents, bytes and npz archives."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

#: Replacement values: wrong types, boundaries, huge and negative numbers, odd strings.
ODD_VALUES = [None, True, False, 0, -1, 1, 2, 3, 255, 256, 257, 2**31, 2**63, 10**30, -(10**9), 1.5, -0.0,
              1e308, "", "x", "node0.mlir", "../../etc/passwd", "llama", [], {}, [0], {"a": 1}]


def _containers(doc: Any, path=()):
    """Every (path, container) in ``doc``, the root first."""
    out = [(path, doc)]
    if isinstance(doc, dict):
        for k, v in doc.items():
            if isinstance(v, (dict, list)):
                out += _containers(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            if isinstance(v, (dict, list)):
                out += _containers(v, path + (i,))
    return out


def mutate_json(data, doc: Any, max_edits: int = 3) -> Any:
    """A copy of ``doc`` with 1..max_edits random edits drawn from ``data`` (st.data())."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, max_edits), label="edits")):
        places = [c for c in _containers(doc) if c[1]]
        if not places:
            break
        _, box = data.draw(st.sampled_from(places), label="container")
        key = data.draw(st.sampled_from(list(box.keys()) if isinstance(box, dict) else list(range(len(box)))))
        action = data.draw(st.sampled_from(["replace", "delete", "perturb", "duplicate", "nest"]), label="action")
        if action == "replace":
            box[key] = copy.deepcopy(data.draw(st.sampled_from(ODD_VALUES), label="value"))
        elif action == "delete":
            del box[key]
        elif action == "perturb" and isinstance(box[key], int) and not isinstance(box[key], bool):
            box[key] = data.draw(st.sampled_from([box[key] + 1, box[key] - 1, box[key] * 2, -box[key],
                                                  box[key] * 1000, box[key] + 10**9]), label="perturbed")
        elif action == "duplicate" and isinstance(box, list):
            box.insert(key, copy.deepcopy(box[key]))
        elif action == "nest":
            box[key] = [box[key]]
    return doc


def mutate_bytes(data, raw: bytes, regions: list[tuple[int, int]] | None = None) -> bytes:
    """``raw`` with a few bytes flipped, set, cut or inserted (inside ``regions`` when given)."""
    out = bytearray(raw)
    regions = regions or [(0, len(raw))]
    for _ in range(data.draw(st.integers(1, 4), label="byte edits")):
        start, end = data.draw(st.sampled_from(regions), label="region")
        last = min(end, len(out)) - 1
        if last < start:  # the region was cut away by an earlier edit
            continue
        pos = data.draw(st.integers(start, last), label="pos")
        action = data.draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]), label="byte action")
        if action == "flip":
            out[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "set":
            out[pos] = data.draw(st.sampled_from([0x00, 0xFF, 0x7E, 0x7C, ord("["), ord("9"), ord('"')]))
        elif action == "truncate":
            del out[pos:]
        elif action == "insert":
            out[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            del out[pos]
    return bytes(out)
