"""The custom assembly format of each op: one handler per op name (:data:`HANDLERS`).

A handler takes the parser positioned after the op name, fills ``op`` (operands, operand groups,
attributes, regions) and returns the result types. It may look at most two tokens past the last
one it consumes (op_templates.py relies on it).
"""

from __future__ import annotations

from .. import affine
from ..errors import Location
from ..ir import (INDEX, AccessTileType, DenseConstant, Op, Region, ScalarType, TensorType, Value)
from . import generic_form, tile_types
from ..registry import Table


# ---------------------------------------------------------------------------------------------
# op handlers: parse the rest of the op after its name; return the result types

def _shaped_like(t, elem: str):
    if isinstance(t, TensorType):
        return TensorType(t.shape, elem)
    return ScalarType(elem)


def _h_constant(p, op: Op):
    i = p.pos
    if p.kind() == "dense":
        p.pos += 1
        value = p.dense(p.texts[i], i)
    elif p.peek() in ("true", "false"):
        value = DenseConstant((p.next() == "true",), splat=True)
    else:
        value = DenseConstant((p.number(),), splat=True)
    p.expect(":", "before the constant's type")
    t = p.parse_type()
    op.attrs["value"] = value
    return [t]


def _h_simple(p, op: Op):
    """``op [pred,] %a, %b, ... [attr] : T[, T...] [to T2]`` for arith/math elementwise ops."""
    name = op.name
    if name in ("arith.cmpi", "arith.cmpf"):
        pred = p.expect_kind("ident", "a comparison predicate")
        p.expect(",")
        op.attrs["predicate"] = pred
    op.operands = p.operand_list()
    if p.peek() == "fastmath" or p.kind() == "hashid" and p.peek().startswith("#arith"):
        while p.peek() != ":":
            p.next()
    if p.kind() == "punct" and p.peek() == "{":
        op.attrs.update(p.attr_dict())
    p.expect(":", f"before the type of '{name}'")
    types = p.type_list()
    op.attrs["types"] = types
    if p.accept("to"):
        to = p.parse_type()
        op.attrs["to"] = to
        return [to]
    if name in ("arith.cmpi", "arith.cmpf"):
        return [_shaped_like(types[0], "i1")]
    return [types[-1]]


def _h_get_tile_id(p, op: Op):
    p.expect(":", "before the result types")
    return p.type_list()


def bracket_ints_or_values(p, what: str) -> tuple[list, list[Value]]:
    """``[4, %n, ...]`` -> static list (None marks a dynamic slot), dynamic operand list."""
    p.expect("[", f"opening {what}")
    static: list = []
    dyn: list[Value] = []
    while not p.accept("]"):
        if p.kind() == "ssa":
            static.append(None)
            dyn.append(p.operand())
        else:
            i = p.pos
            v = p.number()
            if not isinstance(v, int):
                p.fail(f"{what} entries must be integers or SSA values", i)
            static.append(v)
        if not p.accept(","):
            p.expect("]", f"closing {what}")
            break
    return static, dyn


def _h_memory_view(p, op: Op):
    op.operands = [p.operand()]
    p.expect(",")
    for key in ("sizes", "strides"):
        p.expect(key, "in construct_memory_view")
        p.expect(":")
        static, dyn = bracket_ints_or_values(p, key)
        op.attrs["static_" + key] = static
        op.groups[key] = dyn
        if key == "sizes":
            p.expect(",")
    op.attrs.update(p.attr_dict() if p.peek() == "{" else {})
    p.expect(":", "before the memref type")
    op.operands = op.operands + op.groups["sizes"] + op.groups["strides"]
    op.groups["offset"] = op.operands[:1]
    return [p.parse_type()]


def _h_distributed_view(p, op: Op):
    p.expect("(")
    op.operands = p.operand_list()
    p.expect(":", "before the partition types")
    op.attrs["types"] = p.type_list()
    p.expect(")")
    if p.peek() == "{":
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the result type")
    return [p.parse_type()]


