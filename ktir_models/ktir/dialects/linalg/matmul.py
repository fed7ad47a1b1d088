"""linalg.matmul, matmul_transpose_b, batch_matmul and matvec: each op kind's parts side by side
(syntax, verification rule, builder, stacked form, cost).

Numerics: the products are summed in f32, the ``outs`` accumulator is added in f32, and the sum is
rounded once to the result type. With the native kernel (``Machine.native_matmul``, f16 x f16
operands: :func:`~ktir_models.ktir.exec.native_matmul.uses_native`) each element's products are summed
sequentially over k (:mod:`...backends.seqmm`), the same order however the grid is batched;
otherwise f16 operands are widened to f32 and multiplied with f32 BLAS, in OpenBLAS's order.
(numpy float16 matmul does not use BLAS and is never called.)

``linalg.matvec`` (``ins(A: MxK, x: K) outs(y: M)``, ``y[i] += sum_k A[i, k] x[k]``) is the
matmul of A by x as a K x 1 matrix with accumulator y as an M x 1 one: the same products,
summation order and roundings, on the same kernel choice.
"""

from __future__ import annotations

import numpy as np

from ...ir import registry
from ...ir.nodes import FLOAT_TYPES, Op, TensorType
from ...exec.native_matmul import uses_native, weight_n_axis
from ...verify.rules import Rule, check_declared_ins_outs, eq, fail, ins_outs
from .numerics import wide_of
from .syntax import parse_structured


MATMULS = ("linalg.matmul", "linalg.matmul_transpose_b", "linalg.batch_matmul")


def is_zero_const(c, v) -> bool:
    """Whether ``v`` is a compile-time constant tensor of zeros (a matmul with such an
    accumulator does not add it)."""
    if not c.is_const(v):
        return False
    val = c.const(v)
    return isinstance(val, np.ndarray) and not np.any(val)


def as_batch3(x, lead: tuple) -> np.ndarray:
    """``x`` as a 3-D array whose leading dim is 1 or prod(``lead``) (a leading dim of 1 is
    shared by every batch entry: the kernel broadcasts it without a view being made)."""
    if x.ndim == 2:
        return x[None]
    if x.ndim == 3 and len(lead) == 1:
        return x
    x = np.broadcast_to(x, lead + x.shape[-2:])  # several batch dims (stacked batch_matmul)
    return x.reshape((-1,) + x.shape[-2:])


def native_matmul_step(ia, ib, iacc, ir, dt, trans, zero_acc, machine=None):
    """The step of a matmul on the native kernel (one trip of all of K, f32 partial sums
    sequential over k, the accumulator added in f32, one rounding to ``dt``). ``machine``:
    where B is a weight view with a blocked copy registered there (exec/row_major.py), the
    kernel reads the copy: the same values, so the same bits."""
    from ...backends.seqmm import kloop
    from ...exec.row_major import blocked_view

    f16 = np.dtype(np.float16)

    def kernel(A, B, acc, transposed, groups=1):
        return kloop(A, B, acc, trips=1, kb=A.shape[-1], transpose_b=transposed,
                     part_dtype=np.float32, acc_dtype=dt, groups=groups)

    def step(env):
        A, B = env[ia], env[ib]
        blocked = blocked_view(machine, B) if machine is not None else None
        if blocked is not None and A.dtype == f16 and A.ndim <= 3 and A.shape[-1] > 0 and \
                (A.ndim < 3 or A.shape[0] in (1, blocked.boxes)):
            acc = None if zero_acc else np.asarray(env[iacc])
            out = blocked.apply(A if A.ndim == 3 else A[None], acc, kernel)
            env[ir] = out if B.ndim == 3 else out[0]
            return
        if A.dtype != f16:  # an f32 copy of f16 values: exact
            A = A.astype(f16)
        if B.dtype != f16:
            B = B.astype(f16)
        lead = A.shape[:-2] if A.ndim >= B.ndim else B.shape[:-2]
        if A.ndim > 3 or B.ndim > 3 or (A.ndim == B.ndim == 3 and A.shape[0] != B.shape[0]):
            lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        M, K, N = A.shape[-2], A.shape[-1], B.shape[-2] if trans else B.shape[-1]
        if K == 0:  # an empty sum: the accumulator (or zero), rounded
            zeros = np.zeros(lead + (M, N), np.float32)
            env[ir] = (zeros if zero_acc else zeros + env[iacc]).astype(dt)
            return
        acc = None if zero_acc else as_batch3(np.asarray(env[iacc]), lead)
        out = kloop(as_batch3(A, lead), as_batch3(B, lead), acc, trips=1, kb=K,
                    transpose_b=trans, part_dtype=np.float32, acc_dtype=dt)
        env[ir] = out.reshape(lead + (M, N))

    return step


@registry.implements("build", *MATMULS)
def build_matmul(c, op):
    (a, b), (acc,) = ins_outs(op)
    r = op.result
    dt = r.type.dtype
    ia, ib, iacc, ir = c.slot(a), c.slot(b), c.slot(acc), c.slot(r)
    trans = op.name == "linalg.matmul_transpose_b"
    zero_acc = is_zero_const(c, acc)
    if uses_native(c, op):
        weight = weight_n_axis(c, b) is not None  # its load may register a blocked copy
        return native_matmul_step(ia, ib, iacc, ir, dt, trans, zero_acc,
                                  c.machine if weight else None)
    return blas_matmul_step(c.xp, ia, ib, iacc, ir, dt, trans, zero_acc)


