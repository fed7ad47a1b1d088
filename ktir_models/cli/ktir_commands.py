"""`ktir-models check` and `ktir-models run`: the emulator on single KTIR files.

Both take KTIR files, never a program directory: there is no manifest, so they call the ktir API
directly (``load_module``; ``Machine.compile`` on the one function ``run`` runs). Everything that
runs a manifest's nodes (forward's runner, generate's session, diagnose, latency) goes through the
loaded-program object of ``model/program.py`` instead.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from ..api.runtime import build_backend
from ..errors import UserError
from .app import app
from .backend_options import backend_option, device_option, lx_model_option


@app.command("check")
def check(files: List[Path] = typer.Argument(..., help="KTIR files (.mlir / .ktir) to check"),
          reshaping_reduce: bool = typer.Option(
              False, "--reshaping-reduce",
              help="Accept ktdp.inter_tile_reduce results that reshape the partial (ktir-cpu's "
                   "reading; the dialect rejects them).")):
    """Parse and verify KTIR files; print one summary line per file.

    Exit 0 when every file is clean, 2 when any has errors (printed as file:line:col: error: ...).
    """
    from ..ktir import KtirError, load_module

    failed = 0
    for path in files:
        t0 = time.perf_counter()
        try:
            module = load_module(path, reshaping_reduce=reshaping_reduce)
        except KtirError as exc:
            failed += 1
            print(str(exc), file=sys.stderr)
            print(f"{path}: FAILED ({len(exc.diagnostics)} error(s))")
            continue
        ops = sum(1 for fn in module.functions.values() for _ in fn.walk())
        ms = (time.perf_counter() - t0) * 1e3
        names = ", ".join("@" + n for n in module.functions)
        print(f"{path}: ok ({len(module.functions)} function(s): {names}; {ops} ops; {ms:.1f} ms)")
    if failed:
        raise UserError(f"{failed} of {len(files)} file(s) have errors")


def _parse_scalars(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, eq, val = item.partition("=")
        if not eq or not key:
            raise UserError(f"--scalar {item!r}: expected NAME=VALUE")
        out[key.lstrip("%")] = val
    return out


@app.command("run")
def run(
    file: Path = typer.Argument(..., help="KTIR file"),
    fn: Optional[str] = typer.Option(None, "--fn", help="function to run (default: the only one)"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help=".npz: argument name -> array"),
    out: Optional[Path] = typer.Option(None, "--out", help=".npz receiving every buffer argument"),
    force: bool = typer.Option(False, "--force", help="Let --out replace an existing file that is not an .npz."),
    scalar: List[str] = typer.Option([], "--scalar", help="scalar argument NAME=VALUE (repeat)"),
    lx_capacity: int = typer.Option(2 * 1024 * 1024, "--lx-capacity", help="LX bytes per core"),
    address_unit: str = typer.Option("element", "--address-unit",
                                     help="element | byte | stick"),
    backend: str = backend_option(),
    device: str = device_option(),
    lx_model: str = lx_model_option(),
    reshaping_reduce: bool = typer.Option(
        False, "--reshaping-reduce",
        help="Accept ktdp.inter_tile_reduce results that reshape the partial (ktir-cpu's "
             "reading; the dialect rejects them)."),
):
    """Run one function: arrays from --inputs are placed in HBM and their arguments receive the
    buffers' addresses; scalars come from --scalar; buffers are written to --out."""
    import numpy as np

    from ..ktir import Machine, load_module

    module = load_module(file, reshaping_reduce=reshaping_reduce)
    function = module.function(fn) if fn else module.only_function
    arrays: dict[str, np.ndarray] = {}
    if inputs is not None:
        from ..readers import InputFileError, read_npz

        try:  # plain numeric arrays only; checked member by member (readers/npz_file.py)
            arrays = {k.lstrip("%"): v for k, v in read_npz(inputs).items()}
        except InputFileError as exc:
            raise UserError(f"--inputs {exc}") from None
    if out is not None:
        from ..outputs import NPZ, check_output_target

        check_output_target(out, "--out", NPZ, force=force,
                            inputs=[file] + ([inputs] if inputs is not None else []))
    scalars = _parse_scalars(scalar)
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
            from ..api.option_checks import scalar_value

            args[name] = scalar_value(name, scalars[name], arg.type)
        else:
            raise UserError(f"{file}: argument %{name} of @{function.name} needs an array in "
                            "--inputs or a --scalar value")
    stats = machine.compile(function).run(args)
    print(f"{stats} on {array_backend.describe()}")
    if out is not None:
        from ..outputs import atomic_output

        with atomic_output(out, "--out") as f:  # a temporary sibling, removed on any error
            np.savez(f, **{n: b.read() for n, b in buffers.items()})
        print(f"wrote {len(buffers)} buffer(s) to {out}")