def _subscript_expr(p, captured: list[Value], table: dict[str, tuple],
                    stop: tuple[str, ...]) -> affine.Expr:
    """Parse an affine expression over SSA names; new outer names are appended to ``captured``."""
    start = p.pos
    # fast path: a lone SSA name or integer (the common `%c0`, `%k7`, `3`)
    if p.texts[start + 1] in stop:
        kind, text = p.kinds[start], p.texts[start]
        if kind == "int":
            p.pos += 1
            return ("c", int(text))
        if kind == "ssa":
            p.pos += 1
            ref = table.get(text)
            if ref is None:
                captured.append(p.lookup(text, start))
                ref = ("d", len(captured) - 1)
                table[text] = ref
            return ref
    depth = 0
    while True:
        t = p.peek()
        if p.kind() == "eof":
            p.fail("unexpected end of file inside a subscript")
        if depth == 0 and t in stop:
            break
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        p.pos += 1
    toks = [(p.kinds[j] if p.kinds[j] != "int" else "num", p.texts[j], j)
            for j in range(start, p.pos)]
    if not toks:
        p.fail("empty subscript", start)

    def resolve(name: str):
        if not name.startswith("%"):
            return ("d", -1) if name in ("floordiv", "ceildiv", "mod") else None
        if name in table:
            return table[name]
        v = p.lookup(name, start)
        captured.append(v)
        ref = ("d", len(captured) - 1)
        table[name] = ref
        return ref

    ep = affine.ExprParser([(k if k != "ssa" else "ssa", t, j) for k, t, j in toks], resolve)
    try:
        e = ep.parse_expr()
        if ep.pos != len(toks):
            raise affine.AffineSyntaxError(f"unexpected {toks[ep.pos][1]!r} in subscript",
                                           toks[ep.pos][2])
    except affine.AffineSyntaxError as exc:
        p.fail(str(exc), exc.offset if isinstance(exc.offset, int) and exc.offset >= start
               else start)
    return e


def _symbols_clause(p) -> list[Value]:
    if p.peek() == "[" and p.peek(1) == "symbols":
        p.pos += 2
        p.expect("(")
        vals = p.operand_list(")")
        p.expect(")")
        p.expect("]")
        return vals
    if p.peek() == "symbols":
        p.pos += 1
        p.expect("(")
        vals = p.operand_list(")")
        p.expect(")")
        return vals
    return []


def _h_access_tile(p, op: Op):
    base = p.operand()
    p.expect("[", "opening the subscripts")
    captured: list[Value] = []
    table: dict[str, tuple] = {}
    exprs: list = []
    if not p.accept("]"):
        while True:
            exprs.append(_subscript_expr(p, captured, table, (",", "]")))
            if p.accept(","):
                continue
            p.expect("]", "closing the subscripts")
            break
    syms = _symbols_clause(p)
    op.attrs.update(p.attr_dict())
    generic_form.default_order(op, "access_tile_set", "access_tile_order")
    p.expect(":", "before the base type")
    base_t = p.parse_type()
    p.expect("->")
    result = p.parse_type()
    if isinstance(result, AccessTileType):
        op.attrs["access_tile_set"] = tile_types.clip_set_to_type(
            op.attrs.get("access_tile_set"), op.attrs.get("access_tile_order"), result.shape)
    op.attrs["base_map"] = affine.AffineMap(len(captured), 0, tuple(exprs))
    op.attrs["base_type"] = base_t
    op.groups = {"base": [base], "indices": captured, "symbols": syms}
    op.operands = [base] + captured + syms
    return [result]


