"""The reference interpreter's memory objects (``interp.memory``), over one lenient
:class:`~ktir_models.ktir.Machine`.

* :class:`HBMSimulator` (``interp.memory.hbm``): addresses are HBM stick indices, or
  ``(stick, byte offset)`` pairs. ``allocate(nbytes)`` returns the stick of a new zeroed,
  stick-padded region; ``write(addr, data)`` copies an array's bytes there (the lenient HBM maps
  bytes no region covers); ``read(addr, n, dtype)`` returns a flat copy.
* :class:`LXScratchpad` (``interp.memory.get_lx(core)``): byte offsets into one core's LX.
* :class:`SpyreMemoryHierarchy`: ``hbm``, ``get_lx(core)``, ``num_cores``.

Invariant: these objects hold no data of their own; every byte lives in the machine.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..ktir.exec.machine import STICK_BYTES, Machine
from .dtypes import to_np_dtype

__all__ = ["STICK_BYTES", "HBMSimulator", "LXScratchpad", "SpyreMemoryHierarchy"]


def _bytes_of(data) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(data)).reshape(-1).view(np.uint8)


class HBMSimulator:
    """Stick-addressed access to the machine's (lenient) HBM."""

    STICK_BYTES = STICK_BYTES

    def __init__(self, machine: Machine):
        self._machine = machine

    @staticmethod
    def byte_address(addr) -> int:
        """A stick index, or a ``(stick, byte offset)`` pair, as a byte address."""
        if isinstance(addr, tuple):
            stick, intra = addr
            return int(stick) * STICK_BYTES + int(intra)
        return int(addr) * STICK_BYTES

    def allocate(self, size: int) -> int:
        """A new zero-filled region of ``size`` bytes (stick-padded); returns its stick."""
        buf = self._machine.hbm.allocate((max(int(size), 1),), "uint8", name="allocation")
        buf.write(np.zeros(buf.shape, np.uint8))
        return buf.byte_address // STICK_BYTES

    def write(self, addr, data) -> None:
        """Copy ``data``'s bytes (row-major) to ``addr``, mapping bytes no region covers."""
        try:
            self._machine.hbm.write_bytes(self.byte_address(addr), _bytes_of(data))
        except UserError as e:
            raise ValueError(str(e)) from e

    def read(self, addr, n_elements: int, dtype: str) -> np.ndarray:
        """``n_elements`` elements of KTIR type ``dtype`` at ``addr``, as a new flat array."""
        dt = to_np_dtype(dtype)
        try:
            raw = self._machine.hbm.read_bytes(self.byte_address(addr),
                                               int(n_elements) * dt.itemsize)
        except UserError as e:
            raise ValueError(str(e)) from e
        return raw.view(dt).copy()


class LXScratchpad:
    """One core's LX, by byte offset."""

    def __init__(self, machine: Machine, core_id: int):
        self._machine = machine
        self.core_id = core_id

    @property
    def capacity(self) -> int:
        return self._machine.lx_capacity

    def write(self, ptr: int, data) -> None:
        try:
            self._machine.lx(self.core_id).write(int(ptr), _bytes_of(data))
        except UserError as e:
            raise ValueError(str(e)) from e

    def read(self, ptr: int, n_elements: int, dtype: str) -> np.ndarray:
        dt = to_np_dtype(dtype)
        try:
            return self._machine.lx(self.core_id).read(int(ptr), (int(n_elements),), dt)
        except UserError as e:
            raise ValueError(str(e)) from e


class SpyreMemoryHierarchy:
    """HBM shared by ``num_cores`` cores, each with its LX."""

    def __init__(self, machine: Machine, num_cores: int):
        self.num_cores = num_cores
        self.hbm = HBMSimulator(machine)
        self.lx_scratchpads = [LXScratchpad(machine, c) for c in range(num_cores)]

    def get_lx(self, core_id: int) -> LXScratchpad:
        return self.lx_scratchpads[core_id]