def blas_matmul_step(xp, ia, ib, iacc, ir, dt, trans, zero_acc):
    """The step of a matmul on the back end's f32 matmul (BLAS on numpy): operands widened to
    f32 (exact), the accumulator added in f32, one rounding to ``dt``."""
    wide, matmul, add, astype = wide_of(xp), xp.matmul, xp.add, xp.astype

    def step(env):
        # operands loaded only for matmuls arrive as (cached) f32 already; see ktdp.load
        A = wide(env[ia])
        B = wide(env[ib])
        if trans:
            B = B.swapaxes(-1, -2)
        P = matmul(A, B)
        if not zero_acc:
            P = add(P, env[iacc])  # in P's (f32) precision: both back ends promote alike
        env[ir] = astype(P, dt)

    return step


def _matmul(op: Op) -> None:
    ins, outs = ins_outs(op)
    if len(ins) != 2 or len(outs) != 1:
        fail(f"{op.name} takes ins(A, B) outs(C)")
    check_declared_ins_outs(op)
    a, b, c = (v.type for v in (ins[0], ins[1], outs[0]))
    for x in (a, b, c):
        if not isinstance(x, TensorType):
            fail(f"{op.name} operands must be tensors")
    batch = op.name == "linalg.batch_matmul"
    rank = 3 if batch else 2
    if not (len(a.shape) == len(b.shape) == len(c.shape) == rank):
        fail(f"{op.name} operands must have rank {rank}: {a}, {b}, {c}")
    sa, sb, sc = a.shape[-2:], b.shape[-2:], c.shape[-2:]
    if op.name == "linalg.matmul_transpose_b":
        sb = (sb[1], sb[0])
    m, k = sa
    k2, n = sb
    if not (eq(k, k2) and eq(sc[0], m) and eq(sc[1], n)):
        fail(f"shape mismatch in {op.name}: {a} x {b} -> {c}")
    if batch and not (eq(a.shape[0], b.shape[0]) and eq(a.shape[0], c.shape[0])):
        fail(f"batch sizes differ in {op.name}: {a}, {b}, {c}")


for _n in MATMULS:
    registry.set_part("syntax", _n, parse_structured)
    registry.set_part("verify", _n, Rule((3, 3), (1, 1), check=_matmul))


@registry.implements("stacked", *MATMULS)
def stacked_matmul(b, op, plain):
    return plain  # numpy matmul broadcasts over the leading core axis, one BLAS call per core


@registry.implements("cost", *MATMULS, "linalg.matvec")
def cost_matmul(w, op: Op, scale: float) -> None:
    """2 M N K flops (N = 1 for matvec) at the systolic array's rate (docs/latency.md); the
    result is written to LX."""
    ins = op.groups.get("ins", [])
    if len(ins) < 2:
        w.charge(op, scale)
        return
    a, b = ins[0].type, ins[1].type
    out = op.result.type if op.results else op.groups["outs"][0].type
    if not (isinstance(a, TensorType) and isinstance(out, TensorType)) or not a.is_static:
        w.note(f"{op.loc}: {op.name} with dynamic shapes; counted as free")
        w.charge(op, scale)
        return
    k = a.shape[-1]
    n_out = out.num_elements or 0
    flops = 2.0 * n_out * k
    w.charge(op, scale, "matmul", flops / w.params.systolic_flops_per_cycle, flops=flops)
    w.cost.lx_bytes += (out.nbytes or 0) * scale
    for r in op.results:
        w.env[r] = None


# -- linalg.matvec ------------------------------------------------------------------------------

def _matvec(op: Op) -> None:
    ins, outs = ins_outs(op)
    if len(ins) != 2 or len(outs) != 1:
        fail("linalg.matvec takes ins(A, x) outs(y)")
    check_declared_ins_outs(op)
    a, x, y = (v.type for v in (ins[0], ins[1], outs[0]))
    for t in (a, x, y):
        if not isinstance(t, TensorType) or t.elem not in FLOAT_TYPES:
            fail(f"linalg.matvec operands must be float tensors, got {t}")
    if not (len(a.shape) == 2 and len(x.shape) == 1 and len(y.shape) == 1):
        fail(f"linalg.matvec takes a matrix and two vectors: {a}, {x}, {y}")
    m, k = a.shape
    if not (eq(k, x.shape[0]) and eq(m, y.shape[0])):
        fail(f"shape mismatch in linalg.matvec: {a} x {x} -> {y}")


registry.set_part("syntax", "linalg.matvec", parse_structured)
registry.set_part("verify", "linalg.matvec", Rule((3, 3), (1, 1), check=_matvec))


@registry.implements("build", "linalg.matvec")
def build_matvec(c, op):
    """y = A x + y as the matmul of A [M, K] by x as [K, 1] with accumulator y as [M, 1]: the
    steps of :func:`build_matmul`, on the same kernel choice, over views of x and y."""
    (a, x), (acc,) = ins_outs(op)
    r = op.result
    dt = r.type.dtype
    ia, ix, iacc, ir = c.slot(a), c.slot(x), c.slot(acc), c.slot(r)
    zero_acc = is_zero_const(c, acc)
    col, acc_col, out_col = c.new_slot(), c.new_slot(), c.new_slot()
    if uses_native(c, op):
        inner = native_matmul_step(ia, col, acc_col, out_col, dt, False, zero_acc)
    else:
        inner = blas_matmul_step(c.xp, ia, col, acc_col, out_col, dt, False, zero_acc)

    def step(env):
        env[col] = env[ix][..., None]  # x as a K x 1 matrix (a view)
        if not zero_acc:
            env[acc_col] = env[iacc][..., None]
        inner(env)
        env[ir] = env[out_col][..., 0]

    return step
