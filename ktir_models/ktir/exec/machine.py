"""The emulated hardware: shared HBM, per-core LX scratchpads, the grid of cores.

HBM is one virtual *byte* address space holding independent regions (one per allocation), each
starting on a 128-byte stick boundary. A region keeps its bytes in a numpy array (adopted without a
copy when the caller's array is C-contiguous, so multi-GB weights are never duplicated) plus, for
regions allocated without data, a per-byte "written" mask: reading a never-written byte is an
:class:`EmulationFault`. Every write bumps the region's ``version`` (used to invalidate cached f32
copies of read-only tiles).

Address units: a kernel's ``index`` address ``a`` for a view of element type T denotes byte
``a * sizeof(T)`` by default (``address_unit="element"``, the reference convention). ``"byte"``
(or ``1``) and ``"stick"`` (or ``128``) count bytes and 128-byte sticks instead; any positive int is
a fixed number of bytes per unit.
"""

from __future__ import annotations

import bisect

import numpy as np

from ...errors import UserError
from ..backends.capabilities import caps_of
from ..backends.f16_convert import f16_all_finite  # noqa: F401  (re-exported: model/ reads it here)
from ..backends.f16_convert import nonfinite_probe, nonfinite_scan
from .compile import compile_function
from .row_major import budget_from_environment, default_budget
from ..ir.errors import FaultSignal
from .execute import RunStats  # noqa: F401  (re-exported: a plan's run report)

STICK_BYTES = 128
DEFAULT_LX_BYTES = 2 * 1024 * 1024
MAX_CORES = 32


class Region:
    """A contiguous byte range of HBM. Invariant: ``start % 128 == 0``; ``data`` is 1-D uint8."""

    __slots__ = ("start", "nbytes", "end", "name", "data", "mask", "version", "_typed", "writable",
                 "dev", "dev_typed")

    def __init__(self, start: int, data: np.ndarray, name: str, initialised: bool):
        self.start = start
        self.data = data
        self.nbytes = int(data.shape[0])
        self.end = start + self.nbytes
        self.name = name
        self.mask = None if initialised else np.zeros(self.nbytes, dtype=np.bool_)
        self.version = 0
        self._typed: dict = {}
        self.writable = bool(data.flags.writeable)
        self.dev = None  # the back end's mirror of ``data`` (torch back end; see backends/)
        self.dev_typed: dict = {}

    def typed(self, dtype: np.dtype) -> np.ndarray:
        """The region's bytes as a flat array of ``dtype`` (trailing partial element dropped)."""
        arr = self._typed.get(dtype)
        if arr is None:
            n = self.nbytes - self.nbytes % dtype.itemsize
            arr = self.data[:n].view(dtype)
            self._typed[dtype] = arr
        return arr

    def mark_initialised(self) -> None:
        self.mask = None

    def __repr__(self) -> str:
        return f"Region({self.name!r}, bytes {self.start}..{self.end})"


