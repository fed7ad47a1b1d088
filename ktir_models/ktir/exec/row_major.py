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
served; 0 turns them off) and shared by every step that reads the same box; a stacked copy of a
grid's boxes serves each of those boxes as well, so a weight is held once.
"""

from __future__ import annotations

import os

import numpy as np

from ..backends.strided_copy import c_order


# An nn operand streams from memory in order only where the kernel reads its rows whole; a row
# wider than a work item's columns is read a chunk at a time, in strided runs. Measured on Zen 4,
# one GEMV row: a shared 2048 x 2048 weight nn 14.6 GB/s against 18.8 nt; 32 boxes of 256
# columns nn 18.8, the same bytes as 128 contiguous blocks of 64 columns 26.1 (nt 12.8).
NARROW = BLOCK = 64  # columns per block of a blocked copy (BlockedWeight); N-contiguous up to this
STRIP = 16  # other block widths are a multiple of this: the kernel's column strip (two AVX2
            # vectors); 40-column blocks (32 + an 8-column tail) streamed slower than nt reads


def block_width(n: int) -> int | None:
    """The columns per block of a blocked copy of a weight with ``n`` columns: BLOCK where it
    divides ``n``, else the widest multiple of STRIP up to 2 * BLOCK that does (granite-3.3-8b's
    gate/up boxes of 400 columns: 80; on Zen 3 its 4-layer decode 81.6 ms against 97.3 read nt,
    90.3 in blocks of 16), else None (no blocked copy)."""
    if n % BLOCK == 0:
        return BLOCK
    for width in range(2 * BLOCK, STRIP - 1, -STRIP):
        if n % width == 0:
            return width
    return None


MAX_VIEWS = 1 << 16  # load views registered with their blocked copies, per machine


def _copyable(machine, region, block: np.ndarray, n_axis: int) -> bool:
    return region is not None and not region.writable and block.ndim >= 2 and \
        n_axis in (-1, -2) and min(block.shape[-2:]) >= 2 and \
        block.strides[n_axis] != block.itemsize and machine.row_major_bytes > 0


def _keep(machine, key, region, copy: np.ndarray):
    """``copy`` cached under ``key``, or None over the budget or where keeping it would leave
    less than a third of the host's memory available. A model whose weights read into memory
    fill most of it gets no copies, or few; weights mapped from their files (the model runner's
    choice for such a model) are page cache, which counts as available and gives way to the
    copies."""
    if machine.row_major_used + copy.nbytes > machine.row_major_bytes:
        return None
    room = _available_bytes()
    if room is not None and room - copy.nbytes < _total_bytes() // 3:
        return None
    copy.flags.writeable = False
    machine.row_major_cache[key] = (region, copy)
    machine.row_major_used += copy.nbytes
    return copy


def _box_key(kind: str, region, data: int, shape: tuple, strides: tuple) -> tuple:
    """The cache key of one box's copy: the box's first byte and its last two axes."""
    return (kind, id(region), data, tuple(shape[-2:]), tuple(strides[-2:]))


def _copy_key(kind: str, region, block: np.ndarray, one_box: bool) -> tuple:
    """The cache key of ``block``'s copy: one box's (:func:`_box_key`, which a stacked copy's
    part also answers to) or a stacked [C, ...] view's own."""
    data = block.__array_interface__["data"][0]
    if one_box:
        return _box_key(kind, region, data, block.shape, block.strides)
    return (kind, id(region), data, block.shape, block.strides)


def _share_boxes(machine, kind: str, region, stacked: np.ndarray, parts) -> None:
    """After a copy of ``stacked`` ([C, ...] boxes at a constant stride) was kept: each box's
    own copy (made by a plan that ran core after core, usually the first pass) is dropped, and
    its key now finds ``parts[i]``, a view into the stacked copy. A weight is then held once,
    whichever plans read it (an 8B model's copies fill what memory the weights leave)."""
    cache = machine.row_major_cache
    base = stacked.__array_interface__["data"][0]
    for i, part in enumerate(parts):
        key = _box_key(kind, region, base + i * stacked.strides[0], stacked.shape, stacked.strides)
        old = cache.get(key)
        if old is not None and old[0] is region and old[1] is not None:
            machine.row_major_used -= old[1].nbytes
        cache[key] = (region, None, part)


def _box_hit(machine, key, region):
    """A cached copy of one box (``_keep``'s, or a part of a stacked copy), or None."""
    hit = machine.row_major_cache.get(key)
    if hit is None or hit[0] is not region:
        return None
    return hit[1] if len(hit) == 2 else hit[2]


