"""Elementwise tails fused in a replayed tape: the SiLU-and-product tail as one native step.

A SiLU MLP ends every layer with ``y = x / (1 + exp(-x)) * u`` (and, in f32 programs, a truncf to
f16). Run op by op, the tail after the exp is three or four numpy calls on the same rows, each
writing a fresh array: in a prefill on [32, 32, 48] f32 values ~25-30 us each inside a pass. The
*SiLU tail* is the run of tape entries

    s = arith.addf(k, e)        (or addf(e, k)); k a splat constant
    q = arith.divf(a, s)
    p = arith.mulf(q, u)        (or mulf(u, q))
    h = arith.truncf(p) : f32 -> f16     (optional)

with every intermediate (s, q, and p when truncf follows) used once, by the next op of the run,
all of one element type (f32, or f16 without the truncf). :func:`fuse_tails` replaces such a run
by one step calling the library's ``seqmm_silu_tail`` (backends/f16conv.c, through the fastcall
extension): per element the same IEEE f32 operations in the same order, each rounded to the
chain's type as the single op rounds it, so the same bits (for a NaN with a NaN, a NaN carrying
either payload, as for the single ops). Intermediates are not written: nothing reads them (their
only user is the next op of the run, inside the step).

The step checks its operands each time (arrays of the chain's dtype, one shape, C-contiguous)
and otherwise runs the original entries, so a tape whose values change layout still replays
exactly. Like the rewrite rules (patterns/), it is off with ``KTIR_MODELS_REWRITES=0``. Only
tapes of plain and stacked plans are fused, whose slots are the plan's compile's (the ops' users
are read from the function, the constants from the compile's template); a rewrite needs the
extension.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import patterns
from ..backends import f16_convert
from ..ir.nodes import TensorType

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
_ELEM = {"f32": F32, "f16": F16}


@dataclass(frozen=True)
class _Tail:
    """One matched tail: the slots it reads (a, e, u), writes (out), the splat constant k, the
    chain's dtype, the output's dtype and whether u is the product's left operand."""

    a: int
    e: int
    u: int
    out: int
    k: float
    dtype: np.dtype
    out_dtype: np.dtype
    u_left: bool

    @property
    def mode(self) -> int:
        return int(self.dtype == F16) | int(self.out_dtype == F16) << 1 | int(self.u_left) << 2


def _elem(v) -> str | None:
    return v.type.elem if isinstance(v.type, TensorType) else None


def _splat(value) -> float | None:
    """The one value of a constant whose elements all have the same bits, else None."""
    arr = np.asarray(value)
    if arr.dtype not in (F16, F32) or arr.size == 0:
        return None
    flat = arr.reshape(-1)
    bits = flat.view(np.uint16 if arr.dtype == F16 else np.uint32)
    if not (bits == bits[0]).all():
        return None
    return float(flat[0])


def _only_user(users: dict, value, op) -> bool:
    found = users.get(id(value), ())
    return len(found) == 1 and found[0] is op


def _match(entries: list, i: int, users: dict, template: list,
           base: list) -> tuple[_Tail, int] | None:
    """The tail starting at ``entries[i]`` and how many entries it covers, or None."""
    ops = [getattr(e, "op", None) for e in entries[i:i + 4]]
    if len(ops) < 3 or any(getattr(e, "io", None) is None for e in entries[i:i + 3]):
        return None
    add, div, mul = ops[:3]
    if (add.name, div.name, mul.name) != ("arith.addf", "arith.divf", "arith.mulf"):
        return None
    elem = _elem(add.result)
    if elem not in _ELEM or any(_elem(v) != elem for op in ops[:3]
                                for v in (*op.operands, op.result)):
        return None
    (x0, x1), s = entries[i].io
    # a folded constant: in the compile's template, written by no step
    const = [slot for slot in (x0, x1) if slot < len(template) and template[slot] is not None]
    if len(const) != 1 or x0 == x1:
        return None
    k = _splat(base[const[0]])
    e = x1 if const[0] == x0 else x0
    (a, q_in), q = entries[i + 1].io
    (m0, m1), p = entries[i + 2].io
    if q_in != s or q not in (m0, m1) or m0 == m1 or k is None:
        return None
    if not (_only_user(users, add.result, div) and _only_user(users, div.result, mul)):
        return None
    u_left = m1 == q
    u = m0 if u_left else m1
    out, out_dtype, covered = p, _ELEM[elem], 3
    trunc = ops[3] if len(ops) == 4 else None
    if trunc is not None and trunc.name == "arith.truncf" and elem == "f32" and \
            _elem(trunc.result) == "f16" and getattr(entries[i + 3], "io", None) is not None and \
            entries[i + 3].io[0] == (p,) and _only_user(users, mul.result, trunc):
        out, out_dtype, covered = entries[i + 3].io[1], F16, 4
    if elem == "f16" and out_dtype != F16:
        return None
    return _Tail(a, e, u, out, k, _ELEM[elem], out_dtype, u_left), covered


def _step(tail: _Tail, originals: list, ext):
    a_, e_, u_, out_, k, dt, odt, mode = (tail.a, tail.e, tail.u, tail.out, tail.k, tail.dtype,
                                          tail.out_dtype, tail.mode)
    fn = ext.silu_tail
    nd = np.ndarray

    def step(env):
        a, e, u = env[a_], env[e_], env[u_]
        if type(a) is nd and type(e) is nd and type(u) is nd and a.dtype == dt and \
                e.dtype == dt and u.dtype == dt and a.shape == e.shape == u.shape and \
                a.flags.c_contiguous and e.flags.c_contiguous and u.flags.c_contiguous:
            out = np.empty(a.shape, odt)
            fn(a, e, u, out, k, mode)
            env[out_] = out
            return
        for original in originals:  # another layout: the ops one by one
            original(env)

    step.op = originals[-1].op
    step.fused = tuple(originals)  # the entries it stands for
    return step


def fuse_tails(entries: list, base: list, users: dict, template: list) -> list:
    """``entries`` with each SiLU tail (module docstring) replaced by one fused step; the same
    list where there is none or the extension is unavailable. ``base``: the env the replay
    starts from (its constants); ``users`` (``Function.users()``) and ``template`` (its folded
    constants): of the compile whose slots the entries use."""
    fns = f16_convert._functions()
    ext = fns.ext if fns is not None else None
    if ext is None or not patterns.enabled():
        return entries
    out = []
    i = 0
    n = len(entries)
    while i < n:
        found = _match(entries, i, users, template, base)
        if found is None:
            out.append(entries[i])
            i += 1
            continue
        tail, covered = found
        out.append(_step(tail, entries[i:i + covered], ext))
        i += covered
    return out if len(out) != n else entries
