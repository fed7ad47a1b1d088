/* seqmm: K-blocked matmul over f16 operands with one fixed summation order.
 *
 * Definition (seqmm.py's docstring; kloop_reference is its numpy form), per output (c, m, n):
 *   r = acc[c,m,n] if given, else none
 *   for t in trips: s = +0.0f; for k in trip t: s = f32(s + f32(a[c,m,k]) * f32(B[c,k,n]))
 *                   p = round(part, s); r = p if none else round(acc, f32(r) + f32(p))
 *   out = round(acc, r)
 * Every product of two f16 values is exact in f32 (11+11 significant bits, exponents far inside
 * f32's range), so an FMA and a multiply-then-add give the same bits. Each output element is
 * one sequential chain over k whatever the tiling, vector width, thread split or layout; tiles
 * and threads only choose WHICH elements are computed together, never the order within one.
 *
 * Structure: the output is cut into work items (c, chunk of columns: wide for nn, narrow for nt);
 * threads claim items one at a time, each from the front of its own contiguous range of them and
 * then from the back of another's (a late or slow thread takes fewer; see run_part).
 * Per item, K is walked in slabs of KS k's (16; 32 on the AVX-512 path, 128 there for nn with
 * more than two rows, so that a tile keeps its accumulators over 128 k's; 64 for nn with more
 * than two rows on the AVX2 path, KSNN_AVX2; 32 for nt there, KSNT_AVX2). The slab's f16
 * weights are read in place (nn) or transposed into an f16 buffer (nt, b = [C, N, K]): AVX2,
 * 8 n x 16 k at a time into rows [k][n]; AVX-512, 16 n x 32 k at a time into 16-column panels
 * (see PANEL_POS). With M > 2 rows (stacked cores, prefill rows) the AVX-512 path widens the
 * slab to f32 once for every row; the AVX2 tiles widen each weight as they use it. A
 * register-blocked micro-kernel runs
 * a tile of rows x columns over the slab's k's, closing a trip (round the partial, chain it into
 * r) whenever a trip boundary is crossed; a partial that spans slabs waits in an f32 buffer s.
 * The weights, which stream from memory (decode is bandwidth bound), are prefetched twice: a few
 * slabs ahead in the kernel's order, and the thread's next item whole (up to 512 KB), in address
 * order, spread over the current item's slabs or panels (into L2; see ahead_t).
 *
 * Cost of nt (every GEMM of the real programs): the transposes are shuffle-port bound. AVX2
 * spends 24 in-lane unpacks per 128 weights plus 16-byte stores; AVX-512 spends 24 unpacks and
 * 8 lane permutes per 256 weights and stores 64-byte panel rows, then the micro-kernel widens
 * 16 n's per vcvtph2ps from memory (no shuffle) into 16-lane FMAs. That is still 4 vector uops
 * per 16 multiply-adds on the two 512-bit ports against nn's 2, so nt stays slower where the
 * weights are in cache; streamed from memory (decode), measured on the 2-core dev machine:
 * nt / nn = 1.5 (1 thread) and 1.4 (2 threads) at 1x576 @ 1536x576, 1.2 and 1.25 at K = N =
 * 2048 (the AVX2 path: 1.85 / 1.55 and 1.5 / 1.8).
 *
 * Small K blocks with f16 partials and an f16 accumulator (the lm_heads: kb = 2 or 4) are bound
 * by closing trips, not by FMAs: each close rounds the partial and the chained sum to f16 (two
 * f16 round trips per 16 outputs on the two vector ports). Without AVX512-FP16 (AMD Zen 4:
 * one vcvtps2ph + vcvtph2ps round trip per ~3 cycles, against one 512-bit FMA per cycle), the
 * many-rows tiles keep r in registers across a slab's trips (tile512r); the round trips remain
 * the bound. Where the CPU has AVX512-FP16 the chained sum is one f16 add and r stays in registers across a slab's trips (tile512h; see the
 * proof there that the bits are the same), and nt with 16+ rows (stacked cores, prefill rows) runs
 * the m-vector layout (slab_mvec): a transposed once, weight rows widened without panels, vectors
 * over m. Measured on the 2-core dev VM, [32 x 576] @ [16384 x 576]^T at 144 x 4, 2 threads:
 * ~8.5 -> ~4.4 ms (36 -> 69 GMAC/s; the prefill GEMMs at kb 64-128 gain 10-20%). The same layout
 * serves every other (part, acc) pair there (tile_mvec32: the prefill GEMMs of our emitted
 * programs, f32 sums of all of K into a given f32 accumulator; [32 x 4096] @ [4096 x 4096]^T over
 * 32 cores, 2 threads: ~78 -> ~85-107 GMAC/s, the VM's speed swinging by a third between runs).
 *
 * Four paths with the same semantics, selected at run time by a CPU check and compiled through
 * function target attributes (no -m flags): AVX-512 F+BW+VL (with FMA, F16C) with and without
 * AVX512-FP16 (the FP16 parts are compiled where the compiler's immintrin.h has its intrinsics
 * without -m flags: GCC 12 does, clang 14 does not), AVX2+FMA+F16C, and portable C with exact bit-level
 * f16 <-> f32 conversions (round to nearest even, subnormals, overflow). seqmm_kloop's last
 * argument caps the path (1: portable, 2: at most AVX2, 3: AVX-512 without FP16) so tests run
 * each one on any machine. All run with flush-to-zero, denormals-are-zero off and
 * round-to-nearest (MXCSR set per thread on x86; the FP16 adds round by it too).
 * Never compile this with -ffast-math.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SEQMM_NO_SIMD)
#define SEQMM_X86 1
#include <immintrin.h>
#include <cpuid.h>
#define SIMD_FN __attribute__((target("avx2,fma,f16c")))
#define SIMD_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#else
#define SEQMM_X86 0
#endif
/* the AVX512-FP16 closing of f16 chains needs the ISA's intrinsics without -m flags (GCC 12+,
   whose immintrin.h then includes them, defining these guards; clang 14's only with
   -mavx512fp16); otherwise the library is built without it (the other paths are unchanged) */
#if SEQMM_X86 && !defined(SEQMM_NO_FP16) && \
    ((defined(__AVX512FP16INTRIN_H_INCLUDED) && defined(__AVX512FP16VLINTRIN_H_INCLUDED)) || \
     (defined(__AVX512FP16INTRIN_H) && defined(__AVX512VLFP16INTRIN_H)))
#define SEQMM_FP16 1
#else
#define SEQMM_FP16 0
#endif

#define KS 16          /* k's per slab (portable and AVX2 paths; the AVX-512 path: KS512 = 32) */
#ifndef KSNN
#define KSNN 128       /* k's per slab of nn (b = [K, N]) with M > 2 on the AVX-512 path (32 and 64
                          measured 3-14% slower per prefill call, single and two threads, Zen 4) */
#endif
#ifndef KSNN_H
#define KSNN_H 64      /* the same with AVX512-FP16 (the many-rows f16-chain tiles): 128 measured
                          ~13% slower per prefill call on the Intel dev machine (1 thread, calls
                          alternated between builds), its 32 KB f32 slab crowding the L1 */
#endif
#ifndef KSNT_AVX2
#define KSNT_AVX2 32   /* k's per slab of nt on the AVX2 path: a weight row's whole 64-byte line
                          per slab, where 16 k's read half a line and came back for the other
                          half two slabs later (rows 8 KB apart share one L1 set). Decode-shaped
                          calls (one row; 4096 x 4096, 4096 x 12800, 12800 x 4096, 2 threads,
                          replayed in turns) on the Zen 3 VM: x1.16 against 16; 64: x1.13 */
#endif
#ifndef KSNN_AVX2
#define KSNN_AVX2 64   /* the same on the AVX2 path (KS before): a prefill's calls replayed
                          (benchmarks/kernel_calls.py --variant) on a 2-core AMD EPYC Zen 3 VM,
                          against 16: x1.18 smollm2-135m-prefill, x1.16 the emitted prefill-32,
                          x1.14 llama-3.2-1b prefill-32 (32: x0.91 to x1.23, noisier) */
#endif
#define MAX2(x, y) ((x) > (y) ? (x) : (y))
#define KS_MAX MAX2(MAX2(KSNN, KSNN_H), MAX2(MAX2(KSNN_AVX2, KSNT_AVX2), 32))  /* slab buffers' rows: every slab's */
/* columns per work item. nn (b [K, N]): wide, so each weight row is read in long runs. nt
   (b [N, K]): narrow, so an item's rows are one contiguous block of b read front to back. */
#ifndef NC_NN
#define NC_NN 512
#endif
#ifndef NC_NT
#define NC_NT 64
#endif
#ifndef NC_NT_WIDE
#define NC_NT_WIDE 128  /* nt on the AVX-512 path where the weight rows spread over the L1 sets */
#endif
#define NC_ALIGN 32    /* slab/tile columns are padded to this many (micro-kernel strip widths) */
#ifndef BALANCE_ROWS
#define BALANCE_ROWS 1 /* many-row calls: a few items not a multiple of the threads halved (seqmm_kloop) */
#endif
#ifndef MIN_ITEMS
#define MIN_ITEMS 4    /* with threads > 1, items per thread the columns are split for (see seqmm_kloop) */
#endif
#ifndef PF_SLABS
#define PF_SLABS 2     /* how many slabs ahead the weights are prefetched */
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T0
#endif
#ifndef PF_AHEAD
#define PF_AHEAD 1     /* prefetch the next work item's weights in address order (see ahead_t),
                          on CPUs whose own prefetchers leave that to software
                          (cpu_streaming_aids) */
#endif
#ifndef PF_AHEAD_MAX
#define PF_AHEAD_MAX (1024 * 1024)  /* bytes: a bigger next item is not prefetched. Items over
   512 KB are the 32-column nt items of K > 8192 (the 7-8B models' down projections); measured
   on the 2-core Zen 4 VM (1 MB L2), granite-3.3-8b's down call (32 x 128 columns, K = 12800,
   800 KB items), replayed in turns: prefetching them 1.24-1.29x, the other calls unchanged. On
   an Intel core with a 2 MB L2, 1 MB items prefetched were slower: tune it per machine. */
#endif
#ifndef NT_ITEM_MAX
#define NT_ITEM_MAX (256 * 1024)  /* bytes: nt items are cut to at most this many weight bytes, down
                                     to NC_ALIGN rows (0: no cap); see seqmm_kloop */
#endif
#ifndef NT_FEW_ROWS
#define NT_FEW_ROWS 16  /* nt with M <= 2 on the AVX-512 path of a CPU without the streaming aids
   (cpu_streaming_aids: Intel): items of a multiple of 16 rows, at most NT_FEW_ITEM_MAX bytes.
   Each item row is a stream the core's prefetchers follow (rows of NT_FEW_MIN_ROW bytes or
   more). Measured on the 2-core Intel VM, 2 threads, weights over the L3, granite-3.3-8b's
   decode shapes: 16-row items 23.0-23.7 GB/s against 20.0-20.6 with 32 rows (K = 4096), 27.4-27.6
   against 25.8-26.0 (K = 12800); 128 rows 8-11 */
#endif
#if NT_FEW_ROWS % 16 != 0
#error "NT_FEW_ROWS must be a multiple of 16: the nt decode tiles read whole 16-row panels"
#endif
#ifndef NT_FEW_MIN_ROW
#define NT_FEW_MIN_ROW 2048  /* bytes: shorter rows keep the 32-row alignment (K = 576: 16-row
   items 3-10 % slower; K = 1536-8192: 13-41 % faster, same machine) */
#endif
#ifndef NT_FEW_ITEM_MAX
#define NT_FEW_ITEM_MAX (128 * 1024)
#endif
#ifndef PF_AHEAD_STEP
#define PF_AHEAD_STEP 64
#endif
#ifndef STAGE_ALIAS
#define STAGE_ALIAS 2048  /* bytes: AVX-512 nt rows whose stride is a multiple of this are staged
                             (0: never; nor where cpu_streaming_aids says not; see
                             stage_rows) */
#endif
#ifndef STAGE_K
#define STAGE_K 256    /* k's of each row per staging copy (a multiple of KS512) */
#endif
#define STAGE_S (STAGE_K + 32)  /* the stage's row stride in f16: 64 bytes past a multiple of 256,
                                   so 16 consecutive rows fall in different L1 sets */
#ifndef PF_AHEAD_LOCALITY
#define PF_AHEAD_LOCALITY 1  /* __builtin_prefetch locality: 1 = into L2 (x86 PREFETCHT2) */
#endif
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_AHEAD(p) __builtin_prefetch((p), 0, PF_AHEAD_LOCALITY)
#else
#define PREFETCH_AHEAD(p) ((void)(p))
#endif
/* (NC_NN, NC_NT, PF_SLABS, PF_HINT: measured on the 2-core dev machine; -D overrides for tuning) */
#define MR_MAX 6       /* rows per micro-kernel tile */
#ifndef NC_MVEC
#define NC_MVEC 64     /* columns per item in the m-vector layout (see slab_mvec) */
#endif
#ifndef MVEC_MIN_ROWS
#define MVEC_MIN_ROWS 16  /* rows from which nt uses the m-vector layout (FP16 CPUs) */
#endif
/* the micro-kernel's accumulators must live in registers: fully unroll its small fixed loops */
#if defined(__clang__)
#define UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define UNROLL _Pragma("GCC unroll 16")
#else
#define UNROLL
#endif

/* ---------------------------------------------------------------- exact f16 <-> f32, portable */

static inline float bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }

static inline float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));  /* inf, NaN (payload kept) */
    if (e != 0) return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0) return bits_f32(sign);
    /* subnormal: m * 2^-24, exact in f32 */
    return bits_f32(sign | f32_bits((float)m * 5.9604644775390625e-8f));
}

static inline uint16_t f2h(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((ax >> 13) & 0x3ffu);  /* quiet NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;  /* >= 65520 (incl. inf) rounds to inf */
    if (ax >= 0x38800000u) {                       /* f16 normal range, >= 2^-14 */
        uint32_t r = ax - 0x38000000u;             /* rebias the exponent 127 -> 15 */
        r += 0x0fffu + ((r >> 13) & 1u);           /* round to nearest even at bit 13 */
        return sign | (uint16_t)(r >> 13);         /* a carry into the exponent is correct */
    }
    if (ax < 0x33000000u) return sign;             /* below 2^-25 (half the least subnormal) */
    {   /* f16 subnormal: the value in units of 2^-24, rounded to nearest even */
        uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;                 /* 14 .. 24 */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | (uint16_t)q;                 /* q == 0x400 is the least normal: correct */
    }
}

static inline float round16(float f) { return h2f(f2h(f)); }

/* exported for tests: the portable conversions over whole arrays */
void seqmm_f2h(const float *x, uint16_t *y, ptrdiff_t n) { for (ptrdiff_t i = 0; i < n; i++) y[i] = f2h(x[i]); }
void seqmm_h2f(const uint16_t *x, float *y, ptrdiff_t n) { for (ptrdiff_t i = 0; i < n; i++) y[i] = h2f(x[i]); }

/* ---------------------------------------------------------------- the job */

typedef struct {
    const uint16_t *a; ptrdiff_t sac, sam, sak;
    const uint16_t *b; ptrdiff_t sbc, sbo;   /* nn: b[c*sbc + k*sbo + n]; nt: b[c*sbc + n*sbo + k] */
    void *out;                               /* [C / groups, M, groups * N] contiguous, f16 or
                                                f32: item c's N columns start at column
                                                (c % groups) * N of output c / groups (out_at) */
    const void *acc;                         /* the given acc, laid out as out (acc_at), its
                                                [M, groups * N] blocks acc_cs elements apart
                                                (0: one for all); out itself where the caller
                                                copied it there */
    ptrdiff_t groups, ostride, acc_cs;       /* ostride = groups * N: a row of out (and acc) */
    ptrdiff_t C, M, N, K, trips, kb;
    int nt, part16, acc16, acc_given, simd;  /* simd: 0 portable, 1 AVX2, 2 AVX-512 */
    int fp16;                                /* AVX-512 with AVX512-FP16: f16 chains close natively */
    int mvec;                                /* nt, many rows, FP16 CPU: the m-vector layout (see
                                                slab_mvec); then mp = M rounded up to 16 */
    ptrdiff_t mp;
    ptrdiff_t ks;                            /* k's per slab on the SIMD paths (see KSNN) */
    int aids;                                /* the CPU wants software streaming aids
                                                (cpu_streaming_aids): ahead, stage */
    int ahead;                               /* prefetch each next item (PF_AHEAD and aids) */
    int stage;                               /* AVX-512 nt: rows are copied into a staging
                                                buffer before the transposes (see stage_rows) */
    ptrdiff_t nc, ncp, chunks;               /* item width, padded width, items per c */
    ptrdiff_t align;                         /* item widths are a multiple of this: NC_ALIGN, or
                                                NT_FEW_ROWS (then the last item is padded to 16) */
    ptrdiff_t items;                         /* C * chunks */
    ptrdiff_t *claimed;                      /* items handed out so far (atomic; see run_part) */
    uint64_t *ranges;                        /* RANGES: each part's items, lo | hi << 32 (atomic;
                                                see claim_item); NULL: one counter, claimed */
    ptrdiff_t *finished;                     /* items run so far (atomic) */
    int nranges;
} job_t;

