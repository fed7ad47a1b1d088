"""``spyreop.slice_reduction %x {reduction_kind = #spyreop.reduction_kind<K>, reduction_scope =
#spyreop.reduction_scope<S>} : T -> T`` (SpyreOp.td, SpyreOpAttrs.td): its parts side by side.

It reduces a ranked tensor's slices. The definition does not say how wide a slice is; the
emulator takes the last dimension as the elements of one slice and every leading index as one
slice (a 1-D tensor is a single slice). ``in_slice``: the first element of each slice becomes the
reduction of that slice; ``across_slice``: the first slice becomes the element-wise reduction of
all slices. The other elements keep their values. Kinds: ``add``, ``sub`` (the first minus the
others), ``mul``, ``max``, ``min``, ``abs_max`` (the largest magnitude); sums and products are
accumulated in float64 (int64 for integers) in index order and rounded once.
"""

from __future__ import annotations

import numpy as np

from ...ir import registry
from ...ir.nodes import Op, TensorType
from ...verify.rules import Rule, fail
from .types import Opaque, attr_value, build_host

REDUCTION_KINDS = ("add", "sub", "max", "min", "mul", "abs_max")
REDUCTION_SCOPES = ("in_slice", "across_slice")


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
