"""Where a ``json`` report may go, checked before any work: writable, JSON (or ``force``), and
never a file of the program it reports on (an input of the run)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError


def check_program_json_target(json_path: Path | None, program: Path, force: bool = False) -> None:
    """``json_path`` must be writable, must not name a file of ``program``, and replaces a file
    that is not JSON only with ``force``."""
    from ..model.checks.report import check_json_target

    if json_path is None:
        return
    check_json_target(json_path, force=force)
    target = json_path.resolve()
    if Path(program).is_dir():
        for path in Path(program).iterdir():
            if path.resolve() == target:
                raise UserError(f"--json {json_path}: refusing to overwrite {path}, a file of the "
                                "program")
