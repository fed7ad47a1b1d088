"""IR -> MLIR's generic op form (``print_generic(module)``), which parse/generic_form.py reads
back into the same IR.

Every op prints as ``%r = "dialect.op"(%operands) <{properties}> ({regions}) : (operand types)
-> (result types)``; functions as ``"func.func"`` ops inside ``"builtin.module"``. Values are
renamed ``%0, %1, ...`` in definition order (the IR's names may shadow one another across
regions; fresh names never do) except function arguments, which keep their names (plans bind
arguments by name), attribute aliases are written out in full, and attributes the
IR derives from operand types (declared type lists, a tile's base type) are left out: the
generic form's function type carries them. Where MLIR spells an attribute its own way, that
spelling is printed: ``operandSegmentSizes``, ``static_*`` arrays with the dynamic-size sentinel,
integer comparison predicates, ``#linalg.iterator_type<...>``, ``array<i64: ...>`` dimension
lists. MLIR locations the program gave (``loc(...)`` on ops, arguments, functions and the
module) are written back in full after what carries them, without aliases.
"""

from __future__ import annotations

from ..ir import affine
from ..ir.nodes import (DenseConstant, Function, MemorySpace, Module, Op, Region, ScalarType,
                 TensorType, TileFutureType, Value)
from .generic_form import (CMPF_PREDICATES, CMPI_PREDICATES, DYNAMIC_SENTINEL, Opaque,
                                 Typed)
from .ops_frontend import EXTRACT_KINDS

# attributes the parser rebuilds from the operand types of the generic form
_DERIVED = {"types", "in_types", "out_types", "base_type", "to", "num_variables",
            "variable_names", "combiner", "opaque"}
_I64_ARRAYS = {"dimensions", "permutation"}


def _expr_text(e, dn: list[str], sn: list[str]) -> str:
    """An affine expression with as few parentheses as MLIR's syntax allows (the lexer reads
    affine_map/affine_set tokens with a bounded parenthesis depth)."""
    lf = affine.linear_form(e)
    if lf is None:
        kind = e[0]
        a, b = _expr_text(e[1], dn, sn), _expr_text(e[2], dn, sn)
        if kind in ("floordiv", "ceildiv", "mod"):
            return f"({a}) {kind} {b}" if not _atomic(e[1]) else f"{a} {kind} {b}"
        if kind == "*":
            return f"({a}) * ({b})"
        return f"{a} + {b}"
    coeffs, k = lf
    out = ""
    for (kind, i), c in coeffs.items():  # in the order the expression names them
        if c == 0:
            continue
        x = dn[i] if kind == "d" else sn[i]
        term = x if abs(c) == 1 else f"{x} * {abs(c)}"
        if not out:
            out = term if c > 0 else f"-{term}"
        else:
            out += f" + {term}" if c > 0 else f" - {term}"
    if k or not out:
        out = str(k) if not out else (f"{out} + {k}" if k > 0 else f"{out} - {-k}")
    return out


def _atomic(e) -> bool:
    return e[0] in ("c", "d", "s")


def _map_text(m: affine.AffineMap) -> str:
    dn = [f"d{i}" for i in range(m.num_dims)]
    sn = [f"s{i}" for i in range(m.num_syms)]
    syms = f"[{', '.join(sn)}]" if sn else ""
    return f"affine_map<({', '.join(dn)}){syms} -> ({', '.join(_expr_text(r, dn, sn) for r in m.results)})>"


def _set_text(s: affine.AffineSet) -> str:
    dn = [f"d{i}" for i in range(s.num_dims)]
    sn = [f"s{i}" for i in range(s.num_syms)]
    syms = f"[{', '.join(sn)}]" if sn else ""
    cs = ", ".join(f"{_expr_text(e, dn, sn)} {'==' if q else '>='} 0" for e, q in s.constraints)
    return f"affine_set<({', '.join(dn)}){syms} : ({cs})>"


def type_text(t) -> str:
    if isinstance(t, TileFutureType):
        groups = f", groups = {_set_text(t.groups)}" if t.groups is not None else ""
        return f"!ktdp.tile_future<({', '.join(map(type_text, t.partials))}){groups}>"
    return str(t)


def _literal(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple) and v and v[0] == "hex":
        return hex(v[1])
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _dense(c: DenseConstant) -> str:
    if c.splat:
        return f"dense<{_literal(c.values[0])}>"
    return f"dense<[{', '.join(_literal(v) for v in c.values)}]>"


