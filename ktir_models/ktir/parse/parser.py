"""The recursive-descent parser: KTIR text -> :mod:`ir` (types, attributes, module, functions,
regions, op dispatch by the registry's ``syntax`` part; the tokenizer is parse/lexer.py, each op's
custom form its dialect module in dialects/, MLIR's generic form parse/generic_form.py).

The tokenizer is one regular expression. Types (``tensor<...>``, ``memref<...>``,
``!ktdp.access_tile<...>``), affine maps/sets and ``#ktdp.*<...>`` attributes are single tokens, and
their parsed objects are cached by text: whole-model programs repeat the same few hundred of them
thousands of times, which keeps parsing of a 452-node program well under a second.

Every op gets the :class:`Location` of its first token, with the MLIR location its text gives
(``loc(...)``, parse/locations.py) as that Location's ``source``. The text's bounds
(parse/bounds.py) are checked as it is read. Undefined SSA names are reported here (the
parser must resolve operands anyway); the structural and type rules live in :mod:`verify`.
"""

from __future__ import annotations

import bisect
import gc
import re
from dataclasses import replace
from pathlib import Path

from ..ir import affine
from .op_templates import OpTemplate
from . import generic_form
from . import locations as loc_syntax
from .bounds import MAX_LINES, MAX_NESTING, MAX_OPS, MAX_TEXT_CHARS
from .numbers import check_literal
from .numbers import hex_float  # noqa: F401  (re-exported; it lived here)
from . import types as frontend_types
from .lexer import (AFFINE_PAREN_DEPTH, LineOffsets, TokenBoundError, tokenize,
                          tokenize_text)
from .tile_types import parse_tile_future
from .. import dialects  # noqa: F401  (registers each op kind's syntax)
from ..ir import registry
from ..ir.errors import Diagnostic, KtirError, Location
from ..ir.nodes import (AccessTileType, Block, DenseConstant, ELEMENT_DTYPES, Function, MemorySpace,
                 MemRefType, Module, Op, Region, ScalarType, TensorType, Value)

_SHAPE_RE = re.compile(r"((?:(?:\d+|\?)x)*)([a-z]\w*|![a-z]\w*\.\w+)$")

_type_cache: dict[str, object] = {}


def _shape_and_elem(body: str):
    m = _SHAPE_RE.match(body.replace(" ", ""))
    if m is None:
        return None
    dims = tuple(None if d == "?" else int(d) for d in m.group(1).split("x")[:-1])
    return dims, m.group(2)


# ops parsed before, keyed by their first four token texts (see op_templates.py); newest first
_OP_TEMPLATES: dict[tuple[str, str, str, str], list[OpTemplate]] = {}