/* element offsets of row m of item c's columns in out and in the given acc */
static inline ptrdiff_t out_at(const job_t *j, ptrdiff_t c, ptrdiff_t m) {
    return (c / j->groups * j->M + m) * j->ostride + c % j->groups * j->N;
}
static inline ptrdiff_t acc_at(const job_t *j, ptrdiff_t c, ptrdiff_t m) {
    return c / j->groups * j->acc_cs + m * j->ostride + c % j->groups * j->N;
}

/* An item's weights as rows of seg bytes, stride bytes apart: nt, its nb rows of b (K values
   each); nn, the K rows' runs of nb columns. */
typedef struct {
    const char *base;
    ptrdiff_t rows, seg, stride;
} block_t;

static block_t item_block(const job_t *j, ptrdiff_t item) {
    ptrdiff_t c = item / j->chunks, n0 = (item % j->chunks) * j->nc;
    ptrdiff_t nb = j->N - n0 < j->nc ? j->N - n0 : j->nc;
    const uint16_t *bc = j->b + c * j->sbc;
    block_t blk;
    blk.stride = (ptrdiff_t)sizeof(uint16_t) * j->sbo;
    if (j->nt) { blk.base = (const char *)(bc + n0 * j->sbo); blk.rows = nb; blk.seg = 2 * j->K; }
    else { blk.base = (const char *)(bc + n0); blk.rows = j->K; blk.seg = 2 * nb; }
    return blk;
}

/* The next item's weights are prefetched into L2 in address order, a share per slab of the
   current item (per 16-column panel on the AVX-512 nt path, so that the requests spread over
   the slab's work), so that memory streams while the current item computes. The slab prefetch
   alone (a few slabs ahead, in the kernel's order: one line from each of 64-128 rows) overlaps
   little of the memory time with the compute: measured on the dev VM, 1 thread over 400 MB of
   64 x 576 items, 6.5-7 GB/s without this and 9-10 GB/s with it (a plain read: 12-13 GB/s). An
   item over PF_AHEAD_MAX is not prefetched ahead: with the current one it crowds the L2. */
typedef struct {
    block_t blk;
    ptrdiff_t row, off;       /* the next line to fetch */
    ptrdiff_t per_step;       /* lines per ahead_step */
} ahead_t;

/* steps: how many times ahead_step runs during the current item */
static inline void ahead_start(const job_t *j, ahead_t *ah, ptrdiff_t next, ptrdiff_t steps) {
    ah->row = ah->off = 0;
    if (next < 0) { ah->blk.rows = 0; ah->per_step = 0; return; }
    ah->blk = item_block(j, next);
    if (ah->blk.rows * ah->blk.seg > PF_AHEAD_MAX) { ah->blk.rows = 0; ah->per_step = 0; return; }
    ptrdiff_t lines = ah->blk.rows * ((ah->blk.seg + PF_AHEAD_STEP - 1) / PF_AHEAD_STEP + 1);
    ah->per_step = (lines + steps - 1) / steps;
}

static inline void ahead_step(ahead_t *ah) {
    for (ptrdiff_t i = 0; i < ah->per_step && ah->row < ah->blk.rows; i++) {
        const char *rp = ah->blk.base + ah->row * ah->blk.stride;
        PREFETCH_AHEAD(rp + (ah->off < ah->blk.seg ? ah->off : ah->blk.seg - 1));
        if (ah->off >= ah->blk.seg) { ah->off = 0; ah->row++; }  /* the row's last byte taken */
        else ah->off += PF_AHEAD_STEP;
    }
}

typedef struct {
    float *a32;    /* [M][K] the current c's a, in f32 */
    float *slab;   /* [KS][ncp] f32 weights of one slab */
    uint16_t *slab16; /* [KS][ncp] f16 weights of one slab (transposed for nt) */
    uint16_t *stage;  /* j->stage: [ncp][STAGE_S] the item's rows, STAGE_K k's of each */
    float *s;      /* [M][ncp] partials that span slabs */
    float *r;      /* [M][ncp] the chained accumulator (values of acc dtype, or the first partial) */
    float *at;     /* the m-vector layout (j->mvec): [K][mp] the current c's a, transposed, in f32;
                      slab is then [ncp][KS512] (n-major), s and r [ncp][mp] */
    ptrdiff_t cur_c;
    ahead_t ah;    /* the next item's prefetch */
} scratch_t;

static void convert_a(const job_t *j, scratch_t *w, ptrdiff_t c) {
    if (w->cur_c >= 0 && (w->cur_c == c || j->sac == 0)) return;
    const uint16_t *ac = j->a + c * j->sac;
    for (ptrdiff_t m = 0; m < j->M; m++)
        for (ptrdiff_t k = 0; k < j->K; k++) w->a32[m * j->K + k] = h2f(ac[m * j->sam + k * j->sak]);
    w->cur_c = c;
}

/* r from the given acc, pad columns zero */
static void load_r(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    for (ptrdiff_t m = 0; m < j->M; m++) {
        float *rm = w->r + m * j->ncp;
        ptrdiff_t base = acc_at(j, c, m) + n0;
        for (ptrdiff_t n = 0; n < nb; n++)
            rm[n] = j->acc16 ? h2f(((const uint16_t *)j->acc)[base + n]) : ((const float *)j->acc)[base + n];
        for (ptrdiff_t n = nb; n < j->ncp; n++) rm[n] = 0.f;
    }
}

static void store_out(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    for (ptrdiff_t m = 0; m < j->M; m++) {
        const float *rm = w->r + m * j->ncp;
        ptrdiff_t base = out_at(j, c, m) + n0;
        for (ptrdiff_t n = 0; n < nb; n++) {
            if (j->acc16) ((uint16_t *)j->out)[base + n] = f2h(rm[n]);
            else ((float *)j->out)[base + n] = rm[n];
        }
    }
}

/* ---------------------------------------------------------------- portable path */

static void slab_portable(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                          ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb, ptrdiff_t nbp) {
    for (ptrdiff_t kk = 0; kk < ks; kk++) {
        float *row = w->slab + kk * j->ncp;
        for (ptrdiff_t n = 0; n < nb; n++)
            row[n] = j->nt ? h2f(bc[(n0 + n) * j->sbo + k0 + kk]) : h2f(bc[(k0 + kk) * j->sbo + n0 + n]);
        for (ptrdiff_t n = nb; n < nbp; n++) row[n] = 0.f;
    }
}

/* one slab for all rows: s[m][n] += a[m][k] * slab[k][n], closing trips as they end */
static void slab_rows_portable(const job_t *j, scratch_t *w, ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t nbp) {
    for (ptrdiff_t kk = 0; kk < ks; kk++) {
        ptrdiff_t k = k0 + kk, t = k / j->kb;
        int opens = (k % j->kb) == 0, closes = (k % j->kb) == j->kb - 1;
        int have_r = j->acc_given || t > 0;
        const float *wk = w->slab + kk * j->ncp;
        for (ptrdiff_t m = 0; m < j->M; m++) {
            float *sm = w->s + m * j->ncp, *rm = w->r + m * j->ncp;
            float av = w->a32[m * j->K + k];
            if (opens) for (ptrdiff_t n = 0; n < nbp; n++) sm[n] = 0.f;
            for (ptrdiff_t n = 0; n < nbp; n++) sm[n] = sm[n] + av * wk[n];
            if (closes) {
                for (ptrdiff_t n = 0; n < nbp; n++) {
                    float p = j->part16 ? round16(sm[n]) : sm[n];
                    if (have_r) { float x = rm[n] + p; rm[n] = j->acc16 ? round16(x) : x; }
                    else rm[n] = p;
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- AVX2 + FMA + F16C path */
#if SEQMM_X86

SIMD_INLINE __m256 r16v(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* Weights stream from memory once, in an order the hardware prefetchers do not follow (short
   runs of many rows): fetch the slab PF_SLABS ahead explicitly. */
SIMD_FN static void prefetch_slab(const job_t *j, const uint16_t *bc, ptrdiff_t k0, ptrdiff_t n0, ptrdiff_t nb) {
    ptrdiff_t kp = k0 + PF_SLABS * j->ks;
    if (!j->nt) {
        for (ptrdiff_t k = kp; k < kp + j->ks && k < j->K; k++)
            for (ptrdiff_t n = 0; n < nb; n += 32) _mm_prefetch((const char *)(bc + k * j->sbo + n0 + n), PF_HINT);
    } else {
        for (ptrdiff_t k = kp; k < kp + j->ks && k < j->K; k += 32)
            for (ptrdiff_t n = 0; n < nb; n++) _mm_prefetch((const char *)(bc + (n0 + n) * j->sbo + k), PF_HINT);
    }
}

/* nn: slab16[kk][n] = b[k0+kk, n0+n] for n < nb, zero up to nbp (only for an item's column tail:
   full items are read in place) */
SIMD_FN static void slab16_nn(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                              ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb, ptrdiff_t nbp) {
    for (ptrdiff_t kk = 0; kk < ks; kk++) {
        const uint16_t *src = bc + (k0 + kk) * j->sbo + n0;
        uint16_t *row = w->slab16 + kk * j->ncp;
        memcpy(row, src, sizeof(uint16_t) * (size_t)nb);
        memset(row + nb, 0, sizeof(uint16_t) * (size_t)(nbp - nb));
    }
}

/* 8x8 transpose of 16-bit elements within each 128-bit lane: rows r[i] (n0+i) of k's become
   y[kk] = the 8 n's at one k (lane 0: k = kk, lane 1: k = 8 + kk) */
#define TRANSPOSE8x8(T, U, r, y)                                                                     \
    do {                                                                                          \
        T t0 = U##_unpacklo_epi16(r[0], r[1]), t1 = U##_unpackhi_epi16(r[0], r[1]);      \
        T t2 = U##_unpacklo_epi16(r[2], r[3]), t3 = U##_unpackhi_epi16(r[2], r[3]);      \
        T t4 = U##_unpacklo_epi16(r[4], r[5]), t5 = U##_unpackhi_epi16(r[4], r[5]);      \
        T t6 = U##_unpacklo_epi16(r[6], r[7]), t7 = U##_unpackhi_epi16(r[6], r[7]);      \
        T u0 = U##_unpacklo_epi32(t0, t2), u1 = U##_unpackhi_epi32(t0, t2);              \
        T u2 = U##_unpacklo_epi32(t1, t3), u3 = U##_unpackhi_epi32(t1, t3);              \
        T u4 = U##_unpacklo_epi32(t4, t6), u5 = U##_unpackhi_epi32(t4, t6);              \
        T u6 = U##_unpacklo_epi32(t5, t7), u7 = U##_unpackhi_epi32(t5, t7);              \
        y[0] = U##_unpacklo_epi64(u0, u4); y[1] = U##_unpackhi_epi64(u0, u4);                    \
        y[2] = U##_unpacklo_epi64(u1, u5); y[3] = U##_unpackhi_epi64(u1, u5);                    \
        y[4] = U##_unpacklo_epi64(u2, u6); y[5] = U##_unpackhi_epi64(u2, u6);                    \
        y[6] = U##_unpacklo_epi64(u3, u7); y[7] = U##_unpackhi_epi64(u3, u7);                    \
    } while (0)
#define _mm128_unpacklo_epi16 _mm_unpacklo_epi16
#define _mm128_unpackhi_epi16 _mm_unpackhi_epi16
#define _mm128_unpacklo_epi32 _mm_unpacklo_epi32
#define _mm128_unpackhi_epi32 _mm_unpackhi_epi32
#define _mm128_unpacklo_epi64 _mm_unpacklo_epi64
#define _mm128_unpackhi_epi64 _mm_unpackhi_epi64

/* dst[kk][i] = src[i][kk] for 8 rows i x 16 k's: two 8x8 blocks per 256-bit shuffle. Kept out
   of line so the 16 vector registers hold only the block (no spills). */
__attribute__((noinline)) SIMD_FN static void transpose8x16(const uint16_t *src, ptrdiff_t sbo, uint16_t *dst, ptrdiff_t ncp) {
    __m256i r[8], y[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_si256((const __m256i *)(src + i * sbo));
    TRANSPOSE8x8(__m256i, _mm256, r, y);
    for (int i = 0; i < 8; i++) {
        _mm_storeu_si128((__m128i *)(dst + i * ncp), _mm256_castsi256_si128(y[i]));
        _mm_storeu_si128((__m128i *)(dst + (8 + i) * ncp), _mm256_extracti128_si256(y[i], 1));
    }
}

/* nt: slab16[kk][n] = b[n0+n, k0+kk] (transposed, still f16), zero for n >= nb */
SIMD_FN static void slab16_nt(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                              ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb, ptrdiff_t nbp) {
    const ptrdiff_t ncp = j->ncp, sbo = j->sbo;
    uint16_t *slab = w->slab16;
    for (ptrdiff_t g = 0; g < nbp; g += 8) {
        ptrdiff_t kk = 0;
        if (g + 8 <= nb) {
            const uint16_t *src = bc + (n0 + g) * sbo + k0;
            for (; kk + 16 <= ks; kk += 16) transpose8x16(src + kk, sbo, slab + kk * ncp + g, ncp);
            for (; kk + 8 <= ks; kk += 8) {
                __m128i r[8], y[8];
                for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)(src + i * sbo + kk));
                TRANSPOSE8x8(__m128i, _mm128, r, y);
                for (int i = 0; i < 8; i++) _mm_storeu_si128((__m128i *)(slab + (kk + i) * ncp + g), y[i]);
            }
        }
        /* k tail of the last slab, or an n group reaching past N */
        for (; kk < ks; kk++)
            for (ptrdiff_t i = 0; i < 8; i++)
                slab[kk * ncp + g + i] = g + i < nb ? bc[(n0 + g + i) * sbo + k0 + kk] : 0;
    }
}

/* Rows [0, MR) x columns [0, 8*NV) of a tile over ks k's, weights f16 (W16) or f32, row
   stride ws; MR, NV, W16 are compile-time constants at every call. Accumulators open at +0 on a
   trip's first k, close (round, chain into r) after its last k, wait in s between slabs. */
SIMD_INLINE void tile(const int MR, const int NV, const int W16, const float *a32, ptrdiff_t K,
                      const void *wp, ptrdiff_t ws, float *s, float *r, ptrdiff_t ncp,
                      ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t kb, int acc_given, int part16, int acc16) {
    __m256 acc[MR_MAX][8];
    ptrdiff_t t = k0 / kb, in_trip = k0 % kb;
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < NV; v++)
            acc[i][v] = in_trip ? _mm256_loadu_ps(s + i * ncp + 8 * v) : _mm256_setzero_ps();
    for (ptrdiff_t kk = 0; kk < ks; kk++) {
        __m256 wv[8];
        UNROLL for (int v = 0; v < NV; v++)
            wv[v] = W16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)wp + kk * ws + 8 * v)))
                        : _mm256_loadu_ps((const float *)wp + kk * ws + 8 * v);
        UNROLL for (int i = 0; i < MR; i++) {
            __m256 av = _mm256_broadcast_ss(a32 + i * K + k0 + kk);
            UNROLL for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(av, wv[v], acc[i][v]);
        }
        if (++in_trip == kb) {
            int have_r = acc_given || t > 0;
            UNROLL for (int i = 0; i < MR; i++)
                UNROLL for (int v = 0; v < NV; v++) {
                    float *rp = r + i * ncp + 8 * v;
                    __m256 p = part16 ? r16v(acc[i][v]) : acc[i][v];
                    if (have_r) {
                        __m256 x = _mm256_add_ps(_mm256_loadu_ps(rp), p);
                        p = acc16 ? r16v(x) : x;
                    }
                    _mm256_storeu_ps(rp, p);
                    acc[i][v] = _mm256_setzero_ps();
                }
            in_trip = 0;
            t++;
        }
    }
    if (in_trip)
        UNROLL for (int i = 0; i < MR; i++)
            UNROLL for (int v = 0; v < NV; v++) _mm256_storeu_ps(s + i * ncp + 8 * v, acc[i][v]);
}

