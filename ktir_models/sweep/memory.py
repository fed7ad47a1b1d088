"""Memory sizes in specs, each case's estimated peak memory, and what this machine has free.

The estimate only schedules (how many cases run side by side, Ray's ``memory`` resource); it
never kills. A case's ``memory_limit`` is the one thing that kills (worker.py's watchdog).
"""

from __future__ import annotations

import os
import re

from ..errors import UserError

MiB = 1 << 20
GiB = 1 << 30

#: Resident size of a case process before any weights: python, numpy, the emulator, its plans.
BASE_BYTES = 400 * MiB
#: Extra for a live golden or the torch back end: torch + transformers imported.
TORCH_BYTES = 700 * MiB

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])i?)?(b)?\s*$", re.IGNORECASE)
_UNITS = {"k": 1 << 10, "m": MiB, "g": GiB, "t": 1 << 40}


def parse_size(value: int | str, where: str) -> int:
    """Bytes of ``"512MiB"``, ``"2GiB"``, ``"1.5G"`` or an integer number of MiB."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise UserError(f"{where} = {value}: expected a positive size")
        return value * MiB
    match = _SIZE.match(str(value))
    if not match:
        raise UserError(f"{where} = {value!r}: expected a size such as \"512MiB\" or \"2GiB\"")
    number, unit, byte = match.groups()
    scale = _UNITS[unit.lower()] if unit else (1 if byte else MiB)  # a bare number is MiB
    size = int(float(number) * scale)
    if size <= 0:
        raise UserError(f"{where} = {value!r}: expected a positive size")
    return size


def estimate_bytes(num_parameters: int | None, *, torch: bool, mode: str | None, tokens: int | None) -> int:
    """Peak resident bytes of one case (a deliberate over-estimate).

    f16 weights are held twice (the checkpoint read and emulated HBM); a live golden adds the
    model in f32 (4 bytes per parameter) and torch itself. Activations are small next to that
    except for long prefills, covered by a per-token allowance.
    """
    params = num_parameters or 0
    total = BASE_BYTES + 2 * 2 * params
    if torch:
        total += TORCH_BYTES + 4 * params
    if mode == "prefill" or (tokens or 1) > 1:
        total += (tokens or 32) * 2 * MiB
    return total


def available_bytes() -> int:
    """Memory this machine can give new processes now (``MemAvailable``), else total RAM."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * GiB


def rss_bytes(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (Linux /proc; 0 where unreadable)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid ... rss is field 24 (1-based).
        rest = stat.rsplit(")", 1)[-1].split()
        if len(rest) < 22:
            continue
        child, parent = int(name), int(rest[1])
        children.setdefault(parent, []).append(child)
        rss[child] = int(rest[21]) * _PAGE
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += rss.get(current, 0)
        stack.extend(children.get(current, ()))
    return total


try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (ValueError, OSError, AttributeError):
    _PAGE = 4096
