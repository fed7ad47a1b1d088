"""The typed IR the parser produces and the verifier, compiler and tools consume.

Invariants:

* Every :class:`Op` carries the :class:`Location` of its first token (the result name, or the op
  name when it has no results). A trailing ``loc(...)`` in the text becomes that Location's
  ``source`` (source_loc.py), as it does for function and block arguments, functions and the
  module; without one, ``source`` is None.
* SSA values are :class:`Value` objects; operands refer to the defining Value directly (names are
  kept only for messages). Block arguments (loop induction variables, iter_args, region args) are
  Values too, with ``owner`` None.
* Op-specific syntax (static sizes, base maps, reassociation lists, ...) is stored in ``op.attrs``
  as plain typed Python objects (ints, tuples, :class:`AffineMap`, :class:`AffineSet`,
  :class:`MemorySpace`, :class:`DenseConstant`), never as raw text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .affine import AffineMap, AffineSet
from .errors import KtirError, Location

DYNAMIC = None  # a `?` dimension

# element type name -> numpy dtype; "index" is an exact Python int for scalars, int64 in tensors.
# Integers follow MLIR's builtin types: signless iN (stored as two's complement in the signed
# numpy type of the same width; the op decides how the bits are read), signed siN and unsigned uiN.
ELEMENT_DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "i1": np.dtype(np.bool_), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64), "index": np.dtype(np.int64),
    "si8": np.dtype(np.int8), "si16": np.dtype(np.int16), "si32": np.dtype(np.int32),
    "si64": np.dtype(np.int64), "ui8": np.dtype(np.uint8), "ui16": np.dtype(np.uint16),
    "ui32": np.dtype(np.uint32), "ui64": np.dtype(np.uint64),
    "bf16": None,  # filled below when ml_dtypes is present
    # spyreop's types, held as bit patterns (dialects/spyreop/types.py, backends/df16.py)
    "!spyreop.df16": np.dtype(np.uint16), "!spyreop.df16_fused": np.dtype(np.uint32),
    "!spyreop.fp16_fused": np.dtype(np.uint32), "!spyreop.fp32_fused": np.dtype(np.uint64),
}
try:  # bf16 is optional: ml_dtypes provides it
    import ml_dtypes

    ELEMENT_DTYPES["bf16"] = np.dtype(ml_dtypes.bfloat16)
except Exception:  # pragma: no cover
    del ELEMENT_DTYPES["bf16"]

FLOAT_TYPES = frozenset({"f16", "f32", "f64", "bf16"})
#: signless integers of fixed width: what arith's integer ops take (with index)
SIGNLESS_INT_TYPES = frozenset({"i1", "i8", "i16", "i32", "i64"})
SIGNED_INT_TYPES = frozenset({"si8", "si16", "si32", "si64"})
UNSIGNED_INT_TYPES = frozenset({"ui8", "ui16", "ui32", "ui64"})
#: every integer element type (storage in tensors, memrefs and views; index included)
INT_TYPES = SIGNLESS_INT_TYPES | SIGNED_INT_TYPES | UNSIGNED_INT_TYPES | {"index"}


def int_width(name: str) -> int:
    """The bit width of integer type ``name`` (index: 64, the emulated target's)."""
    if name == "index":
        return 64
    return int(name.lstrip("su")[1:])


# ---------------------------------------------------------------------------------------------
# types

@dataclass(frozen=True)
class ScalarType:
    name: str  # "f16", "f32", "i32", "i1", "index", ...

    @property
    def dtype(self) -> np.dtype:
        return ELEMENT_DTYPES[self.name]

    @property
    def is_float(self) -> bool:
        return self.name in FLOAT_TYPES

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TensorType:
    shape: tuple  # ints or None (dynamic)
    elem: str

    @property
    def dtype(self) -> np.dtype:
        return ELEMENT_DTYPES[self.elem]

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def num_elements(self) -> int | None:
        if not self.is_static:
            return None
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int | None:
        n = self.num_elements
        return None if n is None else n * self.dtype.itemsize

    def __str__(self) -> str:
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        return f"tensor<{dims}{self.elem}>"


@dataclass(frozen=True)
class MemRefType:
    """``memory_space`` is the type's own ``memref<..., #ktdp.spyre_memory_space<...>>`` (None
    when the type names none). It does not take part in equality: a view's memory space is
    decided by its ``construct_memory_view`` attribute, and a type with and without the
    annotation describe the same view (the frontend prints both)."""

    shape: tuple
    elem: str
    memory_space: "MemorySpace | None" = field(default=None, compare=False)

    @property
    def dtype(self) -> np.dtype:
        return ELEMENT_DTYPES[self.elem]

    def __str__(self) -> str:
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        if self.memory_space is not None:
            return f"memref<{dims}{self.elem}, {self.memory_space}>"
        return f"memref<{dims}{self.elem}>"


@dataclass(frozen=True)
class AccessTileType:
    shape: tuple

    def __str__(self) -> str:
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        return f"!ktdp.access_tile<{dims}index>"


@dataclass(frozen=True, eq=False)
class TileFutureType:
    """``!ktdp.tile_future<(T_1, ..., T_n), groups = S>``: the handle an ``inter_tile_produce``
    returns, carrying one partial tensor type per role (n >= 1) and the group set ``S`` (one
    dimension, no symbols; None when the text omits it). Equality compares the partial types
    only, as a type match between a future's definition and its use does."""
    partials: tuple[TensorType, ...]
    groups: AffineSet | None

    @property
    def tensor(self) -> TensorType:
        """The first role's partial type (the only one of a one-role future)."""
        return self.partials[0]

    def __eq__(self, other) -> bool:
        return isinstance(other, TileFutureType) and other.partials == self.partials

    def __hash__(self) -> int:
        return hash(self.partials)

    def __str__(self) -> str:
        if len(self.partials) == 1:
            return f"!ktdp.tile_future<{self.tensor}>"
        return f"!ktdp.tile_future<({', '.join(map(str, self.partials))})>"


@dataclass(frozen=True)
class RuntimeArgType:
    """``!ktdp.runtime_arg<T, granularity=G, upperbound=U>``: a scalar argument known only at run
    time, with an optional granularity and upper bound (both positive when given; the parser
    rejects others). ``ktdp.runtime_arg_extract`` reads its value, granularity or bound; the
    value is checked against the bound when it is extracted (dialects/runtime_arg.py)."""

    underlying: ScalarType
    granularity: int | None = None
    upperbound: int | None = None

    def body(self) -> str:
        """The text between the angle brackets (granularity first, as the frontend prints)."""
        parts = [str(self.underlying)]
        if self.granularity is not None:
            parts.append(f"granularity={self.granularity}")
        if self.upperbound is not None:
            parts.append(f"upperbound={self.upperbound}")
        return ", ".join(parts)

    def __str__(self) -> str:
        return f"!ktdp.runtime_arg<{self.body()}>"


Type = ScalarType | TensorType | MemRefType | AccessTileType | TileFutureType | RuntimeArgType

INDEX = ScalarType("index")


# ---------------------------------------------------------------------------------------------
# attributes with structure

@dataclass(frozen=True)
class MemorySpace:
    """``kind`` is "hbm" or "lx"; ``core`` is the owning core for a remote LX (None = executing)."""

    kind: str
    core: int | None = None

    def __str__(self) -> str:
        if self.kind == "hbm":
            return "#ktdp.memory_space<global>"
        if self.core is None:
            return "#ktdp.memory_space<ct_local>"
        return f"#ktdp.memory_space<ct_local, ct_id = {self.core}>"


@dataclass(frozen=True, eq=False)
class DenseConstant:
    """A literal: a scalar (``values`` has one entry, ``splat`` True) or a list of values."""

    values: tuple
    splat: bool


# ---------------------------------------------------------------------------------------------
# SSA structure

@dataclass(eq=False)
class Value:
    name: str
    type: Type
    loc: Location
    owner: "Op | None" = None  # defining op; None for function and block arguments
    index: int = 0  # result number within the owner

    def __repr__(self) -> str:
        return f"Value({self.name}: {self.type})"


@dataclass(eq=False)
class Block:
    args: list[Value] = field(default_factory=list)
    ops: list["Op"] = field(default_factory=list)


@dataclass(eq=False)
class Region:
    blocks: list[Block] = field(default_factory=list)

    @property
    def block(self) -> Block:
        return self.blocks[0]


@dataclass(eq=False)
class Op:
    name: str
    loc: Location
    operands: list[Value] = field(default_factory=list)
    results: list[Value] = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    regions: list[Region] = field(default_factory=list)
    # operand groups for ops with several variadic lists (e.g. "ins", "outs", "sizes")
    groups: dict[str, list[Value]] = field(default_factory=dict)
    # the parser's record of ops with the same tokens and operand types (op_templates.py), or
    # None; ops sharing it differ only in their Location and Value objects, so per-op work that
    # depends on nothing else (verification) may be done once per origin
    origin: object = field(default=None, repr=False)

    @property
    def result(self) -> Value:
        return self.results[0]

    def __repr__(self) -> str:
        return f"Op({self.name} @ {self.loc})"


@dataclass(eq=False)
class Function:
    name: str
    loc: Location
    args: list[Value]
    body: Region
    attrs: dict = field(default_factory=dict)
    grid: tuple[int, int, int] = (1, 1, 1)
    module: "Module | None" = None
    results: list = field(default_factory=list)  # the declared result types (`-> (T, ...)`)

    @property
    def arg_names(self) -> list[str]:
        """Argument names without the leading ``%``."""
        return [a.name[1:] for a in self.args]

    @property
    def arg_types(self) -> list[Type]:
        return [a.type for a in self.args]

    @property
    def num_cores(self) -> int:
        x, y, z = self.grid
        return x * y * z

    def walk(self):
        """Every op of the body, pre-order (nested regions included)."""
        stack = [iter(self.body.block.ops)]
        while stack:
            for op in stack[-1]:
                yield op
                if op.regions:
                    stack.append(iter([o for r in op.regions for b in r.blocks for o in b.ops]))
                    break
            else:
                stack.pop()

    def users(self) -> dict[int, list[Op]]:
        """id(value) -> the ops using it as an operand, in :meth:`walk` order (nested ops
        included); a fresh dict each call."""
        found: dict[int, list[Op]] = {}
        for op in self.walk():
            for v in op.operands:
                found.setdefault(id(v), []).append(op)
        return found


@dataclass(eq=False)
class Module:
    filename: str
    functions: dict[str, Function] = field(default_factory=dict)
    aliases: dict[str, object] = field(default_factory=dict)
    loc: Location | None = None

    def function(self, name: str) -> Function:
        name = name.lstrip("@")
        fn = self.functions.get(name)
        if fn is None:
            have = ", ".join("@" + n for n in self.functions) or "none"
            loc = self.loc or Location(self.filename, 1, 1)
            raise KtirError.at(loc, f"no function @{name} in {self.filename} (functions: {have})")
        return fn

    @property
    def only_function(self) -> Function:
        if len(self.functions) != 1:
            return self.function("<choose one with its name>")
        return next(iter(self.functions.values()))