/* Small K blocks (kb in {1, 2, 4, 8}: the lm_heads) with many rows: tile closes every trip
   through r in memory (a load, an add and a store per 8 outputs besides the f16 round trips of
   an f16 chain). Here r stays in registers, as f32, across the slab's trips: each trip is one
   unrolled run of KBC k's (kb divides the slab's k's and k0, so every trip lies inside the slab
   and nothing waits in s), then tile's closing arithmetic on registers (the same operations in
   the same order, so the same bits). Rows [0, MR) x columns [0, 8 * NV_R): 3 x 2 keeps 6
   accumulators, 6 r's, 2 weights and a broadcast in the 16 registers. Measured on the Zen 3 VM,
   the smollm2-135m-prefill lm_head ([32 x 576] @ [16384 x 576]^T at 144 x 4, blocked weights, 2
   threads): 10.2 -> 9.5 ms; 6 x 1 10.2, 2 x 2 10.7. Both are bound by the two f16 round trips
   per 8 outputs of each trip, which no tiling removes. */
#ifndef MR_R
#define MR_R 3
#endif
#ifndef NV_R
#define NV_R 2
#endif
#if NV_R > 2
#error "NV_R > 2: the tiles would read past the slab's columns rounded up to 16"
#endif
#ifndef SEQMM_NO_ROWS_R
#define SMALL_KB(kb) ((kb) == 1 || (kb) == 2 || (kb) == 4 || (kb) == 8)
#else
#define SMALL_KB(kb) 0
#endif
SIMD_INLINE void tile_r(const int MR, const int KBC, const float *a32, ptrdiff_t K,
                        const uint16_t *wp, ptrdiff_t ws, float *r, ptrdiff_t ncp, ptrdiff_t k0,
                        ptrdiff_t ks, int acc_given, int part16, int acc16) {
    __m256 acc[MR_R][NV_R], rr[MR_R][NV_R];
    int have_r = acc_given || k0 > 0;   /* k0 > 0: an earlier slab closed a trip */
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < NV_R; v++)
            rr[i][v] = have_r ? _mm256_loadu_ps(r + i * ncp + 8 * v) : _mm256_setzero_ps();
    for (ptrdiff_t kk = 0; kk < ks; kk += KBC) {
        UNROLL for (int q = 0; q < KBC; q++) {
            __m256 wv[NV_R];
            UNROLL for (int v = 0; v < NV_R; v++)
                wv[v] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wp + (kk + q) * ws + 8 * v)));
            UNROLL for (int i = 0; i < MR; i++) {
                __m256 av = _mm256_broadcast_ss(a32 + i * K + k0 + kk + q);
                /* the trip's first k: +0 + a*w, as tile's sum from a zeroed accumulator */
                UNROLL for (int v = 0; v < NV_R; v++)
                    acc[i][v] = _mm256_fmadd_ps(av, wv[v], q == 0 ? _mm256_setzero_ps() : acc[i][v]);
            }
        }
        UNROLL for (int i = 0; i < MR; i++)
            UNROLL for (int v = 0; v < NV_R; v++) {
                __m256 p = part16 ? r16v(acc[i][v]) : acc[i][v];
                if (have_r) {
                    __m256 x = _mm256_add_ps(rr[i][v], p);
                    p = acc16 ? r16v(x) : x;
                }
                rr[i][v] = p;
            }
        have_r = 1;
    }
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < NV_R; v++) _mm256_storeu_ps(r + i * ncp + 8 * v, rr[i][v]);
}

/* the many-rows tiles of one slab with tile_r (SMALL_KB), the rows shared out evenly as in
   slab_simd; nw: the columns the tiles cover (the slab's, a multiple of 16 and so of 8 * NV_R) */
SIMD_FN static void slab_rows_r(const job_t *j, scratch_t *w, const uint16_t *w16, ptrdiff_t ws16,
                                ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t nw) {
    const ptrdiff_t M = j->M, K = j->K, ncp = j->ncp, kb = j->kb;
    const int ag = j->acc_given, p16 = j->part16, a16 = j->acc16;
    const ptrdiff_t tiles = (M + MR_R - 1) / MR_R, per = M / tiles, more = M % tiles;
    for (ptrdiff_t ti = 0, m0 = 0; ti < tiles; m0 += per + (ti < more), ti++) {
        ptrdiff_t mr = per + (ti < more);
        const float *am = w->a32 + m0 * K;
        float *rm = w->r + m0 * ncp;
#define TILES_R(MR, KBC) for (ptrdiff_t n = 0; n < nw; n += 8 * NV_R) \
            tile_r(MR, KBC, am, K, w16 + n, ws16, rm + n, ncp, k0, ks, ag, p16, a16)
#define TILES_R_KB(MR)                             \
        switch (kb) {                              \
        case 1: TILES_R(MR, 1); break;             \
        case 2: TILES_R(MR, 2); break;             \
        case 4: TILES_R(MR, 4); break;             \
        default: TILES_R(MR, 8); break;            \
        }
        switch (mr) {
#if MR_R > 5
        case 6: TILES_R_KB(6); break;
#endif
#if MR_R > 4
        case 5: TILES_R_KB(5); break;
#endif
#if MR_R > 3
        case 4: TILES_R_KB(4); break;
#endif
        case 3: TILES_R_KB(3); break;
        case 2: TILES_R_KB(2); break;
        default: TILES_R_KB(1); break;
        }
#undef TILES_R_KB
#undef TILES_R
    }
}

/* one slab (k0 .. k0+ks) of one item for all rows m */
SIMD_FN static void slab_simd(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                              ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb, ptrdiff_t nbp) {
    const ptrdiff_t M = j->M, K = j->K, ncp = j->ncp, kb = j->kb;
    const int ag = j->acc_given, p16 = j->part16, a16 = j->acc16;
    const uint16_t *w16;  /* the slab's weights, f16, [ks][>= nbp], row stride ws16 */
    ptrdiff_t ws16;
    /* the tiles cover the item's columns in whole 16-column strips, not its padding to the
       item alignment: 48 columns are three strips, not two of 32 (a quarter of the FMAs spent
       on padding; padding columns are never stored) */
    nbp = (nb + 15) / 16 * 16;
    prefetch_slab(j, bc, k0, n0, nb);
    if (j->nt) {
        slab16_nt(j, w, bc, k0, ks, n0, nb, nbp);
        w16 = w->slab16; ws16 = ncp;
    } else if (nb == nbp) {   /* read in place: every tile's columns exist */
        w16 = bc + k0 * j->sbo + n0; ws16 = j->sbo;
    } else {
        slab16_nn(j, w, bc, k0, ks, n0, nb, nbp);
        w16 = w->slab16; ws16 = ncp;
    }
    if (M <= 2) {   /* few rows: convert each weight as it is used; 8 accumulators hide the FMA latency */
        ptrdiff_t n = 0;
        if (M == 1) {
            for (; n + 64 <= nbp; n += 64)
                tile(1, 8, 1, w->a32, K, w16 + n, ws16, w->s + n, w->r + n, ncp, k0, ks, kb, ag, p16, a16);
            for (; n + 32 <= nbp; n += 32)
                tile(1, 4, 1, w->a32, K, w16 + n, ws16, w->s + n, w->r + n, ncp, k0, ks, kb, ag, p16, a16);
            if (n < nbp)
                tile(1, 2, 1, w->a32, K, w16 + n, ws16, w->s + n, w->r + n, ncp, k0, ks, kb, ag, p16, a16);
        } else {
            for (; n + 32 <= nbp; n += 32)
                tile(2, 4, 1, w->a32, K, w16 + n, ws16, w->s + n, w->r + n, ncp, k0, ks, kb, ag, p16, a16);
            if (n < nbp)
                tile(2, 2, 1, w->a32, K, w16 + n, ws16, w->s + n, w->r + n, ncp, k0, ks, kb, ag, p16, a16);
        }
        return;
    }
    if (SMALL_KB(kb)) {   /* kb divides the slab's k's and k0 */
        slab_rows_r(j, w, w16, ws16, k0, ks, nbp);
        return;
    }
    /* many rows: tiles of up to 6 rows x 16 columns, the rows shared out evenly (32 rows are
       6+6+5+5+5+5, not five 6s and a 2, whose 4 accumulators leave half the FMA slots idle),
       each weight widened in the tile as it is used. On Zen 3 the vcvtph2ps there costs less
       than widening the slab into an f32 buffer first (another pass over it through L1): the
       smollm2-135m-prefill program's kb 64/128 calls replayed in turns, 2 threads, 60.9 ->
       57.5 ms for the even rows, -> 55.3 ms with both. */
    const ptrdiff_t tiles = (M + MR_MAX - 1) / MR_MAX, per = M / tiles, more = M % tiles;
    for (ptrdiff_t ti = 0, m0 = 0; ti < tiles; m0 += per + (ti < more), ti++) {
        ptrdiff_t mr = per + (ti < more);
        const float *am = w->a32 + m0 * K;
        float *sm = w->s + m0 * ncp, *rm = w->r + m0 * ncp;
        for (ptrdiff_t n = 0; n < nbp; n += 16) {
            const uint16_t *wn = w16 + n;
            switch (mr) {
            case 6: tile(6, 2, 1, am, K, wn, ws16, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 5: tile(5, 2, 1, am, K, wn, ws16, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 4: tile(4, 2, 1, am, K, wn, ws16, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 3: tile(3, 2, 1, am, K, wn, ws16, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 2: tile(2, 2, 1, am, K, wn, ws16, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            default: tile(1, 2, 1, am, K, wn, ws16, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            }
        }
    }
}

/* ---------------------------------------------------------------- AVX-512 (F, BW, VL) path
 * The same structure with 512-bit registers and 32-k slabs. Its point is the nt layout: one
 * 64-byte load holds 32 k's of one weight row, so a single 512-bit unpack network transposes four
 * 8 n x 8 k blocks at once (24 shuffles per 256 weights, half the AVX2 count), and each 128-bit
 * lane (8 n's at one k) is stored straight into its slab row; the micro-kernel then widens 16 n's
 * at a time with vcvtph2ps from memory (no shuffle-port work) and runs 16-lane FMAs. */

#define SIMD512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define SIMD512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define KS512 32       /* k's per slab on the AVX-512 path */
#define MR512 8        /* rows per micro-kernel tile (8 x 32 columns: 16 accumulators) */

/* whether an item's columns, rounded up to 16, end 16 past a multiple of 32 (48, 80, ...): then
   the many-rows paths run its last 48 as 3-vector tiles rather than a strip of 16 or of 32 */
static inline int ends_in_48(ptrdiff_t n16) { return n16 >= 48 && n16 % 32 == 16; }

SIMD512_INLINE __m512 r16z(__m512 x) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* a trip's end for 16 outputs held in memory at rp: p = part(sum); r = p, or acc(f32(r) + f32(p)) */
SIMD512_INLINE void close16(float *rp, __m512 sum, int have_r, int part16, int acc16) {
    __m512 p = part16 ? r16z(sum) : sum;
    if (have_r) {
        __m512 x = _mm512_add_ps(_mm512_loadu_ps(rp), p);
        p = acc16 ? r16z(x) : x;
    }
    _mm512_storeu_ps(rp, p);
}

/* The nt slab on this path is a row of panels: panel q holds the item's columns [16q, 16q + 16)
   as 32 rows of 16 f16 (one 32-byte row per k, 1 KB), its k's in the order PANEL_POS, which is
   the order the transpose below produces them in. The micro-kernel widens one 32-byte row per
   k and panel, and keeps each element's k's in sequence whatever the rows' order in memory. */
#define PANEL (KS512 * 16)                            /* f16 values per panel */
#define PANEL_POS(kk) ((((kk) & 7) * 4 + ((kk) >> 3)) * 16)  /* offset of k0+kk's row in a panel */

/* one panel from 16 rows x 32 k's of b: each row is one 512-bit load; the in-lane 8x8
   transposes of rows 0-7 (y) and 8-15 (z) leave in lane L of y[kk] / z[kk] the 8 n's at
   k = 8L + kk; one 2-source lane permute per output pairs them up as [y.L | z.L | y.L+1 | z.L+1]
   = 16 n's at k = 8L + kk, then at 8(L+1) + kk, stored whole (1 shuffle-port op and 1 store per
   32 weights on top of the 24 unpacks per 256). */
/* rows [0, nr) x k's [0, ks) of src (nr <= 16, ks <= 32; the rest reads as zero, and masked-off
   elements are not touched in memory) */
SIMD512_INLINE void transpose16x32_body(const uint16_t *src, ptrdiff_t sbo, uint16_t *panel, int nr, __mmask32 km) {
    __m512i r[8], y[8], q[8], z[8];
    for (int i = 0; i < 8; i++)
        r[i] = i < nr ? _mm512_maskz_loadu_epi16(km, src + i * sbo) : _mm512_setzero_si512();
    for (int i = 0; i < 8; i++)
        q[i] = 8 + i < nr ? _mm512_maskz_loadu_epi16(km, src + (8 + i) * sbo) : _mm512_setzero_si512();
    TRANSPOSE8x8(__m512i, _mm512, r, y);
    TRANSPOSE8x8(__m512i, _mm512, q, z);
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
    const __m512i hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
    for (int i = 0; i < 8; i++) {   /* rows kk = i, 8 + i (lo) and 16 + i, 24 + i (hi) */
        _mm512_storeu_si512((void *)(panel + PANEL_POS(i)), _mm512_permutex2var_epi64(y[i], lo, z[i]));
        _mm512_storeu_si512((void *)(panel + PANEL_POS(16 + i)), _mm512_permutex2var_epi64(y[i], hi, z[i]));
    }
}

/* the whole 16 x 32 block (a masked load with every lane on is a plain load) */
__attribute__((noinline)) SIMD512_FN static void transpose16x32(const uint16_t *src, ptrdiff_t sbo, uint16_t *panel) {
    transpose16x32_body(src, sbo, panel, 16, (__mmask32)0xffffffffu);
}

/* a partial block: the last panel of an N that is not a multiple of 16, or a short last slab */
__attribute__((noinline)) SIMD512_FN static void transpose16x32_part(const uint16_t *src, ptrdiff_t sbo, uint16_t *panel,
                                                                   int nr, int ks) {
    transpose16x32_body(src, sbo, panel, nr, (__mmask32)(ks >= 32 ? 0xffffffffu : (1u << ks) - 1u));
}

/* Rows whose stride is a multiple of the L1's way size (K = 2048, 8192: every row of an item in
   one L1 set) make the transposes' 16 loads of one block miss into a single 8-way set; measured
   on a Zen 4 core, one thread, 64 x 2048 items: 9-12 GB/s at stride 2048 against 17-26 GB/s at
   stride 2112, from memory and from L2 alike (software prefetches in or out made no
   difference). So such rows are first copied, STAGE_K k's at a time and each row's run whole
   (consecutive lines, consecutive sets), into w->stage at the stride STAGE_S, and the
   transposes read the copy. It moves bytes only: the bits are the same. */
SIMD512_FN static void stage_rows(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                                  ptrdiff_t n0, ptrdiff_t nb) {
    ptrdiff_t kc = j->K - k0 < STAGE_K ? j->K - k0 : STAGE_K;
    for (ptrdiff_t n = 0; n < nb; n++) {
        const uint16_t *src = bc + (n0 + n) * j->sbo + k0;
        uint16_t *dst = w->stage + n * STAGE_S;
        for (ptrdiff_t k = 0; k < kc; k += 32) {
            __mmask32 m = kc - k >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (kc - k)) - 1u);
            _mm512_mask_storeu_epi16(dst + k, m, _mm512_maskz_loadu_epi16(m, src + k));
        }
    }
}

/* nt: the panels of columns [0, nbp): panel q row PANEL_POS(kk) = b[n0+16q .. +16, k0+kk], zero
   for n >= nb (and in the rows kk >= ks of a short slab, which are never read) */
SIMD512_FN static void slab16_nt512(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                                    ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb, ptrdiff_t nbp) {
    ptrdiff_t sbo = j->sbo, kofs = k0;
    const uint16_t *rows = bc + n0 * sbo;   /* the item's first row */
    if (j->stage) {
        if (k0 % STAGE_K == 0) stage_rows(j, w, bc, k0, n0, nb);
        rows = w->stage; sbo = STAGE_S; kofs = k0 % STAGE_K;
    }
    for (ptrdiff_t g = 0; g < nbp; g += 16) {
        uint16_t *panel = w->slab16 + g / 16 * PANEL;
        ptrdiff_t nr = nb - g < 16 ? nb - g : 16;   /* rows of b in this panel (<= 0 past N) */
        const uint16_t *src = nr > 0 ? rows + g * sbo + kofs : rows;
        if (ks == KS512 && nr == 16) transpose16x32(src, sbo, panel);
        else transpose16x32_part(src, sbo, panel, nr > 0 ? (int)nr : 0, (int)ks);
        ahead_step(&w->ah);
    }
}

SIMD512_FN static void prefetch_slab512(const job_t *j, const uint16_t *bc, ptrdiff_t k0, ptrdiff_t n0, ptrdiff_t nb) {
    ptrdiff_t kp = k0 + PF_SLABS * j->ks;
    if (!j->nt) {
        for (ptrdiff_t k = kp; k < kp + j->ks && k < j->K; k++)
            for (ptrdiff_t n = 0; n < nb; n += 32) _mm_prefetch((const char *)(bc + k * j->sbo + n0 + n), PF_HINT);
    } else {
        if (kp < j->K)
            for (ptrdiff_t n = 0; n < nb; n++) _mm_prefetch((const char *)(bc + (n0 + n) * j->sbo + kp), PF_HINT);
    }
}

/* slab32[kk][n] = f32(the f16 weights at k0+kk, column n) from rows of nb columns (row stride ss)
   read in place, as far as 16-column vectors need: the last vector's columns past nb are read as
   zeros (masked), never from beyond the row */
SIMD512_FN static void widen512_cols(float *dst, ptrdiff_t ds, const uint16_t *src, ptrdiff_t ss,
                                     ptrdiff_t ks, ptrdiff_t nb) {
    const ptrdiff_t full = nb / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (nb - full)) - 1u);
    for (ptrdiff_t kk = 0; kk < ks; kk++) {
        const uint16_t *p = src + kk * ss;
        float *d = dst + kk * ds;
        for (ptrdiff_t n = 0; n < full; n += 16)
            _mm512_storeu_ps(d + n, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + n))));
        if (tail)
            _mm512_storeu_ps(d + full, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail, p + full)));
    }
}

