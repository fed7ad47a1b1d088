"""A small builder for the text of one KTIR kernel (one ``func.func`` in its own module).

The builder knows KTIR spelling, not models: memory views on HBM, access tiles, loads and stores,
elementwise arith/math, linalg matmul/reduce/broadcast, ``scf.for`` with loop-carried values
(:meth:`Kernel.for_begin` for none or one, :meth:`Kernel.loop_begin` for several). Every SSA
value it hands out is a :class:`Val` that carries its type, so the emitted text is type-consistent
by construction (a mismatch is a bug here, raised as ``AssertionError`` at emission).

Spelling is the dialect's current one (``#ktdp.memory_space<global>``, indices computed with
``arith`` ops and passed as plain SSA names inside the brackets), the form current KTIR readers
accept. Float literals are written with an explicit mantissa dot (``1.000000000e-05``), which
MLIR requires.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HBM = "#ktdp.memory_space<global>"


@dataclass(frozen=True)
class Val:
    """An SSA value: ``name`` (with ``%``), tensor ``shape`` (empty for scalars) and element type."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # "f16" | "f32" | "index"

    @property
    def type(self) -> str:
        if not self.shape:
            return self.dtype
        return f"tensor<{'x'.join(str(d) for d in self.shape)}x{self.dtype}>"


@dataclass(frozen=True)
class KernelText:
    """A finished kernel: its text, grid size (cores along x) and LX estimate in bytes."""

    text: str
    grid: int
    lx_estimate: int


