"""An optional checking mode of the emulator: numeric faults and write conflicts.

Set ``machine.checks = NumericChecks(strict=...)`` *before* compiling; every compiled step is then
wrapped (:meth:`NumericChecks.wrap`) and each plan run is announced (:meth:`begin_run`). Checks:

* ``nonfinite``  -- an op produced NaN/Inf although every float operand was finite;
* ``overflow``   -- a narrowing cast (``arith.truncf``) turned a finite value into +-inf;
* ``underflow``  -- a narrowing cast turned a non-zero value into zero;
* ``write-conflict`` -- two cores stored to the same HBM element during one run of a function;
* ``masked``     -- a load or store met points of its access tile outside the view's coordinate
  set (loads padded them, stores skipped them: masked access, docs/emulator.md).

Each finding is a :class:`CheckWarning` naming function, op, location and core. With ``strict``
the first finding raises :class:`~ktir_models.ktir.ir.errors.EmulationFault` at once (exit code 2
through the CLI) instead of being collected. Without a checker the emulator runs unchanged: the
checks cost one wrapper call per step only when enabled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dialects.ktdp.access import element_offsets, points_inside, tile_points
from ..ir.errors import EmulationFault, Location
from ..ir.nodes import Op, ScalarType, TensorType
from ..ir.source_loc import described

F16_MIN_SUBNORMAL_HALF = 2.0 ** -25  # values below this round to zero in f16


@dataclass(frozen=True)
class CheckWarning:
    kind: str
    function: str
    op: str
    loc: Location
    core: int
    message: str

    def __str__(self) -> str:
        return (f"{self.loc}: {self.kind} in function @{self.function}, op {self.op}, "
                f"core {self.core}: {self.message}{described(self.loc.source)}")


def _is_float(t) -> bool:
    return isinstance(t, (TensorType, ScalarType)) and getattr(t, "elem", getattr(t, "name", "")) \
        in ("f16", "f32", "f64", "bf16")


class NumericChecks:
    """Collects :class:`CheckWarning` s (or raises on the first one when ``strict``)."""

    def __init__(self, strict: bool = False, limit: int = 1000):
        self.strict = strict
        self.limit = limit
        self.warnings: list[CheckWarning] = []
        self._owners: dict[int, np.ndarray] = {}  # id(region) -> core that stored each element
        self._seen: set[tuple] = set()

    # -- hooks called by the compiler / plan
    def begin_run(self, function: str) -> None:
        """A new run of a function starts: forget which core stored where."""
        self._owners.clear()

    def wrap(self, compiler, op: Op, step):
        """Return ``step`` wrapped with the checks that apply to ``op`` (or ``step`` itself)."""
        if op.name in ("ktdp.load", "ktdp.store"):
            step = self._watch_masking(compiler.machine, op, step)
        if op.name == "ktdp.store":
            tile_slot = compiler.slot(op.operands[1])

            def store_step(env, _step=step):
                _step(env)
                self._record_store(env, op, env[tile_slot])

            return store_step
        float_results = [compiler.slot(r) for r in op.results if _is_float(r.type)]
        if not float_results or op.name in ("arith.constant", "ktdp.load") \
                or op.name.startswith("scf.") or op.name.startswith("ktdp.inter_tile"):
            # loads bring data in from memory and constants are literals: neither computes; a
            # loop or branch result comes from its body, whose ops are checked one by one
            return step
        float_operands = [compiler.slot(v) for v in op.operands if _is_float(v.type)]
        narrowing = op.name == "arith.truncf"
        # values of any array back end are inspected as host numpy arrays (checking is a
        # diagnostic mode: the copies from a device are acceptable there)
        host = compiler.machine.backend.to_host

        def checked(env, _step=step):
            _step(env)
            if narrowing:
                src, out = env[float_operands[0]], env[float_results[0]]
                self._check_narrowing(env, op, None if src is None else host(src),
                                      None if out is None else host(out))
                return
            for s in float_results:
                out = env[s]
                if out is None:
                    continue
                out = host(out)
                if np.all(np.isfinite(out)):
                    continue
                if all(np.all(np.isfinite(host(env[o]))) for o in float_operands
                       if env[o] is not None):
                    bad = int(np.size(out) - np.count_nonzero(np.isfinite(out)))
                    self._warn("nonfinite", env, op, f"{bad} NaN/Inf value(s) from finite inputs")

        return checked

    # -- the checks
    def _watch_masking(self, machine, op: Op, step):
        """``step``, warning when it masked points (``machine.masked_points`` grew)."""
        verb = "read as padding" if op.name == "ktdp.load" else "not stored"

        def watched(env, _step=step):
            before = machine.masked_points
            _step(env)
            n = machine.masked_points - before
            if n:
                self._warn("masked", env, op, f"{n} point(s) of the access tile lie outside the "
                           f"view's coordinate set and were {verb}")

        return watched

    def _check_narrowing(self, env, op: Op, src, out) -> None:
        if src is None or out is None:
            return
        src = np.asarray(src, dtype=np.float64)
        out = np.asarray(out)
        over = np.isfinite(src) & ~np.isfinite(out)
        if over.any():
            k = int(np.argmax(over.reshape(-1)))
            self._warn("overflow", env, op, f"{int(over.sum())} finite value(s) became inf when "
                       f"narrowed to {out.dtype} (first {src.reshape(-1)[k]:.6g})")
        under = (src != 0) & np.isfinite(src) & (out == 0)
        if under.any():
            k = int(np.argmax(under.reshape(-1)))
            self._warn("underflow", env, op, f"{int(under.sum())} non-zero value(s) became 0 "
                       f"when narrowed to {out.dtype} (first {src.reshape(-1)[k]:.3g})")

    def _record_store(self, env, op: Op, tile) -> None:
        view = getattr(tile, "view", None)
        region = getattr(view, "region", None)
        if region is None or getattr(view, "flat", None) is None:
            return
        try:
            pts = tile_points(tile)
            offs = element_offsets(view, pts[points_inside(view, pts)])  # masked points: not stored
        except Exception:  # noqa: BLE001 - a faulting store already raised in the step itself
            return
        core = env[0].core
        owners = self._owners.get(id(region))
        if owners is None:
            owners = np.full(view.flat.shape[0], -1, dtype=np.int16)
            self._owners[id(region)] = owners
        prev = owners[offs]
        clash = (prev >= 0) & (prev != core)
        if clash.any():
            k = int(np.argmax(clash))
            self._warn("write-conflict", env, op,
                       f"{int(clash.sum())} element(s) of HBM region {region.name!r} also stored by "
                       f"core {int(prev[k])} in this run (first element offset {int(offs[k])})")
        owners[offs] = core

    def _warn(self, kind: str, env, op: Op, message: str) -> None:
        ctx = env[0]
        w = CheckWarning(kind, ctx.function, op.name, op.loc, ctx.core, message)
        if self.strict:
            raise EmulationFault(f"{kind}: {message}", function=ctx.function, op=op.name,
                                 loc=op.loc, core=ctx.core)
        key = (kind, ctx.function, id(op), ctx.core)
        if key in self._seen or len(self.warnings) >= self.limit:
            return
        self._seen.add(key)
        self.warnings.append(w)
