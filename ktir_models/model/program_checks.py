"""The manifest against its parsed programs: what each node's function does with its address
arguments must agree with what the manifest declares, checked before anything is allocated.

:func:`parse_and_check` parses the program once (``program.parse_program``, which also checks
that each node's function exists and takes exactly the node's argument names, in order) and then
checks, on the IR:

* no program views more elements of a tensor than the manifest declares for it;
* no tensor is declared larger than every view of it (when every use of it is a view whose
  extent is known statically);
* an argument a node's program stores into is flagged ``is_output: true``, and an argument
  flagged so is stored into (when every store of the function was traced to an argument).

Everything is read from the parsed IR, never from the text, so the checks hold for any spelling
the parser accepts (custom or generic form, with or without locations). An argument reaches a
view either directly (the view's offset operand is the argument) or through address arithmetic:
``arith.addi`` of the argument and an offset, through integer casts. A constant offset adds to
the view's extent (addresses count elements, the forward machine's address unit); an offset
known only at run time leaves the argument's extent unknown (it is then never compared), but
its stores are still traced to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .manifest import MANIFEST_FILE, Manifest, manifest_reader
from .program import ParsedProgram, parse_program

#: Integer casts an address may pass through on its way from an argument to a view.
_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui")
#: Ops other than ``ktdp.store`` that may write memory: a function holding one has stores the
#: checks cannot trace, so its written set is a lower bound.
_OTHER_WRITERS = ("func.call",)


def parse_and_check(manifest: Manifest, where: str = MANIFEST_FILE) -> ParsedProgram:
    """``manifest``'s program parsed and verified, its node signatures and its declared tensors
    checked against the functions (see the module docstring); a ManifestError names the first
    disagreement."""
    parsed = parse_program(manifest)
    check_views(parsed, where)
    return parsed


@dataclass(frozen=True)
class ArgViews:
    """How one function uses its address arguments.

    ``extents[name]``: the elements the views of argument ``name`` span (``offset + 1 + sum((size
    - 1) * stride)``, the largest over its views), only for arguments used by nothing but views
    of static sizes, strides and offset; ``written``: the arguments some ``ktdp.store`` reaches
    through an access tile of a view of them; ``complete``: every store was traced (else
    ``written`` is a lower bound and is not compared with the manifest)."""

    extents: dict[str, int]
    written: frozenset[str]
    complete: bool


def arg_views(fn) -> ArgViews:
    """The :class:`ArgViews` of one parsed function (``ktir.ir.Function``)."""
    args = {id(a): a.name[1:] for a in fn.args}
    uses = _uses(fn)
    per_arg: dict[str, list[int]] = {}
    unknown: set[str] = set()  # arguments with a use whose extent is not known statically
    view_arg: dict[int, str] = {}  # id(view value) -> the argument it views
    traced_uses: dict[str, int] = {}  # uses of each argument that reach a view's offset
    complete = True
    for op in fn.walk():
        if op.name == "ktdp.construct_memory_view":
            traced = _address_root(op.operands[0], args, uses)
            if traced is None:
                continue
            view_arg[id(op.result)] = traced.arg
            traced_uses[traced.arg] = traced_uses.get(traced.arg, 0) + 1
            extent = _view_extent(op)
            if extent is None or traced.offset is None or not traced.exclusive:
                unknown.add(traced.arg)
            else:
                per_arg.setdefault(traced.arg, []).append(traced.offset + extent if extent else 0)
        elif op.name in _OTHER_WRITERS:
            complete = False
    arg_uses = {a.name[1:]: uses.get(id(a), 0) for a in fn.args}
    extents = {name: max(views) for name, views in per_arg.items()
               if name not in unknown and arg_uses[name] == traced_uses.get(name, 0)}
    written: set[str] = set()
    for op in fn.walk():
        if op.name != "ktdp.store":
            continue
        name = _stored_argument(op, view_arg)
        if name is None:
            complete = False
        else:
            written.add(name)
    return ArgViews(extents, frozenset(written), complete)


def _view_extent(op) -> int | None:
    """Elements a memory view spans from its offset (0 for an empty view), None when a size or
    stride is known only at run time."""
    sizes, strides = op.attrs["static_sizes"], op.attrs["static_strides"]
    if None in sizes or None in strides or len(sizes) != len(strides):
        return None
    if any(s < 0 for s in list(sizes) + list(strides)):
        return None
    if 0 in sizes:
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides))


@dataclass(frozen=True)
class _Address:
    """An address computed from argument ``arg``: plus ``offset`` elements (None: known only at
    run time); ``exclusive``: every value on the way from the argument has this one use."""

    arg: str
    offset: int | None
    exclusive: bool


def _address_root(value, args: dict[int, str], uses: dict[int, int]) -> _Address | None:
    """The :class:`_Address` of a value computed from one function argument by ``arith.addi`` and
    integer casts; None when the value is not such an address."""
    if id(value) in args:
        return _Address(args[id(value)], 0, True)
    owner = value.owner
    if owner is None:
        return None
    single = uses.get(id(value), 0) == 1
    if owner.name in _CASTS:
        inner = _address_root(owner.operands[0], args, uses)
        if inner is None:
            return None
        return _Address(inner.arg, inner.offset, inner.exclusive and single)
    if owner.name == "arith.addi" and len(owner.operands) == 2:
        for base, offset in (owner.operands, owner.operands[::-1]):
            inner = _address_root(base, args, uses)
            if inner is not None and _address_root(offset, args, uses) is None:
                constant = _constant(offset)
                known = inner.offset is not None and constant is not None
                total = inner.offset + constant if known else None
                return _Address(inner.arg, total, inner.exclusive and single)
    return None


def _constant(value) -> int | None:
    """The value of an integer ``arith.constant`` scalar (None for anything else)."""
    owner = value.owner
    if owner is None or owner.name != "arith.constant":
        return None
    v = owner.attrs.get("value")
    literal = v.values[0] if getattr(v, "splat", False) and len(v.values) == 1 else None
    return literal if isinstance(literal, int) and not isinstance(literal, bool) else None


def _uses(fn) -> dict[int, int]:
    """How many operands of the function's ops are each value (by ``id``)."""
    uses: dict[int, int] = {}
    for op in fn.walk():
        for v in op.operands:
            uses[id(v)] = uses.get(id(v), 0) + 1
    return uses