class _Parser:
    def __init__(self, text: str, filename: str, cached: bool = True):
        """``cached=False`` uses neither the line cache nor op templates (the reference path
        the tests compare the cached one with)."""
        self.text = text
        self.filename = filename
        self.diags: list[Diagnostic] = []
        self.templates = _OP_TEMPLATES if cached else None
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        try:
            if cached:
                self.texts, self.kinds, self.offs, self._line_starts = tokenize(text)
            else:
                self.texts, self.kinds, self.offs = tokenize_text(text)
        except TokenBoundError as exc:
            raise KtirError.at(self.loc_at(exc.offset), str(exc)) from None
        if "bad" in self.kinds:
            j = self.kinds.index("bad")
            raise KtirError.at(self.loc_at(self.offs[j]), f"unexpected character {self.texts[j]!r}")
        if "long" in self.kinds:
            j = self.kinds.index("long")
            check_literal(self, self.texts[j], j)
        for _ in range(4):  # sentinels: peek(k) never runs off the end
            self.kinds.append("eof")
            self.texts.append("<end of file>")
        if type(self.offs) is list:
            self.offs += [len(text)] * 4
        self.pos = 0
        self.scopes: list[dict[str, Value]] = []
        self._lookups: list[tuple[str, Value]] = []  # of the op being parsed, for its template
        self.aliases: dict[str, object] = {}
        # `#name = loc(...)` (unresolved trees: an alias may be used before it is defined) and
        # the ops, values, functions and module that carry a `loc(...)`, attached at the end
        self.loc_aliases: dict[str, object] = {}
        self.loc_fixups: list[tuple[object, object]] = []
        self.depth = 0  # regions and array attributes open around the current token
        self.op_count = 0

    # -- basics ---------------------------------------------------------------------------
    def loc_at(self, offset: int) -> Location:
        line = bisect.bisect_right(self._line_starts, offset)
        return Location(self.filename, line, offset - self._line_starts[line - 1] + 1)

    def loc(self, i: int | None = None) -> Location:
        if i is None:
            i = self.pos
        offs = self.offs
        if type(offs) is LineOffsets and i < offs.count:
            line, col = offs.line_col(i)
            return Location(self.filename, line, col)
        return self.loc_at(offs[i])

    def fail(self, message: str, i: int | None = None):
        raise KtirError(self.diags + [Diagnostic(self.loc(i), message)])

    def peek(self, k: int = 0) -> str:
        return self.texts[self.pos + k]

    def kind(self, k: int = 0) -> str:
        return self.kinds[self.pos + k]

    def next(self) -> str:
        t = self.texts[self.pos]
        if self.kinds[self.pos] == "eof":
            self.fail("unexpected end of file")
        self.pos += 1
        return t

    def accept(self, text: str) -> bool:
        if self.texts[self.pos] == text and self.kinds[self.pos] != "string":
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> None:
        if not self.accept(text):
            found = self.texts[self.pos]
            self.fail(f"expected '{text}'{' ' + what if what else ''}, found '{found}'")

    def expect_kind(self, kind: str, what: str) -> str:
        if self.kinds[self.pos] != kind:
            self.fail(f"expected {what}, found '{self.texts[self.pos]}'")
        return self.next()

    # -- values ---------------------------------------------------------------------------
    def lookup(self, name: str, i: int) -> Value:
        scopes = self.scopes
        k = len(scopes) - 1
        while k >= 0:
            v = scopes[k].get(name)
            if v is not None:
                self._lookups.append((name, v))
                return v
            k -= 1
        self.diags.append(Diagnostic(self.loc(i), f"use of undefined value '{name}'"))
        v = Value(name, ScalarType("<undefined>"), self.loc(i))
        self.scopes[-1][name] = v
        return v

    def operand(self) -> Value:
        i = self.pos
        name = self.expect_kind("ssa", "an SSA value (%name)")
        return self.lookup(name, i)

    def operand_list(self, close: str | None = None) -> list[Value]:
        vals: list[Value] = []
        if close is not None and self.peek() == close:
            return vals
        vals.append(self.operand())
        while self.peek() == "," and self.kind(1) == "ssa":
            self.pos += 1
            vals.append(self.operand())
        return vals

    def define(self, name: str, type_, loc: Location, owner: Op | None = None, index: int = 0):
        scope = self.scopes[-1]
        if name in scope and scope[name].type != ScalarType("<undefined>"):
            self.diags.append(Diagnostic(loc, f"redefinition of value '{name}'"))
        v = Value(name, type_, loc, owner, index)
        scope[name] = v
        return v

    # -- types ----------------------------------------------------------------------------
    def parse_type(self):
        i = self.pos
        kind, text = self.kinds[i], self.texts[i]
        if kind == "type" or kind == "anglety":
            self.pos += 1
            t = _type_cache.get(text)
            if t is None:
                t = self._type_from_text(text, i)
                _type_cache[text] = t
            return t
        if kind == "bang" and text in ELEMENT_DTYPES:  # !spyreop.df16, ...
            self.pos += 1
            return ScalarType(text)
        if kind == "ident":
            if text in ELEMENT_DTYPES:
                self.pos += 1
                return ScalarType(text)
            self.fail(f"unknown type '{text}'")
        if text == "!ktdp.tile_future" or text == "<":
            return parse_tile_future(self, i)
        self.fail(f"expected a type, found '{text}'")

    def _type_from_text(self, text: str, i: int):
        if text.startswith("<"):
            parsed = _shape_and_elem(text[1:-1])
            return AccessTileType(parsed[0])
        head, _, body = text.partition("<")
        body = body[:-1]
        if head == "vector":
            self.fail("vector types are not supported by the emulator", i)
        if head == "!ktdp.runtime_arg":
            return frontend_types.runtime_arg(body, self._fail_in_token(i, len(head) + 1))
        space = None
        if head == "memref" and "," in body:
            body, attr, at = frontend_types.split_memref_body(body)
            if attr is not None and attr.startswith("#"):
                space = self.memory_space(attr, i, self._fail_in_token(i, len(head) + 1 + at))
        if "," in body:
            self.fail(f"memref/tensor layouts and encodings are not supported: '{text}'", i)
        parsed = _shape_and_elem(body)
        if parsed is None:
            self.fail(f"malformed type '{text}'", i)
        dims, elem = parsed
        if head == "!ktdp.access_tile":
            if elem != "index":
                self.fail(f"access tile element type must be 'index', not '{elem}'", i)
            return AccessTileType(dims)
        if elem not in ELEMENT_DTYPES:
            self.fail(f"unknown element type '{elem}' in '{text}'", i)
        return TensorType(dims, elem) if head == "tensor" else MemRefType(dims, elem, space)

    def _fail_in_token(self, i: int, base: int):
        """A ``fail(message, offset)`` that locates ``offset`` characters past ``base`` inside
        token ``i`` (types and attributes are single tokens that may span lines)."""
        def fail(message: str, offset: int = 0):
            start = self.offs[i] + base + offset
            raise KtirError(self.diags + [Diagnostic(self.loc_at(start), message)])
        return fail

    def type_list(self) -> list:
        types = [self.parse_type()]
        while self.peek() == "," and self.kind(1) in ("type", "ident", "anglety", "bang") \
                or (self.peek() == "," and self.peek(1) == "<"):
            self.pos += 1
            types.append(self.parse_type())
        return types

    # -- attributes -----------------------------------------------------------------------
    def parse_attr_value(self):
        i = self.pos
        kind, text = self.kinds[i], self.texts[i]
        if kind == "affine":
            self.pos += 1
            body = text[text.index("<") + 1:-1]
            try:
                if text.startswith("affine_map"):
                    return affine.parse_map(body)
                return affine.parse_set(body)
            except affine.AffineSyntaxError as exc:
                start = self.offs[i] + text.index("<") + 1 + exc.offset
                raise KtirError(self.diags + [Diagnostic(self.loc_at(start), str(exc))]) from None
        if kind == "hashid":
            self.pos += 1
            if text not in self.aliases:
                self.fail(f"undefined attribute alias '{text}'", i)
            return self.aliases[text]
        if kind == "attr":
            self.pos += 1
            return self.memory_space(text, i)
        if kind == "string":
            self.pos += 1
            return text[1:-1]
        if text == "[":
            self.pos += 1
            self.enter(i)
            items = []
            while not self.accept("]"):
                items.append(self.parse_attr_value())
                if not self.accept(","):
                    self.expect("]", "closing the array attribute")
                    break
            self.depth -= 1
            return items
        if kind in ("int", "float", "hex") or text == "-":
            return self.number()
        if kind == "ident" and text in ("true", "false"):
            self.pos += 1
            return text == "true"
        if kind == "ident" and text == "unit":
            self.pos += 1
            return True
        if kind == "dense":
            self.pos += 1
            return self.dense(text, i)
        if kind in ("type", "anglety") or (kind == "ident" and text in ELEMENT_DTYPES):
            return self.parse_type()
        if kind == "ident" and text in ("affine_map", "affine_set"):
            self.fail(f"malformed {text}: its closing '>' is missing or its parentheses nest "
                      f"deeper than {AFFINE_PAREN_DEPTH} levels")
        self.fail(f"unsupported attribute value '{text}'")

    def attr_dict(self, value=None) -> dict:
        """``{name = value, flag, ...}``; ``value()`` parses one value (default
        :meth:`parse_attr_value`; the generic form passes its richer reader)."""
        value = value or self.parse_attr_value
        attrs: dict = {}
        self.expect("{")
        while not self.accept("}"):
            i = self.pos
            key = self.next()
            if self.kinds[i] not in ("ident", "string"):
                self.fail(f"expected an attribute name, found '{key}'", i)
            key = key.strip('"')
            if self.accept("="):
                attrs[key] = value()
            else:
                attrs[key] = True
            if not self.accept(","):
                self.expect("}", "closing the attribute dictionary")
                break
        return attrs

    def memory_space(self, text: str, i: int, fail=None) -> MemorySpace:
        """``fail(message)`` reports at the attribute (default: at token ``i``)."""
        if fail is None:
            def fail(message: str):
                self.fail(message, i)
        return frontend_types.memory_space(text, fail)

    def enter(self, i: int, what: str = "regions and array attributes") -> None:
        """One more region, array attribute or type opens at token ``i`` (parse/bounds.py)."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(f"{what} nest deeper than {MAX_NESTING} levels", i)

    def trailing_loc(self, target) -> None:
        """Read a ``loc(...)`` here, if there is one, for ``target`` (an op, value, function or
        module); it is attached once the module's location aliases are all known."""
        if self.texts[self.pos] == "loc":
            tree = loc_syntax.trailing(self)
            if tree is not None:
                self.loc_fixups.append((target, tree))

    def _attach_locations(self) -> None:
        done: dict = {}
        for target, tree in self.loc_fixups:
            source = loc_syntax.resolve(self, tree, self.loc_aliases, done)
            old = target.loc
            new = replace(old, source=source)
            target.loc = new
            if isinstance(target, Op):
                for r in target.results:
                    if r.loc is old:
                        r.loc = new

    def number(self):
        neg = self.accept("-")
        i = self.pos
        kind, text = self.kinds[i], self.texts[i]
        if kind == "int":
            self.pos += 1
            return -int(text) if neg else int(text)
        if kind == "float":
            self.pos += 1
            return -float(text) if neg else float(text)
        if kind == "hex":
            self.pos += 1
            return ("hex", int(text, 16))
        if kind == "ident" and text in ("inf", "nan"):
            self.pos += 1
            return -float(text) if neg else float(text)
        self.fail(f"expected a number, found '{text}'")

    def dense(self, text: str, i: int) -> DenseConstant:
        body = text[6:-1].strip()
        if body.startswith("["):
            flat = body.replace("[", " ").replace("]", " ").split(",")
            vals = tuple(self._literal(v.strip(), i) for v in flat if v.strip())
            return DenseConstant(vals, splat=False)
        return DenseConstant((self._literal(body, i),), splat=True)

    def _literal(self, s: str, i: int):
        check_literal(self, s, i)
        try:
            if s in ("true", "false"):
                return s == "true"
            if s.lower().startswith("0x"):
                return ("hex", int(s, 16))
            if re.fullmatch(r"[-+]?\d+", s):
                return int(s)
            return float(s)
        except ValueError:
            self.fail(f"bad literal '{s}' in dense constant", i)

    # -- module / function ----------------------------------------------------------------
    def alias_definitions(self) -> None:
        """``#name = <attribute>`` lines; MLIR allows them anywhere at the top level (before
        their first use), e.g. between functions."""
        while self.kind() == "hashid" and self.peek(1) == "=":
            name = self.next()
            self.expect("=", "after the attribute alias name")
            if loc_syntax.at_location(self):
                self.loc_aliases[name] = loc_syntax.trailing(self)
                continue
            self.aliases[name] = self.parse_attr_value()

    def parse_module(self) -> Module:
        module = Module(self.filename, loc=self.loc())
        self.alias_definitions()
        braced = generic_module = False
        if self.accept("module"):
            if self.kind() == "sym":
                self.pos += 1
            if self.accept("attributes"):
                self.attr_dict()
            self.expect("{", "opening the module body")
            braced = True
        while self.kind() != "eof":
            self.alias_definitions()
            if braced and self.peek() == "}":
                break
            if self.kind() == "eof":
                break
            if self.kind() == "string" and self.peek() == '"func.func"':
                fn = generic_form.parse_function(self)
            elif self.kind() == "string" and self.peek() == '"builtin.module"' and not braced:
                self.pos += 1  # "builtin.module"() [<{sym_name = ...}>] ({ ... }) : () -> ()
                self.expect("(", "in the generic form of builtin.module")
                self.expect(")", "in the generic form of builtin.module")
                if self.peek() == "<" and self.peek(1) == "{":
                    self.pos += 1
                    generic_form.dictionary(self)  # its name and attributes: nothing to run
                    self.expect(">", "closing the module's properties")
                for t in ("(", "{"):
                    self.expect(t, "in the generic form of builtin.module")
                if self.kind() == "label":  # ^bb0:
                    self.pos += 1
                    self.expect(":", "after the block label")
                braced = generic_module = True
                continue
            else:
                if self.peek() not in ("func.func", "func"):
                    self.fail(f"expected 'func.func', found '{self.peek()}'")
                fn = self.parse_function()
            if fn.name in module.functions:
                self.diags.append(Diagnostic(fn.loc, f"redefinition of function @{fn.name}"))
            fn.module = module
            module.functions[fn.name] = fn
        if braced:
            self.expect("}", "closing the module")
            if generic_module:
                for t in (")", ":", "(", ")", "->", "(", ")"):
                    self.expect(t, "closing the generic form of builtin.module")
            self.trailing_loc(module)
            self.alias_definitions()
        module.aliases = dict(self.aliases)
        if self.kind() != "eof":
            self.fail(f"unexpected '{self.peek()}' after the module")
        if self.diags:
            raise KtirError(self.diags)
        if self.loc_fixups:
            self._attach_locations()
        return module

    def parse_function(self) -> Function:
        loc = self.loc()
        self.next()
        name_i = self.pos
        name = self.expect_kind("sym", "a function name (@name)")[1:].strip('"')
        self.scopes = [{}]
        self.expect("(", "opening the argument list")
        args: list[Value] = []
        while not self.accept(")"):
            ai = self.pos
            aname = self.expect_kind("ssa", "an argument name")
            self.expect(":", "after the argument name")
            atype = self.parse_type()
            if self.kind() == "punct" and self.peek() == "{":
                generic_form.dictionary(self)  # argument attributes: nothing the emulator reads
            args.append(self.define(aname, atype, self.loc(ai)))
            self.trailing_loc(args[-1])
            if not self.accept(","):
                self.expect(")", "closing the argument list")
                break
        results: list = []
        if self.accept("->"):
            if self.accept("("):
                while not self.accept(")"):
                    results.append(self.parse_type())
                    if self.kind() == "punct" and self.peek() == "{":
                        generic_form.dictionary(self)  # result attributes: nothing to run
                    self.accept(",")
            else:
                results.append(self.parse_type())
        attrs: dict = {}
        if self.accept("attributes"):
            # any attribute MLIR allows (`16 : i32`, `#dialect.attr<...>`), typed values plain
            attrs = {k: generic_form.plain(v) for k, v in generic_form.dictionary(self).items()}
        grid = (1, 1, 1)
        if "grid" in attrs:
            g = attrs["grid"]
            if (not isinstance(g, list) or not 1 <= len(g) <= 3
                    or not all(isinstance(x, int) and x >= 1 for x in g)):
                self.fail("grid must be a list of 1 to 3 positive integers", name_i)
            grid = tuple(list(g) + [1] * (3 - len(g)))
        body = self.parse_region(open_scope=False)
        fn = Function(name, loc, args, body, attrs, grid, results=results)
        self.trailing_loc(fn)
        return fn

    def parse_region(self, block_args: list[Value] | None = None, open_scope: bool = True,
                     terminators: tuple[str, ...] = ()) -> Region:
        self.enter(self.pos)
        self.expect("{", "opening a region")
        if open_scope:
            self.scopes.append({})
        block = Block(list(block_args or []))
        for a in block.args:
            self.scopes[-1][a.name] = a
        if self.kind() == "label":
            self.pos += 1
            if self.accept("("):
                while not self.accept(")"):
                    ai = self.pos
                    aname = self.expect_kind("ssa", "a block argument")
                    self.expect(":")
                    at = self.parse_type()
                    block.args.append(self.define(aname, at, self.loc(ai)))
                    self.trailing_loc(block.args[-1])
                    if not self.accept(","):
                        self.expect(")", "closing the block arguments")
                        break
            self.expect(":", "after the block label")
        texts, kinds, ops, parse_op = self.texts, self.kinds, block.ops, self.parse_op
        first = len(ops)
        room = first + MAX_OPS - self.op_count  # (nested regions check the total as they end)
        while texts[self.pos] != "}":
            if kinds[self.pos] == "eof":
                self.fail("unexpected end of file: missing '}'")
            op = parse_op()
            ops.append(op)
            if texts[self.pos] == "loc":
                self.trailing_loc(op)
            if len(ops) > room:
                self.fail(f"more than {MAX_OPS} ops in one module")
        self.op_count += len(ops) - first
        if self.op_count > MAX_OPS:
            self.fail(f"more than {MAX_OPS} ops in one module")
        self.pos += 1
        self.depth -= 1
        if open_scope:
            self.scopes.pop()
        return Region([block])

    # -- ops ------------------------------------------------------------------------------
    def parse_op(self) -> Op:
        """The op here (its trailing ``loc(...)`` is read by :meth:`parse_region`)."""
        start = self.pos
        cache = self.templates
        if cache is None:
            return self._parse_op(start)[0]
        texts = self.texts
        key = (texts[start], texts[start + 1], texts[start + 2], texts[start + 3])
        templates = cache.get(key)
        if templates is not None:
            for template in templates:
                op = template.replay(self, start)
                if op is not None:
                    return op
        outer_lookups = self._lookups
        self._lookups = lookups = []
        ndiags = len(self.diags)
        op, alias = self._parse_op(start)
        self._lookups = outer_lookups
        if len(self.diags) == ndiags:
            template = OpTemplate.record(texts, self.kinds, start, self.pos, op, lookups, alias)
            if template is not None:
                op.origin = template
                if len(cache) > 20_000:  # bound what unrelated programs pile up (~2 KiB a record)
                    cache.clear()
                templates = cache.setdefault(key, [])
                templates.insert(0, template)
                del templates[8:]
        return op

    def _parse_op(self, start: int) -> tuple[Op, str | None]:
        """The op at token ``start`` and the ``%x`` alias of a ``%x:N`` result list (or None)."""
        loc = self.loc()
        names: list[tuple[str, Location]] = []
        count = None
        if self.kind() == "ssa":
            while True:
                names.append((self.expect_kind("ssa", "a result name"), loc))
                if self.peek() == ":" and self.kind(1) == "int":
                    self.pos += 1
                    count = int(self.next())
                if not self.accept(","):
                    break
            self.expect("=", "after the result names")
        name_i = self.pos
        if self.kind() == "string":  # MLIR's generic form: "dialect.op"(...) ... : (...) -> ...
            opname = self.next()[1:-1]
            op = Op(opname, loc)
            result_types = generic_form.parse_op(self, op, name_i)
            opname = op.name
        else:
            if self.kind() != "ident":
                self.fail(f"expected an operation name, found '{self.peek()}'")
            opname = self.next()
            if opname == "func.return":
                opname = "return"
            elif opname == "call":
                opname = "func.call"
            handler = registry.part("syntax", opname)
            if handler is None:
                self.fail(f"unknown operation '{opname}'", name_i)
            op = Op(opname, loc)
            result_types = handler(self, op) or []
        # bind results (MLIR lets an op's results go unnamed: they get names no text can use)
        if not names and result_types:
            names = [(f"%<unnamed@{start}#{k}>", loc) for k in range(len(result_types))]
        if count is not None:
            if len(names) != 1:
                self.fail("'%name:N' cannot be combined with other result names", start)
            base, nloc = names[0]
            names = [(f"{base}#{k}", nloc) for k in range(count)]
            alias = base
        else:
            alias = None
        if len(names) != len(result_types):
            self.fail(f"'{opname}' produces {len(result_types)} result(s) but "
                      f"{len(names)} name(s) are bound", start)
        for k, ((rname, rloc), rtype) in enumerate(zip(names, result_types)):
            op.results.append(self.define(rname, rtype, rloc, op, k))
        if alias is not None and op.results:
            self.scopes[-1][alias] = op.results[0]
        return op, alias




