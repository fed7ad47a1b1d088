"""Structural and type verification of parsed KTIR.

The rules are a table, :data:`RULES`: op name -> :class:`Rule` (operand/result counts, required
attributes, number of regions, and an optional shape/type check). :func:`verify` walks every op,
applies its rule and collects *all* violations as located diagnostics, then raises one
:class:`KtirError`. Unknown ops are errors. Definition-before-use is checked by the parser (it must
resolve names to values anyway) and reported with the same ``file:line:col: error:`` format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .affine import AffineMap, AffineSet
from .errors import Diagnostic, KtirError
from .registry import Table
from .verify_rules import (Bad as _Bad, Rule, check_declared_ins_outs as _check_declared_ins_outs,
                           check_yield as _check_yield,
                           check_declared_operands as _check_declared_operands,
                           compatible as _compatible, declared as _declared, elem as _elem,
                           elementwise as _elementwise, eq as _eq, fail as _fail,
                           ins_outs as _ins_outs, same_shape as _same_shape, shape as _shape)
from .ir import (AccessTileType, DenseConstant, FLOAT_TYPES, Function, INT_TYPES, MemorySpace,
                 MemRefType, Module, Op, RuntimeArgType, ScalarType, TensorType, TileFutureType)


_CMPI = {"eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"}
_CMPF = {"false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult",
         "ule", "une", "uno", "true"}


def _cmp(op: Op) -> None:
    preds = _CMPI if op.name == "arith.cmpi" else _CMPF
    if op.attrs["predicate"] not in preds:
        _fail(f"unknown predicate '{op.attrs['predicate']}' for {op.name}")
    a, b = op.operands
    if not _compatible(a.type, b.type):
        _fail(f"operands {a.name} ({a.type}) and {b.name} ({b.type}) differ in type")
    _check_declared_operands(op)


def _select(op: Op) -> None:
    c, a, b = op.operands
    if _elem(c.type) != "i1":
        _fail(f"select condition {c.name} must be i1, got {c.type}")
    rt = op.results[0].type
    for v in (a, b):
        if not _compatible(v.type, rt):
            _fail(f"operand {v.name} of type {v.type} does not match the result type {rt}")


def _cast(op: Op) -> None:
    (a,) = op.operands
    src = _declared(op)
    dst = op.attrs.get("to")
    if dst is None:
        _fail(f"'{op.name}' needs 'to <type>'")
    if src is not None and not _compatible(a.type, src):
        _fail(f"operand {a.name} has type {a.type}, but the op says {src}")
    if not _same_shape(a.type, dst) or isinstance(a.type, TensorType) != isinstance(dst,
                                                                                    TensorType):
        _fail(f"cast changes the shape: {a.type} to {dst}")


def _constant(op: Op) -> None:
    t = op.results[0].type
    v: DenseConstant = op.attrs["value"]
    if isinstance(t, TensorType):
        n = t.num_elements
        if not v.splat and n is not None and len(v.values) != n:
            _fail(f"dense constant has {len(v.values)} values but {t} has {n} elements")
    elif isinstance(t, ScalarType):
        if not v.splat:
            _fail("a scalar constant cannot be a list")
    else:
        _fail(f"constants of type {t} are not supported")


def _tile_id(op: Op) -> None:
    for r in op.results:
        if r.type != ScalarType("index"):
            _fail("get_compute_tile_id results must be 'index'")
    if len(op.results) > 3:
        _fail("get_compute_tile_id has at most 3 results (x, y, z)")


def _memory_view(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, MemRefType):
        _fail(f"construct_memory_view must produce a memref, got {t}")
    sizes, strides = op.attrs["static_sizes"], op.attrs["static_strides"]
    if not (len(sizes) == len(strides) == len(t.shape)):
        _fail(f"the result memref {t} has rank {len(t.shape)}, which does not match the "
              f"{len(sizes)} sizes and {len(strides)} strides given")
    for k, (s, d) in enumerate(zip(sizes, t.shape)):
        if s is not None and d is not None and s != d:
            _fail(f"static size {s} of dim {k} does not match {t}")
    cs = op.attrs.get("coordinate_set")
    if cs is not None:
        if not isinstance(cs, AffineSet):
            _fail("coordinate_set must be an affine_set")
        if cs.num_dims != len(t.shape):
            _fail(f"coordinate_set has {cs.num_dims} dims but the view has rank {len(t.shape)}")
    ms = op.attrs.get("memory_space")
    if ms is not None and not isinstance(ms, MemorySpace):
        _fail("memory_space must be a #ktdp memory space attribute")
    for v in op.operands:
        if _elem(v.type) not in INT_TYPES or not isinstance(v.type, ScalarType):
            _fail(f"offset/size/stride operand {v.name} must be an index scalar, got {v.type}")


def _distributed_view(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, MemRefType):
        _fail(f"construct_distributed_memory_view must produce a memref, got {t}")
    for v in op.operands:
        if not isinstance(v.type, MemRefType):
            _fail(f"partition {v.name} is not a memref view")
        if v.type.elem != t.elem:
            _fail(f"partition {v.name} ({v.type}) holds {v.type.elem}, but the result {t} holds "
                  f"{t.elem}: every input memref must have the result's element type")
        if len(v.type.shape) != len(t.shape):
            _fail(f"partition {v.name} ({v.type}) has rank {len(v.type.shape)}, but the result "
                  f"{t} has rank {len(t.shape)}: every input memref must have the result's rank")


def _tile_set_shape(s: AffineSet, order: AffineMap):
    box = s.box_bounds()
    if box is None or s.num_syms:
        return None
    ext = [b.hi[1] - b.lo[1] + 1 if b.hi[0] == "c" and b.lo[0] == "c" else None for b in box]
    perm = order.permutation()
    if perm is None:
        return tuple(ext)
    return tuple(ext[p] for p in perm)


def _access_tile(op: Op) -> None:
    base = op.groups["base"][0]
    if not isinstance(base.type, (MemRefType, TensorType)):
        _fail(f"access tile base {base.name} must be a memory view, got {base.type}")
    declared = op.attrs.get("base_type")
    if declared is not None and not _compatible(base.type, declared):
        _fail(f"base {base.name} has type {base.type}, but the op says {declared}")
    t = op.results[0].type
    if not isinstance(t, AccessTileType):
        _fail(f"result must be an access tile, got {t}")
    s, order = op.attrs.get("access_tile_set"), op.attrs.get("access_tile_order")
    if not isinstance(s, AffineSet):
        _fail("access_tile_set must be an affine_set")
    if not isinstance(order, AffineMap):
        _fail("access_tile_order must be an affine_map")
    bm: AffineMap = op.attrs["base_map"]
    rank = len(base.type.shape)
    if bm.num_results != rank:
        _fail(f"{bm.num_results} subscripts for a view of rank {rank}")
    if bm.num_dims != len(op.groups["indices"]) or bm.num_syms:
        _fail(f"base_map {bm} takes {bm.num_dims} dims and {bm.num_syms} symbols, but "
              f"{len(op.groups['indices'])} index operands are given")
    if s.num_dims != rank or len(t.shape) != rank:
        _fail(f"access_tile_set has {s.num_dims} dims, the tile rank is {len(t.shape)} and the "
              f"view rank is {rank}: they must be equal")
    if order.num_dims != s.num_dims or order.num_results != s.num_dims:
        _fail("access_tile_order must be a square map with as many dims as access_tile_set")
    if s.num_syms != len(op.groups["symbols"]):
        _fail(f"access_tile_set has {s.num_syms} symbols but {len(op.groups['symbols'])} "
              "symbol operands are given")
    for v in op.groups["indices"] + op.groups["symbols"]:
        if _elem(v.type) not in INT_TYPES:
            _fail(f"subscript value {v.name} must be an index, got {v.type}")
    # No rule ties the set's extent to the result type: the dialect's verifier has none (its own
    # tests build 1x64 tiles from a 2x64 set and 32x16 tiles from a 16x32 one). The tile is the
    # result type's box; positions whose point is outside the set are not accessed
    # (docs/emulator.md, "Access tiles whose type and set differ").


def _indirect_tile(op: Op) -> None:
    base = op.groups["base"][0]
    if not isinstance(base.type, MemRefType):
        _fail(f"base {base.name} must be a memory view, got {base.type}")
    t = op.results[0].type
    kinds = op.attrs["subscript_kinds"]
    if len(kinds) != len(base.type.shape):
        _fail(f"{len(kinds)} subscripts for a view of rank {len(base.type.shape)}")
    s = op.attrs.get("variables_space_set")
    order = op.attrs.get("variables_space_order")
    if not isinstance(s, AffineSet) or not isinstance(order, AffineMap):
        _fail("variables_space_set (affine_set) and variables_space_order (affine_map) are required")
    if s.num_dims != op.attrs["num_variables"]:
        _fail(f"{op.attrs['num_variables']} intermediate variables but variables_space_set has "
              f"{s.num_dims} dims")
    if order.num_dims != s.num_dims or order.num_results != s.num_dims:
        _fail("variables_space_order must be a square map over the variables")
    if not isinstance(t, AccessTileType) or len(t.shape) != s.num_dims:
        _fail(f"result {t} must be an access tile with one dim per intermediate variable")
    maps = op.attrs["subscript_maps"]
    for iv, m in zip(op.groups["indirect"],
                     [m for k, m in zip(kinds, maps) if k == "indirect"]):
        if not isinstance(iv.type, MemRefType) or iv.type.elem not in INT_TYPES:
            _fail(f"index view {iv.name} must be a memref of integers, got {iv.type}")
        if m.num_results != len(iv.type.shape):
            _fail(f"index view {iv.name} has rank {len(iv.type.shape)} but {m.num_results} "
                  "subscripts")
    _outer_variables(op, s)


def _outer_variables(op: Op, s: AffineSet) -> None:
    """An intermediate variable named like a value of an enclosing scope stands for that value
    (the parser adds it to the variable's iterator), which is only what the program means when
    the iterator cannot move: its range in variables_space_set must be exactly [0, 0]."""
    names = op.attrs["variable_names"]
    for k in op.attrs.get("outer_variables", ()):
        try:
            lo, hi = s.bounding_box(tuple(0 for _ in range(s.num_syms)))[k] if not s.num_syms \
                else (None, None)
        except ValueError:
            lo = hi = None
        if (lo, hi) != (0, 0):
            where = f"[{lo}, {hi}]" if lo is not None else "a range that is not a constant"
            _fail(f"intermediate variable {names[k]} is an outer SSA value, but "
                  f"variables_space_set lets it range over {where}: iterating it would replace "
                  "the value by the iterator; pin its range to [0, 0] or use a fresh name")


def view_elem_of_tile(v) -> str | None:
    """Element type of the view behind an access tile value (None when unknown)."""
    owner = v.owner
    if owner is None or owner.name not in ("ktdp.construct_access_tile",
                                           "ktdp.construct_indirect_access_tile"):
        return None
    return _elem(owner.groups["base"][0].type)


def _load(op: Op) -> None:
    (a,) = op.operands
    if not isinstance(a.type, AccessTileType):
        _fail(f"load operand {a.name} must be an access tile, got {a.type}")
    _check_declared_operands(op)
    t = op.results[0].type
    if not isinstance(t, TensorType):
        _fail(f"load must produce a tensor, got {t}")
    if not _same_shape(a.type, t):
        _fail(f"load of {a.type} cannot produce {t}: the access tile shape and the result "
              "tensor shape differ")
    elem = view_elem_of_tile(a)
    if elem is not None and elem != t.elem:
        _fail(f"load produces {t.elem} but the view holds {elem}")


def _store(op: Op) -> None:
    if len(op.operands) != 2:
        _fail("store takes a tensor and an access tile")
    v, a = op.operands
    if not isinstance(v.type, TensorType):
        _fail(f"stored value {v.name} must be a tensor, got {v.type}")
    if not isinstance(a.type, AccessTileType):
        _fail(f"store destination {a.name} must be an access tile, got {a.type}")
    _check_declared_operands(op)
    if not _same_shape(v.type, a.type):
        _fail(f"cannot store {v.type} through {a.type}: the data tile shape and the access tile "
              "shape differ")
    elem = view_elem_of_tile(a)
    if elem is not None and elem != v.type.elem:
        _fail(f"stores {v.type.elem} into a view of {elem}")


def _matmul(op: Op) -> None:
    ins, outs = _ins_outs(op)
    if len(ins) != 2 or len(outs) != 1:
        _fail(f"{op.name} takes ins(A, B) outs(C)")
    _check_declared_ins_outs(op)
    a, b, c = (v.type for v in (ins[0], ins[1], outs[0]))
    for x in (a, b, c):
        if not isinstance(x, TensorType):
            _fail(f"{op.name} operands must be tensors")
    batch = op.name == "linalg.batch_matmul"
    rank = 3 if batch else 2
    if not (len(a.shape) == len(b.shape) == len(c.shape) == rank):
        _fail(f"{op.name} operands must have rank {rank}: {a}, {b}, {c}")
    sa, sb, sc = a.shape[-2:], b.shape[-2:], c.shape[-2:]
    if op.name == "linalg.matmul_transpose_b":
        sb = (sb[1], sb[0])
    m, k = sa
    k2, n = sb
    if not (_eq(k, k2) and _eq(sc[0], m) and _eq(sc[1], n)):
        _fail(f"shape mismatch in {op.name}: {a} x {b} -> {c}")
    if batch and not (_eq(a.shape[0], b.shape[0]) and _eq(a.shape[0], c.shape[0])):
        _fail(f"batch sizes differ in {op.name}: {a}, {b}, {c}")


def _reduce(op: Op) -> None:
    ins, outs = _ins_outs(op)
    if len(ins) != len(outs) or not ins:
        _fail("linalg.reduce needs as many inits as inputs")
    _check_declared_ins_outs(op)
    dims = op.attrs.get("dimensions")
    if not isinstance(dims, list):
        _fail("linalg.reduce needs dimensions = [...]")
    x, init = ins[0].type, outs[0].type
    if any(d < 0 or d >= len(x.shape) for d in dims) or len(set(dims)) != len(dims):
        _fail(f"bad reduction dimensions {dims} for {x}")
    kept = tuple(s for k, s in enumerate(x.shape) if k not in dims)
    if not _same_shape(TensorType(kept, x.elem), init):
        _fail(f"reducing {x} over {dims} gives {'x'.join(map(str, kept))}, not {init}")
    if "combiner" not in op.attrs and not op.regions:
        _fail("linalg.reduce needs a combiner ({ arith.addf }) or a body region")
    if "combiner" in op.attrs and op.attrs["combiner"] not in _COMBINERS:
        _fail(f"unsupported reduction combiner '{op.attrs['combiner']}'")


_COMBINERS = {"arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf", "arith.maxnumf",
              "arith.minnumf", "arith.maxf", "arith.minf", "arith.addi", "arith.muli",
              "arith.maxsi", "arith.minsi", "arith.andi", "arith.ori", "arith.xori"}


def _broadcast(op: Op) -> None:
    ins, outs = _ins_outs(op)
    if len(ins) != 1 or len(outs) != 1:
        _fail("linalg.broadcast takes ins(x) outs(init)")
    _check_declared_ins_outs(op)
    dims = op.attrs.get("dimensions")
    if not isinstance(dims, list):
        _fail("linalg.broadcast needs dimensions = [...]")
    x, y = ins[0].type, outs[0].type
    if len(y.shape) != len(x.shape) + len(dims) or any(d < 0 or d >= len(y.shape) for d in dims):
        _fail(f"cannot broadcast {x} to {y} with new dimensions {dims}")
    kept = [s for k, s in enumerate(y.shape) if k not in dims]
    if not all(_eq(a, b) for a, b in zip(kept, x.shape)) or x.elem != y.elem:
        _fail(f"cannot broadcast {x} to {y} with new dimensions {dims}")


def _transpose(op: Op) -> None:
    ins, outs = _ins_outs(op)
    if len(ins) != 1 or len(outs) != 1:
        _fail("linalg.transpose takes ins(x) outs(init)")
    _check_declared_ins_outs(op)
    perm = op.attrs.get("permutation")
    x, y = ins[0].type, outs[0].type
    if not isinstance(perm, list) or sorted(perm) != list(range(len(x.shape))):
        _fail(f"permutation {perm} is not a permutation of the {len(x.shape)} dims of {x}")
    if len(y.shape) != len(x.shape) or not all(_eq(y.shape[k], x.shape[p])
                                               for k, p in enumerate(perm)):
        _fail(f"transposing {x} by {perm} does not give {y}")


def _named_elementwise(op: Op) -> None:
    ins, outs = _ins_outs(op)
    if len(outs) != 1 or not ins:
        _fail(f"{op.name} takes ins(...) outs(init)")
    _check_declared_ins_outs(op)
    for v in ins:
        if not _same_shape(v.type, outs[0].type):
            _fail(f"operand {v.name} ({v.type}) does not match the output {outs[0].type}")


def _fill(op: Op) -> None:
    ins, outs = _ins_outs(op)
    if len(ins) != 1 or len(outs) != 1 or not isinstance(ins[0].type, ScalarType):
        _fail("linalg.fill takes ins(scalar) outs(tensor)")
    _check_declared_ins_outs(op)
    if ins[0].type.name != outs[0].type.elem:
        _fail(f"fill value {ins[0].type} does not match {outs[0].type}")


def _generic(op: Op) -> None:
    ins, outs = _ins_outs(op)
    _check_declared_ins_outs(op)
    maps = op.attrs.get("indexing_maps")
    its = op.attrs.get("iterator_types")
    if not isinstance(maps, list) or not all(isinstance(m, AffineMap) for m in maps):
        _fail("linalg.generic needs indexing_maps = [affine_map, ...]")
    if len(maps) != len(ins) + len(outs):
        _fail(f"{len(maps)} indexing maps for {len(ins) + len(outs)} operands")
    if not isinstance(its, list) or any(i not in ("parallel", "reduction") for i in its):
        _fail('iterator_types must list "parallel" / "reduction"')
    for m, v in zip(maps, ins + outs):
        if m.num_dims != len(its):
            _fail(f"indexing map {m} has {m.num_dims} dims but there are {len(its)} loops")
        if isinstance(v.type, TensorType) and m.num_results != len(v.type.shape):
            _fail(f"indexing map {m} has {m.num_results} results for {v.type}")
    if len(op.regions) != 1 or len(op.regions[0].block.args) != len(ins) + len(outs):
        _fail("linalg.generic body needs one block argument per operand")


def _index(op: Op) -> None:
    if op.attrs["dim"] < 0:
        _fail("linalg.index dimension must be >= 0")


def _empty(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, TensorType):
        _fail(f"tensor.empty must produce a tensor, got {t}")
    if len(op.operands) != sum(1 for d in t.shape if d is None):
        _fail(f"tensor.empty needs one size operand per dynamic dim of {t}")


def _splat(op: Op) -> None:
    t = op.results[0].type
    s = op.operands[0]
    if not isinstance(t, TensorType) or not isinstance(s.type, ScalarType):
        _fail("tensor.splat takes a scalar and produces a tensor")
    if s.type.name != t.elem:
        _fail(f"splat of {s.type} cannot produce {t}")


def _extract(op: Op) -> None:
    src = op.operands[0]
    t = _declared(op)
    if not _compatible(src.type, t):
        _fail(f"operand {src.name} has type {src.type}, but the op says {t}")
    if len(op.operands) - 1 != len(t.shape):
        _fail(f"tensor.extract needs {len(t.shape)} indices for {t}")


def _reshape(op: Op) -> None:
    src = op.operands[0]
    t_in, t_out = _declared(op), op.results[0].type
    if not _compatible(src.type, t_in):
        _fail(f"operand {src.name} has type {src.type}, but the op says {t_in}")
    re_ = op.attrs["reassociation"]
    big, small = (t_out, t_in) if op.name == "tensor.expand_shape" else (t_in, t_out)
    flat = [d for g in re_ for d in g]
    if not small.shape and not re_:
        pass  # collapse to / expand from a rank-0 tensor
    elif len(re_) != len(small.shape) or flat != list(range(len(big.shape))):
        _fail(f"reassociation {re_} does not fit {t_in} -> {t_out}")
    n_in, n_out = t_in.num_elements, t_out.num_elements
    if n_in is not None and n_out is not None and n_in != n_out:
        _fail(f"{op.name} changes the element count: {t_in} -> {t_out}")
    if t_in.elem != t_out.elem:
        _fail(f"{op.name} cannot change the element type")


def _slice(op: Op) -> None:
    t = op.results[0].type
    if op.name == "tensor.extract_slice":
        src = _declared(op)
        if not _compatible(op.operands[0].type, src):
            _fail(f"operand {op.operands[0].name} has type {op.operands[0].type}, but the op "
                  f"says {src}")
    else:
        src = op.operands[1].type
        if not _compatible(t, src):
            _fail(f"insert_slice result {t} must equal the destination type {src}")
    rank = len(src.shape)
    for key in ("static_offsets", "static_sizes", "static_strides"):
        if len(op.attrs[key]) != rank:
            _fail(f"{key[7:]} has {len(op.attrs[key])} entries for a rank-{rank} tensor")


def _from_elements(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, TensorType) or t.num_elements != len(op.operands):
        _fail(f"tensor.from_elements needs {t.num_elements} scalars for {t}")


def _for(op: Op) -> None:
    lb, ub, st = op.groups["bounds"]
    for v in (lb, ub, st):
        if _elem(v.type) not in INT_TYPES or not isinstance(v.type, ScalarType):
            _fail(f"loop bound {v.name} must be an integer scalar, got {v.type}")
    inits = op.groups["inits"]
    body = op.regions[0].block
    for init, r in zip(inits, op.results):
        if not _compatible(init.type, r.type):
            _fail(f"iter_args init {init.name} ({init.type}) does not match result type {r.type}")
    _check_yield(op, body, [r.type for r in op.results], "scf.yield")


def _if(op: Op) -> None:
    c = op.operands[0]
    if c.type != ScalarType("i1"):
        _fail(f"scf.if condition {c.name} must be i1, got {c.type}")
    if op.results and len(op.regions) != 2:
        _fail("scf.if with results needs an else region")
    for r in op.regions:
        _check_yield(op, r.block, [x.type for x in op.results], "scf.yield")


def _produce(op: Op) -> None:
    t = op.results[0].type
    if not isinstance(t, TileFutureType):
        _fail(f"inter_tile_produce must produce a tile_future, got {t}")
    if not isinstance(op.attrs.get("producer_tiles_per_group"), AffineSet):
        _fail("producer_tiles_per_group must be an affine_set")
    if t.groups is None:
        _fail("the tile_future type needs groups = affine_set<...>")
    block = op.regions[0].block
    if len(block.args) != 1:
        _fail("inter_tile_produce region takes one index argument (the group id)")
    _check_yield(op, block, [t.tensor], "ktdp.yield_partial")


def _reduce_tiles(op: Op) -> None:
    fu = op.operands[0]
    if not isinstance(fu.type, TileFutureType):
        _fail(f"inter_tile_reduce operand {fu.name} must be a tile_future, got {fu.type}")
    if not isinstance(op.attrs.get("consumer_tiles_per_group"), AffineSet):
        _fail("consumer_tiles_per_group must be an affine_set")
    t = op.results[0].type
    part = fu.type.tensor
    if not isinstance(t, TensorType) or (t.num_elements is not None and part.num_elements
                                         is not None and t.num_elements != part.num_elements):
        _fail(f"reduce result {t} must have as many elements as the partial {part}")
    block = op.regions[0].block
    if len(block.args) != 2:
        _fail("inter_tile_reduce combiner takes two arguments")
    _check_yield(op, block, [part], "ktdp.yield_reduced")


def _runtime_arg_extract(op: Op) -> None:
    (x,) = op.operands
    t = x.type
    if not isinstance(t, RuntimeArgType):
        _fail(f"runtime_arg_extract reads a !ktdp.runtime_arg, but {x.name} is {t}")
    declared = _declared(op)
    if declared is not None and declared != t:
        _fail(f"operand {x.name} has type {t}, but the op says {declared}")
    kind = op.attrs["kind"]
    r = op.results[0].type
    if kind == "value":
        if r != t.underlying:
            _fail(f"result type ({r}) must be the runtime_arg's underlying type "
                  f"({t.underlying}) when extracting its value")
        return
    if getattr(t, kind) is None:
        _fail(f"cannot extract {kind} from {t}: the runtime_arg type does not have one")
    if r != ScalarType("index"):
        _fail(f"result type ({r}) must be index when extracting {kind}")


def _parallel(op: Op) -> None:
    g = op.groups
    n = len(g["lbs"])
    if n == 0 or len(g["ubs"]) != n or len(g["steps"]) != n:
        _fail(f"scf.parallel needs as many lower bounds, upper bounds and steps as induction "
              f"variables (got {n}, {len(g['ubs'])}, {len(g['steps'])})")
    for v in g["lbs"] + g["ubs"] + g["steps"]:
        if v.type != ScalarType("index"):
            _fail(f"loop bound {v.name} must be an index, got {v.type}")
    block = op.regions[0].block
    if len(block.args) != n:
        _fail(f"scf.parallel has {n} bounds but {len(block.args)} induction variables")
    inits = g["inits"]
    if len(inits) != len(op.results):
        _fail(f"scf.parallel has {len(inits)} init values but {len(op.results)} results")
    for init, r in zip(inits, op.results):
        if not _compatible(init.type, r.type):
            _fail(f"init {init.name} ({init.type}) does not match result type {r.type}")
    last = block.ops[-1] if block.ops else None
    if last is None or last.name != "scf.reduce":
        if inits:
            _fail("scf.parallel body must end with 'scf.reduce' of one value per result")
        return
    if len(last.operands) != len(inits):
        _fail(f"scf.reduce reduces {len(last.operands)} value(s) but scf.parallel has "
              f"{len(inits)} result(s)")
    for v, r in zip(last.operands, op.results):
        if not _compatible(v.type, r.type):
            _fail(f"scf.reduce operand {v.name} ({v.type}) does not match result type {r.type}")


def _reduce_op(op: Op) -> None:
    if len(op.regions) != len(op.operands):
        _fail(f"scf.reduce needs one combiner region per reduced value ({len(op.operands)}), "
              f"got {len(op.regions)}")
    types = op.attrs.get("types") or []
    for v, t in zip(op.operands, types):
        if not _compatible(v.type, t):
            _fail(f"operand {v.name} has type {v.type}, but the op says {t}")
    for v, r in zip(op.operands, op.regions):
        b = r.block
        if len(b.args) != 2 or not all(_compatible(a.type, v.type) for a in b.args):
            _fail(f"the combiner of {v.name} takes two {v.type} arguments")
        _check_yield(op, b, [v.type], "scf.reduce.return")


_ELEMENTWISE = ("addf subf mulf divf remf negf absf maximumf minimumf maxf minf maxnumf minnumf "
                "addi subi muli divui divsi floordivsi ceildivsi remui remsi andi ori xori shli "
                "shrsi shrui minsi maxsi minui maxui").split()
_UNARY_MATH = ("exp exp2 log log2 log10 log1p sqrt rsqrt tanh sin cos erf absf absi ceil floor "
               "round").split()
_CASTS = "extf truncf sitofp uitofp fptosi fptoui index_cast index_castui extsi extui trunci " \
         "bitcast".split()

RULES = Table("verify")  # op name -> Rule, a view of the registry (registry.py)
RULES.update({
    "arith.constant": Rule((0, 0), (1, 1), ("value",), check=_constant),
    "arith.cmpi": Rule((2, 2), (1, 1), ("predicate",), check=_cmp),
    "arith.cmpf": Rule((2, 2), (1, 1), ("predicate",), check=_cmp),
    "arith.select": Rule((3, 3), (1, 1), check=_select),
    "math.fma": Rule((3, 3), (1, 1), check=_elementwise),
    "math.powf": Rule((2, 2), (1, 1), check=_elementwise),
    "ktdp.get_compute_tile_id": Rule((0, 0), (1, 3), check=_tile_id),
    # coordinate_set may be omitted (one corpus kernel does): it then defaults to the full box
    "ktdp.construct_memory_view": Rule((1, None), (1, 1), ("memory_space",),
                                       check=_memory_view),
    "ktdp.construct_distributed_memory_view": Rule((1, None), (1, 1), check=_distributed_view),
    "ktdp.construct_access_tile": Rule((1, None), (1, 1),
                                       ("access_tile_set", "access_tile_order"),
                                       check=_access_tile),
    "ktdp.construct_indirect_access_tile": Rule(
        (1, None), (1, 1), ("variables_space_set", "variables_space_order"),
        check=_indirect_tile),
    "ktdp.load": Rule((1, 1), (1, 1), check=_load),
    "ktdp.store": Rule((2, 2), (0, 0), check=_store),
    "ktdp.inter_tile_produce": Rule((0, 0), (1, 1), ("producer_tiles_per_group",), (1, 1),
                                    check=_produce),
    "ktdp.inter_tile_reduce": Rule((2, 2), (1, 1), ("consumer_tiles_per_group",), (1, 1),
                                   check=_reduce_tiles),
    "ktdp.yield_partial": Rule((1, 1), (0, 0)),
    "ktdp.yield_reduced": Rule((1, 1), (0, 0)),
    "scf.for": Rule((3, None), (0, None), (), (1, 1), check=_for),
    "scf.if": Rule((1, 1), (0, None), (), (1, 2), check=_if),
    "scf.yield": Rule(),
    "scf.parallel": Rule((3, None), (0, None), (), (1, 1), check=_parallel),
    "scf.reduce": Rule((0, None), (0, 0), (), (0, 64), check=_reduce_op),
    "scf.reduce.return": Rule((1, 1), (0, 0)),
    "ktdp.runtime_arg_extract": Rule((1, 1), (1, 1), ("kind",), check=_runtime_arg_extract),
    "func.call": Rule((0, None), (0, None), ("callee",)),
    "linalg.yield": Rule(),
    "tensor.yield": Rule((1, 1), (0, 0)),
    "return": Rule((0, None), (0, 0)),  # operands checked against the function's results
    "linalg.matmul": Rule((3, 3), (1, 1), check=_matmul),
    "linalg.matmul_transpose_b": Rule((3, 3), (1, 1), check=_matmul),
    "linalg.batch_matmul": Rule((3, 3), (1, 1), check=_matmul),
    "linalg.reduce": Rule((2, None), (1, None), (), (0, 1), check=_reduce),
    "linalg.broadcast": Rule((2, 2), (1, 1), ("dimensions",), check=_broadcast),
    "linalg.transpose": Rule((2, 2), (1, 1), ("permutation",), check=_transpose),
    "linalg.generic": Rule((1, None), (1, None), ("indexing_maps", "iterator_types"), (1, 1),
                           check=_generic),
    "linalg.fill": Rule((2, 2), (1, 1), check=_fill),
    "linalg.index": Rule((0, 0), (1, 1), ("dim",), check=_index),
    "tensor.empty": Rule((0, None), (1, 1), check=_empty),
    "tensor.splat": Rule((1, None), (1, 1), check=_splat),
    "tensor.extract": Rule((1, None), (1, 1), check=_extract),
    "tensor.expand_shape": Rule((1, None), (1, 1), ("reassociation",), check=_reshape),
    "tensor.collapse_shape": Rule((1, 1), (1, 1), ("reassociation",), check=_reshape),
    "tensor.extract_slice": Rule((1, None), (1, 1), check=_slice),
    "tensor.insert_slice": Rule((2, None), (1, 1), check=_slice),
    "tensor.from_elements": Rule((1, None), (1, 1), check=_from_elements),
    "tensor.generate": Rule((0, None), (1, 1), (), (1, 1)),
})
for _n in _ELEMENTWISE:
    RULES["arith." + _n] = Rule((1 if _n in ("negf", "absf") else 2,) * 2, (1, 1),
                                check=_elementwise)
for _n in _UNARY_MATH:
    RULES["math." + _n] = Rule((1, 1), (1, 1), check=_elementwise)
for _n in _CASTS:
    RULES["arith." + _n] = Rule((1, 1), (1, 1), check=_cast)
for _n in ("add", "sub", "mul", "div", "max", "min", "exp", "copy"):
    RULES["linalg." + _n] = Rule((2, None), (1, 1), check=_named_elementwise)

# terminators and the ops whose region they close
_TERMINATOR_PARENTS = {
    "scf.yield": ("scf.for", "scf.if"), "linalg.yield": ("linalg.reduce", "linalg.generic"),
    "tensor.yield": ("tensor.generate",), "ktdp.yield_partial": ("ktdp.inter_tile_produce",),
    "scf.reduce": ("scf.parallel",), "scf.reduce.return": ("scf.reduce",),
    "ktdp.yield_reduced": ("ktdp.inter_tile_reduce",),
}


def _count(lo: int, hi: int | None) -> str:
    if lo == hi:
        return str(lo)
    return f"at least {lo}" if hi is None else f"{lo} to {hi}"


def _op_messages(op: Op, rule: Rule, parent: str | None) -> list[str]:
    """The violations of ``op`` itself (its regions' ops are checked separately)."""
    try:
        lo, hi = rule.operands
        n = len(op.operands)
        if n < lo or (hi is not None and n > hi):
            _fail(f"'{op.name}' takes {_count(lo, hi)} operand(s), got {n}")
        lo, hi = rule.results
        n = len(op.results)
        if n < lo or (hi is not None and n > hi):
            _fail(f"'{op.name}' produces {_count(lo, hi)} result(s), got {n}")
        for a in rule.attrs:
            if a not in op.attrs:
                _fail(f"'{op.name}' needs the attribute '{a}'")
        rlo, rhi = rule.regions
        if not rlo <= len(op.regions) <= rhi:
            _fail(f"'{op.name}' takes {rlo}..{rhi} region(s), got {len(op.regions)}")
        if op.name in _TERMINATOR_PARENTS and parent not in _TERMINATOR_PARENTS[op.name]:
            _fail(f"'{op.name}' may only end a region of "
                  f"{' / '.join(_TERMINATOR_PARENTS[op.name])}")
        for v in op.operands:
            t = v.type
            if isinstance(t, ScalarType) and t.name == "<undefined>":
                return []  # already reported as an undefined value
        if rule.check is not None:
            rule.check(op)
    except _Bad as exc:
        return [str(exc)]
    except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
        return [f"malformed '{op.name}': {exc!r}"]
    return []


def _verdict_key(op: Op, parent: str | None) -> tuple | None:
    """What an op's verdict depends on beyond its origin, or None when it cannot be keyed.

    Ops with one origin (see ``Op.origin``) have the same name, attributes, operand and result
    names and types. A check reads those and, at most, the defining op of an operand (its name
    and operand types, e.g. the view behind an access tile), which the defining op's origin
    fixes. So (origin, parent, origins of the operands' defining ops) decides the verdict; an
    operand defined by an op without an origin makes the op unkeyable (checked every time)."""
    owners = []
    for v in op.operands:
        owner = v.owner
        if owner is None:  # a block or function argument: only its type matters, and it is fixed
            owners.append(None)
        elif owner.origin is None:
            return None
        else:
            owners.append(owner.origin)
    return parent, tuple(owners)


def _verify_op(op: Op, parent: str | None, diags: list[Diagnostic]) -> None:
    rule = RULES.get(op.name)
    if rule is None and op.attrs.get("opaque"):
        return  # an op of a dialect the emulator does not know, kept as written (generic form)
    if rule is None:
        diags.append(Diagnostic(op.loc, f"unknown operation '{op.name}'"))
        return
    origin = op.origin
    key = None if origin is None else _verdict_key(op, parent)
    if key is None:
        messages = _op_messages(op, rule, parent)
    else:  # ops of one origin share verdicts (scratchy smollm2-135m: 5253 checks for 27892 ops)
        messages = origin.verified.get(key)
        if messages is None:
            messages = origin.verified[key] = _op_messages(op, rule, parent)
    for message in messages:
        diags.append(Diagnostic(op.loc, message))
    if op.regions:
        for r in op.regions:
            for b in r.blocks:
                for inner in b.ops:
                    _verify_op(inner, op.name, diags)


def verify_function(fn: Function) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    ops = fn.body.block.ops
    for op in ops:
        _verify_op(op, "func.func", diags)
    if not ops or ops[-1].name != "return":
        diags.append(Diagnostic(fn.loc, f"function @{fn.name} must end with 'return'"))
    else:
        ret = ops[-1]
        got = [v.type for v in ret.operands]
        if len(got) != len(fn.results) or not all(_compatible(a, b)
                                                   for a, b in zip(got, fn.results)):
            have = ", ".join(map(str, got)) or "nothing"
            want = ", ".join(map(str, fn.results)) or "nothing"
            diags.append(Diagnostic(ret.loc, f"return gives ({have}) but @{fn.name} returns "
                                             f"({want})"))
    return diags


def _check_calls(module: Module, fn: Function, diags: list[Diagnostic]) -> None:
    """``func.call`` names a function of the module with matching argument and result types,
    and no function reaches itself through calls (the emulator expands calls in place)."""
    for op in fn.walk():
        if op.name != "func.call":
            continue
        callee = module.functions.get(op.attrs["callee"])
        if callee is None:
            have = ", ".join("@" + n for n in module.functions)
            diags.append(Diagnostic(op.loc, f"call to @{op.attrs['callee']}, which is not a "
                                            f"function of this module (functions: {have})"))
            continue
        got = [v.type for v in op.operands]
        declared = op.attrs.get("types") or got
        if len(got) != len(callee.args) or not all(
                _compatible(a, b.type) for a, b in zip(got, callee.args)) or not all(
                _compatible(a, b) for a, b in zip(got, declared)):
            diags.append(Diagnostic(op.loc, f"call passes ({', '.join(map(str, got))}) but "
                                            f"@{callee.name} takes "
                                            f"({', '.join(map(str, callee.arg_types))})"))
        res = [r.type for r in op.results]
        if len(res) != len(callee.results) or not all(_compatible(a, b)
                                                      for a, b in zip(res, callee.results)):
            diags.append(Diagnostic(op.loc, f"call expects ({', '.join(map(str, res))}) but "
                                            f"@{callee.name} returns "
                                            f"({', '.join(map(str, callee.results))})"))


def _call_cycle(module: Module) -> list[Diagnostic]:
    calls = {name: [op for op in fn.walk() if op.name == "func.call"]
             for name, fn in module.functions.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list) -> list[Diagnostic]:
        state[name] = 1
        for op in calls.get(name, ()):
            callee = op.attrs["callee"]
            if state.get(callee) == 1:
                chain = " -> ".join("@" + n for n in path + [name, callee])
                return [Diagnostic(op.loc, f"recursive call ({chain}): the emulator expands "
                                           "calls in place and cannot run recursion")]
            if callee in calls and state.get(callee) is None:
                found = visit(callee, path + [name])
                if found:
                    return found
        state[name] = 2
        return []

    for name in calls:
        if state.get(name) is None:
            found = visit(name, [])
            if found:
                return found
    return []


def _reduce_result_types(fn: Function, reshaping: bool, diags: list[Diagnostic]) -> None:
    """The dialect's rule: an inter_tile_reduce result has its future's partial type.

    ktir-cpu's ring-reduce examples reduce tensor<1x128xf16> partials to a tensor<128xf16>
    result (its interpreter reshapes); the dialect's verifier rejects that, and so does this
    one unless ``reshaping`` asks for ktir-cpu's reading (same element count, any shape)."""
    for op in fn.walk():
        if op.name != "ktdp.inter_tile_reduce" or not op.operands or not op.results:
            continue
        fu, t = op.operands[0].type, op.results[0].type
        if not isinstance(fu, TileFutureType) or reshaping or _compatible(t, fu.tensor):
            continue
        diags.append(Diagnostic(op.loc, f"inter_tile_reduce result type {t} must be the "
                                        f"future's partial type {fu.tensor}: the reduce does "
                                        "not reshape (put a tensor.collapse_shape after it; "
                                        "ktir-cpu's reshaping reading is the opt-in "
                                        "reshaping_reduce)"))


def verify(module: Module, *, reshaping_reduce: bool = False) -> None:
    """Raise :class:`KtirError` listing every violation in ``module``. ``reshaping_reduce``
    accepts inter_tile_reduce results that reshape the partial (see
    :func:`_reduce_result_types`)."""
    diags: list[Diagnostic] = []
    for fn in module.functions.values():
        diags += verify_function(fn)
        _check_calls(module, fn, diags)
        _reduce_result_types(fn, reshaping_reduce, diags)
    diags += _call_cycle(module)
    if diags:
        raise KtirError(diags)