class Buffer:
    """A typed, shaped handle on one HBM region (what :class:`HBM` allocations return)."""

    def __init__(self, hbm: "HBM", region: Region, shape: tuple, dtype: np.dtype):
        self._hbm = hbm
        self.region = region
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        self._flat16 = None  # the f16 elements (host memory), for all_finite after every node

    @property
    def name(self) -> str:
        return self.region.name

    @property
    def byte_address(self) -> int:
        return self.region.start

    @property
    def address(self) -> int:
        """The value to pass as the kernel's ``index`` argument (in the machine's address unit,
        element units of this buffer's dtype by default)."""
        unit = self._hbm.machine.unit_bytes(self.dtype)
        return self.region.start // unit

    @property
    def array(self) -> np.ndarray:
        """A numpy view of the buffer; writes are visible to kernels.

        Handing out a writable view gives up initialisation tracking for this buffer: it counts as
        fully written from now on.
        """
        self._hbm.machine.backend.release(self.region)
        self.region.mark_initialised()
        self.region.version += 1
        n = self.size
        return self.region.typed(self.dtype)[:n].reshape(self.shape)

    def read(self) -> np.ndarray:
        """A copy of the buffer's contents (does not change initialisation tracking)."""
        self._hbm.machine.backend.pull(self.region)
        n = self.size
        return self.region.typed(self.dtype)[:n].reshape(self.shape).copy()

    def all_finite(self) -> bool:
        """True when no element is NaN/Inf. Checked where the bytes live (on a device back end,
        on the device: only the answer crosses to the host)."""
        if self.dtype.kind != "f" and self.dtype.name != "bfloat16":
            return True
        n = self.size
        if self.region.dev is None:
            if self.dtype == np.float16:
                if self._flat16 is None:
                    self._flat16 = self.region.typed(self.dtype)[:n]
                return f16_all_finite(self._flat16)
            return bool(np.isfinite(self.region.typed(self.dtype)[:n]).all())
        backend = self._hbm.machine.backend
        return bool(backend.isfinite(backend.typed(self.region, self.dtype)[:n]).all())

    def host_f16(self) -> np.ndarray | None:
        """The buffer's elements as a flat host float16 array over its region (a view; a region's
        bytes never move), or None for a device buffer or another dtype."""
        if self.region.dev is not None or self.dtype != np.float16:
            return None
        if self._flat16 is None:
            self._flat16 = self.region.typed(self.dtype)[:self.size]
        return self._flat16

    def finite_test(self):
        """A callable of no arguments that answers :meth:`all_finite` at each call, cheaper where
        it is called often (a forward asks after every node): a host f16 buffer's native test
        with its pointer resolved once (a region's bytes never move)."""
        if self.region.dev is None and self.dtype == np.float16:
            if self._flat16 is None:
                self._flat16 = self.region.typed(self.dtype)[:self.size]
            probe = nonfinite_probe(self._flat16)
            if probe is not None:
                return lambda: not probe()
        return self.all_finite

    def write(self, array) -> None:
        """Copy ``array`` (same element count) into the buffer and mark it initialised."""
        if not self.region.writable:
            raise UserError(f"buffer {self.name} is read-only (a weight): its bytes never change")
        src = np.asarray(array, dtype=self.dtype)
        n = self.size
        if src.size != n:
            raise UserError(f"buffer {self.name}: expected {n} elements {self.shape}, "
                            f"got {src.size} {src.shape}")
        region = self.region
        region.mark_initialised()
        region.version += 1
        region.typed(self.dtype)[:n] = src.reshape(-1)
        self._hbm.machine.backend.push(region)  # a device mirror gets the new bytes

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.shape}, {self.dtype}, byte {self.byte_address})"


def buffers_nonfinite_scan(buffers: list):
    """A callable of no arguments giving the index of the first of ``buffers`` that now holds an
    inf or NaN, or -1, in one native pass over all of them; None unless every one is a host
    float16 buffer and the native library is built."""
    flats = [b.host_f16() for b in buffers]
    if any(f is None for f in flats):
        return None
    return nonfinite_scan(flats)


