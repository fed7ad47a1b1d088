"""``spyreop.constant`` and ``spyreop.slice_reduction``: each op kind's parts side by side.

``spyreop.constant V : T`` is the float V rounded to T, which is a scalar ``f16`` or ``f32``
(not df16, bf16, f64, an integer or a tensor: the frontend's ops-invalid tests). Its value is
a float attribute of the result's type (``"spyreop.constant"() {value = 0.0 : f16} : () -> f16``
in the generic form).

``spyreop.slice_reduction %x {reduction_kind = #spyreop.reduction_kind<K>, reduction_scope =
#spyreop.reduction_scope<S>} : T -> T`` reduces a ranked tensor's slices. The definition does not
say how wide a slice is; the emulator takes the last dimension as the elements of one slice and
every leading index as one slice (a 1-D tensor is a single slice). ``in_slice``: the first
element of each slice becomes the reduction of that slice; ``across_slice``: the first slice
becomes the element-wise reduction of all slices. The other elements keep their values. Kinds:
``add``, ``sub`` (the first minus the others), ``mul``, ``max``, ``min``, ``abs_max`` (the
largest magnitude); sums and products are accumulated in float64 in index order and rounded once.
"""

from __future__ import annotations

import numpy as np

from ... import registry
from ...ir import DenseConstant, Op, ScalarType, TensorType
from ...verify_rules import Rule, fail
from ..arith import literal_value
from .types import Opaque, Typed, attr_value, build_host, finish

_CONSTANT_TYPES = ("f16", "f32")
REDUCTION_KINDS = ("add", "sub", "max", "min", "mul", "abs_max")
REDUCTION_SCOPES = ("in_slice", "across_slice")


# -- spyreop.constant -----------------------------------------------------------------------------

@registry.implements("syntax", "spyreop.constant")
def parse_constant(p, op: Op) -> list:
    """``V [attr-dict] : T`` (V a number or a dense literal; its type is the result's)."""
    i = p.pos
    if p.kind() == "dense":
        p.pos += 1
        value = p.dense(p.texts[i], i)
    else:
        value = p.number()
    if p.peek() == "{" and p.kind() == "punct":
        op.attrs.update(p.attr_dict())
    p.expect(":", "before the constant's type")
    t = p.parse_type()
    op.attrs["value"] = Typed(value, t)
    return [t]


def _constant(op: Op) -> None:
    # counts and the attribute are checked here, with the frontend's messages
    if op.operands:
        fail("requires zero operands")
    if len(op.results) != 1:
        fail("requires one result")
    if "value" not in op.attrs:
        fail("requires attribute 'value'")
    t = op.results[0].type
    if not isinstance(t, ScalarType) or t.name not in _CONSTANT_TYPES:
        fail(f"result #0 must be 16-bit float or 32-bit float, but got '{t}'")
    value = op.attrs["value"]
    vtype = value.type if isinstance(value, Typed) else None
    value = attr_value(value)
    if isinstance(value, DenseConstant) or isinstance(value, bool) or \
            not isinstance(value, (int, float, tuple)):
        fail(f"requires a floating-point value attribute, got {value!r}")
    if vtype != t:
        fail("failed to verify that all of {value, result} have same type")


registry.set_part("verify", "spyreop.constant", Rule(check=_constant))
registry.set_part("cost", "spyreop.constant", "free")


@registry.implements("build", "spyreop.constant")
def build_constant(c, op: Op):
    value = attr_value(op.attrs["value"])
    t = op.result.type
    c.set_const(op.result, finish(np.asarray(literal_value(value, t.name), t.dtype), t))
    return None


# -- spyreop.slice_reduction ----------------------------------------------------------------------

@registry.implements("syntax", "spyreop.slice_reduction")
def parse_slice_reduction(p, op: Op) -> list:
    """``%x {reduction_kind = #spyreop.reduction_kind<K>, reduction_scope =
    #spyreop.reduction_scope<S>} : T -> T`` (the enum attributes read here)."""
    op.operands = [p.operand()]
    if p.accept("{"):
        while not p.accept("}"):
            key = p.expect_kind("ident", "an attribute name")
            p.expect("=")
            i = p.pos
            text = p.next()
            head, _, body = text.partition("<")
            expected = f"#spyreop.{key}"
            if key in ("reduction_kind", "reduction_scope") and head != expected:
                p.fail(f"'{key}' takes a {expected}<...> attribute, found '{text}'", i)
            op.attrs[key] = Opaque(text)
            if not p.accept(","):
                p.expect("}", "closing the attribute dictionary")
                break
    p.expect(":", "before the type of 'spyreop.slice_reduction'")
    op.attrs["types"] = [p.parse_type()]
    p.expect("->", "before the result type of 'spyreop.slice_reduction'")
    return [p.parse_type()]


def _slice_reduction(op: Op) -> None:
    t = op.operands[0].type
    if not isinstance(t, TensorType) or not t.shape:
        fail(f"operand #0 must be ranked tensor of any type values, but got '{t}'")
    if op.results[0].type != t:
        fail("requires the same type for all operands and results")
    if attr_value(op.attrs["reduction_kind"]) not in REDUCTION_KINDS:
        fail(f"reduction_kind must be one of {', '.join(REDUCTION_KINDS)}")
    if attr_value(op.attrs["reduction_scope"]) not in REDUCTION_SCOPES:
        fail(f"reduction_scope must be one of {', '.join(REDUCTION_SCOPES)}")
    if t.elem not in ("f16", "f32", "i32", "i64"):
        fail(f"slice_reduction of {t.elem} elements is not implemented")


registry.set_part("verify", "spyreop.slice_reduction",
                  Rule((1, 1), (1, 1), ("reduction_kind", "reduction_scope"),
                       check=_slice_reduction))
registry.set_part("cost", "spyreop.slice_reduction", "vector")


def reduce_slices(x: np.ndarray, kind: str, axis: int) -> np.ndarray:
    """The reduction of ``x`` along ``axis`` (kept, extent 1), in float64 for float inputs."""
    wide = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    if kind == "add":
        return np.add.reduce(wide, axis=axis, keepdims=True)
    if kind == "mul":
        return np.multiply.reduce(wide, axis=axis, keepdims=True)
    if kind == "sub":
        first = np.take(wide, [0], axis=axis)
        rest = np.take(wide, range(1, wide.shape[axis]), axis=axis)
        return first - np.add.reduce(rest, axis=axis, keepdims=True)
    if kind == "max":
        return np.max(wide, axis=axis, keepdims=True)
    if kind == "min":
        return np.min(wide, axis=axis, keepdims=True)
    return np.max(np.abs(wide), axis=axis, keepdims=True)  # abs_max


@registry.implements("build", "spyreop.slice_reduction")
def build_slice_reduction(c, op: Op):
    kind, scope = (attr_value(op.attrs[k]) for k in ("reduction_kind", "reduction_scope"))

    def compute(x):
        x = np.asarray(x)
        out = x.copy()
        if scope == "in_slice":
            with np.errstate(all="ignore"):
                out[..., :1] = reduce_slices(x, kind, x.ndim - 1).astype(x.dtype)
        elif x.ndim > 1:
            flat = x.reshape(-1, x.shape[-1])
            with np.errstate(all="ignore"):
                first = reduce_slices(flat, kind, 0).astype(x.dtype)
            out.reshape(-1, x.shape[-1])[:1] = first
        return out

    return build_host(c, op, compute)
