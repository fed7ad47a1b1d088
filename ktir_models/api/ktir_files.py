"""``check`` and ``run``: the emulator on single KTIR files (no manifest, no model layer: the
emulator's own API, ``ktir.load_module`` and ``Machine.compile``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import UserError
from .option_checks import scalar_value
from .runtime import build_backend, check_lx_model


@dataclass(frozen=True)
class FileCheck:
    """One file's verdict: its functions and op count, or its located errors (``errors``, one
    ``file:line:col: error: ...`` line per problem)."""

    path: str
    functions: tuple[str, ...] = ()
    ops: int = 0
    milliseconds: float = 0.0
    errors: str | None = None
    error_count: int = 0

    @property
    def passed(self) -> bool:
        return self.errors is None

    def line(self) -> str:
        if not self.passed:
            return f"{self.path}: FAILED ({self.error_count} error(s))"
        names = ", ".join("@" + n for n in self.functions)
        return (f"{self.path}: ok ({len(self.functions)} function(s): {names}; {self.ops} ops; "
                f"{self.milliseconds:.1f} ms)")


@dataclass
class CheckReport:
    """``ktir-models check``: one :class:`FileCheck` per file, in the order given. ``render()`` is
    the summary lines (stdout); each failed file's ``errors`` go to stderr."""

    files: list[FileCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.files)

    @property
    def mismatch(self) -> str | None:
        failed = sum(not f.passed for f in self.files)
        return None if not failed else f"{failed} of {len(self.files)} file(s) have errors"

    def to_dict(self) -> dict[str, Any]:
        return {"pass": self.passed, "files": [
            {"path": f.path, "pass": f.passed, "functions": list(f.functions), "ops": f.ops,
             "errors": f.errors} for f in self.files]}

    def render(self) -> str:
        return "\n".join(f.line() for f in self.files)


def check(files: Sequence[Path | str], *, reshaping_reduce: bool = False,
          legality: bool = False) -> CheckReport:
    """Parse and verify each KTIR file; a file with errors is a failed :class:`FileCheck` (its
    errors located), never an exception. ``reshaping_reduce``: accept ktdp.inter_tile_reduce
    results that reshape the partial (ktir-cpu's reading; the dialect rejects them).
    ``legality``: also apply the hardware lowering's legality rules (``ktir.check_legality``)."""
    from ..ktir import KtirError, check_legality, load_module

    report = CheckReport()
    for path in files:
        start = time.perf_counter()
        try:
            module = load_module(path, reshaping_reduce=reshaping_reduce)
            if legality:
                check_legality(module)
        except KtirError as exc:
            report.files.append(FileCheck(str(path), errors=str(exc),
                                          error_count=len(exc.diagnostics)))
            continue
        ops = sum(1 for fn in module.functions.values() for _ in fn.walk())
        report.files.append(FileCheck(str(path), tuple(module.functions), ops,
                                      (time.perf_counter() - start) * 1e3))
    return report


@dataclass
class RunReport:
    """``ktir-models run``: the run's statistics (``ktir.RunStats``), the back end it ran on and
    every buffer argument's contents after the run (``buffers``, by argument name)."""

    stats: Any
    backend: str
    buffers: dict[str, Any]
    out: str | None = None

    passed = True
    mismatch = None

    def to_dict(self) -> dict[str, Any]:
        return {"stats": str(self.stats), "backend": self.backend, "buffers": sorted(self.buffers),
                "out": self.out}

    def render(self) -> str:
        lines = [f"{self.stats} on {self.backend}"]
        if self.out is not None:
            lines.append(f"wrote {len(self.buffers)} buffer(s) to {self.out}")
        return "\n".join(lines)


def run(file: Path | str, *, fn: str | None = None,
        inputs: Path | str | Mapping[str, Any] | None = None, out: Path | str | None = None,
        force: bool = False, scalar: Sequence[str] | Mapping[str, Any] = (),
        lx_capacity: int = 2 * 1024 * 1024, address_unit: str = "element",
        backend: str = "numpy", device: str = "auto", lx_model: str = "allocator",
        reshaping_reduce: bool = False) -> RunReport:
    """Run one function of ``file`` (``fn``, default the only one): arrays (``inputs``: an .npz
    file or a mapping, argument name -> array) are placed in HBM and their arguments receive the
    buffers' addresses; scalars come from ``scalar`` (``NAME=VALUE`` strings or a mapping); every
    buffer is returned, and written to the .npz ``out`` when given."""
    import numpy as np

    from ..ktir import Machine, load_module

    file = Path(file)
    module = load_module(file, reshaping_reduce=reshaping_reduce)
    function = module.function(fn) if fn else module.only_function
    arrays = _input_arrays(inputs)
    out_path = Path(out) if out is not None else None
    if out_path is not None:
        from ..outputs import NPZ, check_output_target

        named = [file] + ([Path(inputs)] if isinstance(inputs, (str, Path)) else [])
        check_output_target(out_path, "--out", NPZ, force=force, inputs=named)
    scalars = _scalars(scalar)
    names = function.arg_names
    unknown = sorted(set(arrays) - set(names)) + sorted(set(scalars) - set(names))
    if unknown:
        raise UserError(f"{file}: @{function.name} has no argument(s) {', '.join(unknown)} "
                        f"(arguments: {', '.join(names)})")
    unit: str | int = address_unit
    if address_unit not in ("element", "byte", "stick"):
        if not address_unit.isdigit() or int(address_unit) <= 0:
            raise UserError(f"--address-unit {address_unit!r}: expected element, byte, stick or "
                            "a positive number of bytes")
        unit = int(address_unit)
    check_lx_model(lx_model)
    array_backend = build_backend(backend, device)
    machine = Machine(lx_capacity=lx_capacity, address_unit=unit, backend=array_backend,
                      lx_model=lx_model)
    args: dict[str, object] = {}
    buffers = {}
    for name, arg in zip(names, function.args):
        if name in arrays:
            buf = machine.hbm.allocate_from(np.array(arrays[name]), name=name)
            buffers[name] = buf
            args[name] = buf.address
        elif name in scalars:
            args[name] = scalar_value(name, str(scalars[name]), arg.type)
        else:
            raise UserError(f"{file}: argument %{name} of @{function.name} needs an array in "
                            "--inputs or a --scalar value")
    stats = machine.compile(function).run(args)
    contents = {n: b.read() for n, b in buffers.items()}
    if out_path is not None:
        from ..outputs import atomic_output

        with atomic_output(out_path, "--out") as f:  # a temporary sibling, removed on any error
            np.savez(f, **contents)
    return RunReport(stats, array_backend.describe(), contents,
                     None if out_path is None else str(out_path))


def _input_arrays(inputs: Path | str | Mapping[str, Any] | None) -> dict[str, Any]:
    """Argument name (without ``%``) -> array, from an .npz file (plain numeric arrays only,
    checked member by member: readers/npz_file.py) or a mapping."""
    if inputs is None:
        return {}
    if isinstance(inputs, Mapping):
        return {k.lstrip("%"): v for k, v in inputs.items()}
    from ..readers import InputFileError, read_npz

    try:
        return {k.lstrip("%"): v for k, v in read_npz(Path(inputs)).items()}
    except InputFileError as exc:
        raise UserError(f"--inputs {exc}") from None


def _scalars(items: Sequence[str] | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(items, Mapping):
        return {k.lstrip("%"): v for k, v in items.items()}
    out: dict[str, Any] = {}
    for item in items:
        key, eq, val = item.partition("=")
        if not eq or not key:
            raise UserError(f"--scalar {item!r}: expected NAME=VALUE")
        out[key.lstrip("%")] = val
    return out