/* the same from rows (nn, row stride ss) or panels, nbp columns */
SIMD512_FN static void widen512(float *dst, ptrdiff_t ds, const uint16_t *src, ptrdiff_t ss, int panels,
                                ptrdiff_t ks, ptrdiff_t nbp) {
    if (!panels) {
        widen512_cols(dst, ds, src, ss, ks, nbp);
        return;
    }
    for (ptrdiff_t kk = 0; kk < ks; kk++)
        for (ptrdiff_t n = 0; n < nbp; n += 16)
            _mm512_storeu_ps(dst + kk * ds + n, _mm512_cvtph_ps(_mm256_loadu_si256(
                (const __m256i *)(src + n / 16 * PANEL + PANEL_POS(kk)))));
}

/* tile's 512-bit form: rows [0, MR) x columns [0, 16*NV); weights f32 rows (W = 0), f16 rows
   (W = 1, row stride ws) or f16 panels (W = 2, see PANEL_POS). The k's are walked in runs that
   end at a trip boundary or at the slab's end, so the FMA loop carries no trip test. */
SIMD512_INLINE void tile512(const int MR, const int NV, const int W, const float *a32, ptrdiff_t K,
                            const void *wp, ptrdiff_t ws, float *s, float *r, ptrdiff_t ncp,
                            ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t kb, int acc_given, int part16, int acc16) {
    __m512 acc[MR512][8];
    ptrdiff_t t = k0 / kb, in_trip = k0 % kb;
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < NV; v++)
            acc[i][v] = in_trip ? _mm512_loadu_ps(s + i * ncp + 16 * v) : _mm512_setzero_ps();
    for (ptrdiff_t kk = 0; kk < ks;) {
        ptrdiff_t end = kk + (kb - in_trip < ks - kk ? kb - in_trip : ks - kk);
        in_trip += end - kk;
        for (; kk < end; kk++) {
            __m512 wv[8];
            UNROLL for (int v = 0; v < NV; v++)
                wv[v] = W == 2 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)wp + v * PANEL + PANEL_POS(kk))))
                      : W == 1 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)wp + kk * ws + 16 * v)))
                               : _mm512_loadu_ps((const float *)wp + kk * ws + 16 * v);
            UNROLL for (int i = 0; i < MR; i++) {
                __m512 av = _mm512_set1_ps(a32[i * K + k0 + kk]);
                UNROLL for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(av, wv[v], acc[i][v]);
            }
        }
        if (in_trip == kb) {
            int have_r = acc_given || t > 0;
            UNROLL for (int i = 0; i < MR; i++)
                UNROLL for (int v = 0; v < NV; v++) {
                    close16(r + i * ncp + 16 * v, acc[i][v], have_r, part16, acc16);
                    acc[i][v] = _mm512_setzero_ps();
                }
            in_trip = 0;
            t++;
        }
    }
    if (in_trip)
        UNROLL for (int i = 0; i < MR; i++)
            UNROLL for (int v = 0; v < NV; v++) _mm512_storeu_ps(s + i * ncp + 16 * v, acc[i][v]);
}

/* Small K blocks (kb in {1, 2, 4, 8}: the lm_heads) on the many-rows path of a CPU without
 * AVX512-FP16: tile512 closes every trip through r in memory (a load, an add, a store and two f16
 * round trips per 16 outputs, against kb FMAs). Here r stays in registers, as f32, across the
 * slab's trips: each trip is one unrolled run of KBC k's (kb divides the slab's KSNN k's and k0, so
 * every trip lies inside the slab and nothing waits in s), then close16's arithmetic on registers
 * (the same operations in the same order, so the same bits). r is read from memory once per tile
 * and slab (when it holds a value) and written back once. Rows [0, MR) x columns [0, 32). */
#ifndef MRR
#define MRR 6          /* rows per tile512r tile (x 2 vectors: 12 accumulators, 12 r's) */
#endif
SIMD512_INLINE void tile512r(const int MR, const int KBC, const int part16, const int acc16, const float *a32,
                             ptrdiff_t K, const float *wp, ptrdiff_t ws, float *r, ptrdiff_t ncp,
                             ptrdiff_t k0, ptrdiff_t ks, int acc_given) {
    __m512 acc[MRR][2], rr[MRR][2];
    int have_r = acc_given || k0 > 0;   /* k0 > 0: an earlier slab closed a trip */
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < 2; v++)
            rr[i][v] = have_r ? _mm512_loadu_ps(r + i * ncp + 16 * v) : _mm512_setzero_ps();
    for (ptrdiff_t kk = 0; kk < ks; kk += KBC) {
        UNROLL for (int q = 0; q < KBC; q++) {
            const float *wk = wp + (kk + q) * ws;
            __m512 w0 = _mm512_loadu_ps(wk), w1 = _mm512_loadu_ps(wk + 16);
            UNROLL for (int i = 0; i < MR; i++) {
                __m512 av = _mm512_set1_ps(a32[i * K + k0 + kk + q]);
                /* the trip's first k: +0 + a*w, as tile512's sum from a zeroed accumulator */
                acc[i][0] = _mm512_fmadd_ps(av, w0, q == 0 ? _mm512_setzero_ps() : acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(av, w1, q == 0 ? _mm512_setzero_ps() : acc[i][1]);
            }
        }
        UNROLL for (int i = 0; i < MR; i++)
            UNROLL for (int v = 0; v < 2; v++) {
                __m512 p = part16 ? r16z(acc[i][v]) : acc[i][v];
                if (have_r) {
                    __m512 x = _mm512_add_ps(rr[i][v], p);
                    p = acc16 ? r16z(x) : x;
                }
                rr[i][v] = p;
            }
        have_r = 1;
    }
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < 2; v++) _mm512_storeu_ps(r + i * ncp + 16 * v, rr[i][v]);
}

/* the many-rows tiles of one widened slab with tile512r (kb in {1, 2, 4, 8}) */
SIMD512_FN static void slab_rows512r(const job_t *j, scratch_t *w, ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t nbp) {
    const ptrdiff_t M = j->M, K = j->K, ncp = j->ncp, kb = j->kb;
    const int ag = j->acc_given, p16 = j->part16, a16 = j->acc16;
    for (ptrdiff_t m0 = 0; m0 < M; m0 += MRR) {
        ptrdiff_t mr = M - m0 < MRR ? M - m0 : MRR;
        const float *am = w->a32 + m0 * K;
        float *rm = w->r + m0 * ncp;
#define ROWS_R(MR, KBC, P, A) for (ptrdiff_t n = 0; n < nbp; n += 32) \
            tile512r(MR, KBC, P, A, am, K, w->slab + n, ncp, rm + n, ncp, k0, ks, ag)
#define ROWS_R_KB(MR, P, A)                          \
        switch (kb) {                                \
        case 1: ROWS_R(MR, 1, P, A); break;          \
        case 2: ROWS_R(MR, 2, P, A); break;          \
        case 4: ROWS_R(MR, 4, P, A); break;          \
        default: ROWS_R(MR, 8, P, A); break;         \
        }
        if (mr == MRR && p16 && a16) { ROWS_R_KB(MRR, 1, 1); continue; }
        if (mr == MRR) { ROWS_R_KB(MRR, p16, a16); continue; }
        switch (mr) {
#if MRR > 5
        case 5: ROWS_R_KB(5, p16, a16); break;
#endif
#if MRR > 4
        case 4: ROWS_R_KB(4, p16, a16); break;
#endif
        case 3: ROWS_R_KB(3, p16, a16); break;
        case 2: ROWS_R_KB(2, p16, a16); break;
        default: ROWS_R_KB(1, p16, a16); break;
        }
#undef ROWS_R_KB
#undef ROWS_R
    }
}

#if SEQMM_FP16
/* ---------------------------------------------------------------- AVX512-FP16 closing (f16 part, f16 acc)
 * Closing a trip costs tile512 two f16 round trips per 16 outputs (vcvtps2ph + vcvtph2ps, 2 uops
 * each on the two vector ports) plus a load, an add and a store of r, against kb FMAs: at kb = 4
 * (the scratchy prefill lm_head) 13 port uops per 64 multiply-adds, mostly rounding. With
 * AVX512-FP16 the chained sum is one f16 add: round(f16, f32(r) + f32(p)) of two f16 values
 * equals the correctly rounded f16 sum r + p (f32 carries 24 >= 2 * 11 + 2 bits, so the double
 * rounding is innocuous, overflow included, as IEEE decides it on the value rounded with an
 * unbounded exponent; a sum below 2^-14 is a multiple of 2^-24, exact in f32 and f16;
 * infinities, NaN and signed zeros come out the same; the f16 add rounds to nearest even by the
 * MXCSR that run_part sets, subnormals kept). tests/ktir/test_seqmm_fp16.py checks 2M pairs
 * covering every f16 class. So r stays
 * in registers as f16 across the slab's trips, a close is vcvtps2ph + vaddph (3 uops), and the
 * f32 r buffer (whose values are all f16 values: the conversions are exact) is read and written
 * once per tile and slab. */
#define SIMD512H_INLINE static inline __attribute__((always_inline, target("avx512fp16,avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define SIMD512H_FN __attribute__((target("avx512fp16,avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define MRH_MAX 8

/* one k of a tile512h tile: acc += a * w (onto +0 when the k opens its trip) */
SIMD512H_INLINE void h_step(const int MR, const int NV, const int W, __m512 acc[MRH_MAX][8], const float *a32,
                            ptrdiff_t K, ptrdiff_t k, const void *wp, ptrdiff_t ws, ptrdiff_t kk, int opens) {
    __m512 wv[8];
    UNROLL for (int v = 0; v < NV; v++)
        wv[v] = W == 2 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)wp + v * PANEL + PANEL_POS(kk))))
              : W == 1 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)wp + kk * ws + 16 * v)))
                       : _mm512_loadu_ps((const float *)wp + kk * ws + 16 * v);
    UNROLL for (int i = 0; i < MR; i++) {
        __m512 av = _mm512_set1_ps(a32[i * K + k]);
        UNROLL for (int v = 0; v < NV; v++)
            acc[i][v] = _mm512_fmadd_ps(av, wv[v], opens ? _mm512_setzero_ps() : acc[i][v]);
    }
}