def n_contiguous(machine, region, block: np.ndarray, n_axis: int, make: bool = True):
    """``block`` (a read-only view of a box of HBM region ``region``), or a copy of it whose
    axis ``n_axis`` (-1 or -2: N of the matmul's B) is unit-stride with every other axis
    C-ordered. The copy only where it changes the kernel's layout (N is not unit-stride now and
    the last two axes both exceed one), its rows are at most NARROW columns (wider ones are
    read a column chunk at a time: BlockedWeight), the region is read-only, and it fits the machine's budget; it is cached per box and never
    written."""
    if not _copyable(machine, region, block, n_axis) or block.shape[n_axis] > NARROW:
        return block
    if block.ndim > 2 and block.shape[0] == 1:  # [1, ...] and [...]: one box, one copy
        return n_contiguous(machine, region, block[0], n_axis, make)[None]
    key = _copy_key("nn", region, block, block.ndim == 2)
    hit = _box_hit(machine, key, region)
    if hit is not None:
        return hit
    if not make:
        return block
    if n_axis == -1:
        copy = c_order(block)
    else:
        copy = c_order(block.swapaxes(-1, -2)).swapaxes(-1, -2)
    kept = _keep(machine, key, region, copy)
    if kept is None:
        return block
    if block.ndim == 3:
        _share_boxes(machine, "nn", region, block, list(kept))
    return kept


class BlockedWeight:
    """A weight B read by the same rows A in every box of a call ([Cb, K, N], or [Cb, N, K] for
    transpose_b; Cb = 1 for a weight shared by every row), held as ``data`` [Cb*G, K, W] (W =
    :func:`block_width` of N, G = N / W): block (c, g) is box c's columns [g*W, (g+1)*W),
    k-major and contiguous, so the kernel
    streams each block in order. :meth:`bind` makes the call on one fixed A [1, M, K]: the
    Cb*G blocks as cores sharing A's rows (stride 0), the output's blocks put side by side
    again. Every output element is the kernel's sequential sum over k of the same products
    whatever the batching (backends/seqmm.py), so the bits are those of the call on B itself."""

    def __init__(self, data: np.ndarray, boxes: int, n: int):
        self.data = data
        self.boxes = boxes
        self.n = n
        self.groups = n // data.shape[-1]  # G: blocks per box

    @staticmethod
    def of(machine, region, B: np.ndarray, n_axis: int, make: bool = True):
        """B's blocked copy (cached per box), or None where B is not read-only boxes read as
        [Cb, ...], N has no :func:`block_width` or is unit-stride already, or the budget is
        spent."""
        if B.ndim != 3 or not _copyable(machine, region, B, n_axis):
            return None
        width = block_width(B.shape[n_axis])
        if width is None:
            return None
        kn = B if n_axis == -1 else B.swapaxes(1, 2)  # [Cb, K, N]
        boxes, K, N = kn.shape
        key = _copy_key("blocked", region, B, boxes == 1)
        hit = _box_hit(machine, key, region)
        if hit is not None:
            return BlockedWeight(hit, boxes, N)
        if not make:
            return None
        G = N // width
        copy = c_order(kn.reshape(boxes, K, G, width).transpose(0, 2, 1, 3))
        kept = _keep(machine, key, region, copy.reshape(boxes * G, K, width))
        if kept is None:
            return None
        if boxes > 1:
            _share_boxes(machine, "blocked", region, B, [kept[i * G:(i + 1) * G] for i in range(boxes)])
        return BlockedWeight(kept, boxes, N)

    def bind(self, A: np.ndarray, kernel):
        """A callable ``total -> out`` equal to ``kernel(A, B, total, False)`` for this
        weight's B read as [Cb, K, N] (``kernel(A, B, total, transpose_b)``: the K-loop's kernel
        call), A a [1, M, K] view read afresh on every call, total None or [1 or Cb, M, N];
        out [Cb, M, N]."""
        rows = _repeated(A, self.data.shape[0])
        return lambda total: self._run(rows, A.shape[1], total, kernel)

    def apply(self, A: np.ndarray, total, kernel) -> np.ndarray:
        """``kernel(A, B, total, False)`` for this weight's B read as [Cb, K, N], A [1 or Cb,
        M, K] (each box's rows repeated for its blocks: a copy where they differ by box)."""
        G = self.groups
        if A.shape[0] == 1 or A.strides[0] == 0:
            rows = _repeated(A[:1], self.boxes * G)
        else:
            rows = np.repeat(A, G, axis=0)
        return self._run(rows, A.shape[1], total, kernel)

    def _run(self, rows, M: int, total, kernel) -> np.ndarray:
        # the kernel puts each box's G blocks side by side itself and reads total where it lies
        # (its ``groups``): no transposed copies of the output or the accumulator
        acc = None if total is None else np.asarray(total)
        if acc is not None and acc.shape != (self.boxes, M, self.n):  # np.broadcast_to: ~7 us
            acc = np.broadcast_to(acc, (self.boxes, M, self.n))
        return kernel(rows, self.data, acc, False, groups=self.groups)