def attr_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return _literal(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(attr_text(x) for x in v) + "]"
    if isinstance(v, affine.AffineMap):
        return _map_text(v)
    if isinstance(v, affine.AffineSet):
        return _set_text(v)
    if isinstance(v, MemorySpace):
        return str(v)
    if isinstance(v, DenseConstant):
        return _dense(v)
    if isinstance(v, Opaque):  # a dialect attribute kept as written (unregistered ops)
        return v.text
    if isinstance(v, Typed):
        return f"{attr_text(v.value)} : {type_text(v.type)}"
    return type_text(v)


def _loc(x) -> str:
    """`` loc(...)`` for an op, value, function or module whose Location has a source."""
    loc = x.loc
    source = None if loc is None else loc.source
    return "" if source is None else f" loc({source.mlir()})"


def _i64_array(values) -> str:
    vals = [DYNAMIC_SENTINEL if x is None else x for x in values]
    return f"array<i64{': ' if vals else ''}{', '.join(str(x) for x in vals)}>"


def _segments(*sizes: int) -> str:
    return f"array<i32: {', '.join(str(s) for s in sizes)}>"


class _Printer:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.reserved: set[str] = set()  # kept names (function arguments): never handed out
        self.counter = 0
        self.lines: list[str] = []

    def name(self, v: Value) -> str:
        n = self.names.get(id(v))
        if n is None:
            while f"%{self.counter}" in self.reserved:
                self.counter += 1
            n = self.names[id(v)] = f"%{self.counter}"
            self.counter += 1
        return n

    def keep(self, v: Value) -> None:
        """``v`` is printed under its own name (a function argument: plans bind by name)."""
        self.names[id(v)] = v.name
        self.reserved.add(v.name)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    # -- properties -----------------------------------------------------------------------
    def properties(self, op: Op) -> dict[str, str]:
        a, g, name = op.attrs, op.groups, op.name
        props: dict[str, str] = {}
        for k, v in a.items():
            if k in _DERIVED and not (name == "ktdp.inter_tile_produce" and k == "types"):
                continue
            props[k] = _i64_array(v) if k in _I64_ARRAYS else attr_text(v)
        if name in ("arith.cmpi", "arith.cmpf"):
            table = CMPI_PREDICATES if name == "arith.cmpi" else CMPF_PREDICATES
            props["predicate"] = f"{table.index(a['predicate'])} : i64"
        elif name == "arith.constant":
            c, t = a["value"], op.result.type
            if isinstance(t, TensorType):
                props["value"] = f"{_dense(c)} : {type_text(t)}"
            elif isinstance(c.values[0], bool):
                props["value"] = _literal(c.values[0])
            else:
                props["value"] = f"{_literal(c.values[0])} : {type_text(t)}"
        elif name == "ktdp.construct_memory_view":
            props["operandSegmentSizes"] = _segments(1, len(g["sizes"]), len(g["strides"]))
            props["static_sizes"] = _i64_array(a["static_sizes"])
            props["static_strides"] = _i64_array(a["static_strides"])
        elif name == "ktdp.construct_access_tile":
            props["operandSegmentSizes"] = _segments(1, len(g["indices"]), len(g["symbols"]))
        elif name == "ktdp.construct_indirect_access_tile":
            props["operandSegmentSizes"] = _segments(1, len(g["indirect"]), len(g["captured"]),
                                                     len(g["symbols"]))
            props["per_dim_subscript_kinds"] = attr_text([k == "indirect"
                                                          for k in a["subscript_kinds"]])
            props["per_dim_subscript_maps"] = attr_text(a["subscript_maps"])
            del props["subscript_kinds"], props["subscript_maps"]
            if "outer_variables" in a:
                props["outer_variables"] = _i64_array(a["outer_variables"])
        elif name == "ktdp.runtime_arg_extract":
            props["kind"] = f"{EXTRACT_KINDS.index(a['kind'])} : i32"
        elif name == "func.call":
            props["callee"] = "@" + a["callee"]
        elif name == "linalg.index":
            props["dim"] = f"{a['dim']} : i64"
        elif name == "scf.parallel":
            props["operandSegmentSizes"] = _segments(*(len(g[k]) for k in
                                                       ("lbs", "ubs", "steps", "inits")))
        elif name in ("tensor.extract_slice", "tensor.insert_slice"):
            heads = (1, 1) if name == "tensor.insert_slice" else (1,)
            props["operandSegmentSizes"] = _segments(*heads, *(len(g[k]) for k in
                                                               ("offsets", "sizes", "strides")))
            for k in ("offsets", "sizes", "strides"):
                props["static_" + k] = _i64_array(a["static_" + k])
        elif name in ("tensor.expand_shape", "tensor.collapse_shape"):
            if "output_shape" in a:
                del props["output_shape"]
                props["static_output_shape"] = _i64_array(a["output_shape"])
        elif name.startswith("linalg.") and name not in ("linalg.yield", "linalg.index"):
            props["operandSegmentSizes"] = _segments(len(g.get("ins", [])),
                                                     len(g.get("outs", [])))
            if "iterator_types" in a:
                props["iterator_types"] = "[" + ", ".join(
                    f"#linalg.iterator_type<{t}>" for t in a["iterator_types"]) + "]"
        return props

    # -- ops ------------------------------------------------------------------------------
    def op(self, op: Op, depth: int) -> None:
        operands = ", ".join(self.name(v) for v in op.operands)
        head = ""
        if op.results:
            head = ", ".join(self.name(r) for r in op.results) + " = "
        name = "func.return" if op.name == "return" else op.name
        props = self.properties(op)
        text = f'{head}"{name}"({operands})'
        if props:
            text += " <{" + ", ".join(f"{k} = {v}" for k, v in sorted(props.items())) + "}>"
        regions = list(op.regions)
        combiner = op.attrs.get("combiner")
        if combiner is not None:
            regions = [None]
        if op.name == "ktdp.construct_indirect_access_tile":
            # the hidden region whose block arguments are the intermediate variables
            from ..ir.nodes import INDEX, Block, Location

            args = [Value(n, INDEX, Location("<printer>", 0, 0))
                    for n in op.attrs["variable_names"]]
            for a in args:  # their names are what messages show: keep them
                self.keep(a)
            regions = [Region([Block(args)])]
        if not regions:
            self.emit(depth, text + " : " + self.ftype(op) + _loc(op))
            return
        self.emit(depth, text + " (")
        for k, r in enumerate(regions):
            if r is None:
                self.combiner_region(op, combiner, depth + 1)
            elif op.name == "ktdp.construct_indirect_access_tile":
                self.region(r, depth + 1, "ktdp.region_terminator")
            else:
                self.region(r, depth + 1)
            if k + 1 < len(regions):
                self.lines[-1] += ","
        self.emit(depth, ") : " + self.ftype(op) + _loc(op))

    def ftype(self, op: Op) -> str:
        args = ", ".join(type_text(v.type) for v in op.operands)
        res = ", ".join(type_text(r.type) for r in op.results)
        return f"({args}) -> ({res})"

    def region(self, r: Region, depth: int, terminator: str | None = None) -> None:
        block = r.block
        self.emit(depth, "{")
        args = ", ".join(f"{self.name(a)}: {type_text(a.type)}{_loc(a)}" for a in block.args)
        self.emit(depth, f"^bb0({args}):" if args else "^bb0:")
        for inner in block.ops:
            self.op(inner, depth + 1)
        if terminator is not None:  # an implicit terminator, explicit in the generic form
            self.emit(depth + 1, f'"{terminator}"() : () -> ()')
        self.emit(depth, "}")

    def combiner_region(self, op: Op, combiner: str, depth: int) -> None:
        """The body a ``{ arith.addf }`` shorthand stands for: ``yield(combiner(in, acc))``."""
        t = ScalarType(op.groups["outs"][0].type.elem)
        a, b, r = (f"%c{self.counter}_{k}" for k in range(3))
        self.counter += 1
        self.emit(depth, "{")
        self.emit(depth, f"^bb0({a}: {t}, {b}: {t}):")
        self.emit(depth + 1, f'{r} = "{combiner}"({a}, {b}) : ({t}, {t}) -> ({t})')
        self.emit(depth + 1, f'"linalg.yield"({r}) : ({t}) -> ()')
        self.emit(depth, "}")

    def function(self, fn: Function) -> None:
        for a in fn.args:
            self.keep(a)
        args = ", ".join(type_text(a.type) for a in fn.args)
        res = ", ".join(type_text(t) for t in fn.results)
        props = f'function_type = ({args}) -> ({res}), sym_name = "{fn.name}"'
        self.emit(1, '"func.func"() <{' + props + "}> (")
        self.region(fn.body if not fn.args else _with_args(fn), 2)
        attrs = dict(fn.attrs)
        tail = ""
        if attrs:
            tail = " {" + ", ".join(f"{k} = {attr_text(v)}" for k, v in attrs.items()) + "}"
        self.emit(1, ")" + tail + " : () -> ()" + _loc(fn))


def _with_args(fn: Function) -> Region:
    """The body region with the function's arguments as its entry block's arguments."""
    from ..ir.nodes import Block

    block = fn.body.block
    return Region([Block(list(fn.args), block.ops)])


def print_generic(module: Module) -> str:
    """``module`` in MLIR's generic form (parse it back with ``ktir.parse_text``)."""
    p = _Printer()
    p.emit(0, '"builtin.module"() ({')
    p.emit(0, "^bb0:")
    for fn in module.functions.values():
        p.function(fn)
    p.emit(0, "}) : () -> ()" + _loc(module))
    return "\n".join(p.lines) + "\n"