def _stored_argument(store, view_arg: dict[int, str]) -> str | None:
    """The argument a ``ktdp.store`` writes: its access tile's view's argument (None when the tile
    is not a ``construct_access_tile`` of a traced view)."""
    if len(store.operands) != 2:
        return None
    tile = store.operands[1].owner
    if tile is None or tile.name != "ktdp.construct_access_tile":
        return None
    base = tile.groups.get("base") or []
    return view_arg.get(id(base[0])) if base else None


def check_views(parsed: ParsedProgram, where: str = MANIFEST_FILE) -> None:
    """The declared tensors agree with what the parsed node programs view and write (the module
    docstring lists the rules)."""
    manifest = parsed.manifest
    r = manifest_reader(where)
    seen: dict[int, ArgViews] = {}
    largest: dict[int, int] = {}
    opaque: set[int] = set()
    for node in parsed.nodes:
        i, decl, fn = node.index, node.decl, node.function
        path = manifest.directory / decl.mlir
        if fn is None:
            opaque.update(a.tensor for a in decl.args if a.tensor is not None)
            continue
        if id(fn) not in seen:
            seen[id(fn)] = arg_views(fn)
        views = seen[id(fn)]
        for j, a in enumerate(decl.args):
            if a.tensor is None:  # a host scalar: no tensor behind it
                continue
            q = f"nodes[{i}].args[{j}]"
            t = manifest.tensor(a.tensor)
            extent = views.extents.get(a.name)
            if extent is None:
                opaque.add(a.tensor)
            else:
                if extent > t.rows * t.cols:
                    raise r.fail(q, f"@{decl.fn} views %{a.name} as {extent} elements, but tensor "
                                    f"{t.id} is declared {t.rows}x{t.cols} = {t.rows * t.cols} "
                                    f"({path})")
                largest[a.tensor] = max(largest.get(a.tensor, 0), extent)
            if a.name in views.written and not a.is_output:
                raise r.fail(f"{q}.is_output", f"false, but @{decl.fn} stores into %{a.name} "
                                               f"(tensor {t.id}; {path})")
            if views.complete and a.is_output and a.name not in views.written:
                raise r.fail(f"{q}.is_output", f"true, but @{decl.fn} never stores into "
                                               f"%{a.name} (tensor {t.id}; {path})")
    for i, t in enumerate(manifest.tensors):
        if t.id in largest and t.id not in opaque and t.rows * t.cols > largest[t.id]:
            raise r.fail(f"tensors[{i}]", f"tensor {t.id} is declared {t.rows}x{t.cols} = "
                                          f"{t.rows * t.cols} elements, but the programs view at "
                                          f"most {largest[t.id]} of them")