def _h_indirect_tile(p, op: Op):
    p.expect("intermediate_variables", "after construct_indirect_access_tile")
    p.expect("(")
    var_names: list[tuple[str, Location]] = []
    while not p.accept(")"):
        vi = p.pos
        var_names.append((p.expect_kind("ssa", "an intermediate variable"), p.loc(vi)))
        if not p.accept(","):
            p.expect(")")
            break
    base = p.operand()
    p.expect("[", "opening the subscripts")
    captured: list[Value] = []
    nvars = len(var_names)
    # variables come after captured values in the domain; give them provisional refs
    table: dict[str, tuple] = {n: ("v", k) for k, (n, _) in enumerate(var_names)}
    # A variable named like a value of an enclosing scope (`intermediate_variables(%c2, %k)`)
    # stands for that value plus its iterator: only sound when the iterator is pinned to 0,
    # which verify.py requires (outer_variables records them).
    outer: list[tuple[int, str]] = []
    for k, (n, _) in enumerate(var_names):
        if any(n in scope for scope in p.scopes):
            captured.append(p.lookup(n, p.pos))
            table[n] = ("+", ("v", k), ("d", len(captured) - 1))
            outer.append((k, n))
    subs: list[tuple] = []  # ("direct", expr) | ("indirect", index_view, [exprs])
    while True:
        if p.peek() == "ind":
            p.pos += 1
            p.expect("(")
            iv = p.operand()
            p.expect("[")
            exprs = []
            while True:
                exprs.append(_subscript_expr(p, captured, table, (",", "]")))
                if p.accept(","):
                    continue
                p.expect("]")
                break
            p.expect(")", "closing ind(...)")
            subs.append(("indirect", iv, exprs))
        else:
            subs.append(("direct", _subscript_expr(p, captured, table, (",", "]"))))
        if p.accept(","):
            continue
        p.expect("]", "closing the subscripts")
        break
    syms = _symbols_clause(p)
    op.attrs.update(p.attr_dict())
    p.expect(":", "before the operand types")
    types = p.type_list()
    p.expect("->")
    result = p.parse_type()
    ncap = len(captured)

    def fix(e):  # ("v", k) -> ("d", ncap + k)
        if e[0] == "v":
            return ("d", ncap + e[1])
        if e[0] in ("c", "d", "s"):
            return e
        return (e[0], fix(e[1]), fix(e[2]))

    kinds, maps, index_views = [], [], []
    for s in subs:
        if s[0] == "direct":
            kinds.append("direct")
            maps.append(affine.AffineMap(ncap + nvars, 0, (fix(s[1]),)))
        else:
            kinds.append("indirect")
            maps.append(affine.AffineMap(ncap + nvars, 0, tuple(fix(e) for e in s[2])))
            index_views.append(s[1])
    op.attrs["subscript_kinds"] = kinds
    op.attrs["subscript_maps"] = maps
    if isinstance(result, AccessTileType):
        generic_form.default_order(op, "variables_space_set", "variables_space_order")
        op.attrs["variables_space_set"] = tile_types.clip_set_to_type(
            op.attrs.get("variables_space_set"), op.attrs.get("variables_space_order"),
            result.shape)
    op.attrs["types"] = types
    op.attrs["num_variables"] = nvars
    op.attrs["variable_names"] = [n for n, _ in var_names]
    if outer:
        op.attrs["outer_variables"] = [k for k, _ in outer]
    op.groups = {"base": [base], "indirect": index_views, "captured": captured, "symbols": syms}
    op.operands = [base] + index_views + captured + syms
    return [result]


def _h_load(p, op: Op):
    op.operands = [p.operand()]
    if p.peek() == "{":  # attr-dict (KtdpOps.td), e.g. {padding = -1.0} for masked points
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the access tile type")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    return [p.parse_type()]


def _h_store(p, op: Op):
    op.operands = p.operand_list()
    p.expect(":", "before the operand types")
    op.attrs["types"] = p.type_list()
    return []


def _region_with_typed_args(p) -> Region:
    return p.parse_region()


def _h_produce(p, op: Op):
    p.expect("producer_tiles_per_group")
    p.expect("=")
    op.attrs["producer_tiles_per_group"] = p.parse_attr_value()
    if p.accept(":"):
        op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    result = p.parse_type()
    op.regions = [p.parse_region()]
    return [result]


def _h_reduce_tiles(p, op: Op):
    p.expect("(")
    op.operands = [p.operand()]
    p.expect(")")
    while p.peek() != ":":
        key = p.expect_kind("ident", "an inter_tile_reduce clause")
        if key == "identity":
            p.expect("(")
            ident = p.operand()
            p.expect(":")
            p.parse_type()
            p.expect(")")
            op.groups["identity"] = [ident]
        else:
            p.expect("=")
            op.attrs[key] = p.parse_attr_value()
        p.accept(",")
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->")
    result = p.parse_type()
    op.operands = op.operands + op.groups.get("identity", [])
    op.regions = [p.parse_region()]
    return [result]


def h_yield(p, op: Op):
    if p.kind() == "ssa":
        op.operands = p.operand_list()
        p.expect(":", "before the yielded types")
        op.attrs["types"] = p.type_list()
    return []


def _h_return(p, op: Op):
    if p.kind() == "ssa":
        op.operands = p.operand_list()
        p.expect(":")
        op.attrs["types"] = p.type_list()
    return []