def parse_text(text: str, filename: str = "<string>", cached: bool = True) -> Module:
    """Parse KTIR text into a :class:`Module` (no verification). Raises :class:`KtirError`.

    ``cached`` (the default) reuses tokenized lines and recorded op parses of earlier texts;
    the result is the same as with ``cached=False`` (tests/ktir/test_parse_cache.py)."""
    # The parser allocates many small objects and no garbage cycles; pausing the cyclic GC
    # avoids repeated full-heap scans while a large program is built (about a third of the time).
    if len(text) > MAX_TEXT_CHARS:
        raise KtirError.at(Location(filename, 1, 1), f"program text of {len(text)} characters "
                                                     f"is too long (at most {MAX_TEXT_CHARS})")
    lines = text.count("\n") + 1
    if lines > MAX_LINES:
        raise KtirError.at(Location(filename, MAX_LINES + 1, 1),
                           f"program text of {lines} lines is too long (at most {MAX_LINES})")
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _Parser(text, filename, cached).parse_module()
    finally:
        if was_enabled:
            gc.enable()


def parse_file(path: str | Path) -> Module:
    path = Path(path)
    try:
        with path.open("rb") as f:  # a bounded read: a huge file or a device is refused
            data = f.read(MAX_TEXT_CHARS + 1)
        if len(data) > MAX_TEXT_CHARS:
            raise KtirError.at(Location(str(path), 1, 1), f"file larger than {MAX_TEXT_CHARS} "
                                                          "bytes (the bound on a program text)")
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise KtirError.at(Location(str(path), 0, 0), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KtirError.at(Location(str(path), 0, 0), f"cannot read file: {exc}") from None
    return parse_text(text, str(path))
