"""What MLIR's arith (and math) verifier accepts: each op's operand classes and each constant's
range.

Operand classes (ArithOps.td): float ops (``addf``, ``cmpf``, ``negf``, ...) take float types;
integer ops (``addi``, ``cmpi``, ``divsi``, ``shli``, ...) take signless integers or index (sign
lives in the op, so ``si32``/``ui32`` values are refused); casts state both sides: ``extf``
widens and ``truncf`` narrows a float, ``extsi``/``extui`` widen and ``trunci`` narrows a
fixed-width signless integer, ``sitofp``/``uitofp`` go from such an integer to a float and
``fptosi``/``fptoui`` back, ``index_cast(ui)`` goes between index and a signless integer (one side
each), ``bitcast`` keeps the bit width. math's functions take floats, ``math.absi`` signless
integers. A tensor's element type is what is checked.

Constant ranges (MLIR's literal parser and ``arith.constant``'s verifier):

* a scalar ``arith.constant`` of integer type must be signless (a tensor of si/ui may be dense);
* ``true``/``false`` are i1 values only; a float literal is not an integer;
* a decimal integer literal of ``iN`` fits in N bits read either way: -2^(N-1) <= v < 2^N
  (``255 : i8`` is -1); of ``siN`` and ``index`` (64 bits) in the signed range; of ``uiN`` in
  0 <= v < 2^N;
* a float type takes float literals (a decimal integer is refused: MLIR wants the dot) or a
  hexadecimal bit pattern of at most the type's width; a finite decimal literal beyond the type's
  range rounds to infinity, as MLIR's parser rounds it (``-1.0e38 : f16`` is -inf).
"""

from __future__ import annotations

from ..ir.nodes import (DenseConstant, FLOAT_TYPES, INT_TYPES, Op, SIGNED_INT_TYPES,
                  SIGNLESS_INT_TYPES, ScalarType, TensorType, UNSIGNED_INT_TYPES, int_width)
from ..verify.rules import elem, fail

FLOAT_WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}

_FLOAT = "float"
_INT = "signless integer or index"
_FIXED = "signless integer"

_FLOAT_OPS = ("addf subf mulf divf remf negf absf maximumf minimumf maxf minf maxnumf minnumf "
              "cmpf").split()
_INT_OPS = ("addi subi muli divui divsi floordivsi ceildivsi ceildivui remui remsi andi ori xori "
            "shli shrsi shrui minsi maxsi minui maxui cmpi").split()

#: op -> (operand class, result class or None when the result is the operand's type)
_CLASSES: dict[str, tuple[str, str | None]] = {}
_CLASSES.update({"arith." + n: (_FLOAT, None) for n in _FLOAT_OPS})
_CLASSES.update({"arith." + n: (_INT, None) for n in _INT_OPS})
_CLASSES.update({"math." + n: (_FLOAT, None) for n in (
    "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt tanh sin cos tan atan atan2 erf absf ceil "
    "floor round powf fma cbrt").split()})
_CLASSES["math.absi"] = (_FIXED, None)
_CLASSES.update({
    "arith.extf": (_FLOAT, _FLOAT), "arith.truncf": (_FLOAT, _FLOAT),
    "arith.extsi": (_FIXED, _FIXED), "arith.extui": (_FIXED, _FIXED),
    "arith.trunci": (_FIXED, _FIXED),
    "arith.sitofp": (_FIXED, _FLOAT), "arith.uitofp": (_FIXED, _FLOAT),
    "arith.fptosi": (_FLOAT, _FIXED), "arith.fptoui": (_FLOAT, _FIXED),
    "arith.index_cast": (_INT, _INT), "arith.index_castui": (_INT, _INT),
    "arith.bitcast": ("signless integer or float", "signless integer or float"),
})

