"""Which matmuls run on the native f16 kernel (backends/seqmm), and which values feed only them.

One predicate for every op kind that asks (linalg's matmul builders, the K-loop rules, ktdp.load
choosing between an f16 view and an f32 copy): the choice is made once per op from its types and
the machine's ``native_matmul`` switch, so every plan of a machine (plain, lock step, stacked,
rerolled, the batched K-loop) sums a matmul in the same order and they stay bit-identical.

This module reads only op names, operand groups and types (it imports nothing of the emulator),
so dialect modules and drivers alike may use it.
"""

from __future__ import annotations

MATMULS = ("linalg.matmul", "linalg.matmul_transpose_b", "linalg.batch_matmul",
           "linalg.matvec")  # matvec: the matmul of A by x as a K x 1 matrix (dialects/linalg)


def uses_native(c, op) -> bool:
    """Whether matmul ``op`` runs on the native kernel: decided once per op from its types, so
    every plan of a machine (plain, lock step, stacked, the batched K-loop) sums it in the same
    order and they stay bit-identical."""
    if not c.machine.native_matmul or op.name not in MATMULS:
        return False
    (a, b), (acc,) = op.groups.get("ins", []), op.groups.get("outs", [])
    return a.type.elem == "f16" and b.type.elem == "f16" and acc.type.elem in ("f16", "f32")


def only_matmul_users(c, v) -> bool:
    """Whether ``v`` has users and every one is a matmul reading it as an input."""
    users = c.users.get(id(v), [])
    return bool(users) and all(u.name in MATMULS and v in u.groups.get("ins", []) for u in users)


def feeds_native_matmuls(c, v) -> bool:
    """Whether every user of ``v`` is a matmul on the native kernel, reading ``v`` as an input
    (it then wants the f16 values where they lie, not an f32 copy)."""
    users = c.users.get(id(v), [])
    return bool(users) and c.machine.native_matmul and only_matmul_users(c, v) and \
        all(uses_native(c, u) for u in users)


def weight_n_axis(c, v) -> int | None:
    """The axis of ``v`` that is N for every user, where each user is a matmul on the native
    kernel reading ``v`` as its B operand (-2 for ``linalg.matmul_transpose_b``'s [N, K], -1
    for the others' [K, N]); None otherwise (an A operand, other users, users that disagree).
    row_major.py then may hand those users an N-contiguous copy."""
    users = c.users.get(id(v), [])
    if not users or not feeds_native_matmuls(c, v):
        return None
    axes = set()
    for u in users:
        ins = u.groups.get("ins", [])
        if u.name == "linalg.matvec" or len(ins) < 2 or ins[1] is not v or ins[0] is v:
            return None
        axes.add(-2 if u.name == "linalg.matmul_transpose_b" else -1)
    return axes.pop() if len(axes) == 1 else None
