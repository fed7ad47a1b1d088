"""Converted weights mapped from a file of the run's own: BF16 and F32 checkpoints get what F16
ones get from :meth:`Checkpoint.map_f16`.

A runner that maps its weights (``runner.maps_weights``: an 8B model on 24 GiB) lets the page
cache hold them, so that the native kernel's row-major copies can take the memory. An F16 tensor
is mapped from the checkpoint itself; any other is converted to f16 in memory as before, then
written to an unnamed file in the cache folder and mapped from it read-only. The file has no
name (``O_TMPFILE`` where the system offers it, else unlinked at once): it goes when the process
does, a killed run leaves nothing behind, and the checkpoint's own files are never written.

Invariants: a spilled array holds exactly the bytes it was given (the same values, read-only);
each starts at a page boundary of the file; :meth:`F16Spill.room` says whether the disk holds
the bytes asked for (with :data:`MARGIN` left over) before anything is written.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ...errors import UserError

MARGIN = 1 << 30  # disk bytes left free after a spill
SPILL_FOLDER = "spill"  # below the cache root


class F16Spill:
    """An unnamed file under ``folder`` that f16 arrays are written to and mapped back from."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._file = None
        self.bytes = 0  # bytes spilled so far

    @staticmethod
    def room(folder: Path, nbytes: int) -> bool:
        """Whether ``folder``'s file system has ``nbytes`` free beyond :data:`MARGIN`."""
        try:
            return shutil.disk_usage(folder).free >= nbytes + MARGIN
        except OSError:
            return False

    def put(self, array: np.ndarray) -> np.ndarray:
        """``array`` (f16) written to the file and mapped back read-only: the same bytes."""
        array = np.ascontiguousarray(array)
        if array.dtype != np.float16:
            raise ValueError(f"F16Spill.put: a float16 array, got {array.dtype}")
        if array.size == 0:
            return array
        if self._file is None:
            self._file = tempfile.TemporaryFile(dir=self.folder)  # no name: gone with the process
        start = self._file.seek(0, os.SEEK_END)
        start += -start % mmap.ALLOCATIONGRANULARITY
        try:
            self._file.seek(start)
            self._file.write(memoryview(array.reshape(-1).view(np.uint8)))
            self._file.flush()
            mapped = mmap.mmap(self._file.fileno(), array.nbytes, access=mmap.ACCESS_READ, offset=start)
        except OSError as exc:
            raise UserError(f"{self.folder}: cannot write converted weights there "
                            f"({exc.strerror or exc}); set KTIR_MODELS_ROW_MAJOR_MIB=0 to keep "
                            f"them in memory") from None
        self.bytes += array.nbytes
        return np.frombuffer(mapped, dtype=np.float16).reshape(array.shape)

    def close(self) -> None:
        """Drop this object's handle on the file (mapped arrays keep their pages readable)."""
        if self._file is not None:
            self._file.close()
            self._file = None