/* a trip's end: r = p (the first partial, no acc) or r = f16(r + p), p = f16(the partial) */
SIMD512H_INLINE void h_close(const int MR, const int NV, __m512 acc[MRH_MAX][8], __m256h rh[MRH_MAX][8], int have_r) {
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < NV; v++) {
            __m256h p = _mm256_castsi256_ph(_mm512_cvtps_ph(acc[i][v], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            rh[i][v] = have_r ? _mm256_add_ph(rh[i][v], p) : p;
        }
}

/* tile512 for part16 = acc16 = 1: rows [0, MR) x columns [0, 16*NV), weights as in tile512.
   KBC > 0: kb == KBC divides the slab's k's and k0 (every trip lies inside the slab), so each
   trip is one unrolled run of KBC k's and nothing waits in s. */
SIMD512H_INLINE void tile512h(const int MR, const int NV, const int W, const int KBC, const float *a32, ptrdiff_t K,
                              const void *wp, ptrdiff_t ws, float *s, float *r, ptrdiff_t ncp,
                              ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t kb, int acc_given) {
    __m512 acc[MRH_MAX][8];
    __m256h rh[MRH_MAX][8];
    ptrdiff_t in_trip = KBC ? 0 : k0 % kb;
    int have_r = acc_given || k0 / kb > 0;   /* r holds a value (else the next close sets it) */
    UNROLL for (int i = 0; i < MR; i++)
        UNROLL for (int v = 0; v < NV; v++) {
            acc[i][v] = in_trip ? _mm512_loadu_ps(s + i * ncp + 16 * v) : _mm512_setzero_ps();
            rh[i][v] = have_r ? _mm256_castsi256_ph(_mm512_cvtps_ph(_mm512_loadu_ps(r + i * ncp + 16 * v),
                                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
                              : _mm256_setzero_ph();
        }
    int closed = 0;
    if (KBC) {
        for (ptrdiff_t kk = 0; kk < ks; kk += KBC) {
            UNROLL for (int q = 0; q < KBC; q++) h_step(MR, NV, W, acc, a32, K, k0 + kk + q, wp, ws, kk + q, q == 0);
            h_close(MR, NV, acc, rh, have_r);
            have_r = closed = 1;
        }
    } else {
        for (ptrdiff_t kk = 0; kk < ks;) {
            ptrdiff_t end = kk + (kb - in_trip < ks - kk ? kb - in_trip : ks - kk);
            int opens = in_trip == 0;   /* the trip's first k: its sum is +0 + a*w (one FMA onto +0) */
            in_trip += end - kk;
            if (opens) { h_step(MR, NV, W, acc, a32, K, k0 + kk, wp, ws, kk, 1); kk++; }
            for (; kk < end; kk++) h_step(MR, NV, W, acc, a32, K, k0 + kk, wp, ws, kk, 0);
            if (in_trip == kb) {
                h_close(MR, NV, acc, rh, have_r);
                have_r = closed = 1;
                in_trip = 0;
            }
        }
    }
    if (closed)
        UNROLL for (int i = 0; i < MR; i++)
            UNROLL for (int v = 0; v < NV; v++)
                _mm512_storeu_ps(r + i * ncp + 16 * v, _mm512_cvtph_ps(_mm256_castph_si256(rh[i][v])));
    if (in_trip)
        UNROLL for (int i = 0; i < MR; i++)
            UNROLL for (int v = 0; v < NV; v++) _mm512_storeu_ps(s + i * ncp + 16 * v, acc[i][v]);
}

#ifndef MRH
#define MRH 6          /* rows per tile512h tile on the many-rows path (x 32 columns) */
#endif
#define MR48 4         /* rows per tile of the last 48 columns (x 3 vectors: 12 accumulators) */

/* the many-rows tiles of one widened slab (rows [0, M), columns [0, nb)), closing with FP16.
   Full MRH-row tiles with kb in {1, 2, 4, 8} run unrolled trips (tile512h's KBC). */
SIMD512H_FN static void slab_rows512h(const job_t *j, scratch_t *w, ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t nb) {
    const ptrdiff_t M = j->M, K = j->K, ncp = j->ncp, kb = j->kb;
    /* columns in strips of 32 (two vectors), and a last strip of 16 where nb needs no more (an
       item of 48 columns with kb in {1, 2, 4, 8}: 32 + 16, not 32 + 32 with half of the FMAs on
       padding; other kb: the 3-vector tiles below) */
    const ptrdiff_t n16 = (nb + 15) / 16 * 16;
    const int ag = j->acc_given;
    const int small_kb = kb == 1 || kb == 2 || kb == 4 || kb == 8;
    /* where a 16-column strip would be left over (n16 = 48, 80, ...), the last 48 columns are
       tiles of MR48 rows x 3 vectors after the row loop below: a 6 x 16 tile has 6 accumulators,
       too few to keep both FMA pipes busy (measured on the Intel VM, 2 threads, smollm2-135m's
       gate/up call [32 x 32] @ [32 x 576 x 48]: 265 -> 252 us, weights from memory 297 -> 276) */
    const int last48 = !small_kb && ends_in_48(n16);
    const ptrdiff_t n32 = last48 ? n16 - 48 : n16 / 32 * 32;
    for (ptrdiff_t m0 = 0, mr; m0 < M; m0 += mr) {
        ptrdiff_t rem = M - m0;
        mr = rem < MRH ? rem : MRH;
        /* a full tile followed by 1-3 rows: two tiles of about half each instead, since a tile of
           under 4 rows has too few accumulators to keep both FMA pipes busy (M = 32: 6+6+6+6+4+4
           rows, not 6+6+6+6+6+2); kb in {1, 2, 4, 8} keeps its unrolled full tiles */
        if (!small_kb && rem > MRH && rem < MRH + 4) mr = rem - rem / 2;
        const float *am = w->a32 + m0 * K;
        float *sm = w->s + m0 * ncp, *rm = w->r + m0 * ncp;
#define ROWS_H(MR, KBC) do { \
            for (ptrdiff_t n = 0; n < n32; n += 32) \
                tile512h(MR, 2, 0, KBC, am, K, w->slab + n, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag); \
            if (n16 > n32 && !last48) \
                tile512h(MR, 1, 0, KBC, am, K, w->slab + n32, ncp, sm + n32, rm + n32, ncp, k0, ks, kb, ag); \
        } while (0)
        if (mr == MRH) {
            switch (kb) {
            case 1: ROWS_H(MRH, 1); break;
            case 2: ROWS_H(MRH, 2); break;
            case 4: ROWS_H(MRH, 4); break;
            case 8: ROWS_H(MRH, 8); break;
            default: ROWS_H(MRH, 0); break;
            }
            continue;
        }
        switch (mr) {
#if MRH > 7
        case 7: ROWS_H(7, 0); break;
#endif
#if MRH > 6
        case 6: ROWS_H(6, 0); break;
#endif
#if MRH > 5
        case 5: ROWS_H(5, 0); break;
#endif
#if MRH > 4
        case 4: ROWS_H(4, 0); break;
#endif
        case 3: ROWS_H(3, 0); break;
        case 2: ROWS_H(2, 0); break;
        default: ROWS_H(1, 0); break;
        }
#undef ROWS_H
    }
    if (!last48) return;
    for (ptrdiff_t m0 = 0, mr; m0 < M; m0 += mr) {
        mr = M - m0 < MR48 ? M - m0 : MR48;
        const float *am = w->a32 + m0 * K;
        float *sm = w->s + m0 * ncp + n32, *rm = w->r + m0 * ncp + n32;
        const float *wn = w->slab + n32;
        switch (mr) {
        case 4: tile512h(4, 3, 0, 0, am, K, wn, ncp, sm, rm, ncp, k0, ks, kb, ag); break;
        case 3: tile512h(3, 3, 0, 0, am, K, wn, ncp, sm, rm, ncp, k0, ks, kb, ag); break;
        case 2: tile512h(2, 3, 0, 0, am, K, wn, ncp, sm, rm, ncp, k0, ks, kb, ag); break;
        default: tile512h(1, 3, 0, 0, am, K, wn, ncp, sm, rm, ncp, k0, ks, kb, ag); break;
        }
    }
}

/* one or two rows (decode): slab_simd512's few-rows tiles, closing with FP16; w16: the slab's f16
   weights, panels (nt) or rows of stride ws16 (nn) */
SIMD512H_FN static void slab_few512h(const job_t *j, scratch_t *w, const uint16_t *w16, ptrdiff_t ws16,
                                     ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t nw) {
    const ptrdiff_t K = j->K, ncp = j->ncp, kb = j->kb;
    const int ag = j->acc_given;
    float *s = w->s, *r = w->r;
    const float *a32 = w->a32;
    ptrdiff_t n = 0;
#define FEW_ROWS_H(MR, NV, STEP, KBC)                                                             \
    for (; n + (STEP) <= nw; n += (STEP)) {                                                       \
        if (j->nt) tile512h(MR, NV, 2, KBC, a32, K, w16 + n / 16 * PANEL, 0, s + n, r + n, ncp, k0, ks, kb, ag); \
        else tile512h(MR, NV, 1, KBC, a32, K, w16 + n, ws16, s + n, r + n, ncp, k0, ks, kb, ag);               \
    }
    /* one row with kb 4 or 8, every trip inside the slab: unrolled trips (tile512h's KBC). A
       trip closes every few k's there, and the general loop's bookkeeping costs more than the
       FMAs (measured on the Intel VM in llama-3.2-1b's scratchy decode pass, 2 threads: the
       lm_head's [1 x 2048] @ [256 x 2048 x 64], kb 4: 2.78 -> 2.28-2.37 ms a call, 24 -> 29 GB/s).
       Not kb 2 (smollm2-135m's lm_head: 2.46-2.63 -> 3.07-3.14 ms, the unrolled slab too long) */
#define FEW_ROWS_1(KBC) do { FEW_ROWS_H(1, 8, 128, KBC) FEW_ROWS_H(1, 4, 64, KBC) \
                             FEW_ROWS_H(1, 2, 32, KBC) FEW_ROWS_H(1, 1, 16, KBC) } while (0)
    const int kbc = (kb == 4 || kb == 8) && ks % kb == 0 && k0 % kb == 0 ? (int)kb : 0;
    if (j->M == 1) {
        switch (kbc) {
        case 4: FEW_ROWS_1(4); break;
        case 8: FEW_ROWS_1(8); break;
        default: FEW_ROWS_1(0); break;
        }
    } else {
        FEW_ROWS_H(2, 4, 64, 0)
        FEW_ROWS_H(2, 2, 32, 0)
        FEW_ROWS_H(2, 1, 16, 0)
    }
#undef FEW_ROWS_1
#undef FEW_ROWS_H
}

/* ---------------------------------------------------------------- the m-vector layout (nt, many rows)
 * With b = [N, K] (nt) the n-vector layout above must transpose every slab of weights into
 * panels (shuffle-port work) and widen the panels to f32. With 16+ rows (stacked cores, prefill
 * rows) the vectors can run over m instead: a is transposed ONCE per c into at [K][mp] (f32, rows
 * past M zero), each weight row's slab of 32 k's (contiguous in b) is widened into
 * slab[n][0..32) without a shuffle, and a tile of 16*MV rows x NN columns broadcasts one weight
 * per column and k onto MV row vectors. Same per-element sequence (one FMA per k in order, one
 * close per trip), so the same bits; s and r are [n][mp], and the item's output is transposed
 * back on the way out. (Measured on the 2-core dev VM at [32 x 576] @ [16384 x 576]^T, kb 4:
 * the transposes and panel widening were ~3 of ~10 ms per call.) */
#ifndef NNT
#define NNT 6          /* columns per m-vector tile (x 32 rows: 12 accumulators, 12 f16 r's) */
#endif

/* x[0..16) rows of 16 16-bit values -> their transpose: two in-lane 8x8 transposes (rows 0-7,
   8-15), then each output row joins the matching lanes of the two */
SIMD512H_INLINE void transpose16x16_epi16(__m256i x[16]) {
    __m256i y[8], z[8];
    TRANSPOSE8x8(__m256i, _mm256, x, y);
    TRANSPOSE8x8(__m256i, _mm256, (x + 8), z);
    for (int i = 0; i < 8; i++) {
        x[i] = _mm256_permute2x128_si256(y[i], z[i], 0x20);
        x[8 + i] = _mm256_permute2x128_si256(y[i], z[i], 0x31);
    }
}

/* r[n][m] = f32(acc[c, m, n0 + n]) from the given f16 acc, 16 x 16 blocks at a time */
SIMD512H_FN static void load_r_mvec(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    const ptrdiff_t mp = j->mp, M = j->M, N = j->ostride;   /* N: the row stride here */
    if (!j->acc16) {   /* f32: M * nb values, next to M * nb * K multiply-adds */
        const float *acc32 = (const float *)j->acc + acc_at(j, c, 0) + n0;
        for (ptrdiff_t n = 0; n < nb; n++)
            for (ptrdiff_t m = 0; m < M; m++) w->r[n * mp + m] = acc32[m * N + n];
        return;
    }
    const uint16_t *acc = (const uint16_t *)j->acc + acc_at(j, c, 0) + n0;
    ptrdiff_t n = 0;
    for (; n + 16 <= nb; n += 16)
        for (ptrdiff_t m0 = 0; m0 < M; m0 += 16) {
            __m256i x[16];
            for (int q = 0; q < 16; q++)
                x[q] = m0 + q < M ? _mm256_loadu_si256((const __m256i *)(acc + (m0 + q) * N + n)) : _mm256_setzero_si256();
            transpose16x16_epi16(x);
            for (int i = 0; i < 16; i++) _mm512_storeu_ps(w->r + (n + i) * mp + m0, _mm512_cvtph_ps(x[i]));
        }
    for (; n < nb; n++)
        for (ptrdiff_t m = 0; m < M; m++) w->r[n * mp + m] = _cvtsh_ss(acc[m * N + n]);
}

/* out[c, m, n0 + n] = f16(r[n][m]) (exact: r holds f16 values), 16 x 16 blocks at a time */
SIMD512H_FN static void store_out_mvec(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    const ptrdiff_t mp = j->mp, M = j->M, N = j->ostride;   /* N: the row stride here */
    if (!j->acc16) {
        float *out32 = (float *)j->out + out_at(j, c, 0) + n0;
        for (ptrdiff_t m = 0; m < M; m++)
            for (ptrdiff_t n = 0; n < nb; n++) out32[m * N + n] = w->r[n * mp + m];
        return;
    }
    uint16_t *out = (uint16_t *)j->out + out_at(j, c, 0) + n0;
    ptrdiff_t n = 0;
    for (; n + 16 <= nb; n += 16)
        for (ptrdiff_t m0 = 0; m0 < M; m0 += 16) {
            __m256i x[16];
            for (int i = 0; i < 16; i++)
                x[i] = _mm512_cvtps_ph(_mm512_loadu_ps(w->r + (n + i) * mp + m0), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            transpose16x16_epi16(x);
            for (int q = 0; q < 16 && m0 + q < M; q++) _mm256_storeu_si256((__m256i *)(out + (m0 + q) * N + n), x[q]);
        }
    for (; n < nb; n++)
        for (ptrdiff_t m = 0; m < M; m++)
            out[m * N + n] = _cvtss_sh(w->r[n * mp + m], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* at[k][m] = f32(a[c, m, k]), zero for m in [M, mp): 16 m x 16 k blocks transposed at a time
   where k is unit-stride (called once per c: 32 x 576 element by element took ~12 us) */
SIMD512H_FN static void convert_a_mvec(const job_t *j, scratch_t *w, ptrdiff_t c) {
    if (w->cur_c >= 0 && (w->cur_c == c || j->sac == 0)) return;
    const uint16_t *ac = j->a + c * j->sac;
    const ptrdiff_t M = j->M, mp = j->mp, K = j->K, sam = j->sam, sak = j->sak;
    ptrdiff_t k = 0;
    if (sak == 1)
        for (; k + 16 <= K; k += 16)
            for (ptrdiff_t m0 = 0; m0 < mp; m0 += 16) {
                __m256i x[16];
                for (int q = 0; q < 16; q++)
                    x[q] = m0 + q < M ? _mm256_loadu_si256((const __m256i *)(ac + (m0 + q) * sam + k)) : _mm256_setzero_si256();
                transpose16x16_epi16(x);
                for (int i = 0; i < 16; i++) _mm512_storeu_ps(w->at + (k + i) * mp + m0, _mm512_cvtph_ps(x[i]));
            }
    for (; k < K; k++) {
        float *dst = w->at + k * mp;
        for (ptrdiff_t m = 0; m < M; m++) dst[m] = _cvtsh_ss(ac[m * sam + k * sak]);
        for (ptrdiff_t m = M; m < mp; m++) dst[m] = 0.f;
    }
    w->cur_c = c;
}

/* slab[n][kk] = f32(b[n0 + n, k0 + kk]) for n < nb, kk < ks (ks <= 32) */
SIMD512H_FN static void widen_mvec(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                                   ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb) {
    const uint16_t *src = bc + n0 * j->sbo + k0;
    float *dst = w->slab;
    if (ks == KS512) {
        for (ptrdiff_t n = 0; n < nb; n++, src += j->sbo, dst += KS512) {
            _mm512_storeu_ps(dst, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)src)));
            _mm512_storeu_ps(dst + 16, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 16))));
        }
        return;
    }
    __mmask16 lo = (__mmask16)(ks >= 16 ? 0xffffu : (1u << ks) - 1u);
    __mmask16 hi = (__mmask16)(ks <= 16 ? 0u : (1u << (ks - 16)) - 1u);
    for (ptrdiff_t n = 0; n < nb; n++, src += j->sbo, dst += KS512) {
        _mm512_storeu_ps(dst, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lo, src)));
        _mm512_storeu_ps(dst + 16, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(hi, src + 16)));
    }
}

/* one k of an m-vector tile: acc[q][v] += at[k][16v..] * slab[q][kk] (onto +0 when the k opens) */
SIMD512H_INLINE void mv_step(const int MV, const int NN, __m512 acc[8][2], const float *atk,
                             const float *b32, ptrdiff_t kk, int opens) {
    __m512 av[2];
    UNROLL for (int v = 0; v < MV; v++) av[v] = _mm512_loadu_ps(atk + 16 * v);
    UNROLL for (int q = 0; q < NN; q++) {
        __m512 bv = _mm512_set1_ps(b32[q * KS512 + kk]);
        UNROLL for (int v = 0; v < MV; v++)
            acc[q][v] = _mm512_fmadd_ps(av[v], bv, opens ? _mm512_setzero_ps() : acc[q][v]);
    }
}

