"""Static LX accounting: how many scratchpad bytes one core holds at the worst point of a function.

Tensor shapes are static, so the accounting runs once per function at compile time
(``compile.compile_function``); a run only reports the result. Two models:

``"allocator"`` (the default) counts LX the way a buffer allocator would place tensors:

* A tensor occupies one buffer from the op that defines it to its last use. A use inside a nested
  region (a loop body, an ``scf.if`` branch) counts as a use by the op that owns the region, so a
  value defined before a loop and read inside it stays live until the loop ends (every trip reads
  it). Inside a loop body, a value needed by a later trip is carried by ``scf.yield`` into the
  next trip's iter_arg: the yielded buffer *is* that iter_arg's buffer (no copy), live until the
  iter_arg's last use in the next trip.
* While an op runs, its operands are still held; a result gets a new buffer, except that an
  elementwise op (``arith.*`` / ``math.*``) may write its result into the buffer of a same-sized
  operand that dies at that op, and a ``linalg`` op writes its result into its ``outs`` buffer
  when that dies at the op (destination passing, as MLIR's bufferization does). Each dying buffer
  serves at most one result.
* ``scf.for`` hands an init value that dies at the loop to the first trip's iter_arg (the same
  buffer); an init still used after the loop is copied (a second buffer).
* Reshapes (``tensor.expand_shape`` / ``collapse_shape``) alias their operand's buffer: it lives
  while either name is live.
* Free: ``arith.constant`` (data of the program, folded into the op that consumes it: a zero
  ``outs`` is the fill of the result's own buffer, a scalar operand is an immediate),
  ``tensor.empty`` (no data; its first writer allocates), ``inter_tile_produce`` (a handle) and
  every non-tensor value. A ``tensor.splat`` of a scalar (or any other op that writes a tensor) is
  materialised as a full tensor in LX, from the splat to its last use: Spyre's vector units read
  both operands of an ``arith.addf`` from LX, and the program asked for the tensor by an op.

``"strict"`` is the earlier, conservative accounting, kept as an opt-in check: results are
counted before the operands dying at the op are released (no in-place results), loop-carried
block arguments are charged on entry and held to the end of the body (so an accumulator is
momentarily counted twice) and an init passed to a loop is counted besides its iter_arg.

Either way the function's high-water mark is one number (every core runs the same ops), and the
first op (in program order) where the live bytes exceed the capacity gets a fault planted in
front of it: the overflow is reported, naming the executing core, only if that op runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.nodes import Block, Function, Op, TensorType, Value

MODELS = ("allocator", "strict")

# results that occupy no LX of their own (see the module docstring)
FREE_RESULTS = frozenset({"arith.constant", "tensor.empty", "ktdp.inter_tile_produce"})
ALIASES = frozenset({"tensor.expand_shape", "tensor.collapse_shape"})


@dataclass
class LXAccount:
    """The outcome: ``peak`` bytes (one core) and ``faults`` (id(op) -> message; at most one)."""

    peak: int
    faults: dict = field(default_factory=dict)


def account(fn: Function, capacity: int, model: str = "allocator") -> LXAccount:
    """Peak LX bytes of one core running ``fn`` and the first overflowing op (``model``: see the
    module docstring)."""
    if model == "strict":
        faults: dict = {}
        peak = _strict_peak(fn.body.block, 0, capacity, faults, {})
        return LXAccount(peak, faults)
    alloc = _Allocator(capacity)
    alloc.block(fn.body.block, {})
    return LXAccount(alloc.peak, alloc.faults)


_NBYTES: dict[TensorType, int] = {}  # bytes of each tensor type (types repeat a lot)


def _tensor_bytes(t: TensorType) -> int:
    n = _NBYTES.get(t)
    if n is None:
        n = _NBYTES[t] = t.nbytes or 0  # a dynamic shape counts 0 (unknown until run time)
    return n


def _charge(op: Op, v: Value) -> int:
    if op.name in FREE_RESULTS or type(v.type) is not TensorType:
        return 0
    return _tensor_bytes(v.type)


def _last_uses(block: Block) -> dict[int, int]:
    """id(value) -> index of the last op of ``block`` that uses it (nested uses count at the op
    owning the region)."""
    last_use: dict[int, int] = {}

    def note_uses(op: Op, k: int) -> None:
        for v in op.operands:
            last_use[id(v)] = k
        for r in op.regions:
            for b in r.blocks:
                for inner in b.ops:
                    note_uses(inner, k)

    for k, op in enumerate(block.ops):
        note_uses(op, k)
    return last_use


# ---------------------------------------------------------------------------------------------
# the allocator model

class _Buffer:
    """One LX allocation; ``holders`` are the live values that name it (ids), ``names`` all the
    values that ever did (for messages)."""

    __slots__ = ("nbytes", "holders", "names")

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.holders: set[int] = set()
        self.names: list[str] = []


def _in_place_candidates(op: Op) -> list[Value]:
    """Operands whose buffer ``op``'s result may take when they die at ``op``."""
    if op.name.startswith("linalg."):
        return list(op.groups.get("outs", ()))
    if op.name.startswith(("arith.", "math.")):
        return list(op.operands)
    return []


