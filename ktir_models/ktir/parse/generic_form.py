"""MLIR's generic op form -> the same IR as each op's custom form.

    %r = "ktdp.load"(%t) : (!ktdp.access_tile<4x8xindex>) -> tensor<4x8xf16>
    %v = "ktdp.construct_memory_view"(%a) <{coordinate_set = ..., memory_space = ...,
           operandSegmentSizes = array<i32: 1, 0, 0>, static_sizes = array<i64: 4, 8>,
           static_strides = array<i64: 8, 1>}> : (index) -> memref<4x8xf16>

Every op is ``"name"(operands) [<{properties}>] [({region}, ...)] [{attributes}] : (operand
types) -> result types``. Properties and attributes are read alike (MLIR moved inherent
attributes into properties; older printers put them in the dictionary). What each op's custom
handler stores in ``op.attrs`` / ``op.groups`` is rebuilt here from the operands, their
``operandSegmentSizes`` and the MLIR spellings of the attributes (``array<i64: ...>`` with the
dynamic-size sentinel, integer comparison predicates, ``#linalg.iterator_type<...>``, ...), so
the verifier and compiler see one IR whichever form a program uses.

Ops of dialects the emulator does not implement (e.g. ``"test.op"`` of MLIR's test dialect) are
read and kept as opaque ops, as ``mlir-opt --allow-unregistered-dialect`` keeps them (their
types are read, the module prints back), but the verifier refuses them: a module that verifies
is one the emulator can run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import affine
from ..ir.nodes import AccessTileType, DenseConstant, Function, Op, ScalarType, Value
from .ops_frontend import EXTRACT_KINDS, function_type
from .tile_types import clip_set_to_type

DYNAMIC_SENTINEL = -9223372036854775808  # ShapedType::kDynamic in static_* arrays

CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge",
                   "ult", "ule", "une", "uno", "true")

# dialects whose ops the emulator implements: an unknown op of these is an error, not opaque
KNOWN_DIALECTS = ("arith", "math", "linalg", "tensor", "scf", "ktdp", "func", "spyreop")


@dataclass(frozen=True)
class Typed:
    """An attribute written ``value : type`` (``0 : index``, ``dense<1.0> : tensor<4xf16>``)."""

    value: object
    type: object


@dataclass(frozen=True)
class Opaque:
    """A dialect attribute the emulator has no meaning for (``#arith.fastmath<none>``); kept as
    its text."""

    text: str


def attribute(p):
    """One attribute value in MLIR's syntax, as a plain Python object (see :class:`Typed`)."""
    i = p.pos
    kind, text = p.kinds[i], p.texts[i]
    if kind == "ident" and text == "array" and p.peek(1) == "<":
        p.pos += 2
        p.parse_type()  # the element type: i64 / i32 / i1
        items: list = []
        if p.accept(":"):
            while True:
                items.append(_number_or_bool(p))
                if not p.accept(","):
                    break
        p.expect(">", "closing array<...>")
        return items
    if kind == "attr" and not text.startswith(("#ktdp.memory_space", "#ktdp.spyre_memory_space")):
        p.pos += 1
        head, _, body = text.partition("<")
        if head in ("#linalg.iterator_type", "#ktdp.runtime_arg_extract_kind"):
            return body[:-1].strip()
        return Opaque(text)
    if kind == "sym":
        p.pos += 1
        return text[1:].strip('"')
    if text == "[":
        p.pos += 1
        p.enter(i)
        items = []
        while not p.accept("]"):
            items.append(attribute(p))
            if not p.accept(","):
                p.expect("]", "closing the array attribute")
                break
        p.depth -= 1
        return items
    if text == "(" and kind == "punct":  # a function type (function_type = (index) -> ())
        return function_type(p)
    if kind == "ident" and text == "unit":
        p.pos += 1
        return True
    value = p.parse_attr_value()
    if isinstance(value, (int, float, tuple, DenseConstant)) and not isinstance(value, bool) \
            and p.peek() == ":":
        p.pos += 1
        return Typed(value, p.parse_type())
    if isinstance(value, bool) and p.peek() == ":" and p.peek(1) == "i1":
        p.pos += 2
    return value


def _number_or_bool(p):
    if p.peek() in ("true", "false"):
        return p.next() == "true"
    return p.number()


def dictionary(p) -> dict:
    """``{name = attr, flag, ...}`` with generic attribute values."""
    return p.attr_dict(lambda: attribute(p))


def _plain(value):
    """``5 : i64`` -> 5; lists element-wise; other values unchanged."""
    if isinstance(value, Typed) and not isinstance(value.value, DenseConstant):
        return value.value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


plain = _plain


def _dynamic(values: list) -> list:
    return [None if v == DYNAMIC_SENTINEL else v for v in values]


def _segments(op: Op, attrs: dict, names: tuple[str, ...], operands: list[Value], p, i: int):
    """Split ``operands`` into groups by ``operandSegmentSizes`` (names in order)."""
    sizes = attrs.pop("operandSegmentSizes", None)
    if sizes is None:
        sizes = attrs.pop("operand_segment_sizes", None)
    if sizes is None or len(sizes) != len(names) or sum(sizes) != len(operands):
        p.fail(f"'{op.name}' in generic form needs operandSegmentSizes = array<i32: ...> with "
               f"{len(names)} entries ({', '.join(names)}) summing to its {len(operands)} "
               "operands", i)
    groups, k = {}, 0
    for name, n in zip(names, sizes):
        groups[name] = operands[k:k + n]
        k += n
    return groups


def parse_op(p, op: Op, name_i: int) -> list:
    """The rest of a generic op after its quoted name; fills ``op``, returns its result types."""
    p.expect("(", "opening the operand list")
    operands = p.operand_list(")")
    p.expect(")", "closing the operand list")
    attrs: dict = {}
    if p.peek() == "<" and p.peek(1) == "{":
        p.pos += 1
        attrs.update(dictionary(p))
        p.expect(">", "closing the properties")
    if p.peek() == "(" and p.peek(1) == "{":
        p.pos += 1
        while True:
            op.regions.append(p.parse_region())
            if not p.accept(","):
                break
        p.expect(")", "closing the region list")
    if p.peek() == "{":
        attrs.update(dictionary(p))
    p.expect(":", "before the generic op's function type")
    arg_types, result_types = function_type(p)
    if len(arg_types) != len(operands):
        p.fail(f"'{op.name}' has {len(operands)} operands but its type lists {len(arg_types)}",
               name_i)
    for v, t in zip(operands, arg_types):
        if v.type != t and v.type != ScalarType("<undefined>"):
            p.fail(f"operand {v.name} has type {v.type}, but the generic op's type says {t}",
                   name_i)
    adapt = _ADAPTERS.get(op.name)
    if adapt is None:
        family = op.name.split(".", 1)[0]
        adapt = _FAMILIES.get(family)
    if adapt is None:
        if op.name.split(".", 1)[0] in KNOWN_DIALECTS:
            p.fail(f"unknown operation '{op.name}'", name_i)
        op.operands = operands
        op.attrs.update(attrs)
        op.attrs["opaque"] = True
        return result_types
    adapt(p, op, operands, attrs, arg_types, result_types, name_i)
    return result_types


# ---------------------------------------------------------------------------------------------
# adapters: generic pieces -> what the custom handler of the op stores

def _copy_attrs(op: Op, attrs: dict, drop: tuple[str, ...] = ()) -> None:
    for k, v in attrs.items():
        if k not in drop and not isinstance(v, Opaque):
            op.attrs[k] = _plain(v)


def _a_simple(p, op, operands, attrs, arg_types, result_types, i):
    op.operands = operands
    pred = attrs.pop("predicate", None)
    if pred is not None:
        pred = _plain(pred)
        table = CMPI_PREDICATES if op.name == "arith.cmpi" else CMPF_PREDICATES
        if isinstance(pred, int):
            if not 0 <= pred < len(table):
                p.fail(f"predicate {pred} is not one of {op.name}'s (0..{len(table) - 1})", i)
            pred = table[pred]
        op.attrs["predicate"] = pred
    attrs.pop("fastmath", None)
    attrs.pop("overflowFlags", None)
    attrs.pop("roundingmode", None)
    _copy_attrs(op, attrs)
    op.attrs["types"] = list(arg_types)
    if op.name.split(".")[1] in _CASTS:
        op.attrs["to"] = result_types[0]


_CASTS = frozenset("extf truncf sitofp uitofp fptosi fptoui index_cast index_castui extsi extui "
                   "trunci bitcast".split())


def _a_constant(p, op, operands, attrs, arg_types, result_types, i):
    v = attrs.pop("value", None)
    if v is None:
        p.fail("arith.constant needs a value attribute", i)
    if isinstance(v, Typed):
        v = v.value
    if isinstance(v, bool):
        v = DenseConstant((v,), splat=True)
    elif not isinstance(v, DenseConstant):
        v = DenseConstant((v,), splat=True)
    op.attrs["value"] = v


def _a_none(p, op, operands, attrs, arg_types, result_types, i):
    op.operands = operands
    _copy_attrs(op, attrs)


def _a_typed(p, op, operands, attrs, arg_types, result_types, i):
    """Ops whose custom form lists the operand types (load, store, yields, extract, ...)."""
    op.operands = operands
    _copy_attrs(op, attrs)
    if arg_types:
        op.attrs["types"] = list(arg_types)


def _a_memory_view(p, op, operands, attrs, arg_types, result_types, i):
    g = _segments(op, attrs, ("offset", "sizes", "strides"), operands, p, i)
    for key in ("sizes", "strides"):
        static = attrs.pop("static_" + key, None)
        if static is None:
            static = [None] * len(g[key])
        static = _dynamic(_plain(static))
        if static.count(None) != len(g[key]):
            p.fail(f"static_{key} has {static.count(None)} dynamic entries but "
                   f"{len(g[key])} {key} operands are given", i)
        op.attrs["static_" + key] = static
    _copy_attrs(op, attrs)
    op.groups = {"sizes": g["sizes"], "strides": g["strides"]}
    op.operands = g["offset"] + g["sizes"] + g["strides"]
    op.groups["offset"] = op.operands[:1]


def _a_access_tile(p, op, operands, attrs, arg_types, result_types, i):
    g = _segments(op, attrs, ("base", "indices", "symbols"), operands, p, i)
    bm = attrs.pop("base_map", None)
    if not isinstance(bm, affine.AffineMap):
        p.fail("construct_access_tile in generic form needs base_map = affine_map<...>", i)
    _copy_attrs(op, attrs)
    default_order(op, "access_tile_set", "access_tile_order")
    if result_types and isinstance(result_types[0], AccessTileType):
        op.attrs["access_tile_set"] = clip_set_to_type(
            op.attrs.get("access_tile_set"), op.attrs.get("access_tile_order"),
            result_types[0].shape)
    op.attrs["base_map"] = bm
    op.attrs["base_type"] = arg_types[0]
    op.groups = {"base": g["base"], "indices": g["indices"], "symbols": g["symbols"]}
    op.operands = g["base"] + g["indices"] + g["symbols"]


def default_order(op: Op, set_key: str, order_key: str) -> None:
    """A missing order is the identity over the set's dims (the dialect's default)."""
    s = op.attrs.get(set_key)
    if order_key not in op.attrs and isinstance(s, affine.AffineSet):
        op.attrs[order_key] = affine.AffineMap(s.num_dims, 0, tuple(("d", k)
                                                                     for k in range(s.num_dims)))


def _a_indirect_tile(p, op, operands, attrs, arg_types, result_types, i):
    g = _segments(op, attrs, ("base", "indirect", "captured", "symbols"), operands, p, i)
    kinds = _plain(attrs.pop("per_dim_subscript_kinds", None))
    maps = attrs.pop("per_dim_subscript_maps", None)
    if not isinstance(kinds, list) or not isinstance(maps, list) or len(kinds) != len(maps):
        p.fail("construct_indirect_access_tile in generic form needs per_dim_subscript_kinds "
               "and per_dim_subscript_maps of one entry per base dimension", i)
    kinds = ["indirect" if k is True or k == "indirect" else "direct" for k in kinds]
    if len(op.regions) != 1:
        p.fail("construct_indirect_access_tile in generic form has one region whose block "
               "arguments are the intermediate variables", i)
    block = op.regions[0].block
    op.regions = []
    outer = _plain(attrs.pop("outer_variables", None))
    _copy_attrs(op, attrs)
    default_order(op, "variables_space_set", "variables_space_order")
    if result_types and isinstance(result_types[0], AccessTileType):
        op.attrs["variables_space_set"] = clip_set_to_type(
            op.attrs.get("variables_space_set"), op.attrs.get("variables_space_order"),
            result_types[0].shape)
    op.attrs["subscript_kinds"] = kinds
    op.attrs["subscript_maps"] = list(maps)
    op.attrs["types"] = list(arg_types[:1 + len(g["indirect"])])
    op.attrs["num_variables"] = len(block.args)
    op.attrs["variable_names"] = [a.name for a in block.args]
    if outer:
        op.attrs["outer_variables"] = list(outer)
    op.groups = {"base": g["base"], "indirect": g["indirect"], "captured": g["captured"],
                 "symbols": g["symbols"]}
    op.operands = g["base"] + g["indirect"] + g["captured"] + g["symbols"]


def _a_produce(p, op, operands, attrs, arg_types, result_types, i):
    _copy_attrs(op, attrs)
    op.operands = operands


def _a_reduce_tiles(p, op, operands, attrs, arg_types, result_types, i):
    _copy_attrs(op, attrs)
    op.attrs["types"] = list(arg_types[:1])
    op.operands = operands
    if len(operands) > 1:
        op.groups["identity"] = operands[1:]


def _a_for(p, op, operands, attrs, arg_types, result_types, i):
    if len(operands) < 3 or len(op.regions) != 1:
        p.fail("scf.for in generic form takes (lb, ub, step, inits...) and one region", i)
    _copy_attrs(op, attrs)
    op.operands = operands
    op.groups = {"bounds": operands[:3], "inits": operands[3:]}


def _a_parallel(p, op, operands, attrs, arg_types, result_types, i):
    g = _segments(op, attrs, ("lbs", "ubs", "steps", "inits"), operands, p, i)
    _copy_attrs(op, attrs)
    op.groups = g
    op.operands = g["lbs"] + g["ubs"] + g["steps"] + g["inits"]


def _a_linalg(p, op, operands, attrs, arg_types, result_types, i):
    g = _segments(op, attrs, ("ins", "outs"), operands, p, i)
    n_in = len(g["ins"])
    if op.name not in ("linalg.generic", "linalg.reduce"):
        op.regions = []  # a named op's body is implied by its name
        attrs.pop("indexing_maps", None)
    combiner = _single_combiner(op) if op.name == "linalg.reduce" else None
    if combiner is not None:  # the body `{ arith.addf }` stands for, as the custom form has it
        op.regions = []
        op.attrs["combiner"] = combiner
    attrs.pop("linalg.memoized_indexing_maps", None)
    _copy_attrs(op, attrs)
    op.groups = {"ins": g["ins"], "outs": g["outs"]}
    op.attrs["in_types"] = list(arg_types[:n_in])
    op.attrs["out_types"] = list(arg_types[n_in:])
    op.operands = g["ins"] + g["outs"]


def _single_combiner(op: Op) -> str | None:
    """``combiner`` when the reduce body is ``%r = combiner(%a, %b)`` on its two arguments and
    ``linalg.yield %r``."""
    if len(op.regions) != 1:
        return None
    block = op.regions[0].block
    if len(block.args) != 2 or len(block.ops) != 2 or block.ops[1].name != "linalg.yield":
        return None
    body = block.ops[0]
    if body.attrs.get("opaque") or len(body.results) != 1 or \
            block.ops[1].operands != [body.result] or body.operands != block.args:
        return None
    return body.name


def _a_linalg_index(p, op, operands, attrs, arg_types, result_types, i):
    op.attrs["dim"] = _plain(attrs.pop("dim", None))
    _copy_attrs(op, attrs)


def _a_reshape(p, op, operands, attrs, arg_types, result_types, i):
    op.operands = operands
    op.attrs["reassociation"] = _plain(attrs.pop("reassociation", None))
    static = attrs.pop("static_output_shape", None)
    if static is not None:
        op.attrs["output_shape"] = _dynamic(_plain(static))
    elif "output_shape" in attrs:
        op.attrs["output_shape"] = _plain(attrs.pop("output_shape"))
    _copy_attrs(op, attrs)
    op.attrs["types"] = list(arg_types[:1])


def _a_slice(p, op, operands, attrs, arg_types, result_types, i):
    insert = op.name == "tensor.insert_slice"
    heads = ("source", "dest") if insert else ("source",)
    g = _segments(op, attrs, heads + ("offsets", "sizes", "strides"), operands, p, i)
    for key in ("offsets", "sizes", "strides"):
        static = _dynamic(_plain(attrs.pop("static_" + key, [None] * len(g[key]))))
        op.attrs["static_" + key] = static
        op.groups[key] = g[key]
    _copy_attrs(op, attrs)
    op.attrs["types"] = [arg_types[0]]
    op.operands = [v for h in heads for v in g[h]] + g["offsets"] + g["sizes"] + g["strides"]


def _a_extract(p, op, operands, attrs, arg_types, result_types, i):
    op.operands = operands
    _copy_attrs(op, attrs)
    op.attrs["types"] = [arg_types[0]]


def _a_runtime_arg_extract(p, op, operands, attrs, arg_types, result_types, i):
    kind = _plain(attrs.pop("kind", None))
    if isinstance(kind, int) and 0 <= kind < len(EXTRACT_KINDS):
        kind = EXTRACT_KINDS[kind]
    if kind not in EXTRACT_KINDS:
        p.fail("runtime_arg_extract in generic form needs kind = value, granularity or "
               "upperbound (or 0, 1, 2)", i)
    op.attrs["kind"] = kind
    _copy_attrs(op, attrs)
    op.attrs["types"] = list(arg_types)
    op.operands = operands


def _a_call(p, op, operands, attrs, arg_types, result_types, i):
    callee = attrs.pop("callee", None)
    if not isinstance(callee, str):
        p.fail("func.call in generic form needs callee = @name", i)
    op.attrs["callee"] = callee
    _copy_attrs(op, attrs)
    op.attrs["types"] = list(arg_types)
    op.operands = operands


def _a_return(p, op, operands, attrs, arg_types, result_types, i):
    op.name = "return"
    op.operands = operands
    if arg_types:
        op.attrs["types"] = list(arg_types)


def _a_reduce_return(p, op, operands, attrs, arg_types, result_types, i):
    op.operands = operands
    op.attrs["types"] = list(arg_types)


_ADAPTERS = {
    "arith.constant": _a_constant,
    "ktdp.get_compute_tile_id": _a_none,
    "ktdp.construct_memory_view": _a_memory_view,
    "ktdp.construct_distributed_memory_view": _a_typed,
    "ktdp.construct_access_tile": _a_access_tile,
    "ktdp.construct_indirect_access_tile": _a_indirect_tile,
    "ktdp.load": _a_typed,
    "ktdp.store": _a_typed,
    "ktdp.inter_tile_produce": _a_produce,
    "ktdp.inter_tile_reduce": _a_reduce_tiles,
    "ktdp.inter_tile_consume": _a_reduce_tiles,  # the future, and no identity
    "ktdp.yield_partial": _a_typed,
    "ktdp.yield_reduced": _a_typed,
    "ktdp.runtime_arg_extract": _a_runtime_arg_extract,
    # the implicit terminator of an indirect tile's hidden region (the region is dropped)
    "ktdp.region_terminator": _a_none,
    "scf.for": _a_for,
    "scf.if": _a_none,
    "scf.while": _a_none,
    "scf.condition": _a_typed,
    "scf.yield": _a_typed,
    "scf.parallel": _a_parallel,
    "scf.reduce": _a_typed,
    "scf.reduce.return": _a_reduce_return,
    "linalg.yield": _a_typed,
    "linalg.index": _a_linalg_index,
    "tensor.yield": _a_typed,
    "tensor.empty": _a_none,
    "tensor.splat": _a_none,
    "tensor.extract": _a_extract,
    "tensor.expand_shape": _a_reshape,
    "tensor.collapse_shape": _a_reshape,
    "tensor.reshape": _a_typed,
    "tensor.extract_slice": _a_slice,
    "tensor.insert_slice": _a_slice,
    "tensor.from_elements": _a_none,
    "tensor.generate": _a_none,
    "func.call": _a_call,
    "func.return": _a_return,
    "return": _a_return,
}
def _a_spyreop(p, op, operands, attrs, arg_types, result_types, i):
    """spyreop ops keep their attributes as written (typed values, ``#spyreop.*<...>`` enums):
    the dialect reads them in that form whichever way the op was written."""
    op.operands = operands
    op.attrs.update(attrs)


_FAMILIES = {"arith": _a_simple, "math": _a_simple, "linalg": _a_linalg, "spyreop": _a_spyreop}


def parse_function(p) -> Function:
    """``"func.func"() <{function_type = (T...) -> (R...), sym_name = "f"}> ({^bb0(args): ...})
    {attributes} : () -> ()`` (the parser stands on the quoted name)."""
    loc = p.loc()
    name_i = p.pos
    p.pos += 1
    p.expect("(")
    p.expect(")")
    attrs: dict = {}
    if p.peek() == "<" and p.peek(1) == "{":
        p.pos += 1
        attrs.update(dictionary(p))
        p.expect(">")
    p.scopes = [{}]
    p.expect("(", "opening the function's region")
    body = p.parse_region(open_scope=False)
    p.expect(")", "closing the function's region")
    if p.peek() == "{":
        attrs.update(dictionary(p))
    p.expect(":")
    function_type(p)
    name = attrs.pop("sym_name", None)
    ftype = attrs.pop("function_type", None)
    if not isinstance(name, str) or not isinstance(ftype, tuple):
        p.fail("func.func in generic form needs sym_name and function_type", name_i)
    arg_types, results = ftype
    block = body.block
    args = block.args
    block.args = []
    if [a.type for a in args] != list(arg_types):
        p.fail(f"@{name}: the entry block's arguments do not match function_type", name_i)
    fn_attrs = {k: _plain(v) for k, v in attrs.items()
                if k not in ("arg_attrs", "res_attrs", "sym_visibility")}
    grid = (1, 1, 1)
    g = fn_attrs.get("grid")
    if g is not None:
        if (not isinstance(g, list) or not 1 <= len(g) <= 3
                or not all(isinstance(x, int) and x >= 1 for x in g)):
            p.fail("grid must be a list of 1 to 3 positive integers", name_i)
        grid = tuple(list(g) + [1] * (3 - len(g)))
    fn = Function(name, loc, args, body, fn_attrs, grid, results=list(results))
    p.trailing_loc(fn)
    return fn


__all__ = ["parse_op", "parse_function", "attribute", "dictionary", "plain", "Typed", "Opaque",
           "DYNAMIC_SENTINEL", "CMPI_PREDICATES", "CMPF_PREDICATES", "default_order"]
