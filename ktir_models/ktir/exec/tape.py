"""A plan's run specialised to its arguments: address arithmetic replayed as recorded values.

Most of a node's steps compute addresses, not data: index arithmetic on the address arguments
and the core id, memory views, access tiles, loop induction variables. Given the same argument
values (and the same HBM regions) they produce the same values on every pass. A *tape* is the
list of the remaining (data) steps of one run, in the order they ran, with the address values
they read stored in between as plain slot assignments, and loops whose bounds are addresses
unrolled. Replaying the tape writes every slot a data step reads with exactly the value it held
in the recorded run, and runs the same data steps in the same order, so it computes the same bytes
as running the plan; it only skips the work whose result is known.

Which values are *static* (:func:`static_values`): the function's scalar arguments, and the
results of effect-free ops (arith, math, affine, index, views, access tiles, the core id) whose
operands are all static; a loop's induction variable when its bounds are static. Anything read from
memory, every tensor, every loop-carried value and every result of a region op is *dynamic*.
A data step may additionally be *specialised* (``step.specialize(env)``, see
dialects/ktdp/transfer.py): given the static values now in ``env`` it returns a cheaper step valid
for them (e.g. a load whose box, checks and HBM view are resolved once), or None.

A tape is valid for one tuple of argument values and one HBM generation (regions allocated or
freed); :class:`Plan` records one when a run repeats the previous run's key and replays it while
the key holds. A fault raised while recording propagates as in a plain run (nothing is kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.nodes import Function, ScalarType, TensorType

# effect-free ops whose results are fixed by their operands (besides the arith/math/affine/index
# dialects): a view or access tile is a description of addresses, the core id is the context's
_STATIC_KTDP = ("ktdp.construct_memory_view", "ktdp.construct_distributed_memory_view",
                "ktdp.construct_access_tile", "ktdp.get_compute_tile_id")
_PURE_DIALECTS = ("arith.", "math.", "affine.", "index.")

MAX_ENTRIES = 60_000  # a longer tape (a huge unrolled loop) is not kept


def _pure(op) -> bool:
    if op.regions:
        return False
    if op.name in _STATIC_KTDP:
        return True
    return op.name.startswith(_PURE_DIALECTS) and \
        not any(isinstance(r.type, TensorType) for r in op.results)


def static_values(fn: Function, ops=None) -> set[int]:
    """ids of the values fixed by the argument values and the core id (module docstring);
    ``ops``: the top-level ops analysed (default: the function body)."""
    static = {id(a) for a in fn.args if isinstance(a.type, ScalarType)}

    def walk(ops_) -> None:
        for op in ops_:
            if op.name == "scf.for" and op.regions:
                body = op.regions[0].block
                if all(id(v) in static for v in op.groups["bounds"]):
                    static.add(id(body.args[0]))
                walk(body.ops)
            elif op.regions:
                for r in op.regions:
                    for b in r.blocks:
                        walk(b.ops)
            elif _pure(op) and all(id(v) in static for v in op.operands):
                static.update(id(r) for r in op.results)

    walk(fn.body.block.ops if ops is None else ops)
    return static


@dataclass
class StaticInfo:
    """Per op id: the slots of a static op's results (``ops``); the scf.for ops whose bounds are
    static (``loops``); the data ops a specialised step may stand for (``special``: every
    operand that is not a tensor, its nested ops' included, is static, so what the
    specialisation fixes is fixed)."""

    ops: dict = field(default_factory=dict)
    loops: set = field(default_factory=set)
    special: set = field(default_factory=set)


def static_info(fn: Function, slot_of: dict, ops=None) -> StaticInfo:
    """:class:`StaticInfo` of ``fn`` compiled with the value -> slot map ``slot_of``."""
    static = static_values(fn, ops)
    info = StaticInfo()

    def addresses_static(op) -> bool:
        """Every non-tensor operand of ``op`` and of the ops nested in it is static."""
        if not all(id(v) in static for v in op.operands if not isinstance(v.type, TensorType)):
            return False
        return all(addresses_static(inner) for r in op.regions for b in r.blocks
                   for inner in b.ops)

    def walk(ops_) -> None:
        for op in ops_:
            if op.name == "scf.for" and op.regions:
                if all(id(v) in static for v in op.groups["bounds"]):
                    info.loops.add(id(op))
            if op.regions:
                if addresses_static(op):  # e.g. a K-loop run as one kernel call
                    info.special.add(id(op))
                for r in op.regions:
                    for b in r.blocks:
                        walk(b.ops)
            elif op.results and all(id(r) in static for r in op.results) and \
                    all(id(r) in slot_of for r in op.results):
                info.ops[id(op)] = tuple(slot_of[id(r)] for r in op.results)
            elif addresses_static(op):
                info.special.add(id(op))

    walk(fn.body.block.ops if ops is None else ops)
    return info


@dataclass
class LoopShape:
    """What a tape needs to unroll an ``scf.for`` step: the induction variable's slot and values
    (``trips(env)``), the body's steps, the carried values' slots, and ``carry(env, dst, src)``
    which moves loop-carried values as the step does (reads every source before writing)."""

    iv: int
    body: list
    carried: list
    inits: list
    yields: list
    results: list
    carry: object
    trips: object  # env -> the induction variable's values, or raises: run the step instead
    # env -> (the values every core's trips take, a step running the later trips of the cores
    # that have more), or raises; for loops whose trip counts differ by core (stacked loops
    # carrying nothing), tried when ``trips`` raises
    split: object = None


class Tape:
    """The recorded data steps of one run (``entries``), valid for ``key``."""

    __slots__ = ("key", "entries")

    def __init__(self, key, entries: list):
        self.key = key
        self.entries = entries


def _setter(pairs: tuple):
    def step(env):
        for s, v in pairs:
            env[s] = v
    step.pairs = pairs
    return step


def fold_assignments(entries: list, env: list) -> tuple[list, list]:
    """``entries`` replayed from ``env`` as (entries', env'): every slot that the tape's
    assignments write once (a static value outside unrolled loops) holds its value in env' from
    the start and is no longer assigned. The same bytes: such a slot holds an SSA value that no
    step reads before its definition, and no other entry writes it (data steps and loop moves
    write dynamic slots only); a slot assigned more than once (an unrolled loop's induction
    variable, a static value in its body) keeps its assignments."""
    count: dict = {}
    for e in entries:
        for s, _ in getattr(e, "pairs", ()):
            count[s] = count.get(s, 0) + 1
    env = list(env)
    out = []
    for e in entries:
        pairs = getattr(e, "pairs", None)
        if pairs is None:
            out.append(e)
            continue
        kept = []
        for s, v in pairs:
            if count[s] == 1:
                env[s] = v
            else:
                kept.append((s, v))
        if kept:
            out.append(_setter(tuple(kept)))
    return out, env


def _mover(loop: LoopShape, dst: list, src: list):
    carry = loop.carry

    def step(env):
        carry(env, dst, src)
    return step


class Recorder:
    """Runs steps as a plan would while building the tape: static steps run and their results
    are kept as assignments, loops with static bounds are unrolled, data steps are appended (in
    their specialised form when they have one). ``run_one(step, env)`` runs a single step the
    way the plan's runner does (plain plans: with fault location)."""

    def __init__(self, info: StaticInfo, run_one):
        self.info = info
        self.run_one = run_one
        self.entries: list = []
        self.pending: dict = {}
        self.full = False

    def _emit(self, step) -> None:
        if self.pending:
            self.entries.append(_setter(tuple(self.pending.items())))
            self.pending = {}
        self.entries.append(step)
        if len(self.entries) > MAX_ENTRIES:
            self.full = True
            self.entries = []

    def run(self, steps, env) -> None:
        info = self.info
        for step in steps:
            op = getattr(step, "op", None)
            if self.full or op is None:
                self._data(step, env)
                continue
            slots = info.ops.get(id(op))
            if slots is not None:
                self.run_one(step, env)
                for s in slots:
                    self.pending[s] = env[s]
                continue
            loop = getattr(step, "loop", None)
            if loop is not None and id(op) in info.loops and self._unroll(loop, env):
                continue
            self._data(step, env)

    def _data(self, step, env) -> None:
        special = getattr(step, "specialize", None)
        if special is not None and not self.full and id(step.op) in self.info.special:
            try:
                fast = special(env)
            except Exception:  # noqa: BLE001 - conditions unmet: the step as it is
                fast = None
            if fast is not None:
                fast.op = step.op
                step = fast
        if not self.full:
            self._emit(step)
        self.run_one(step, env)

    def _unroll(self, loop: LoopShape, env) -> bool:
        rest = None
        try:
            ivs = loop.trips(env)
        except Exception:  # noqa: BLE001 - the step itself decides (and reports faults)
            if loop.split is None:
                return False
            try:
                ivs, rest = loop.split(env)
            except Exception:  # noqa: BLE001 - as above
                return False
        src = loop.inits
        for i in ivs:
            if loop.carried:  # moved before the iv is set, as the loop steps do
                mover = _mover(loop, loop.carried, src)
                self._emit(mover)
                mover(env)
            env[loop.iv] = i
            self.pending[loop.iv] = i
            self.run(loop.body, env)
            src = loop.yields
        if rest is not None:  # the later trips of some cores: one data step
            self._data(rest, env)
        if loop.results:
            mover = _mover(loop, loop.results, src)
            self._emit(mover)
            mover(env)
        return True

    def tape(self, key) -> Tape | None:
        if self.full:
            return None
        if self.pending:
            self.entries.append(_setter(tuple(self.pending.items())))
            self.pending = {}
        return Tape(key, self.entries)