class _Allocator:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.buffer_of: dict[int, _Buffer] = {}  # id(value) -> its buffer, while live
        self.live: dict[int, _Buffer] = {}  # id(buffer) -> buffer, in allocation order
        self.bytes = 0
        self.peak = 0
        self.faults: dict = {}

    # -- buffers ------------------------------------------------------------------------------
    def hold(self, v: Value, buf: _Buffer) -> None:
        key = id(buf)
        if key not in self.live:
            self.live[key] = buf
            self.bytes += buf.nbytes
        vid = id(v)
        buf.holders.add(vid)
        buf.names.append(v.name)
        self.buffer_of[vid] = buf

    def new(self, v: Value, nbytes: int) -> None:
        self.hold(v, _Buffer(nbytes))

    def release(self, v: Value) -> None:
        buf = self.buffer_of.pop(id(v), None)
        if buf is None:
            return
        buf.holders.discard(id(v))
        if not buf.holders:
            del self.live[id(buf)]
            self.bytes -= buf.nbytes

    def dies_alone(self, v: Value, k: int, last_use: dict, owned: set) -> _Buffer | None:
        """``v``'s buffer when ``v`` is released at op ``k`` of this block and no other live
        value names it (the buffer is free for a result of op ``k``), else None."""
        buf = self.buffer_of.get(id(v))
        if buf is None or id(v) not in owned or last_use.get(id(v)) != k or buf.holders != {id(v)}:
            return None
        return buf

    def check(self, op: Op) -> None:
        self.peak = max(self.peak, self.bytes)
        if self.bytes > self.capacity and not self.faults:
            self.faults[id(op)] = self.overflow_message(op)

    def overflow_message(self, op: Op) -> str:
        bufs = sorted(self.live.values(), key=lambda b: -b.nbytes)
        shown = ", ".join(f"{'='.join(dict.fromkeys(b.names))} ({b.nbytes} B)" for b in bufs[:12])
        more = f", and {len(bufs) - 12} more" if len(bufs) > 12 else ""
        return (f"LX scratchpad overflow at {op.name}: {self.bytes} bytes live while it runs, "
                f"capacity {self.capacity} bytes; live values: {shown}{more}")

    # -- blocks -------------------------------------------------------------------------------
    def block(self, block: Block, forwarded: dict[int, _Buffer]) -> None:
        """Walk ``block`` once; ``forwarded``: id(block arg) -> the buffer it takes over (an
        scf.for init dying at the loop). Every value defined here is released by the end."""
        last_use = _last_uses(block)
        owned = {id(a) for a in block.args}
        dying: dict[int, list[Value]] = {}  # op index -> tensors defined here that die there
        active: list[tuple[int, Op]] = []  # ops that may allocate (tensor results or regions)
        for a in block.args:
            if id(a) in last_use and type(a.type) is TensorType:
                dying.setdefault(last_use[id(a)], []).append(a)
        for k, op in enumerate(block.ops):
            allocates = bool(op.regions)
            for v in op.results:
                if type(v.type) is TensorType:  # only tensors hold buffers
                    allocates = True
                    owned.add(id(v))
                    dying.setdefault(last_use.get(id(v), k), []).append(v)
            if allocates:
                active.append((k, op))
        for a in block.args:
            if type(a.type) is not TensorType or not _tensor_bytes(a.type):
                continue
            buf = forwarded.get(id(a))
            if buf is not None:
                self.hold(a, buf)
            else:
                self.new(a, _tensor_bytes(a.type))
        if block.ops:
            self.check(block.ops[0])
        for a in block.args:
            if id(a) not in last_use:
                self.release(a)
        # walk the ops that allocate; releases between them happen at their own index, in order
        release = self.release
        done = -1
        for k, op in active:
            for j in range(done + 1, k):
                for v in dying.get(j, ()):
                    release(v)
            self.op(op, k, last_use, owned)
            for v in dying.get(k, ()):
                release(v)
            done = k
        for j in range(done + 1, len(block.ops)):
            for v in dying.get(j, ()):
                release(v)

    def op(self, op: Op, k: int, last_use: dict, owned: set) -> None:
        """Results of ``op`` take their buffers and the live bytes are checked; the values dying
        at ``op`` are released by the caller afterwards."""
        for region in op.regions:
            for b in region.blocks:
                self.block(b, self.forwarded(op, b, k, last_use, owned))
        taken: set[int] = set()
        candidates = None
        for v in op.results:
            if not isinstance(v.type, TensorType):
                continue
            if op.name in ALIASES:  # the operand's buffer under a second name (none: free)
                buf = self.buffer_of.get(id(op.operands[0])) if op.operands else None
                if buf is not None:
                    self.hold(v, buf)
                continue
            nbytes = _charge(op, v)
            if not nbytes:
                continue
            if candidates is None:
                candidates = _in_place_candidates(op)
            for cand in candidates:
                buf = self.dies_alone(cand, k, last_use, owned)
                if buf is not None and buf.nbytes == nbytes and id(buf) not in taken:
                    taken.add(id(buf))
                    self.hold(v, buf)
                    break
            else:
                self.new(v, nbytes)
        self.check(op)

    def forwarded(self, op: Op, b: Block, k: int, last_use: dict, owned: set) -> dict:
        """For an scf.for body: iter_args that take over the buffer of an init dying at the
        loop (the init's name is released here: the iter_arg names the buffer from now on)."""
        if op.name != "scf.for":
            return {}
        out: dict[int, _Buffer] = {}
        inits = op.groups.get("inits", [])
        for init, arg in zip(inits, b.args[1:]):
            buf = self.dies_alone(init, k, last_use, owned)
            if buf is not None and inits.count(init) == 1 and isinstance(arg.type, TensorType) \
                    and arg.type.nbytes == buf.nbytes:
                out[id(arg)] = buf
                buf.holders.discard(id(init))  # the buffer stays allocated for the iter_arg
                del self.buffer_of[id(init)]
        return out


