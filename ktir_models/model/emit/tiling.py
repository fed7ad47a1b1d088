"""Tile sizes that fit the machine: 2 MiB of LX per core, up to 32 cores.

Every kernel we emit is planned here from its shapes alone. The LX estimates count every tensor
that is live at the worst point of a kernel body: the loaded f16 tiles, f32 copies where a kernel
widens explicitly, the loop-carried accumulator twice (old and new value coexist at the
``scf.yield``), and the epilogue temporaries. Estimates are kept under :data:`LX_BUDGET`
(1.5 MiB), leaving a quarter of LX as slack for accounting differences between emulators; the
emulator's measured high-water mark is checked against the full 2 MiB in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError

LX_BYTES = 2 * 1024 * 1024
LX_BUDGET = 3 * 512 * 1024  # 1.5 MiB
MAX_CORES = 32
ROW_BLOCK = 64  # rows of activations handled together (GEMM weight tiles are reused across them)


def divisors(n: int) -> list[int]:
    """All divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def row_blocks(m: int, block: int = ROW_BLOCK) -> list[tuple[int, int]]:
    """``[(start, size), ...]`` covering ``range(m)`` with blocks of ``block`` rows (last ragged)."""
    return [(r, min(block, m - r)) for r in range(0, m, block)]


@dataclass(frozen=True)
class ColumnChunks:
    """Output columns split into ``full`` chunks of ``size`` plus an optional ``tail`` chunk.

    Chunks are dealt round-robin to the ``grid`` cores (core c takes chunks c, c + grid, ...); the
    tail chunk, if any, goes to core 0.
    """

    size: int
    full: int
    tail: int
    grid: int


@dataclass(frozen=True)
class GemmPlan:
    """How one GEMM node ``[m, K] x [N, K]^T`` is tiled (see :func:`plan_gemm`)."""

    rows: tuple[tuple[int, int], ...]
    cols: ColumnChunks
    kblock: int
    lx_estimate: int


#: Epilogue LX per output element (bytes): the f16 result, plus for "residual" the residual tile
#: (f16) and the f32 sum, for "silu_mul" four f32 temporaries, for "bias" the broadcast f32 bias
#: and the f32 sum (the bias row itself, f16 + f32, is counted per element too: an overestimate).
#: A family scalar (multiplier / divisor) adds SCALAR_BYTES per element (its f32 product).
EPILOGUE_BYTES = {"none": 2, "residual": 2 + 2 + 4, "silu_mul": 2 + 4 * 4, "bias": 2 + 6 + 4 + 4}
SCALAR_BYTES = 4


def gemm_lx(mb: int, nb: int, kb: int, weights: int, epilogue: str = "silu_mul", scalars: int = 0) -> int:
    """LX bytes live at the worst point of one output chunk of a GEMM node.

    The f16 x and weight tiles (the matmul takes them directly, accumulating in f32), the f32
    accumulator old + new, the finished accumulators of earlier weights (gate while up runs), and
    the epilogue temporaries.
    """
    return (2 * mb * kb + 2 * nb * kb + 8 * mb * nb + 4 * mb * nb * (weights - 1)
            + (EPILOGUE_BYTES[epilogue] + SCALAR_BYTES * scalars) * mb * nb)