def fastest_form(machine, region, block: np.ndarray, n_axis: int, make: bool = True):
    """``(array, blocked)``: the form the kernel streams the weight box ``block`` fastest in
    (a read-only view of a box of ``region``, the B of native matmuls with N on ``n_axis``).
    Rows of at most NARROW columns: an N-contiguous copy (:func:`n_contiguous`) and None; wider
    ones: ``block`` itself and its BlockedWeight, or None where it gets no copy. ``make``
    False: copies made before are used, none is made."""
    nn = n_contiguous(machine, region, block, n_axis, make)
    if nn is not block:
        return nn, None
    return block, BlockedWeight.of(machine, region, block if block.ndim == 3 else block[None],
                                   n_axis, make)


def fast_weight(machine, region, block: np.ndarray, n_axis: int) -> np.ndarray:
    """For a load step that hands ``block`` (a read-only view of a box of ``region``, the B
    of native matmuls with N on ``n_axis``) to its users: :func:`fastest_form`'s array, with
    the blocked copy, where there is one, registered for the matmuls to find
    (:func:`blocked_view`)."""
    block, blocked = fastest_form(machine, region, block, n_axis)
    if blocked is not None:
        views = machine.row_major_views
        if len(views) >= MAX_VIEWS:  # tapes recorded again and again (regions changing): the
            views.clear()            # dropped views' matmuls read B itself, the same bits
        views[id(block)] = (block, blocked)
    return block


def blocked_view(machine, B):
    """The BlockedWeight registered for the array object ``B`` (:func:`fast_weight`), or None."""
    hit = machine.row_major_views.get(id(B))
    return hit[1] if hit is not None and hit[0] is B else None


def _repeated(A: np.ndarray, count: int) -> np.ndarray:
    """A [1, M, K] as a read-only [count, M, K] view (stride 0 over count)."""
    shape, strides = (count,) + A.shape[1:], (0,) + A.strides[1:]
    if A.flags.c_contiguous:  # the ndarray constructor: ~1 us against ~8 for as_strided
        out = np.ndarray(shape, A.dtype, A, 0, strides)
        out.flags.writeable = False
        return out
    return np.lib.stride_tricks.as_strided(A, shape=shape, strides=strides, writeable=False)


def host_memory_bytes() -> int:
    """The host's physical memory in bytes (6 GiB where the system does not say)."""
    return _total_bytes()


def _total_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 6 << 30


def _available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (Linux), else None (no check)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def budget_from_environment() -> bool:
    """Whether ``KTIR_MODELS_ROW_MAJOR_MIB`` sets the copies' budget."""
    return bool(os.environ.get("KTIR_MODELS_ROW_MAJOR_MIB", "").strip())


def room_for_mapped(machine, nbytes: int) -> None:
    """Raise the default budget of ``machine``'s copies to ``nbytes``: the bytes of weights
    mapped from their checkpoint files (a model runner's ``marshal``), which the page cache
    holds and may drop again, so that their copies take the memory the weights leave rather
    than come on top of it. A budget the caller or ``KTIR_MODELS_ROW_MAJOR_MIB`` set, or 0,
    stays; :func:`_keep`'s memory check applies either way."""
    if not machine.row_major_fixed and machine.row_major_bytes > 0:
        machine.row_major_bytes = max(machine.row_major_bytes, int(nbytes))


def default_budget() -> int:
    """Bytes of copies a machine keeps by default: ``KTIR_MODELS_ROW_MAJOR_MIB`` MiB where that
    is set (0: none), else a sixth of the host's memory, at most 4 GiB (a 1B model's weights
    fit; an 8B model's where the runner maps them: :func:`room_for_mapped`)."""
    from ...errors import UserError

    setting = os.environ.get("KTIR_MODELS_ROW_MAJOR_MIB", "").strip()
    if setting:
        try:
            mib = int(setting)
        except ValueError:
            mib = -1
        if mib < 0:
            raise UserError(f"KTIR_MODELS_ROW_MAJOR_MIB must be a whole number of MiB (0: no "
                            f"copies), got {setting!r}")
        return mib << 20
    return int(min(4 << 30, _total_bytes() // 6))