def _h_for(p, op: Op):
    ivi = p.pos
    iv_name = p.expect_kind("ssa", "the induction variable")
    p.expect("=")
    lb = p.operand()
    p.expect("to")
    ub = p.operand()
    p.expect("step")
    st = p.operand()
    inits: list[Value] = []
    arg_names: list[tuple[str, Location]] = []
    if p.accept("iter_args"):
        p.expect("(")
        while not p.accept(")"):
            ai = p.pos
            arg_names.append((p.expect_kind("ssa", "an iter_args name"), p.loc(ai)))
            p.expect("=")
            inits.append(p.operand())
            if not p.accept(","):
                p.expect(")")
                break
    result_types = _arrow_types(p)
    iv_type = INDEX
    if p.accept(":"):
        iv_type = p.parse_type()
    if len(result_types) != len(inits):
        p.fail(f"scf.for has {len(inits)} iter_args but {len(result_types)} result types", ivi)
    p.scopes.append({})
    args = [p.define(iv_name, iv_type, p.loc(ivi))]
    for (n, l), t in zip(arg_names, result_types):
        args.append(p.define(n, t, l))
    body = p.parse_region(args, open_scope=False)
    p.scopes.pop()
    op.operands = [lb, ub, st] + inits
    op.groups = {"bounds": [lb, ub, st], "inits": inits}
    op.regions = [body]
    return result_types


def _arrow_types(p) -> list:
    """An optional ``-> T`` or ``-> (T, ...)`` (``-> ()`` too): the listed types."""
    if not p.accept("->"):
        return []
    if not p.accept("("):
        return [p.parse_type()]
    if p.accept(")"):
        return []
    types = p.type_list()
    p.expect(")")
    return types


def _h_if(p, op: Op):
    op.operands = [p.operand()]
    result_types = _arrow_types(p)
    op.regions = [p.parse_region()]
    if p.accept("else"):
        op.regions.append(p.parse_region())
    return result_types


def _ins_outs(p, key: str) -> tuple[list[Value], list]:
    p.expect(key)
    p.expect("(")
    vals = p.operand_list(")")
    types: list = []
    if p.accept(":"):
        types = p.type_list()
    p.expect(")", f"closing {key}(...)")
    return vals, types


def _h_linalg(p, op: Op):
    """Named and generic linalg ops: clauses in any order until the op ends."""
    result_types: list = []
    while True:
        t = p.peek()
        k = p.kind()
        if t == "{" and k == "punct":
            if p.kind(1) == "ident" and p.peek(2) == "}":  # shorthand combiner { arith.addf }
                p.pos += 1
                op.attrs["combiner"] = p.next()
                p.pos += 1
            elif p.kind(1) == "ident" and p.peek(2) == "=":
                op.attrs.update(p.attr_dict())
            else:
                op.regions.append(p.parse_region())
        elif t == "ins" and p.peek(1) == "(":
            op.groups["ins"], op.attrs["in_types"] = _ins_outs(p, "ins")
        elif t == "outs" and p.peek(1) == "(":
            op.groups["outs"], op.attrs["out_types"] = _ins_outs(p, "outs")
        elif k == "ident" and p.peek(1) == "=" and t not in ("ins", "outs"):
            p.pos += 2
            op.attrs[t] = p.parse_attr_value()
        elif t == "(" and p.kind(1) == "ssa" and p.peek(2) == ":":
            # explicit region arguments: (%a: T, %b: T) { ... }
            p.pos += 1
            args = []
            while not p.accept(")"):
                ai = p.pos
                n = p.expect_kind("ssa", "a region argument")
                p.expect(":")
                args.append(Value(n, p.parse_type(), p.loc(ai)))
                if not p.accept(","):
                    p.expect(")")
                    break
            op.regions.append(p.parse_region(args))
        elif t == "->":
            p.pos += 1
            if p.accept("("):
                result_types = p.type_list()
                p.expect(")")
            else:
                result_types = p.type_list()
        else:
            break
    ins = op.groups.setdefault("ins", [])
    outs = op.groups.setdefault("outs", [])
    op.operands = ins + outs
    if not result_types:
        result_types = [o.type for o in outs if isinstance(o.type, TensorType)]
    return result_types


def _h_linalg_index(p, op: Op):
    i = p.pos
    dim = p.number()
    if not isinstance(dim, int):
        p.fail("linalg.index takes an integer dimension", i)
    op.attrs["dim"] = dim
    p.expect(":")
    return [p.parse_type()]


def _h_empty(p, op: Op):
    p.expect("(")
    op.operands = p.operand_list(")")
    p.expect(")")
    p.expect(":")
    return [p.parse_type()]


def _h_splat(p, op: Op):
    op.operands = [p.operand()]
    if p.peek() == "[":  # dynamic sizes
        p.pos += 1
        op.operands += p.operand_list("]")
        p.expect("]")
    p.expect(":")
    return [p.parse_type()]


def _h_extract(p, op: Op):
    op.operands = [p.operand()]
    p.expect("[")
    op.operands += p.operand_list("]")
    p.expect("]")
    p.expect(":")
    t = p.parse_type()
    op.attrs["types"] = [t]
    if not isinstance(t, TensorType):
        p.fail("tensor.extract needs a tensor type")
    return [ScalarType(t.elem)]


