"""N-contiguous copies of the weight boxes the native kernel reads transposed.

The native kernel (backends/seqmm.c) sums every output element in one fixed order whatever the
layout of its B operand, but it reads a B whose N is unit-stride ("nn") faster than one whose K is
("nt"): an nt operand is transposed in registers, 16 rows by 32 k's at a time, before the FMAs,
which bounds a decode GEMV at about three weights a cycle per core (docs/performance.md). A
transformer's weights are stored [out, in] and read by ``linalg.matmul_transpose_b``: all nt.

So where a tape's load step (tape.py) hands the kernel a fixed box of a *read-only* HBM region
(the model runner marshals its weights read-only: their bytes never change, and a store into them
faults), it may hand it :func:`n_contiguous`'s copy instead: the same values in the same shape,
whose memory holds each k's N values side by side. Every consumer computes the same bytes from it
(the kernel's order does not depend on the layout: tests/ktir/test_seqmm.py); only where they are
read from differs. Writable regions are never copied: their bytes may change between replays.

The copies are kept per machine (``Machine.row_major_bytes`` bounds them, first come first
served; 0 turns them off) and shared by every step that reads the same box.
"""

from __future__ import annotations

import numpy as np


def n_contiguous(machine, region, block: np.ndarray, n_axis: int):
    """``block`` (a read-only view of a box of HBM region ``region``), or a copy of it whose
    axis ``n_axis`` (-1 or -2: N of the matmul's B) is unit-stride with every other axis
    C-ordered. The copy only where it changes the kernel's layout (N is not unit-stride now and
    the last two axes both exceed one), the region is read-only, and it fits the machine's
    budget; it is cached per box and never written."""
    if region is None or region.writable or block.ndim < 2 or n_axis not in (-1, -2) or \
            min(block.shape[-2:]) < 2 or block.strides[n_axis] == block.itemsize or \
            machine.row_major_bytes <= 0:
        return block
    key = (id(region), block.__array_interface__["data"][0], block.shape, block.strides)
    cache = machine.row_major_cache
    hit = cache.get(key)
    if hit is not None and hit[0] is region:
        return hit[1]
    if machine.row_major_used + block.nbytes > machine.row_major_bytes:
        return block
    if n_axis == -1:
        copy = np.ascontiguousarray(block)
    else:
        copy = np.ascontiguousarray(block.swapaxes(-1, -2)).swapaxes(-1, -2)
    copy.flags.writeable = False
    cache[key] = (region, copy)
    machine.row_major_used += copy.nbytes
    return copy


def default_budget() -> int:
    """Bytes of copies a machine keeps by default: a sixth of the host's memory, at most 4 GiB
    (a 1B model's weights fit; an 8B model's first layers)."""
    try:
        import os

        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 30
    return int(min(4 << 30, total // 6))