# ---------------------------------------------------------------------------------------------
# the strict model (the earlier accounting, unchanged)

_STRICT_FREE = FREE_RESULTS | ALIASES


def _strict_charge(op: Op, v: Value) -> int:
    if op.name in _STRICT_FREE or not isinstance(v.type, TensorType):
        return 0
    return v.type.nbytes or 0


def _strict_peak(block: Block, live_in: int, cap: int, faults: dict, fault_ops: dict) -> int:
    """Peak LX bytes while running ``block`` with ``live_in`` bytes live from outside.

    Values are charged when defined and released after their last use in this block (a use inside
    a nested region counts as a use by the op that owns the region); block arguments are charged
    on entry (so a loop-carried accumulator is momentarily counted twice, as on the hardware).
    """
    last_use = _last_uses(block)
    live = live_in + sum(a.type.nbytes or 0 for a in block.args if isinstance(a.type, TensorType))
    peak = live
    sizes: dict[int, int] = {}
    dying: dict[int, list[int]] = {}
    for k, op in enumerate(block.ops):
        inner = 0
        if op.regions:
            inner = max(_strict_peak(b, live, cap, faults, fault_ops) - live
                        for r in op.regions for b in r.blocks)
        added = 0
        for v in op.results:
            c = _strict_charge(op, v)
            if c:
                sizes[id(v)] = c
                dying.setdefault(last_use.get(id(v), k), []).append(id(v))
                added += c
        during = live + max(inner, added)
        if during > cap and id(op) not in faults and not fault_ops:
            faults[id(op)] = (f"LX scratchpad overflow: {during} bytes live after this op, "
                              f"capacity {cap} bytes")
            fault_ops[id(op)] = op
        live += added
        peak = max(peak, during)
        for vid in dying.pop(k, ()):
            live -= sizes[vid]
    return peak
