"""What a sweep reads: the spec and its cases' files and directories, so no output lands on them.

A case reads its program directory, a model, weights or golden given as a path, and, for a
registry model, its manifest entry and shipped checkpoint directory. An output (``--out``,
``--junit``) equal to one of these, or inside one of the directories, would change what a case
reads (and a directory's content is part of a result's key), so it is refused.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .spec import EMIT, GOLDEN_KEYWORDS, WAIT, WEIGHTS_KEYWORDS, SweepSpec


def input_paths(spec: SweepSpec) -> list[Path]:
    """The spec file and every path a case of ``spec`` reads (absolute, without repeats)."""
    from ..model.registry import MANIFESTS_DIR, load_registry_entry, registry_names

    names = set(registry_names())
    paths: dict[Path, None] = {spec.path: None}
    for case in spec.cases:
        if case.kind == WAIT:
            continue
        values = [case.model]
        if case.program != EMIT:
            values.append(case.program)
        if case.weights not in WEIGHTS_KEYWORDS:
            values.append(case.weights)
        if case.golden not in GOLDEN_KEYWORDS:
            values.append(case.golden)
        for value in values:
            if Path(value).is_absolute():
                paths[Path(value)] = None
        if case.model in names:
            paths[MANIFESTS_DIR / f"{case.model}.toml"] = None
            try:
                local = load_registry_entry(case.model, MANIFESTS_DIR).local_dir
            except UserError:  # the case reports its broken entry as its own error
                local = None
            if local is not None:
                paths[Path(local).resolve()] = None
    return list(paths)


def input_holding(target: Path, spec: SweepSpec) -> str | None:
    """The input of ``spec`` that ``target`` (resolved) is, or lies inside; None if none."""
    for path in input_paths(spec):
        if target == path or target.is_relative_to(path) and path.is_dir():
            return str(path)
    return None
