"""Sweep specs: a TOML matrix expanded into cases with stable, readable ids.

Format (docs/validating.md has a full example)::

    name = "ci"              # optional: the suite name in reports (default: the file's stem)
    timeout = 120            # optional: default per-case timeout in seconds

    [defaults]               # optional: fields every matrix entry starts from
    golden = "vendored"

    [[matrix]]               # one or more; a list value is an axis, a scalar is fixed
    model = "../fixtures/models/tiny-mha"
    program = ["../fixtures/tiny-mha-decode", "../fixtures/tiny-mha-prefill7"]

Each ``[[matrix]]`` entry expands to the cartesian product of its list-valued fields, in the
order the fields are written. Invariants:

* a case id depends only on that case's own field values, never on its position in the spec, so
  adding or reordering entries never renames a case (results in ``--out`` stay attached);
* two cases with the same id are bad input (one message naming both entries);
* ``program`` is always a path, ``weights`` and ``golden`` are keywords or else paths; ``model``
  is a path only when it starts with ``./``, ``../``, ``/`` or ``~`` (else a registry name or a
  repo id). Paths are resolved against the spec file's directory and stored absolute, so a case
  runs the same from any working directory and on any machine that sees the same paths;
* reading is bounded (:mod:`.spec_reader`): a spec is a regular file of at most
  ``MAX_SPEC_BYTES`` UTF-8 bytes nested at most ``MAX_SPEC_DEPTH`` deep, and the number of cases
  it expands to is counted from its axes before any case is built (at most ``MAX_CASES``);
* a case id is a safe file name of at most ``MAX_ID_CHARS`` characters (letters, digits and
  ``._=+@-``, never starting with ``.`` or ``-``); a longer one keeps its head and ends in a hash
  of the whole, so distinct ids stay distinct;
* ``kind = "wait"`` is a case that never finishes on its own (its process waits on a pipe no one
  writes): it checks the sweep's own timeout, memory limit and kill handling with certainty.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import UserError
from .memory import parse_size
from .spec_reader import read_spec, show

KINDS = ("forward", "generate", "wait")
WAIT = "wait"
VERDICTS = ("pass", "fail", "error")
EMIT = "emit"
WEIGHTS_KEYWORDS = ("hub", "synthetic")
GOLDEN_KEYWORDS = ("auto", "vendored", "live", "none")

# Field name -> accepted python types (bool is excluded from int explicitly below).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,), "model": (str,), "program": (str,), "mode": (str,), "tokens": (int,),
    "past": (int,), "steps": (int,), "weights": (str,), "golden": (str,), "backend": (str,),
    "device": (str,), "repeat": (int,), "seed": (int,), "timeout": (int, float),
    "memory": (int, str), "memory_limit": (int, str), "cpus": (int,), "expect": (str,),
    "label": (str,), "id": (str,), "prompt": (str,),
}
_TOP_LEVEL = ("name", "timeout", "defaults", "matrix")
# what a wait case may set: it runs nothing, so model, program and the pass's options mean nothing
_WAIT_FIELDS = ("kind", "timeout", "memory", "memory_limit", "cpus", "expect", "label", "id")
_ID_CHARS = re.compile(r"[^A-Za-z0-9._=+@-]+")
MAX_CASES = 10_000
MAX_ID_CHARS = 120
_ID_HASH_CHARS = 12


@dataclass(frozen=True)
class Case:
    """One forward (or generate) of the sweep, fully resolved.

    ``memory`` / ``memory_limit`` are bytes (None: estimate / no limit); ``timeout`` is seconds
    (None: the sweep's default, then ``--timeout``).
    """

    id: str
    model: str
    kind: str = "forward"
    program: str = EMIT
    mode: str | None = None
    tokens: int | None = None
    past: int = 0
    steps: int = 4
    prompt: str | None = None  # real text as the pass's tokens (the forward's / generate's --prompt)
    weights: str = "hub"
    golden: str = "auto"
    backend: str = "numpy"
    device: str = "auto"
    repeat: int = 1
    seed: int = 0
    timeout: float | None = None
    memory: int | None = None
    memory_limit: int | None = None
    cpus: int = 1
    expect: str = "pass"
    label: str | None = None
    origin: str = ""  # where the case came from: "spec.toml [[matrix]] 3"

    def options(self) -> dict[str, Any]:
        """The fields that change what the case computes or how it is judged (part of its key).

        Paths are left out: keys.py identifies model, program, weights and golden by content, so
        a key does not change when the same files sit elsewhere (another clone, another node)."""
        skip = {"id", "origin", "label", "expect", "memory", "model", "program", "weights", "golden"}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: Path
    cases: tuple[Case, ...] = field(default_factory=tuple)

    def select(self, pattern: str | None) -> tuple[Case, ...]:
        """Cases whose id matches ``pattern``: a glob (``*``, ``?``, ``[``) or else a substring."""
        if not pattern:
            return self.cases
        import fnmatch

        if any(ch in pattern for ch in "*?["):
            return tuple(c for c in self.cases if fnmatch.fnmatchcase(c.id, pattern))
        return tuple(c for c in self.cases if pattern in c.id)


def load_spec(path: Path) -> SweepSpec:
    """Parse and expand a sweep spec; every problem is one UserError naming file and entry."""
    path = Path(path)
    data = read_spec(path)
    unknown = sorted(set(data) - set(_TOP_LEVEL))
    if unknown:
        raise UserError(f"{path}: unknown top-level key {show(unknown[0])} "
                        f"(expected {', '.join(_TOP_LEVEL)})")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name:
        raise UserError(f"{path}: name: expected a non-empty string, got {show(name)}")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UserError(f"{path}: [defaults] must be a table")
    if "timeout" in data:
        defaults = {"timeout": data["timeout"], **defaults}
    entries = data.get("matrix")
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{path}: no [[matrix]] entries (a spec needs at least one)")
    base = path.resolve().parent
    # every entry's axes are checked and the cases counted before any case is built
    planned: list[tuple[str, list[tuple[str, list[Any]]]]] = []
    total = 0
    for index, entry in enumerate(entries, start=1):
        where = f"{path} [[matrix]] {index}"
        if not isinstance(entry, dict):
            raise UserError(f"{where}: expected a table")
        axes = _axes({**defaults, **entry}, where)
        total += math.prod(len(values) for _, values in axes)
        if total > MAX_CASES:
            raise UserError(f"{where}: the spec expands to more than {MAX_CASES} cases "
                            f"({total} up to this entry); split it or use fewer axis values")
        planned.append((where, axes))
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for where, axes in planned:
        for case in _expand(axes, where, base):
            if case.id in seen:
                raise UserError(f"{where}: case id {case.id!r} repeats one of {seen[case.id]} "
                                "(give one of them a distinct 'label')")
            seen[case.id] = where
            cases.append(case)
    return SweepSpec(name=name, path=path.resolve(), cases=tuple(cases))


def _axes(entry: dict[str, Any], where: str) -> list[tuple[str, list[Any]]]:
    """The entry's fields as (name, values) axes, every value type-checked; nothing built yet."""
    for key in entry:
        if key not in _FIELD_TYPES:
            raise UserError(f"{where}: unknown field {show(key)} "
                            f"(known: {', '.join(_FIELD_TYPES)})")
    if "model" not in entry and entry.get("kind") != WAIT:
        raise UserError(f"{where}: field 'model' is missing")
    axes = [(k, v if isinstance(v, list) else [v]) for k, v in entry.items()]
    for key, values in axes:
        if not values:
            raise UserError(f"{where}: {key} = []: an axis needs at least one value")
        for value in values:
            _check_type(key, value, where)
    if "id" in entry and any(len(v) > 1 for _, v in axes):
        raise UserError(f"{where}: 'id' names one case; an entry with list-valued axes uses 'label'")
    return axes


def _expand(axes: list[tuple[str, list[Any]]], where: str, base: Path) -> list[Case]:
    names = [k for k, _ in axes]
    return [_case(dict(zip(names, combo)), where, base)
            for combo in itertools.product(*(values for _, values in axes))]


def _check_type(key: str, value: Any, where: str) -> None:
    types = _FIELD_TYPES[key]
    if isinstance(value, bool) or not isinstance(value, types):
        wanted = " or ".join("a number" if t is float else f"a{'n' if t is int else ''} {t.__name__}"
                             for t in types)
        raise UserError(f"{where}: {key} = {show(value)}: expected {wanted}")


def _case(values: dict[str, Any], where: str, base: Path) -> Case:
    kind = values.get("kind", "forward")
    if kind not in KINDS:
        raise UserError(f"{where}: kind = {show(kind)}: expected {', '.join(KINDS)}")
    expect = values.get("expect", "pass")
    if expect not in VERDICTS:
        raise UserError(f"{where}: expect = {show(expect)}: expected one of {', '.join(VERDICTS)}")
    mode = values.get("mode")
    if mode is not None and mode not in ("decode", "prefill"):
        raise UserError(f"{where}: mode = {show(mode)}: expected decode or prefill")
    for key, low in (("tokens", 1), ("past", 0), ("steps", 0), ("repeat", 1), ("cpus", 1)):
        if key in values and values[key] < low:
            raise UserError(f"{where}: {key} = {values[key]}: expected an integer >= {low}")
    if "timeout" in values:
        check_timeout(values["timeout"], f"{where}: timeout =")
    if kind == WAIT:
        for key in values:
            if key not in _WAIT_FIELDS:
                raise UserError(f"{where}: {key}: not an option of kind = \"wait\" "
                                f"(it takes {', '.join(_WAIT_FIELDS)})")
        resolved = {k: v for k, v in values.items() if k != "id"}
        return _with_id(Case(id="", model="", program="", origin=where, **_sized(resolved, where)),
                        values.get("id"))
    if kind == "generate":
        for key in ("program", "mode", "past", "repeat"):
            if key in values:
                raise UserError(f"{where}: {key}: not an option of kind = \"generate\"")
    program = values.get("program", EMIT)
    if program != EMIT:
        program = str(_resolve(program, base, always=True))
        if not Path(program).is_dir():
            raise UserError(f"{where}: program = {show(values['program'])}: no such directory "
                            f"({show(program)})")
        if values.get("past", 0):
            raise UserError(f"{where}: past: only for emitted programs (a program dir carries its own past)")
    resolved = dict(values)
    resolved["program"] = program
    if "model" in resolved:
        resolved["model"] = _resolve(resolved["model"], base, always=False)
    # weights and golden are a keyword or else a path
    if resolved.get("weights", "hub") not in WEIGHTS_KEYWORDS:
        resolved["weights"] = _resolve(resolved["weights"], base, always=True)
    if resolved.get("golden", "auto") not in GOLDEN_KEYWORDS:
        resolved["golden"] = _resolve(resolved["golden"], base, always=True)
    explicit = resolved.pop("id", None)
    return _with_id(Case(id="", origin=where, **_sized(resolved, where)), explicit)


def _sized(values: dict[str, Any], where: str) -> dict[str, Any]:
    """Sizes in bytes and the timeout as a float."""
    out = dict(values)
    for key in ("memory", "memory_limit"):
        if key in out:
            out[key] = parse_size(out[key], f"{where}: {key}")
    if "timeout" in out:
        out["timeout"] = float(out["timeout"])
    return out


def _with_id(case: Case, explicit: str | None) -> Case:
    return replace(case, id=safe_id(explicit) if explicit else case_id_of(case))


def check_timeout(value: Any, what: str) -> float:
    """A timeout is a finite, positive number of seconds (nan, inf, 0 and negatives refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise UserError(f"{what} {show(value)}: expected a finite, positive number of seconds")
    return float(value)


def safe_id(text: str) -> str:
    """``text`` as a case id that is a safe file name (see the module docstring)."""
    cleaned = _ID_CHARS.sub("_", text)
    if cleaned.startswith((".", "-")):
        cleaned = "_" + cleaned
    if len(cleaned) <= MAX_ID_CHARS:
        return cleaned
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_ID_HASH_CHARS]
    return cleaned[: MAX_ID_CHARS - _ID_HASH_CHARS - 1] + "-" + digest


def _resolve(value: str, base: Path, *, always: bool) -> str:
    if always or value.startswith(("./", "../", "/", "~")):
        return str((base / Path(value).expanduser()).resolve())
    return value


def _short(value: str) -> str:
    """A readable token for a model / program / weights value: a path's or repo's last part."""
    if value.startswith("/"):
        return Path(value).name
    return value.split("@")[0].rstrip("/").split("/")[-1]


def _prompt_short(prompt: str) -> str:
    """``p-`` + the prompt's first words (at most 20 characters) + 6 hex digits of its hash."""
    import hashlib

    words = "_".join(prompt.split())[:20]
    return f"p-{words}-{hashlib.sha256(prompt.encode()).hexdigest()[:6]}"


def _golden_short(golden: str) -> str:
    """A golden file's name without ``.f16.gz``; a plain ``golden.f16.gz``: its directory's name."""
    if not golden.startswith("/"):
        return golden
    path = Path(golden)
    stem = path.name.removesuffix(".gz").removesuffix(".f16")
    return path.parent.name if stem == "golden" else stem


def case_id_of(case: Case) -> str:
    """``model.program-or-shape.weights.golden[.backend@device][.repeatN][.label]``, e.g.
    ``tiny-mha.tiny-mha-decode.w-hub.g-vendored`` (a wait case: ``wait[.label]``); made only of
    the case's own values."""
    if case.kind == WAIT:
        return safe_id(".".join([WAIT] + ([case.label] if case.label else [])))
    # a prompt sets the pass's tokens (and a forward's mode): only explicit shape fields show then
    prompted = case.prompt is not None
    if case.kind == "generate":
        tokens = "" if prompted and case.tokens is None else f"-t{case.tokens or 8}"
        shape = f"generate{tokens}-s{case.steps}"
    elif case.program == EMIT:
        mode = case.mode or ("" if prompted else "decode")
        shape = "emit" + (f"-{mode}" if mode else "") + (f"-m{case.tokens}" if case.tokens else "")
        shape += f"-p{case.past}" if case.past else ""
    else:
        shape = _short(case.program)
    if case.prompt is not None:
        shape += "-" + _prompt_short(case.prompt)
    parts = [_short(case.model), shape, "w-" + _short(case.weights)]
    if case.weights == "synthetic" and case.seed:
        parts[-1] += f"{case.seed}"
    parts.append("g-" + _golden_short(case.golden))
    if case.backend != "numpy" or case.device != "auto":
        parts.append(case.backend + ("" if case.device == "auto" else "@" + case.device))
    if case.repeat != 1:
        parts.append(f"repeat{case.repeat}")
    if case.label:
        parts.append(case.label)
    return safe_id(".".join(parts))