@dataclass(frozen=True)
class View:
    """A memory view: ``name``, logical ``shape`` (row-major, dense) and element type."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def type(self) -> str:
        return f"memref<{'x'.join(str(d) for d in self.shape)}x{self.dtype}>"


def box_set(shape: tuple[int, ...]) -> str:
    """The affine set of the box ``[0, shape)``."""
    dims = ", ".join(f"d{i}" for i in range(len(shape)))
    cons = ", ".join(f"d{i} >= 0, -d{i} + {n - 1} >= 0" for i, n in enumerate(shape))
    return f"affine_set<({dims}) : ({cons})>"


def identity_map(rank: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(rank))
    return f"affine_map<({dims}) -> ({dims})>"


def float_literal(value: float, dtype: str) -> str:
    """An MLIR float literal that round-trips ``value`` rounded to ``dtype``."""
    rounded = float(np.float32(value)) if dtype == "f32" else float(np.float16(value))
    if np.isinf(rounded):
        raise AssertionError(f"constant {value} is not finite in {dtype}")
    return f"{rounded:.9e}"


class Kernel:
    """Text of one kernel under construction. Call :meth:`text` once the body is complete."""

    def __init__(self, name: str, args: list[str], grid: int) -> None:
        assert 1 <= grid <= 32, grid
        self.name = name
        self.args = list(args)
        self.grid = grid
        self._lines: list[str] = []
        self._indent = 2
        self._counter = 0
        self._index_consts: dict[int, Val] = {}

    # ------------------------------------------------------------------ plumbing

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"%{hint}{self._counter}"

    def emit(self, line: str) -> None:
        self._lines.append("  " * self._indent + line)

    def arg(self, name: str) -> Val:
        assert name in self.args, name
        return Val(f"%{name}", (), "index")

    def text(self) -> str:
        args = ", ".join(f"%{a}: index" for a in self.args)
        head = [
            "module {",
            f"  func.func @{self.name}({args}) attributes {{grid = [{self.grid}, 1]}} {{",
        ]
        tail = ["    return", "  }", "}", ""]
        return "\n".join(head + self._lines + tail)

    # ------------------------------------------------------------------ scalars (index)

    def index(self, value: int) -> Val:
        """An ``index`` constant; hoisted at function level and shared (only use outside loops
        would be fine too, but constants are free, so sharing keeps the text short)."""
        if value not in self._index_consts:
            name = f"%c{value}"
            self._index_consts[value] = Val(name, (), "index")
            # Index constants are inserted at the top of the body so they dominate every use.
            self._lines.insert(0, f"    {name} = arith.constant {value} : index")
        return self._index_consts[value]

    def core_id(self) -> Val:
        v = self.fresh("core")
        self.emit(f"{v} = ktdp.get_compute_tile_id : index")
        return Val(v, (), "index")

    def addi(self, a: Val, b: Val) -> Val:
        v = self.fresh("i")
        self.emit(f"{v} = arith.addi {a.name}, {b.name} : index")
        return Val(v, (), "index")

    def muli(self, a: Val, b: Val) -> Val:
        v = self.fresh("i")
        self.emit(f"{v} = arith.muli {a.name}, {b.name} : index")
        return Val(v, (), "index")

    def divui(self, a: Val, b: Val) -> Val:
        v = self.fresh("i")
        self.emit(f"{v} = arith.divui {a.name}, {b.name} : index")
        return Val(v, (), "index")

    def offset(self, base: Val, scale: int, plus: int | Val = 0) -> Val:
        """``base * scale + plus`` as index arithmetic, folding the trivial cases."""
        v = base if scale == 1 else self.muli(base, self.index(scale))
        if isinstance(plus, Val):
            return self.addi(v, plus)
        return v if plus == 0 else self.addi(v, self.index(plus))

    # ------------------------------------------------------------------ memory

    def view(self, ptr: str, shape: tuple[int, ...], dtype: str = "f16") -> View:
        """A dense row-major view of ``shape`` over the HBM buffer whose address is arg ``ptr``."""
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        view = View(self.fresh("view"), tuple(shape), dtype)
        sizes = ", ".join(str(s) for s in shape)
        strs = ", ".join(str(s) for s in strides)
        self.emit(f"{view.name} = ktdp.construct_memory_view {self.arg(ptr).name}, sizes: [{sizes}], strides: [{strs}] {{")
        self.emit(f"  coordinate_set = {box_set(view.shape)},")
        self.emit(f"  memory_space = {HBM}")
        self.emit(f"}} : {view.type}")
        return view

    def _tile(self, view: View, at: list[Val], shape: tuple[int, ...]) -> str:
        assert len(at) == len(view.shape) == len(shape), (view, at, shape)
        tile = self.fresh("tile")
        idx = ", ".join(a.name for a in at)
        ttype = f"!ktdp.access_tile<{'x'.join(str(d) for d in shape)}xindex>"
        self.emit(f"{tile} = ktdp.construct_access_tile {view.name}[{idx}] {{")
        self.emit(f"  access_tile_set = {box_set(shape)},")
        self.emit(f"  access_tile_order = {identity_map(len(shape))}")
        self.emit(f"}} : {view.type} -> {ttype}")
        return tile

    def load(self, view: View, at: list[Val], shape: tuple[int, ...]) -> Val:
        """Load the box ``view[at : at + shape]``."""
        tile = self._tile(view, at, shape)
        out = Val(self.fresh("v"), tuple(shape), view.dtype)
        self.emit(f"{out.name} = ktdp.load {tile} : !ktdp.access_tile<{'x'.join(str(d) for d in shape)}xindex> -> {out.type}")
        return out

    def store(self, value: Val, view: View, at: list[Val]) -> None:
        """Store ``value`` into the box ``view[at : at + value.shape]``."""
        assert value.dtype == view.dtype, (value, view)
        tile = self._tile(view, at, value.shape)
        self.emit(f"ktdp.store {value.name}, {tile} : {value.type}, !ktdp.access_tile<{'x'.join(str(d) for d in value.shape)}xindex>")

    # ------------------------------------------------------------------ tensors

    def splat(self, value: float, shape: tuple[int, ...], dtype: str = "f32") -> Val:
        """A constant tensor filled with ``value`` (constants occupy no LX until used)."""
        out = Val(self.fresh("k"), tuple(shape), dtype)
        self.emit(f"{out.name} = arith.constant dense<{float_literal(value, dtype)}> : {out.type}")
        return out

    def extf(self, x: Val) -> Val:
        assert x.dtype == "f16", x
        out = Val(self.fresh("f"), x.shape, "f32")
        self.emit(f"{out.name} = arith.extf {x.name} : {x.type} to {out.type}")
        return out

    def truncf(self, x: Val) -> Val:
        assert x.dtype == "f32", x
        out = Val(self.fresh("h"), x.shape, "f16")
        self.emit(f"{out.name} = arith.truncf {x.name} : {x.type} to {out.type}")
        return out

    def binary(self, op: str, a: Val, b: Val) -> Val:
        """Elementwise ``arith.<op>`` on equal shapes and types (addf, subf, mulf, divf, maximumf)."""
        assert a.shape == b.shape and a.dtype == b.dtype, (op, a, b)
        out = Val(self.fresh("e"), a.shape, a.dtype)
        self.emit(f"{out.name} = arith.{op} {a.name}, {b.name} : {a.type}")
        return out

    def unary(self, op: str, x: Val) -> Val:
        """Elementwise ``math.exp`` / ``math.sqrt`` / ``arith.negf`` (op given with its dialect)."""
        out = Val(self.fresh("e"), x.shape, x.dtype)
        self.emit(f"{out.name} = {op} {x.name} : {x.type}")
        return out

    def matmul(self, a: Val, b: Val, acc: Val, transpose_b: bool) -> Val:
        """``acc + a @ b`` (or ``acc + a @ b^T``) with an f32 accumulator.

        Operands may be f16 tiles straight from a load (a mixed-precision matmul, as linalg
        allows: operands are converted to the f32 accumulator type, so every f16 product is exact
        and the sum accumulates in f32) — no f32 copy of a weight tile occupies LX."""
        m, k = a.shape
        n, kb = b.shape if transpose_b else (b.shape[1], b.shape[0])
        assert k == kb and acc.shape == (m, n), (a, b, acc)
        assert a.dtype in ("f16", "f32") and b.dtype in ("f16", "f32") and acc.dtype == "f32", (a, b, acc)
        op = "linalg.matmul_transpose_b" if transpose_b else "linalg.matmul"
        out = Val(self.fresh("mm"), acc.shape, "f32")
        self.emit(f"{out.name} = {op} ins({a.name}, {b.name} : {a.type}, {b.type}) outs({acc.name} : {acc.type}) -> {out.type}")
        return out

    def reduce_rows(self, op: str, x: Val, init: Val) -> Val:
        """Fold the last axis of a 2-d ``x`` with ``arith.<op>`` into ``init`` (shape ``[rows]``)."""
        assert len(x.shape) == 2 and init.shape == x.shape[:1] and init.dtype == x.dtype, (x, init)
        out = Val(self.fresh("red"), init.shape, x.dtype)
        self.emit(f"{out.name} = linalg.reduce {{ arith.{op} }}")
        self.emit(f"  ins({x.name} : {x.type})")
        self.emit(f"  outs({init.name} : {init.type})")
        self.emit("  dimensions = [1]")
        return out

    def broadcast(self, x: Val, shape: tuple[int, ...], new_dim: int) -> Val:
        """Broadcast a 1-d ``x`` to the 2-d ``shape`` by adding axis ``new_dim``."""
        assert len(x.shape) == 1 and len(shape) == 2, (x, shape)
        assert x.shape[0] == shape[1 - new_dim], (x, shape, new_dim)
        init = Val(self.fresh("empty"), tuple(shape), x.dtype)
        self.emit(f"{init.name} = tensor.empty() : {init.type}")
        out = Val(self.fresh("bc"), tuple(shape), x.dtype)
        self.emit(f"{out.name} = linalg.broadcast ins({x.name} : {x.type}) outs({init.name} : {init.type}) dimensions = [{new_dim}]")
        return out

    # ------------------------------------------------------------------ control flow

    def for_begin(self, lb: Val, ub: Val, step: Val, carried: Val | None = None) -> tuple[Val, Val | None, str | None]:
        """Open ``scf.for``; returns (induction variable, loop-carried block arg, result name).
        Close with :meth:`for_end`."""
        iv = Val(self.fresh("iv"), (), "index")
        if carried is None:
            self.emit(f"scf.for {iv.name} = {lb.name} to {ub.name} step {step.name} {{")
            self._indent += 1
            return iv, None, None
        result = self.fresh("loop")
        arg = Val(self.fresh("acc"), carried.shape, carried.dtype)
        self.emit(
            f"{result} = scf.for {iv.name} = {lb.name} to {ub.name} step {step.name} "
            f"iter_args({arg.name} = {carried.name}) -> ({carried.type}) {{"
        )
        self._indent += 1
        return iv, arg, result

    def for_end(self, yielded: Val | None = None, result: str | None = None) -> Val | None:
        if yielded is None:
            self.emit("scf.yield")
        else:
            self.emit(f"scf.yield {yielded.name} : {yielded.type}")
        self._indent -= 1
        self.emit("}")
        if yielded is None:
            return None
        assert result is not None
        return Val(result, yielded.shape, yielded.dtype)

    def loop_begin(self, lb: Val, ub: Val, step: Val, carried: list[Val]) -> tuple[Val, list[Val], str]:
        """Open ``scf.for`` with several loop-carried values; returns (induction variable, block
        args, result name). Close with :meth:`loop_end`."""
        iv = Val(self.fresh("iv"), (), "index")
        result = self.fresh("loop")
        args = [Val(self.fresh("acc"), c.shape, c.dtype) for c in carried]
        inits = ", ".join(f"{a.name} = {c.name}" for a, c in zip(args, carried))
        types = ", ".join(c.type for c in carried)
        self.emit(f"{result}:{len(carried)} = scf.for {iv.name} = {lb.name} to {ub.name} step {step.name} "
                  f"iter_args({inits}) -> ({types}) {{")
        self._indent += 1
        return iv, args, result

    def loop_end(self, yielded: list[Val], result: str) -> list[Val]:
        names = ", ".join(v.name for v in yielded)
        types = ", ".join(v.type for v in yielded)
        self.emit(f"scf.yield {names} : {types}")
        self._indent -= 1
        self.emit("}")
        return [Val(f"{result}#{i}", v.shape, v.dtype) for i, v in enumerate(yielded)]