# cast -> (how the result width must compare with the operand's, in words)
_WIDTH_RULES = {
    "arith.extf": (lambda d, s: d > s, "wider than"),
    "arith.extsi": (lambda d, s: d > s, "wider than"),
    "arith.extui": (lambda d, s: d > s, "wider than"),
    "arith.truncf": (lambda d, s: d < s, "narrower than"),
    "arith.trunci": (lambda d, s: d < s, "narrower than"),
    "arith.bitcast": (lambda d, s: d == s, "as wide as"),
}


def _in_class(name: str | None, cls: str) -> bool:
    if cls == _FLOAT:
        return name in FLOAT_TYPES
    if cls == _INT:
        return name in SIGNLESS_INT_TYPES or name == "index"
    if cls == _FIXED:
        return name in SIGNLESS_INT_TYPES
    return name in FLOAT_TYPES or name in SIGNLESS_INT_TYPES


def _width(name: str) -> int:
    return FLOAT_WIDTH[name] if name in FLOAT_WIDTH else int_width(name)


def check_operand_classes(op: Op) -> None:
    """Refuse (``fail``) an operand or result outside the op's class (module docstring)."""
    rule = _CLASSES.get(op.name)
    if rule is None:
        return
    operand_cls, result_cls = rule
    for k, v in enumerate(op.operands):
        if not _in_class(elem(v.type), operand_cls):
            fail(f"'{op.name}' operand #{k} must be {operand_cls}-like, but got {v.type}")
    if result_cls is None:
        return
    dst = op.attrs.get("to")
    if dst is None:
        return
    if not _in_class(elem(dst), result_cls):
        fail(f"'{op.name}' result must be {result_cls}-like, but got {dst}")
    src_e, dst_e = elem(op.operands[0].type), elem(dst)
    if op.name in ("arith.index_cast", "arith.index_castui") and \
            (src_e == "index") == (dst_e == "index"):
        fail(f"'{op.name}' casts between index and a signless integer, not {src_e} to {dst_e}")
    width_rule = _WIDTH_RULES.get(op.name)
    if width_rule is not None and not width_rule[0](_width(dst_e), _width(src_e)):
        fail(f"'{op.name}' result type {dst} must be {width_rule[1]} the operand type "
             f"{op.operands[0].type}")


def check_constant(t, value: DenseConstant) -> None:
    """Refuse a literal that ``t``'s element type cannot hold (module docstring)."""
    e = elem(t)
    if isinstance(t, ScalarType) and e in SIGNED_INT_TYPES | UNSIGNED_INT_TYPES:
        fail(f"'arith.constant' integer type must be signless, got {t}")
    if e not in INT_TYPES and e not in FLOAT_TYPES:
        return
    for v in value.values:
        message = _literal_problem(v, e)
        if message is not None:
            shown = hex(v[1]) if isinstance(v, tuple) else v
            what = "tensor" if isinstance(t, TensorType) else "constant"
            fail(f"{what} literal {shown} is not a valid {e}: {message}")


def _literal_problem(v, e: str) -> str | None:
    """Why literal ``v`` (int, float, bool or ("hex", bits)) is not a value of ``e``, or None."""
    if isinstance(v, bool):
        return None if e == "i1" else "true/false are i1 values"
    if e in FLOAT_TYPES:
        if isinstance(v, tuple):
            if v[1] >= 1 << _width(e):
                return f"hexadecimal float constant out of range for a {_width(e)}-bit type"
            return None
        if isinstance(v, int):
            return "a float type needs a float literal (add a trailing '.0')"
        return None
    if isinstance(v, float):
        return "a float literal is not an integer"
    n = v[1] if isinstance(v, tuple) else v
    bits = int_width(e)
    if e in UNSIGNED_INT_TYPES:
        lo, hi = 0, (1 << bits) - 1
    elif e in SIGNED_INT_TYPES or e == "index":
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:  # signless: the N bits may be read as signed or unsigned
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    if not lo <= n <= hi:
        return f"integer constant out of range [{lo}, {hi}]"
    return None