class HBM:
    """Shared off-chip memory: sorted, non-overlapping regions in a virtual byte space.

    ``lenient`` (``Machine(hbm="lenient")``): the reference interpreter's memory model, for
    harnesses that place data at fixed addresses. :meth:`write_bytes` may cover any bytes
    (existing regions are patched in place, the bytes between them get new zero-filled
    regions), and a kernel's store to bytes no region covers maps zero-filled regions there
    (:meth:`map_uncovered`) instead of faulting. Reads of unmapped bytes fault in both modes.
    Regions stay disjoint either way; every region the lenient mode makes spans whole sticks."""

    def __init__(self, machine: "Machine", lenient: bool = False):
        self.machine = machine
        self.lenient = bool(lenient)
        self.regions: list[Region] = []
        self._starts: list[int] = []
        self._next = 0
        self.generation = 0  # bumped by every allocation and free (cached views check it)

    def _place(self, nbytes: int, byte_address: int | None, name: str) -> int:
        if byte_address is None:
            start = self._next
        else:
            start = int(byte_address)
            if start < 0 or start % STICK_BYTES:
                raise UserError(f"HBM buffer {name}: byte address {start} is not a multiple of "
                                f"{STICK_BYTES} (regions start on stick boundaries)")
        end = start + max(nbytes, 1)
        k = bisect.bisect_right(self._starts, start)
        if k > 0 and self.regions[k - 1].end > start or (
                k < len(self.regions) and self.regions[k].start < end):
            other = self.regions[k - 1] if k > 0 and self.regions[k - 1].end > start \
                else self.regions[k]
            raise UserError(f"HBM buffer {name}: bytes {start}..{end} overlap {other.name} "
                            f"(bytes {other.start}..{other.end})")
        self._next = max(self._next, -(-end // STICK_BYTES) * STICK_BYTES)
        return start

    def _insert(self, region: Region) -> None:
        self.generation += 1
        k = bisect.bisect_right(self._starts, region.start)
        self.regions.insert(k, region)
        self._starts.insert(k, region.start)

    def allocate(self, shape, dtype="float16", name: str = "buffer",
                 byte_address: int | None = None) -> Buffer:
        """A new uninitialised buffer (reading it before a kernel writes it is a fault)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        padded = -(-max(nbytes, 1) // STICK_BYTES) * STICK_BYTES
        start = self._place(padded, byte_address, name)
        region = Region(start, np.zeros(padded, dtype=np.uint8), name, initialised=False)
        region.mask[nbytes:] = True  # stick padding counts as written (it is never the data)
        self._insert(region)
        return Buffer(self, region, shape, dtype)

    def allocate_from(self, array, name: str = "buffer", byte_address: int | None = None,
                      copy: bool = False, read_only: bool = False) -> Buffer:
        """A buffer initialised with ``array``. A C-contiguous array is adopted without a copy
        (the buffer shares its memory; a read-only array makes a read-only region) unless
        ``copy`` is True. ``read_only``: the region is read-only whatever ``array`` is (a
        model's weights): a kernel's store into it faults, so its bytes never change, which
        lets the native kernel read copies of its boxes (row_major.py)."""
        arr = np.asarray(array)
        if copy or not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr).copy()
        if read_only and arr.flags.writeable:
            arr = arr.view()
            arr.flags.writeable = False
        flat = arr.reshape(-1).view(np.uint8)
        start = self._place(flat.shape[0], byte_address, name)
        region = Region(start, flat, name, initialised=True)
        self._insert(region)
        return Buffer(self, region, arr.shape, arr.dtype)

    def find(self, byte_address: int) -> Region | None:
        k = bisect.bisect_right(self._starts, byte_address) - 1
        if k >= 0:
            r = self.regions[k]
            if byte_address < r.end:
                return r
        return None

    def free(self, buf: Buffer) -> None:
        k = self.regions.index(buf.region)
        del self.regions[k]
        del self._starts[k]
        self.generation += 1

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The sub-ranges of bytes ``start..end`` that no region covers, widened to whole sticks
        but never into a region."""
        out = []
        pos = start
        k = max(0, bisect.bisect_right(self._starts, start) - 1)
        while pos < end:
            r = self.regions[k] if k < len(self.regions) else None
            if r is not None and r.end <= pos:
                k += 1
                continue
            if r is not None and r.start <= pos:
                pos = r.end
                k += 1
                continue
            stop = min(end, r.start) if r is not None else end
            prev_end = self.regions[k - 1].end if k > 0 else 0
            lo = max(pos // STICK_BYTES * STICK_BYTES, prev_end)
            hi = -(-stop // STICK_BYTES) * STICK_BYTES
            if r is not None:
                hi = min(hi, r.start)
            out.append((lo, hi))
            pos = stop
        return out

    def map_uncovered(self, start: int, end: int) -> None:
        """Lenient mode: back every uncovered byte of ``start..end`` with a zero-filled region."""
        if not self.lenient:
            raise UserError("only a lenient HBM (Machine(hbm='lenient')) maps memory on store")
        for lo, hi in self.gaps(start, end):
            if lo % STICK_BYTES:  # regions start on sticks: the one before ends mid-stick
                raise UserError(f"HBM bytes {lo}..{hi} cannot be mapped: the region before "
                                "them ends inside a stick")
            self._insert(Region(lo, np.zeros(hi - lo, np.uint8), f"mapped@{lo}", True))
            self._next = max(self._next, hi)

    def map_stores(self, byte_addresses: np.ndarray, itemsize: int) -> None:
        """Lenient mode: back the sticks a scatter of ``itemsize``-byte elements at
        ``byte_addresses`` touches (runs of consecutive sticks, so a sparse scatter maps only
        what it writes)."""
        addrs = np.asarray(byte_addresses, dtype=np.int64)
        sticks = np.unique(np.concatenate([addrs, addrs + itemsize - 1]) // STICK_BYTES)
        breaks = np.flatnonzero(np.diff(sticks) != 1)
        starts = np.r_[sticks[:1], sticks[breaks + 1]]
        ends = np.r_[sticks[breaks], sticks[-1:]] + 1
        for lo, hi in zip(starts.tolist(), ends.tolist()):
            self.map_uncovered(lo * STICK_BYTES, hi * STICK_BYTES)

    def write_bytes(self, byte_address: int, raw: np.ndarray) -> None:
        """Lenient mode: copy ``raw`` (uint8) to ``byte_address``, mapping uncovered bytes."""
        start = int(byte_address)
        end = start + int(raw.shape[0])
        if start < 0:
            raise UserError(f"HBM byte address {start} is negative")
        self.map_uncovered(start, end)
        for r in self.covering(start, end):
            lo, hi = max(start, r.start), min(end, r.end)
            self.machine.backend.release(r)
            r.data[lo - r.start:hi - r.start] = raw[lo - start:hi - start]
            if r.mask is not None:
                r.mask[lo - r.start:hi - r.start] = True
            r.version += 1
            self.machine.backend.push(r)

    def read_bytes(self, byte_address: int, nbytes: int) -> np.ndarray:
        """A copy of ``nbytes`` bytes at ``byte_address``; any byte no region covers (or, in a
        region allocated without data, never written) is a :class:`UserError`."""
        start, end = int(byte_address), int(byte_address) + int(nbytes)
        if self.gaps(start, end):
            lo, _ = self.gaps(start, end)[0]
            raise UserError(f"read of HBM bytes {start}..{end}: byte {max(lo, start)} is in no "
                            "region")
        out = np.empty(end - start, np.uint8)
        for r in self.covering(start, end):
            lo, hi = max(start, r.start), min(end, r.end)
            self.machine.backend.pull(r)
            out[lo - start:hi - start] = r.data[lo - r.start:hi - r.start]
        return out

    def covering(self, start: int, end: int) -> list[Region]:
        """The regions that hold some byte of ``start..end``, in address order."""
        k = max(0, bisect.bisect_right(self._starts, start) - 1)
        out = []
        while k < len(self.regions) and self.regions[k].start < end:
            if self.regions[k].end > start:
                out.append(self.regions[k])
            k += 1
        return out

    def clear(self) -> None:
        """Drop every region (allocation restarts at byte 0)."""
        self.regions.clear()
        self._starts.clear()
        self._next = 0
        self.generation += 1


class LXMemory:
    """One core's LX scratchpad: ``capacity`` bytes addressed from 0 (``data`` is the uint8 array)."""

    def __init__(self, core: int, capacity: int):
        self.core = core
        self.data = np.zeros(capacity, dtype=np.uint8)
        self.dev = None  # the back end's mirror of ``data`` (torch back end)
        self.dev_typed: dict = {}
        self.writable = True

    def typed(self, dtype: np.dtype) -> np.ndarray:
        """The scratchpad as a flat array of ``dtype``."""
        n = self.capacity - self.capacity % dtype.itemsize
        return self.data[:n].view(dtype)

    @property
    def capacity(self) -> int:
        return int(self.data.shape[0])

    def _range(self, byte_offset: int, nbytes: int) -> slice:
        if byte_offset < 0 or byte_offset + nbytes > self.capacity:
            raise UserError(f"LX of core {self.core}: bytes {byte_offset}..{byte_offset + nbytes}"
                            f" are outside its {self.capacity} bytes")
        return slice(byte_offset, byte_offset + nbytes)

    def write(self, byte_offset: int, array) -> None:
        """Copy ``array``'s bytes (row-major) into LX at ``byte_offset``."""
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        self.data[self._range(int(byte_offset), raw.shape[0])] = raw

    def read(self, byte_offset: int, shape, dtype) -> np.ndarray:
        """A copy of LX bytes at ``byte_offset`` viewed as ``dtype`` with ``shape``."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return self.data[self._range(int(byte_offset), n)].view(dtype).reshape(shape).copy()


def _native_matmul(wanted: bool | None, backend) -> bool:
    native_f16 = caps_of(backend).native_f16
    if wanted is False or not native_f16:
        if wanted and not native_f16:
            raise UserError("native_matmul needs the numpy back end (native f16 kernels)")
        return False
    from ..backends import seqmm

    if seqmm.available():
        return True
    if wanted:
        raise UserError(f"the native matmul kernel is unavailable: {seqmm.unavailable_reason()}")
    return False


class Machine:
    """HBM + one LX per core. ``compile(fn)`` gives a reusable :class:`~.plan.Plan`.

    ``backend`` is where tensors live and compute (:mod:`.backends`): a back-end object, or a name
    (``"numpy"``, the default, or ``"torch"``) combined with ``device``.

    ``native_matmul`` (numpy back end only): f16 x f16 matmuls run on the compiled kernel of
    :mod:`.backends.seqmm`, which reads f16 directly and sums in one fixed order (per element,
    sequentially over k) whatever the shapes or batching; ``None`` uses it when it could be built,
    ``False`` keeps f32 BLAS (whose summation order is OpenBLAS's), ``True`` requires it.

    ``tapes``: a plan run repeatedly with the same arguments records its data steps once and then
    replays them without recomputing addresses (:mod:`.tape`; same bytes); ``False`` turns it off.

    ``hbm``: ``"strict"`` (default: every byte a kernel touches must lie in an allocated
    region) or ``"lenient"`` (the reference interpreter's model, for harnesses that place data at
    fixed addresses: see :class:`HBM`).

    ``row_major_bytes``: at most this many bytes of N-contiguous copies of read-only weight boxes
    that the native kernel would read transposed (:mod:`.row_major`; the same bits, read faster);
    None: a sixth of the host's memory, at most 4 GiB, or ``KTIR_MODELS_ROW_MAJOR_MIB`` (a
    model runner raises this default to its weights' bytes where it maps them from their files:
    ``row_major.room_for_mapped``); 0: none.

    ``lx_model``: how LX bytes are counted (:mod:`.lx_liveness`): ``"allocator"`` (default; values
    live from definition to last use, elementwise results in place of dying operands) or
    ``"strict"`` (the earlier conservative count, an opt-in check).
    """

    def __init__(self, lx_capacity: int = DEFAULT_LX_BYTES, num_cores: int = MAX_CORES,
                 address_unit: str | int = "element", f32_cache_bytes: int = 6 << 30,
                 backend="numpy", device: str = "auto", grid_batching: bool = True,
                 native_matmul: bool | None = None, tapes: bool = True,
                 lx_model: str = "allocator", hbm: str = "strict",
                 row_major_bytes: int | None = None):
        from ..verify.lx_liveness import MODELS

        if hbm not in ("strict", "lenient"):
            raise UserError(f"hbm must be 'strict' or 'lenient', got {hbm!r}")

        if lx_model not in MODELS:
            raise UserError(f"lx_model must be one of {', '.join(MODELS)}, got {lx_model!r}")
        self.lx_model = lx_model
        # points of access tiles that fell outside their view's coordinate set so far (loads
        # padded them, stores skipped them: dialects/ktdp/access.py); the checking mode warns
        # when it grows
        self.masked_points = 0
        if isinstance(backend, str):
            from ..backends import make_backend

            backend = make_backend(backend, device)
        self.backend = backend
        self.native_matmul = _native_matmul(native_matmul, backend)
        self._native_asked = native_matmul
        # run multi-core grids in lock step, batching steps that support it across cores
        # (execute.run_lockstep); False runs core after core (the plain plan)
        self.grid_batching = bool(grid_batching)
        # a plan run again with the same arguments replays its recorded data steps (tape.py);
        # False always runs the steps
        self.tapes = bool(tapes)
        if num_cores < 1 or num_cores > MAX_CORES:
            raise UserError(f"num_cores must be 1..{MAX_CORES}, got {num_cores}")
        if isinstance(address_unit, str):
            if address_unit not in ("element", "byte", "stick"):
                raise UserError(f"address_unit must be 'element', 'byte', 'stick' or a positive "
                                f"int, got {address_unit!r}")
            self._unit = {"byte": 1, "stick": STICK_BYTES, "element": 0}[address_unit]
        else:
            if int(address_unit) <= 0:
                raise UserError(f"address_unit must be positive, got {address_unit}")
            self._unit = int(address_unit)
        self.address_unit = address_unit
        self.lx_capacity = int(lx_capacity)
        self.num_cores = int(num_cores)
        self.hbm = HBM(self, lenient=hbm == "lenient")
        self._lx: dict[int, LXMemory] = {}
        self._plans: dict[int, object] = {}
        # f32 copies of read-only HBM tiles that feed matmuls: key -> (version, array). The
        # default bound (6 GiB) holds every matmul weight of a llama-3.2-1b program (f32 = 2x the
        # f16 bytes): past the bound, tiles are widened again on every pass and core.
        self.f32_cache: dict = {}
        self.f32_cache_bytes = int(f32_cache_bytes)
        self.f32_cache_used = 0
        # N-contiguous copies of read-only weight boxes the native kernel reads (row_major.py):
        # key -> (region, array), at most row_major_bytes (None: row_major.default_budget())
        self.row_major_cache: dict = {}
        self.row_major_bytes = default_budget() if row_major_bytes is None else int(row_major_bytes)
        self.row_major_fixed = row_major_bytes is not None or budget_from_environment()
        self.row_major_used = 0
        self.row_major_views: dict = {}  # id(load view) -> (view, its BlockedWeight)

    def matmul_order(self) -> str:
        """How this machine sums f16 x f16 matmuls (reports name it: it decides the last bits)."""
        if self.native_matmul:
            return "native f16 kernel (f32 sums, sequential over k)"
        blas = f"{self.backend.describe()} BLAS on f32 copies (the library's summation order)"
        if not caps_of(self.backend).native_f16 or self._native_asked is False:
            return blas
        from ..backends import seqmm

        return f"{blas}; native kernel unavailable: {seqmm.unavailable_reason()}"

    def unit_bytes(self, dtype: np.dtype) -> int:
        return self._unit or np.dtype(dtype).itemsize

    def lx(self, core: int) -> LXMemory:
        """Core ``core``'s LX scratchpad (allocated on first use)."""
        mem = self._lx.get(core)
        if mem is None:
            if not 0 <= core < self.num_cores:
                raise FaultSignal(f"LX of core {core} does not exist ({self.num_cores} cores)")
            mem = LXMemory(core, self.lx_capacity)
            self._lx[core] = mem
        return mem

    def reset_memory(self) -> None:
        """Empty HBM and zero every LX (compiled plans are kept: they hold no data)."""
        self.hbm.clear()
        self.f32_cache.clear()
        self.f32_cache_used = 0
        for mem in self._lx.values():
            self.backend.release(mem)
            mem.data.fill(0)

    def compile(self, fn):
        """Compile ``fn`` once into a plan (cached per Function object)."""
        plan = self._plans.get(id(fn))
        if plan is None or plan.fn is not fn:
            plan = compile_function(self, fn)
            self._plans[id(fn)] = plan
        return plan