def _reassoc(p) -> list[list[int]]:
    i = p.pos
    v = p.parse_attr_value()
    if not isinstance(v, list) or not all(isinstance(g, list) for g in v):
        p.fail("expected a reassociation list like [[0, 1], [2]]", i)
    return v


def _h_reshape(p, op: Op):
    op.operands = [p.operand()]
    op.attrs["reassociation"] = _reassoc(p)
    if p.accept("output_shape"):
        static, dyn = bracket_ints_or_values(p, "output_shape")
        op.attrs["output_shape"] = static
        op.operands += dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("into")
    return [p.parse_type()]


def _slice_lists(p, op: Op):
    dyn_all: list[Value] = []
    for key in ("offsets", "sizes", "strides"):
        static, dyn = bracket_ints_or_values(p, key)
        op.attrs["static_" + key] = static
        op.groups[key] = dyn
        dyn_all += dyn
    return dyn_all


def _h_extract_slice(p, op: Op):
    src = p.operand()
    dyn = _slice_lists(p, op)
    op.operands = [src] + dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("to")
    return [p.parse_type()]


def _h_insert_slice(p, op: Op):
    src = p.operand()
    p.expect("into")
    dst = p.operand()
    dyn = _slice_lists(p, op)
    op.operands = [src, dst] + dyn
    p.expect(":")
    op.attrs["types"] = [p.parse_type()]
    p.expect("into")
    return [p.parse_type()]


def _h_from_elements(p, op: Op):
    op.operands = p.operand_list()
    p.expect(":")
    return [p.parse_type()]


def _h_generate(p, op: Op):
    op.operands = p.operand_list() if p.kind() == "ssa" else []
    op.regions = [p.parse_region()]
    p.expect(":")
    return [p.parse_type()]


_HANDLERS = Table("syntax")  # op name -> handler, a view of the registry (registry.py)
_HANDLERS.update({
    "arith.constant": _h_constant,
    "ktdp.get_compute_tile_id": _h_get_tile_id,
    "ktdp.construct_memory_view": _h_memory_view,
    "ktdp.construct_distributed_memory_view": _h_distributed_view,
    "ktdp.construct_access_tile": _h_access_tile,
    "ktdp.construct_indirect_access_tile": _h_indirect_tile,
    "ktdp.load": _h_load,
    "ktdp.store": _h_store,
    "ktdp.inter_tile_produce": _h_produce,
    "ktdp.inter_tile_reduce": _h_reduce_tiles,
    "ktdp.yield_partial": h_yield,
    "ktdp.yield_reduced": h_yield,
    "scf.for": _h_for,
    "scf.if": _h_if,
    "scf.yield": h_yield,
    "linalg.yield": h_yield,
    "tensor.yield": h_yield,
    "return": _h_return,
    "linalg.index": _h_linalg_index,
    "tensor.empty": _h_empty,
    "tensor.splat": _h_splat,
    "tensor.extract": _h_extract,
    "tensor.expand_shape": _h_reshape,
    "tensor.collapse_shape": _h_reshape,
    "tensor.extract_slice": _h_extract_slice,
    "tensor.insert_slice": _h_insert_slice,
    "tensor.from_elements": _h_from_elements,
    "tensor.generate": _h_generate,
})
for _n in ("matmul", "matmul_transpose_b", "batch_matmul", "reduce", "broadcast", "transpose",
           "generic", "fill", "add", "sub", "mul", "div", "max", "min", "exp", "copy"):
    _HANDLERS["linalg." + _n] = _h_linalg
for _n in ("addf subf mulf divf remf negf absf maximumf minimumf maxf minf maxnumf minnumf "
           "addi subi muli divui divsi floordivsi ceildivsi remui remsi andi ori xori shli shrsi "
           "shrui minsi maxsi minui maxui cmpi cmpf select extf truncf sitofp uitofp fptosi "
           "fptoui index_cast index_castui extsi extui trunci bitcast").split():
    _HANDLERS["arith." + _n] = _h_simple
for _n in ("exp exp2 log log2 log10 log1p sqrt rsqrt tanh sin cos erf powf absf absi ceil floor "
           "fma round").split():
    _HANDLERS["math." + _n] = _h_simple

from . import ops_frontend as _ops_frontend  # noqa: E402

_HANDLERS.update(_ops_frontend.HANDLERS)

KNOWN_OPS = frozenset(_HANDLERS)