def plan_gemm(m: int, k: int, n: int, weights: int = 1, epilogue: str = "none",
              budget: int = LX_BUDGET, scalars: int = 0) -> GemmPlan:
    """Choose the column chunk and the K block (the largest divisor of K that fits ``budget``).

    Chunks are multiples of 64 up to ``n / 32`` rounded up, the even share ``n / 32`` itself
    where it is a multiple of 8 (12800 -> 400 columns a core, 11008 -> 344; chunk edges then fall
    inside 128-byte sticks, as the 8-column tiles of the real emitter's programs do), or all of
    a narrow ``n``. Among the choices whose busiest core (core 0, which also takes a ragged
    tail chunk: the node's latency is that core's) has at most 10% more columns than the least
    loaded choice's, the one with the fewest K-loop trips on that core wins (fewer, larger DMA
    tiles and matmuls); ties go to the larger chunk. Counting trips alone once dealt 12800 columns as
    40 chunks of 320 over 32 cores, so that 8 cores did twice the others' work."""
    rows = tuple(row_blocks(m))
    mb = max(size for _, size in rows)
    target = -(-n // MAX_CORES)
    top = min(n, max(64, -(-target // 64) * 64))
    even = {target} if n % MAX_CORES == 0 and target % 8 == 0 and target < top else set()
    candidates = sorted({top, *range(64, top, 64)} | even | ({n} if n < 64 else set()), reverse=True)
    options = []
    for nb in candidates:
        fitting = [d for d in divisors(k) if gemm_lx(mb, nb, d, weights, epilogue, scalars) <= budget]
        if not fitting:
            continue
        kb = fitting[-1]
        full, tail = divmod(n, nb)
        grid = min(MAX_CORES, full + (1 if tail else 0))
        busiest = -(-full // grid)
        work = busiest * nb + tail
        trips = busiest * (k // kb) + (k // kb if tail else 0)
        options.append((work, trips, nb, kb, full, tail, grid))
    if not options:
        raise UserError(f"GEMM [{m}x{k}] x [{k}x{n}] does not fit LX in any column chunk")
    least = min(o[0] for o in options)
    near = [o for o in options if o[0] * 10 <= least * 11]
    _, _, nb, kb, full, tail, grid = min(near, key=lambda o: (o[1], -o[2]))  # trips, then wider
    return GemmPlan(rows, ColumnChunks(nb, full, tail, grid), kb, gemm_lx(mb, nb, kb, weights, epilogue, scalars))


@dataclass(frozen=True)
class AttentionPlan:
    """Attention tiling: one query head per core step, query rows in ``rows`` blocks. With
    ``key_block`` None all keys are scored in one pass; otherwise the prefix keys stream through
    blocks of ``key_block`` rows with an online softmax (running max, sum and output)."""

    rows: tuple[tuple[int, int], ...]
    grid: int
    lx_estimate: int
    key_block: int | None = None


def attention_lx(mb: int, keys: int, head_dim: int) -> int:
    """Single pass: K and V rows (f16) of all ``keys`` (prefix + fresh), q (f16), scores and four
    softmax temporaries plus the mask (f16 + f32) over ``[mb, keys]``, the output (f32 accumulator
    twice per part, f16 result)."""
    return 4 * keys * head_dim + 2 * mb * head_dim + 30 * mb * keys + 14 * mb * head_dim


def blocked_attention_lx(mb: int, block: int, m: int, head_dim: int) -> int:
    """Streaming pass: one K/V block (f16) plus the fresh K/V rows, q, the scores of the larger of
    a block and the fresh part with their temporaries, and the carried max/sum/output (twice)."""
    return (4 * (block + m) * head_dim + 2 * mb * head_dim + 30 * mb * max(block, m)
            + 24 * mb * head_dim + 16 * mb)


def plan_attention(m: int, capacity: int, heads: int, head_dim: int, budget: int = LX_BUDGET) -> AttentionPlan:
    """One pass over at most ``capacity + m`` keys when it fits; else key blocks (multiples of 64,
    the largest that fits, at most 1024) over the prefix."""
    keys = capacity + m
    grid = min(MAX_CORES, heads)
    mb = min(m, ROW_BLOCK)
    while attention_lx(mb, keys, head_dim) > budget and mb > 1:
        mb = max(1, mb // 2)
    if attention_lx(mb, keys, head_dim) <= budget:
        return AttentionPlan(tuple(row_blocks(m, mb)), grid, attention_lx(mb, keys, head_dim))
    mb = min(m, ROW_BLOCK)
    while True:
        blocks = [b for b in range(64, 1025, 64) if blocked_attention_lx(mb, b, m, head_dim) <= budget]
        if blocks:
            block = blocks[-1]
            return AttentionPlan(tuple(row_blocks(m, mb)), grid, blocked_attention_lx(mb, block, m, head_dim), block)
        if mb == 1:
            raise UserError(
                f"{m} new tokens with head_dim {head_dim} do not fit one core's LX in the attention "
                f"kernel (the fresh keys alone exceed it); use fewer tokens per pass")
        mb = max(1, mb // 2)


def rows_grid(m: int) -> int:
    """Cores for row-parallel kernels (RMSNorm, RoPE): one row per core step."""
    return min(MAX_CORES, m)


def rmsnorm_lx(hidden: int) -> int:
    """The weight (f16, f32, broadcast f32), one row (f16, f32, squares, normalised, scaled, f16)."""
    return 10 * hidden + 20 * hidden


def rope_lx(heads: int, head_dim: int) -> int:
    """Both halves of one row of heads (f16 + f32), four f32 products, two f16 results, the
    broadcast cos/sin halves (f32)."""
    half = head_dim // 2
    return heads * half * (2 * 6 + 4 * 4 + 2 * 2 + 4 * 4)