SIMD512H_INLINE void mv_close(const int MV, const int NN, __m512 acc[8][2], __m256h rh[8][2], int have_r) {
    UNROLL for (int q = 0; q < NN; q++)
        UNROLL for (int v = 0; v < MV; v++) {
            __m256h p = _mm256_castsi256_ph(_mm512_cvtps_ph(acc[q][v], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            rh[q][v] = have_r ? _mm256_add_ph(rh[q][v], p) : p;
        }
}

/* rows [0, 16*MV) x columns [0, NN) over the slab's k's; at: at + k0*mp + m0, b32: slab + n*KS512,
   s, r: + n*mp + m0. KBC as in tile512h. */
SIMD512H_INLINE void tile_mvec(const int MV, const int NN, const int KBC, const float *at, ptrdiff_t mp,
                               const float *b32, float *s, float *r, ptrdiff_t k0, ptrdiff_t ks,
                               ptrdiff_t kb, int acc_given) {
    __m512 acc[8][2];
    __m256h rh[8][2];
    ptrdiff_t in_trip = KBC ? 0 : k0 % kb;
    int have_r = acc_given || k0 / kb > 0;
    UNROLL for (int q = 0; q < NN; q++)
        UNROLL for (int v = 0; v < MV; v++) {
            acc[q][v] = in_trip ? _mm512_loadu_ps(s + q * mp + 16 * v) : _mm512_setzero_ps();
            rh[q][v] = have_r ? _mm256_castsi256_ph(_mm512_cvtps_ph(_mm512_loadu_ps(r + q * mp + 16 * v),
                                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
                              : _mm256_setzero_ph();
        }
    int closed = 0;
    if (KBC) {
        for (ptrdiff_t kk = 0; kk < ks; kk += KBC) {
            UNROLL for (int u = 0; u < KBC; u++) mv_step(MV, NN, acc, at + (kk + u) * mp, b32, kk + u, u == 0);
            mv_close(MV, NN, acc, rh, have_r);
            have_r = closed = 1;
        }
    } else {
        for (ptrdiff_t kk = 0; kk < ks;) {
            ptrdiff_t end = kk + (kb - in_trip < ks - kk ? kb - in_trip : ks - kk);
            int opens = in_trip == 0;
            in_trip += end - kk;
            for (; kk < end; kk++, opens = 0) mv_step(MV, NN, acc, at + kk * mp, b32, kk, opens);
            if (in_trip == kb) {
                mv_close(MV, NN, acc, rh, have_r);
                have_r = closed = 1;
                in_trip = 0;
            }
        }
    }
    if (closed)
        UNROLL for (int q = 0; q < NN; q++)
            UNROLL for (int v = 0; v < MV; v++)
                _mm512_storeu_ps(r + q * mp + 16 * v, _mm512_cvtph_ps(_mm256_castph_si256(rh[q][v])));
    if (in_trip)
        UNROLL for (int q = 0; q < NN; q++)
            UNROLL for (int v = 0; v < MV; v++) _mm512_storeu_ps(s + q * mp + 16 * v, acc[q][v]);
}

/* tile_mvec for every other (part, acc) pair (f32 partials or accumulators; the GEMMs of our
   emitted programs sum all of K into an f32 accumulator, kb = K): the same per-element sequence,
   closed as tile512 closes (p = part(s); r = p, or acc(f32(r) + f32(p))), with r in memory, where
   it is touched once per trip. Nothing else lives in registers, so a tile is 16*MV rows x NN32
   columns of accumulators (2 x 8: 16 of the 32 registers, enough independent chains to hide the
   FMA latency on both ports); each k is MV row loads, NN32 broadcast weights and MV*NN32 FMAs. */
#ifndef NN32
#define NN32 8
#endif

SIMD512H_INLINE void tile_mvec32(const int MV, const int NN, const float *at, ptrdiff_t mp, const float *b32,
                                 float *s, float *r, ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t kb, int acc_given,
                                 int part16, int acc16) {
    __m512 acc[NN32][2];
    ptrdiff_t in_trip = k0 % kb, t = k0 / kb;
    UNROLL for (int q = 0; q < NN; q++)
        UNROLL for (int v = 0; v < MV; v++)
            acc[q][v] = in_trip ? _mm512_loadu_ps(s + q * mp + 16 * v) : _mm512_setzero_ps();
    for (ptrdiff_t kk = 0; kk < ks;) {
        ptrdiff_t end = kk + (kb - in_trip < ks - kk ? kb - in_trip : ks - kk);
        in_trip += end - kk;
        for (; kk < end; kk++) {
            const float *atk = at + kk * mp;
            __m512 av[2];
            UNROLL for (int v = 0; v < MV; v++) av[v] = _mm512_loadu_ps(atk + 16 * v);
            UNROLL for (int q = 0; q < NN; q++) {
                __m512 bv = _mm512_set1_ps(b32[q * KS512 + kk]);
                UNROLL for (int v = 0; v < MV; v++) acc[q][v] = _mm512_fmadd_ps(av[v], bv, acc[q][v]);
            }
        }
        if (in_trip == kb) {
            int have_r = acc_given || t > 0;
            UNROLL for (int q = 0; q < NN; q++)
                UNROLL for (int v = 0; v < MV; v++) {
                    close16(r + q * mp + 16 * v, acc[q][v], have_r, part16, acc16);
                    acc[q][v] = _mm512_setzero_ps();
                }
            in_trip = 0;
            t++;
        }
    }
    if (in_trip)
        UNROLL for (int q = 0; q < NN; q++)
            UNROLL for (int v = 0; v < MV; v++) _mm512_storeu_ps(s + q * mp + 16 * v, acc[q][v]);
}

#define MVEC32_COLS(MV)                                                                           \
    do {                                                                                          \
        ptrdiff_t n = 0;                                                                          \
        for (; n + NN32 <= nb; n += NN32)                                                         \
            tile_mvec32(MV, NN32, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); \
        switch (nb - n) {                                                                         \
        case 7: tile_mvec32(MV, 7, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); break; \
        case 6: tile_mvec32(MV, 6, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); break; \
        case 5: tile_mvec32(MV, 5, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); break; \
        case 4: tile_mvec32(MV, 4, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); break; \
        case 3: tile_mvec32(MV, 3, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); break; \
        case 2: tile_mvec32(MV, 2, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); break; \
        case 1: tile_mvec32(MV, 1, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag, p16, a16); break; \
        default: break;                                                                           \
        }                                                                                         \
    } while (0)

/* the columns [0, nb) of one slab for the rows m0 .. m0 + 16*MV, in tiles of NNT columns and a tail */
#define MVEC_COLS(MV, KBC)                                                                        \
    do {                                                                                          \
        ptrdiff_t n = 0;                                                                          \
        for (; n + NNT <= nb; n += NNT)                                                           \
            tile_mvec(MV, NNT, KBC, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag); \
        switch (nb - n) {                                                                         \
        case 5: tile_mvec(MV, 5, 0, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag); break; \
        case 4: tile_mvec(MV, 4, 0, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag); break; \
        case 3: tile_mvec(MV, 3, 0, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag); break; \
        case 2: tile_mvec(MV, 2, 0, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag); break; \
        case 1: tile_mvec(MV, 1, 0, atk, mp, w->slab + n * KS512, s + n * mp, r + n * mp, k0, ks, kb, ag); break; \
        default: break;                                                                           \
        }                                                                                         \
    } while (0)

/* one slab (k0 .. k0+ks, ks <= 32) of one item, all rows, in the m-vector layout */
SIMD512H_FN static void slab_mvec(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                                  ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb) {
    const ptrdiff_t mp = j->mp, kb = j->kb;
    const int ag = j->acc_given;
    prefetch_slab512(j, bc, k0, n0, nb);
    widen_mvec(j, w, bc, k0, ks, n0, nb);
    if (!(j->part16 && j->acc16)) {
        const int p16 = j->part16, a16 = j->acc16;
        for (ptrdiff_t m0 = 0; m0 < mp; m0 += 32) {
            const float *atk = w->at + k0 * mp + m0;
            float *s = w->s + m0, *r = w->r + m0;
            if (mp - m0 >= 32) MVEC32_COLS(2);
            else MVEC32_COLS(1);
        }
        return;
    }
    int kbc = kb == 1 || kb == 2 || kb == 4 || kb == 8 ? (int)kb : 0;
    for (ptrdiff_t m0 = 0; m0 < mp; m0 += 32) {
        const float *atk = w->at + k0 * mp + m0;
        float *s = w->s + m0, *r = w->r + m0;
        if (mp - m0 >= 32) {
            switch (kbc) {
            case 1: MVEC_COLS(2, 1); break;
            case 2: MVEC_COLS(2, 2); break;
            case 4: MVEC_COLS(2, 4); break;
            case 8: MVEC_COLS(2, 8); break;
            default: MVEC_COLS(2, 0); break;
            }
        } else {
            MVEC_COLS(1, 0);
        }
    }
}
#undef MVEC_COLS
#undef MVEC32_COLS
#endif

/* one slab (k0 .. k0+ks, ks <= 32) of one item for all rows m */
SIMD512_FN static void slab_simd512(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                                    ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb, ptrdiff_t nbp) {
    const ptrdiff_t M = j->M, K = j->K, ncp = j->ncp, kb = j->kb;
    const int ag = j->acc_given, p16 = j->part16, a16 = j->acc16;
    const uint16_t *w16;  /* the slab's weights, f16: panels (nt), or [ks][>= nbp] rows of stride ws16 */
    ptrdiff_t ws16 = ncp;
    prefetch_slab512(j, bc, k0, n0, nb);
#if SEQMM_FP16
    if (!j->nt && M > 2 && j->fp16 && p16 && a16) {   /* the tiles read columns [0, nb) only */
        widen512_cols(w->slab, ncp, bc + k0 * j->sbo + n0, j->sbo, ks, nb);
        slab_rows512h(j, w, k0, ks, nb);
        return;
    }
#endif
    if (j->nt) {
        slab16_nt512(j, w, bc, k0, ks, n0, nb, nbp);
        w16 = w->slab16;
    } else if (nb == nbp || (M <= 2 && nb % 16 == 0)) {   /* few rows: 16-column tiles too */
        w16 = bc + k0 * j->sbo + n0; ws16 = j->sbo;
    } else {
        slab16_nn(j, w, bc, k0, ks, n0, nb, nbp);
        w16 = w->slab16;
    }
    float *s = w->s, *r = w->r;
    const float *a32 = w->a32;
    /* few rows: widen each weight as it is used (8 accumulators hide the FMA latency where the
       item is wide enough); columns n of a tile are panels n/16.. or row offsets n */
#define FEW_ROWS(MR, NV, STEP)                                                                    \
    for (; n + (STEP) <= nw; n += (STEP)) {                                                       \
        if (j->nt) tile512(MR, NV, 2, a32, K, w16 + n / 16 * PANEL, 0, s + n, r + n, ncp, k0, ks, kb, ag, p16, a16); \
        else tile512(MR, NV, 1, a32, K, w16 + n, ws16, s + n, r + n, ncp, k0, ks, kb, ag, p16, a16);           \
    }
    if (M <= 2) {
        ptrdiff_t n = 0;
        /* the columns the tiles cover: nb where it is a multiple of 16 (read in place; the last
           tile may be 16 wide), else the padded nbp of the copied slab */
        const ptrdiff_t nw = nb % 16 == 0 ? nb : nbp;
#if SEQMM_FP16 && !defined(SEQMM_NO_FEW_H)
        if (j->fp16 && p16 && a16) {
            slab_few512h(j, w, w16, ws16, k0, ks, nw);
            return;
        }
#endif
        if (M == 1) {
            FEW_ROWS(1, 8, 128)
            FEW_ROWS(1, 4, 64)
            FEW_ROWS(1, 2, 32)
            FEW_ROWS(1, 1, 16)
        } else {
            FEW_ROWS(2, 4, 64)
            FEW_ROWS(2, 2, 32)
            FEW_ROWS(2, 1, 16)
        }
        return;
    }
#undef FEW_ROWS
    /* many rows: widen the slab once, then 8 x 32 register tiles */
    widen512(w->slab, ncp, w16, ws16, j->nt, ks, nbp);
#if SEQMM_FP16
    if (j->fp16 && p16 && a16) {
        slab_rows512h(j, w, k0, ks, nb);
        return;
    }
#endif
#ifndef SEQMM_NO_ROWS_R
    if (kb == 1 || kb == 2 || kb == 4 || kb == 8) {   /* kb divides the slab (KSNN k's) and k0 */
        slab_rows512r(j, w, k0, ks, nbp);
        return;
    }
#endif
    /* an item whose columns end 16 past a multiple of 32 (N = 48, 80, ...): its last 48 columns
       in 3-vector tiles, not a last 32-column strip half on padding (measured on the Intel VM,
       2 threads, smollm2-135m's prefill gate/up call with f32 sums: see docs/performance.md) */
    const ptrdiff_t n16 = (nb + 15) / 16 * 16;
    const ptrdiff_t n32 = ends_in_48(n16) ? n16 - 48 : nbp;
    for (ptrdiff_t m0 = 0; m0 < M; m0 += MR512) {
        ptrdiff_t mr = M - m0 < MR512 ? M - m0 : MR512;
        const float *am = a32 + m0 * K;
        float *sm = s + m0 * ncp, *rm = r + m0 * ncp;
        if (n32 < nbp) {
            const float *wn = w->slab + n32;
            float *s3 = sm + n32, *r3 = rm + n32;
            switch (mr) {
            case 8: tile512(8, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            case 7: tile512(7, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            case 6: tile512(6, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            case 5: tile512(5, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            case 4: tile512(4, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            case 3: tile512(3, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            case 2: tile512(2, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            default: tile512(1, 3, 0, am, K, wn, ncp, s3, r3, ncp, k0, ks, kb, ag, p16, a16); break;
            }
        }
        for (ptrdiff_t n = 0; n < n32; n += 32) {
            const float *wn = w->slab + n;
            switch (mr) {
            case 8: tile512(8, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 7: tile512(7, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 6: tile512(6, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 5: tile512(5, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 4: tile512(4, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 3: tile512(3, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            case 2: tile512(2, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            default: tile512(1, 2, 0, am, K, wn, ncp, sm + n, rm + n, ncp, k0, ks, kb, ag, p16, a16); break;
            }
        }
    }
}

/* a[c] in f32 and out from r: the F16C forms of convert_a / store_out (same values) */
SIMD_FN static void convert_a_simd(const job_t *j, scratch_t *w, ptrdiff_t c) {
    if (w->cur_c >= 0 && (w->cur_c == c || j->sac == 0)) return;
    const uint16_t *ac = j->a + c * j->sac;
    for (ptrdiff_t m = 0; m < j->M; m++) {
        float *dst = w->a32 + m * j->K;
        const uint16_t *src = ac + m * j->sam;
        ptrdiff_t k = 0;
        if (j->sak == 1)
            for (; k + 8 <= j->K; k += 8)
                _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + k))));
        for (; k < j->K; k++) dst[k] = _cvtsh_ss(src[k * j->sak]);
    }
    w->cur_c = c;
}

/* load_r's F16C form (the same values: every f16 converts exactly; a NaN stays a NaN) */
SIMD_FN static void load_r_simd(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    if (!j->acc16) { load_r(j, w, c, n0, nb); return; }
    for (ptrdiff_t m = 0; m < j->M; m++) {
        float *rm = w->r + m * j->ncp;
        const uint16_t *src = (const uint16_t *)j->acc + acc_at(j, c, m) + n0;
        ptrdiff_t n = 0;
        for (; n + 8 <= nb; n += 8) _mm256_storeu_ps(rm + n, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + n))));
        for (; n < nb; n++) rm[n] = _cvtsh_ss(src[n]);
        for (; n < j->ncp; n++) rm[n] = 0.f;
    }
}

SIMD_FN static void store_out_simd(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    if (!j->acc16) { store_out(j, w, c, n0, nb); return; }
    for (ptrdiff_t m = 0; m < j->M; m++) {
        const float *rm = w->r + m * j->ncp;
        uint16_t *dst = (uint16_t *)j->out + out_at(j, c, m) + n0;
        ptrdiff_t n = 0;
        for (; n + 8 <= nb; n += 8)
            _mm_storeu_si128((__m128i *)(dst + n), _mm256_cvtps_ph(_mm256_loadu_ps(rm + n), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        for (; n < nb; n++) dst[n] = _cvtss_sh(rm[n], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
}

/* 0: portable only; 1: AVX2+FMA+F16C; 2: also AVX-512 F+BW+VL (the CPU and the OS's saved state);
   3: also AVX512-FP16 (same register state as AVX-512F, so the OS check above covers it) */
static int cpu_has_f16c(void) {   /* CPUID.1:ECX bit 29 (some clang versions lack the "f16c" name) */
    unsigned int a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1u);
}

static int cpu_simd_level(void) {
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c()))
        return 0;
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")))
        return 1;
#if SEQMM_FP16
    {   /* CPUID.(7,0):EDX bit 23 */
        unsigned int a, b, c, d;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 23) & 1u)) return 3;
    }
#endif
    return 2;
}

#else
static int cpu_simd_level(void) { return 0; }
#endif

/* Whether the kernel's software aids to streaming weights pay: the prefetch of each next item
 * (ahead_t) and the staging of nt rows a multiple of STAGE_ALIAS apart (stage_rows). Measured on
 * one CPU of each vendor, in decode passes, builds with and without: on AMD Zen 4 one thread
 * streamed 6.5-7 GB/s without the prefetch and 9-10 GB/s with it, and the staging made
 * llama-3.2-1b's nt calls 1.14x faster; on an Intel Xeon with AVX512-FP16 (48 KB L1, 2 MB L2)
 * the calls took 1.3-1.9x longer with the prefetch (llama-3.2-1b's down projection 2.25 against
 * 1.18 ms, gate/up 1.64 against 1.26 ms) and granite-3.3-8b's decode (nt weights) 972 ms a pass
 * with the staging against 810 ms without: its hardware prefetchers stream an item's rows alone
 * and its L1 holds the aliasing rows, so the extra requests and copies only cost. */
#if SEQMM_X86
static int cpu_aids_cached = -1;   /* asked once, as cpu_level below */

static int cpu_streaming_aids(void) {
    if (cpu_aids_cached < 0) {
        __builtin_cpu_init();
        cpu_aids_cached = !__builtin_cpu_is("intel");
    }
    return cpu_aids_cached;
}
#else
static int cpu_streaming_aids(void) { return 1; }
#endif

/* -1: each CPU's own answer (cpu_streaming_aids); 0 or 1: that answer on every CPU, so that the
   tests run both vendors' item and prefetch choices on any machine (the bits never differ) */
static int aids_forced = -1;

int seqmm_force_streaming_aids(int v) {
    aids_forced = v < 0 ? -1 : v != 0;
    return aids_forced;
}

/* CPUID traps to the hypervisor in a VM (microseconds): ask once. A race between two first
 * callers only writes the same value twice. */
static int cpu_level_cached = -1;

static int cpu_level(void) {
    int level = __atomic_load_n(&cpu_level_cached, __ATOMIC_RELAXED);
    if (level < 0) {
        level = cpu_simd_level();
        __atomic_store_n(&cpu_level_cached, level, __ATOMIC_RELAXED);
    }
    return level;
}

int seqmm_has_simd(void) { return cpu_level() > 0; }
/* the path a call runs with force = 0 (best), 1 (portable), 2 (at most AVX2), 3 (at most AVX-512
   without FP16): 0, 1, 2 or 3 as above */
int seqmm_simd_level(int force) {
    int level = cpu_level();
    if (force == 1) return 0;
    if (force == 2 && level > 1) return 1;
    if (force == 3 && level > 2) return 2;
    return level;
}

/* ---------------------------------------------------------------- work items and threads */

/* one work item; next: the item this thread runs after it (-1: none) */
static void run_item(const job_t *j, scratch_t *w, ptrdiff_t item, ptrdiff_t next) {
    ptrdiff_t c = item / j->chunks, n0 = (item % j->chunks) * j->nc;
    ptrdiff_t nb = j->N - n0 < j->nc ? j->N - n0 : j->nc;
    ptrdiff_t nbp = (nb + j->align - 1) / j->align * j->align;
    const uint16_t *bc = j->b + c * j->sbc;
#if SEQMM_FP16
    if (j->mvec) {
        ptrdiff_t slabs = (j->K + KS512 - 1) / KS512;
        ahead_start(j, &w->ah, j->ahead ? next : -1, slabs);
        convert_a_mvec(j, w, c);
        if (j->acc_given) load_r_mvec(j, w, c, n0, nb);
        for (ptrdiff_t k0 = 0; k0 < j->K; k0 += KS512) {
            ahead_step(&w->ah);
            slab_mvec(j, w, bc, k0, j->K - k0 < KS512 ? j->K - k0 : KS512, n0, nb);
        }
        store_out_mvec(j, w, c, n0, nb);
        return;
    }
#endif
#if SEQMM_X86
    if (j->simd) {
        ptrdiff_t ks = j->ks, slabs = (j->K + ks - 1) / ks;
        /* steps: one per slab, or one per 16-column panel of an AVX-512 nt slab */
        ahead_start(j, &w->ah, j->ahead ? next : -1, j->simd == 2 && j->nt ? slabs * (nbp / 16) : slabs);
        convert_a_simd(j, w, c);
        if (j->acc_given) load_r_simd(j, w, c, n0, nb);
        for (ptrdiff_t k0 = 0; k0 < j->K; k0 += ks) {
            if (!(j->simd == 2 && j->nt)) ahead_step(&w->ah);
            if (j->simd == 2) slab_simd512(j, w, bc, k0, j->K - k0 < ks ? j->K - k0 : ks, n0, nb, nbp);
            else slab_simd(j, w, bc, k0, j->K - k0 < ks ? j->K - k0 : ks, n0, nb, nbp);
        }
        store_out_simd(j, w, c, n0, nb);
        return;
    }
#endif
    (void)next;
    convert_a(j, w, c);
    if (j->acc_given) load_r(j, w, c, n0, nb);
    for (ptrdiff_t k0 = 0; k0 < j->K; k0 += KS) {
        ptrdiff_t ks = j->K - k0 < KS ? j->K - k0 : KS;
        slab_portable(j, w, bc, k0, ks, n0, nb, nbp);
        slab_rows_portable(j, w, k0, ks, nbp);
    }
    store_out(j, w, c, n0, nb);
}

/* One thread's share of a job. Items are handed out one at a time, so a thread that starts late
 * (a sleeping pool worker takes ~5-25 us to wake in a VM, more when the host is busy) or runs
 * slower simply takes fewer items; which thread runs an item never changes its bits. Each thread
 * claims its next item before running the current one, so that it can prefetch that item's
 * weights while it computes (see ahead_t).
 *
 * With several threads (RANGES) the items are cut into one contiguous range per part: a part
 * takes the front item of its own range, and once that is empty the back item of another's.
 * Consecutive items are consecutive weights where each c's block is contiguous (the blocked
 * decode weights), so each thread reads one long stream the hardware prefetchers follow across
 * items, instead of jumping over the other thread's item every time. Measured on the 2-core
 * Intel VM, 2 threads, weights over the L3, alternating builds: llama-3.2-1b's decode calls
 * 27.4-28.9 -> 29.9-30.5 GB/s (gate/up, 128 items of 256 KB), 25.6-25.9 -> 26.7-27.1 (q/o),
 * 18.6-18.7 -> 23.0-23.9 (k/v), 27.5-27.8 -> 29.2-30.0 (lm_head); the part that a late worker
 * would have run is taken from its back by the others, so the balance is as before. */
typedef struct {
    const job_t *job;
    int id;        /* which range the part claims from first (see claim_item) */
} part_t;

#ifndef RANGES
#define RANGES 1
#endif
#define RANGE_LO(w) ((ptrdiff_t)((w) & 0xffffffffu))
#define RANGE_HI(w) ((ptrdiff_t)((w) >> 32))

/* takes the front item of *r (own) or its back item (stolen); -1 when it is empty */
static ptrdiff_t range_take(uint64_t *r, int back) {
    uint64_t w = __atomic_load_n(r, __ATOMIC_RELAXED);
    while (RANGE_LO(w) < RANGE_HI(w)) {
        uint64_t next = back ? w - ((uint64_t)1 << 32) : w + 1;
        if (__atomic_compare_exchange_n(r, &w, next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return back ? RANGE_HI(w) - 1 : RANGE_LO(w);
    }
    return -1;
}

static ptrdiff_t claim_item(const job_t *j, int id) {
    if (!j->ranges) return __atomic_fetch_add(j->claimed, 1, __ATOMIC_RELAXED);
    ptrdiff_t it = range_take(&j->ranges[id], 0);
    if (it >= 0) return it;
    for (int q = 1; q < j->nranges; q++) {
        it = range_take(&j->ranges[(id + q) % j->nranges], 1);
        if (it >= 0) return it;
    }
    return j->items;
}

/* Each thread's scratch is kept between calls, grown to the largest call it has run. Allocated
   and freed per call, a prefill call's buffers (~100 KB and more) could go back to the system at
   each free and come back as fresh zero pages: in a C program calling the kernel in a loop
   (32 x 576 @ 576 x 64, one thread, Zen 3 VM) 64.6 us a call against 35.5 kept, page faults
   the difference. A thread's buffers are freed when it exits (tl_key's destructor). */
typedef struct { void *p; size_t cap; } buf_t;
enum { B_A32, B_AT, B_SLAB, B_SLAB16, B_STAGE, B_S, B_R, B_COUNT };
static __thread buf_t tl_bufs[B_COUNT];
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static int tl_key_ok;

#ifndef TL_KEEP_MAX
#define TL_KEEP_MAX (4 * 1024 * 1024)  /* bytes: a bigger buffer is freed after its call (its
                                          call's arithmetic dwarfs the page faults) */
#endif

/* frees the buffers over `keep` bytes (all with keep 0) */
static void tl_trim(buf_t *b, size_t keep) {
    for (int i = 0; i < B_COUNT; i++)
        if (b[i].cap > keep) { free(b[i].p); b[i].p = NULL; b[i].cap = 0; }
}
static void tl_free(void *v) { tl_trim((buf_t *)v, 0); }
static void tl_init(void) { tl_key_ok = pthread_key_create(&tl_key, tl_free) == 0; }

/* the calling thread's buffer `which`, at least `bytes` long (zeroed where `zero`), or NULL */
static void *tl_buf(int which, size_t bytes, int zero) {
    buf_t *b = &tl_bufs[which];
    if (bytes == 0) bytes = 1;
    if (b->cap < bytes) {
        free(b->p);
        b->p = malloc(bytes);
        b->cap = b->p ? bytes : 0;
        if (!b->p) return NULL;
        pthread_once(&tl_once, tl_init);
        if (tl_key_ok) pthread_setspecific(tl_key, tl_bufs);
    }
    if (zero) memset(b->p, 0, bytes);
    return b->p;
}

static void *run_part(void *arg) {
    part_t *p = (part_t *)arg;
    const job_t *j = p->job;
#if SEQMM_X86
    /* the definition needs IEEE arithmetic: no flush-to-zero, no denormals-are-zero, nearest */
    unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr & ~(0x8000u | 0x0040u | 0x6000u));
#endif
    scratch_t w;
    size_t fl = sizeof(float);
    if (j->mvec) {   /* s, r: [ncp][mp], rows past M zero (they only ever hold zero sums) */
        w.a32 = NULL;
        w.at = tl_buf(B_AT, fl * (size_t)(j->K * j->mp), 0);
        w.slab = tl_buf(B_SLAB, fl * (size_t)(KS_MAX * j->ncp > j->mp ? KS_MAX * j->ncp : j->mp), 0);
        w.slab16 = NULL;
        w.stage = NULL;
        w.s = tl_buf(B_S, fl * (size_t)(j->mp * j->ncp), 1);
        w.r = tl_buf(B_R, fl * (size_t)(j->mp * j->ncp), 1);
    } else {
        w.at = NULL;
        w.a32 = tl_buf(B_A32, fl * (size_t)(j->M * j->K), 0);
        w.slab = tl_buf(B_SLAB, fl * (size_t)(KS_MAX * j->ncp), 0);
        w.slab16 = tl_buf(B_SLAB16, sizeof(uint16_t) * (size_t)(KS_MAX * j->ncp), 0);
        w.stage = j->stage ? tl_buf(B_STAGE, sizeof(uint16_t) * (size_t)(j->ncp * STAGE_S), 0) : NULL;
        w.s = tl_buf(B_S, fl * (size_t)(j->M * j->ncp), 0);
        w.r = tl_buf(B_R, fl * (size_t)(j->M * j->ncp), 0);
    }
    w.cur_c = -1;
    ptrdiff_t ran = 0;
    /* else: no scratch, no claims (others run them) */
    if ((j->mvec ? w.at != NULL : w.a32 && w.slab16 && (!j->stage || w.stage)) && w.slab && w.s && w.r)
        for (ptrdiff_t it = claim_item(j, p->id), next; it < j->items; it = next, ran++) {
            next = claim_item(j, p->id);
            run_item(j, &w, it, next < j->items ? next : -1);
        }
    __atomic_fetch_add(j->finished, ran, __ATOMIC_RELAXED);
    tl_trim(tl_bufs, TL_KEEP_MAX);
#if SEQMM_X86
    _mm_setcsr(csr);
#endif
    return NULL;
}

#define MAX_THREADS 64

/* ---------------------------------------------------------------- a small persistent thread pool
 * Starting a thread costs tens of microseconds, as much as a decode GEMV's share, so workers are
 * started once and kept. After a job a worker spins briefly (calls come back to back in a forward
 * pass), then sleeps on a condition variable. One caller uses the pool at a time; a concurrent
 * caller starts its own threads. After fork() the child forgets the pool (its threads are gone).
 *
 * Waking a sleeping worker takes ~5-60 us in a VM (longer when the host is busy), as long as a
 * small GEMV. So the caller never waits for a worker that has not started: each job has a door,
 * (generation << 32) | DOOR_CLOSED | workers inside. A worker woken for generation g enters only
 * while the door shows g and is open; once the caller's own part is done (every item is then
 * claimed), it closes the door and waits only for the workers inside, which finish the items
 * they claimed. A worker that comes late finds the door closed, or showing a later generation,
 * and goes back to waiting: it never reads a job it has not entered. */
#include <stdatomic.h>

#ifndef POOL_SPIN
#define POOL_SPIN 20000  /* polls (x86: PAUSE, ~30-140 cycles each) before a worker sleeps:
                            ~0.2-1 ms, longer than the Python between one node's kernel call and
                            the next (smollm2-135m decode, Zen 4: a pass 35.3-35.9 ms with 2000,
                            32.0-32.4 ms with 20000, alternating builds) */
#endif
#define DOOR_CLOSED 0x80000000ull
#define DOOR_INSIDE 0x7fffffffull

static pthread_mutex_t pool_call = PTHREAD_MUTEX_INITIALIZER;  /* held by the caller using the pool */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t pool_done = PTHREAD_COND_INITIALIZER;
static int pool_size;                 /* workers started; worker i runs part i (1-based) */
static int pool_atfork;
static atomic_ulong pool_gen;         /* bumped (release) once the job below is published */
static atomic_ullong pool_door;       /* the current job's door (see above) */
static part_t *pool_parts;            /* the job's parts: read only by workers inside its door */
static int pool_nparts;
static unsigned long pool_gen0[MAX_THREADS];  /* the generation each worker was started at */

static inline void cpu_relax(void) {
#if SEQMM_X86
    _mm_pause();
#endif
}

static void pool_forget(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    pool_call = m; pool_mu = m; pool_wake = cv; pool_done = cv;
    pool_size = 0;
}

static inline unsigned long long door_of(unsigned long g) { return (unsigned long long)(g & 0xffffffffu) << 32; }

/* enter generation g's door if it is still open; 1 when entered */
static int door_enter(unsigned long g) {
    unsigned long long d = atomic_load_explicit(&pool_door, memory_order_acquire);
    while ((d & ~(DOOR_CLOSED | DOOR_INSIDE)) == door_of(g) && !(d & DOOR_CLOSED))
        if (atomic_compare_exchange_weak_explicit(&pool_door, &d, d + 1, memory_order_acq_rel, memory_order_acquire))
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- warming the next call's weights
 * Between two kernel calls of a forward pass the caller runs Python (norms, RoPE, attention's
 * small ops) while the pool's worker waits, and the next call's weights are in memory. A call may
 * name the weights of the call expected after it (seqmm.py learns the order of a pass's calls);
 * once the call is done the worker prefetches them, in address order, while it would otherwise
 * wait, so that the next call finds them in the caches. Prefetch instructions never fault, so a
 * stale guess (weights since freed, a call that does not come) costs only bandwidth, and nothing
 * the kernel computes depends on it. The worker checks for a job every WARM_CHECK lines and
 * leaves the warming for it, then resumes where it stopped unless another warming was posted. */
#ifndef WARM_MAX
#define WARM_MAX (16 * 1024 * 1024)  /* bytes of one call's weights warmed at most */
#endif
#define WARM_CHECK 16
#ifndef WARM_LOCALITY
#define WARM_LOCALITY 2
#endif

typedef struct {
    const char *base;             /* the weights: cs blocks cstride bytes apart, each rows runs of */
    ptrdiff_t cs, cstride;        /* seg bytes stride bytes apart */
    ptrdiff_t rows, stride, seg;
} warm_t;

static warm_t warm_req;           /* the posted request (under pool_mu) */
static atomic_ulong warm_gen;     /* bumped when one is posted */

/* prefetch w's lines from (*c, *row, *off) on, at most *budget bytes, until a job is published
   (pool_gen moves from seen) or another warming is posted; 1 when it ran to its end */
static int warm_run(const warm_t *w, ptrdiff_t *c, ptrdiff_t *row, ptrdiff_t *off, ptrdiff_t *budget,
                    unsigned long seen, unsigned long wseen) {
    int n = 0;
    for (; *c < w->cs; (*c)++, *row = 0)
        for (; *row < w->rows; (*row)++, *off = 0) {
            const char *rp = w->base + *c * w->cstride + *row * w->stride;
            for (; *off < w->seg; *off += 64) {
                if (*budget <= 0) return 1;
                __builtin_prefetch(rp + *off, 0, WARM_LOCALITY);
                *budget -= 64;
                if (++n == WARM_CHECK) {
                    n = 0;
                    if (atomic_load_explicit(&pool_gen, memory_order_relaxed) != seen ||
                        atomic_load_explicit(&warm_gen, memory_order_relaxed) != wseen)
                        return 0;
                }
            }
        }
    return 1;
}

static void *pool_worker(void *arg) {
    int id = (int)(intptr_t)arg;
    unsigned long seen = pool_gen0[id];   /* jobs published after the worker's start are its */
    unsigned long wseen = 0;              /* the last warming taken */
    warm_t w = {0};
    ptrdiff_t wc = 0, wrow = 0, woff = 0, wbudget = 0;   /* where the current warming stands */
    int warming = 0;
    for (;;) {
        unsigned long g, wg;
        for (int spin = 0; spin < POOL_SPIN; spin++) {
            g = atomic_load_explicit(&pool_gen, memory_order_acquire);
            wg = atomic_load_explicit(&warm_gen, memory_order_acquire);
            if (g != seen) break;
            if (id == 1 && wg != wseen) {   /* a new warming: take it */
                pthread_mutex_lock(&pool_mu);
                w = warm_req;
                wseen = atomic_load_explicit(&warm_gen, memory_order_relaxed);
                pthread_mutex_unlock(&pool_mu);
                wc = wrow = woff = 0;
                wbudget = WARM_MAX;
                warming = 1;
            }
            if (warming) {
                warming = !warm_run(&w, &wc, &wrow, &woff, &wbudget, seen, wseen);
                spin = 0;   /* awake for POOL_SPIN polls after warming too */
                continue;
            }
            cpu_relax();
        }
        if (g == seen) {
            pthread_mutex_lock(&pool_mu);
            while ((g = atomic_load_explicit(&pool_gen, memory_order_acquire)) == seen &&
                   (id != 1 || atomic_load_explicit(&warm_gen, memory_order_acquire) == wseen))
                pthread_cond_wait(&pool_wake, &pool_mu);
            pthread_mutex_unlock(&pool_mu);
            if (g == seen) continue;   /* woken for a warming: the spin loop takes it */
        }
        seen = g;
        if (!door_enter(g)) continue;
        if (id < pool_nparts) run_part(&pool_parts[id]);
        unsigned long long d = atomic_fetch_sub_explicit(&pool_door, 1, memory_order_acq_rel) - 1;
        if ((d & DOOR_CLOSED) && !(d & DOOR_INSIDE)) {   /* the last one out of a closed door */
            pthread_mutex_lock(&pool_mu);
            pthread_cond_broadcast(&pool_done);
            pthread_mutex_unlock(&pool_mu);
        }
    }
    return NULL;
}

/* starts workers until the pool has n - 1 (as far as threads can be made) */
static void pool_grow(int n) {
    if (!pool_atfork) pool_atfork = pthread_atfork(NULL, NULL, pool_forget) == 0;
    while (pool_size < n - 1 && pool_size + 1 < MAX_THREADS) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pool_gen0[pool_size + 1] = atomic_load(&pool_gen);
        int ok = pthread_create(&tid, &attr, pool_worker, (void *)(intptr_t)(pool_size + 1)) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break;
        pool_size++;
    }
}

/* posts a warming of w to worker 1 (started if need be); the caller holds pool_call */
static void warm_post(const warm_t *w) {
    pool_grow(2);
    if (pool_size < 1) return;
    pthread_mutex_lock(&pool_mu);
    warm_req = *w;
    atomic_fetch_add_explicit(&warm_gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_mu);
}

/* runs parts[0..n) with the pool; returns 0, or -1 when the pool is busy (caller falls back) */
static int pool_run(part_t *parts, int n) {
    if (pthread_mutex_trylock(&pool_call) != 0) return -1;
    pool_grow(n);
    int pooled = pool_size + 1 < n ? pool_size + 1 : n;   /* parts [1, pooled) run on workers */
    pool_parts = parts;
    pool_nparts = pooled;   /* workers beyond the call's thread count enter and leave */
    unsigned long g = atomic_load_explicit(&pool_gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&pool_door, door_of(g), memory_order_relaxed);
    pthread_mutex_lock(&pool_mu);
    atomic_store_explicit(&pool_gen, g, memory_order_release);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_mu);
    run_part(&parts[0]);
    for (int i = pooled; i < n; i++) run_part(&parts[i]);   /* no worker for these (claims are left) */
    atomic_fetch_or_explicit(&pool_door, DOOR_CLOSED, memory_order_acq_rel);
    for (int spin = 0; (atomic_load_explicit(&pool_door, memory_order_acquire) & DOOR_INSIDE) && spin < POOL_SPIN; spin++)
        cpu_relax();
    if (atomic_load_explicit(&pool_door, memory_order_acquire) & DOOR_INSIDE) {
        pthread_mutex_lock(&pool_mu);
        while (atomic_load_explicit(&pool_door, memory_order_acquire) & DOOR_INSIDE)
            pthread_cond_wait(&pool_done, &pool_mu);
        pthread_mutex_unlock(&pool_mu);
    }
    pool_nparts = 0;
    pthread_mutex_unlock(&pool_call);
    return 0;
}

/* runs parts[0..n) on threads started for this call (the pool is in use by another caller) */
static void spawn_run(part_t *parts, int n) {
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int i = 1; i < n; i++) started[i] = pthread_create(&tids[i], NULL, run_part, &parts[i]) == 0;
    run_part(&parts[0]);
    for (int i = 1; i < n; i++) {
        if (started[i]) pthread_join(tids[i], NULL);
        else run_part(&parts[i]);   /* no thread: do its share here (same result) */
    }
}

/* seqmm_kloop with the output in groups (see job_t.out; groups 1: [C, M, N]) and the given acc
   read from acc (NULL: out holds it; acc_cs: see job_t.acc) */
static int kloop_grouped(const uint16_t *a, ptrdiff_t sac, ptrdiff_t sam, ptrdiff_t sak,
                         const uint16_t *b, ptrdiff_t sbc, ptrdiff_t sbo, void *out,
                         ptrdiff_t C, ptrdiff_t M, ptrdiff_t N, ptrdiff_t trips, ptrdiff_t kb,
                         int nt, int part16, int acc16, int acc_given, int threads, int force,
                         ptrdiff_t groups, const void *acc, ptrdiff_t acc_cs) {
    job_t j;
    if (C <= 0 || M <= 0 || N <= 0 || trips <= 0 || kb <= 0) return 0;
    if (groups < 1 || C % groups != 0) return 1;
    j.groups = groups; j.ostride = groups * N;
    j.acc = acc != NULL ? acc : out;
    j.acc_cs = acc != NULL ? acc_cs : M * j.ostride;
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    j.a = a; j.sac = sac; j.sam = sam; j.sak = sak;
    j.b = b; j.sbc = sbc; j.sbo = sbo; j.out = out;
    j.C = C; j.M = M; j.N = N; j.K = trips * kb; j.trips = trips; j.kb = kb;
    j.nt = nt; j.part16 = part16; j.acc16 = acc16; j.acc_given = acc_given;
    /* one trip onto no acc: out = acc(part(sum)), and an f16 out rounds an f32 partial exactly as
       an f16 partial does (f16(f16(x)) = f16(x), NaN, infinity and overflow alike), so the call
       is an f16 chain and takes the f16-chain tiles (the FP16 path's) */
    if (trips == 1 && !acc_given && acc16) j.part16 = 1;
    j.simd = seqmm_simd_level(force);
    j.fp16 = j.simd == 3;
    j.aids = aids_forced >= 0 ? aids_forced : cpu_streaming_aids();
    j.ahead = PF_AHEAD && j.aids;
    if (j.simd > 2) j.simd = 2;
    j.ks = j.simd == 2 ? (nt || M <= 2 ? KS512 : j.fp16 ? KSNN_H : KSNN) : nt ? KSNT_AVX2 : M <= 2 ? KS : KSNN_AVX2;
    j.mp = (M + 15) / 16 * 16;
    /* the m-vector layout computes mp rows: where the padding is over 1/8 of them the n-vector
       tiles are faster (measured: M = 20 loses ~10% at kb 64-128, M = 16, 32, 48, 128 gain) */
    j.mvec = j.fp16 && nt && M >= MVEC_MIN_ROWS && (j.mp - M) * 8 <= j.mp;
#if STAGE_ALIAS > 0
    j.stage = nt && j.simd == 2 && !j.mvec && (sbo * 2) % STAGE_ALIAS == 0 && j.aids;
#else
    j.stage = 0;
#endif
    /* columns per item: at most nc_max; with one c, enough items that the threads share evenly */
    ptrdiff_t nc_max = nt ? NC_NT : NC_NN;
    /* AVX-512 nt: 128 columns (8 accumulators per row) where the item's weight rows spread over
       the L1 sets; rows a multiple of 1 KB apart (K = 512, 1536, 2048, ...) share a few sets, and
       64 rows of them already evict each other (measured: 128 is ~10% faster at K = 576, ~20%
       slower at K = 1536 and 2048) */
    if (nt && j.simd == 2 && (sbo * 2) % 1024 != 0) nc_max = NC_NT_WIDE;
    if (j.mvec) nc_max = NC_MVEC;
    /* nt with a long K (a down projection: 64 rows x 8192 k's = 1 MB per item): narrower items,
       so that each one fits the next-item prefetch (PF_AHEAD_MAX) while the previous computes.
       Measured on the calls of a llama-3.2-1b decode pass replayed back to back (Zen 4, 2
       threads, alternating builds): the cap alone 1.14-1.24x, staging alone 1.14x, both (with
       STAGE_K 256) 1.33-1.38x the speed of neither. */
    const int few_nt = nt && M <= 2 && j.simd == 2 && !j.aids && 2 * sbo >= NT_FEW_MIN_ROW;
    j.align = few_nt ? NT_FEW_ROWS : NC_ALIGN;
    const ptrdiff_t item_max = few_nt ? NT_FEW_ITEM_MAX : NT_ITEM_MAX;
    if (item_max > 0 && nt && !j.mvec) {
        ptrdiff_t cap = item_max / (2 * j.K) / j.align * j.align;
        if (cap < j.align) cap = j.align;
        if (nc_max > cap) nc_max = cap;
    }
    ptrdiff_t chunks = (N + nc_max - 1) / nc_max;
    if (C == 1 && threads > 1) chunks = (chunks + threads - 1) / threads * threads;
    /* several threads, few items (a small weight over a few cores): narrower items, down to
       NC_ALIGN columns, so that every thread gets a share of the claims */
    while (threads > 1 && C * chunks < MIN_ITEMS * threads && (N + 2 * chunks - 1) / (2 * chunks) >= j.align)
        chunks *= 2;
    /* many rows (prefill calls: seconds of work per item), items not a multiple of the threads
       and few of them: halved, so that the threads finish together (9 items on 2 threads were
       5 against 4; now 18 of half the width) */
    if (BALANCE_ROWS && threads > 1 && M > 2 && (C * chunks) % threads != 0 &&
        C * chunks < 4 * MIN_ITEMS * threads && (N + 2 * chunks - 1) / (2 * chunks) >= j.align)
        chunks *= 2;
    if (chunks > N) chunks = N;
    j.nc = (N + chunks - 1) / chunks;
    j.nc = (j.nc + j.align - 1) / j.align * j.align;  /* only an item at the end of N has a tail */
    j.chunks = (N + j.nc - 1) / j.nc;
    j.ncp = (j.nc + NC_ALIGN - 1) / NC_ALIGN * NC_ALIGN;
    ptrdiff_t claimed = 0, finished = 0;
    j.items = C * j.chunks;
    j.claimed = &claimed;
    j.finished = &finished;
    if (threads > j.items) threads = (int)j.items;

    part_t parts[MAX_THREADS];
    uint64_t ranges[MAX_THREADS];
    j.ranges = NULL;
    j.nranges = 1;
    if (RANGES && threads > 1 && j.items < 0x7fffffff) {
        j.ranges = ranges;
        j.nranges = threads;
        for (int i = 0; i < threads; i++)
            ranges[i] = (uint64_t)(j.items * i / threads) | (uint64_t)(j.items * (i + 1) / threads) << 32;
    }
    for (int i = 0; i < threads; i++) { parts[i].job = &j; parts[i].id = i; }
    if (threads == 1) run_part(&parts[0]);
    else if (pool_run(parts, threads) != 0) spawn_run(parts, threads);
    /* a thread without scratch takes no items; the others run them all, unless none could */
    return __atomic_load_n(&finished, __ATOMIC_ACQUIRE) == j.items ? 0 : 1;
}

int seqmm_kloop(const uint16_t *a, ptrdiff_t sac, ptrdiff_t sam, ptrdiff_t sak,
                const uint16_t *b, ptrdiff_t sbc, ptrdiff_t sbo, void *out,
                ptrdiff_t C, ptrdiff_t M, ptrdiff_t N, ptrdiff_t trips, ptrdiff_t kb,
                int nt, int part16, int acc16, int acc_given, int threads, int force) {
    return kloop_grouped(a, sac, sam, sak, b, sbc, sbo, out, C, M, N, trips, kb, nt, part16, acc16,
                         acc_given, threads, force, 1, NULL, 0);
}

/* seqmm_kloop with its 19 arguments packed in one int64 array, in the same order (pointers as
 * integers): one ctypes argument instead of 19 takes ~4 us less per call from Python. Six more
 * name the weights to warm once the call is done (see warm_t: base, cs, cstride, rows, stride,
 * seg; base 0: none), and the last three the output's groups (0 or 1: [C, M, N]), the given
 * acc's address (0: out holds it) and acc_cs (see job_t): 28 in all. */
int seqmm_kloop_packed(const int64_t *v) {
    int rc = kloop_grouped((const uint16_t *)(uintptr_t)v[0], (ptrdiff_t)v[1], (ptrdiff_t)v[2], (ptrdiff_t)v[3],
                           (const uint16_t *)(uintptr_t)v[4], (ptrdiff_t)v[5], (ptrdiff_t)v[6],
                           (void *)(uintptr_t)v[7], (ptrdiff_t)v[8], (ptrdiff_t)v[9], (ptrdiff_t)v[10],
                           (ptrdiff_t)v[11], (ptrdiff_t)v[12], (int)v[13], (int)v[14], (int)v[15],
                           (int)v[16], (int)v[17], (int)v[18],
                           v[25] > 1 ? (ptrdiff_t)v[25] : 1, (const void *)(uintptr_t)v[26], (ptrdiff_t)v[27]);
    if (v[19] != 0 && pthread_mutex_trylock(&pool_call) == 0) {
        warm_t w = {(const char *)(uintptr_t)v[19], (ptrdiff_t)v[20], (ptrdiff_t)v[21],
                    (ptrdiff_t)v[22], (ptrdiff_t)v[23], (ptrdiff_t)v[24]};
        warm_post(&w);
        pthread_mutex_unlock(&pool_call);
    }
    return rc;
}
