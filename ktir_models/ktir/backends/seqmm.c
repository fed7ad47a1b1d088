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
 * Structure: the output is cut into work items (c, chunk of up to NC columns); threads take
 * contiguous ranges of items. Per item, K is walked in slabs of KS k's: the slab's f16 weights
 * are converted (and, for b = [C, N, K], transposed) once into an f32 buffer [KS][NC] in L1 and
 * reused by every row m (stacked cores, prefill rows). A register-blocked micro-kernel runs a
 * tile of rows x columns over the slab's k's, closing a trip (round the partial, chain it into r)
 * whenever a trip boundary is crossed; a partial that spans slabs waits in an f32 buffer s.
 *
 * Two paths with the same semantics: AVX2+FMA+F16C intrinsics (selected at run time by a CPU
 * check, compiled through function target attributes so no -m flags are needed) and portable C
 * with exact bit-level f16 <-> f32 conversions (round to nearest even, subnormals, overflow).
 * Both run with flush-to-zero, denormals-are-zero off and round-to-nearest (MXCSR set per thread
 * on x86). Never compile this with -ffast-math.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SEQMM_X86 1
#include <immintrin.h>
#define SIMD_FN __attribute__((target("avx2,fma,f16c")))
#define SIMD_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#else
#define SEQMM_X86 0
#endif

#define KS 16          /* k's per slab */
#define NC_MAX 256     /* columns per work item */
#define NC_ALIGN 32    /* slab/tile columns are padded to this many (micro-kernel strip widths) */
#define MR_MAX 6       /* rows per micro-kernel tile */

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
    void *out;                               /* [C, M, N] contiguous, f16 or f32 */
    ptrdiff_t C, M, N, K, trips, kb;
    int nt, part16, acc16, acc_given, simd;
    ptrdiff_t nc, ncp, chunks;               /* item width, padded width, items per c */
} job_t;

typedef struct {
    float *a32;    /* [M][K] the current c's a, in f32 */
    float *slab;   /* [KS][ncp] */
    float *s;      /* [M][ncp] partials that span slabs */
    float *r;      /* [M][ncp] the chained accumulator (values of acc dtype, or the first partial) */
    ptrdiff_t cur_c;
} scratch_t;

static void convert_a(const job_t *j, scratch_t *w, ptrdiff_t c) {
    if (w->cur_c >= 0 && (w->cur_c == c || j->sac == 0)) return;
    const uint16_t *ac = j->a + c * j->sac;
    for (ptrdiff_t m = 0; m < j->M; m++)
        for (ptrdiff_t k = 0; k < j->K; k++) w->a32[m * j->K + k] = h2f(ac[m * j->sam + k * j->sak]);
    w->cur_c = c;
}

/* r from the given acc (out holds it), pad columns zero */
static void load_r(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    for (ptrdiff_t m = 0; m < j->M; m++) {
        float *rm = w->r + m * j->ncp;
        ptrdiff_t base = (c * j->M + m) * j->N + n0;
        for (ptrdiff_t n = 0; n < nb; n++)
            rm[n] = j->acc16 ? h2f(((const uint16_t *)j->out)[base + n]) : ((const float *)j->out)[base + n];
        for (ptrdiff_t n = nb; n < j->ncp; n++) rm[n] = 0.f;
    }
}

static void store_out(const job_t *j, scratch_t *w, ptrdiff_t c, ptrdiff_t n0, ptrdiff_t nb) {
    for (ptrdiff_t m = 0; m < j->M; m++) {
        const float *rm = w->r + m * j->ncp;
        ptrdiff_t base = (c * j->M + m) * j->N + n0;
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

SIMD_FN static void slab_simd(const job_t *j, scratch_t *w, const uint16_t *bc, ptrdiff_t k0,
                              ptrdiff_t ks, ptrdiff_t n0, ptrdiff_t nb, ptrdiff_t nbp) {
    const ptrdiff_t ncp = j->ncp, sbo = j->sbo;
    if (!j->nt) {
        for (ptrdiff_t kk = 0; kk < ks; kk++) {
            const uint16_t *src = bc + (k0 + kk) * sbo + n0;
            float *row = w->slab + kk * ncp;
            ptrdiff_t n = 0;
            for (; n + 8 <= nb; n += 8)
                _mm256_storeu_ps(row + n, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + n))));
            for (; n < nb; n++) row[n] = _cvtsh_ss(src[n]);
            for (; n < nbp; n++) row[n] = 0.f;
        }
        return;
    }
    /* nt: b rows are n, k unit stride. 8 n x 8 k blocks are transposed in registers. */
    for (ptrdiff_t g = 0; g < nbp; g += 8) {
        ptrdiff_t kk = 0;
        if (g + 8 <= nb) {
            const uint16_t *src = bc + (n0 + g) * sbo + k0;
            for (; kk + 8 <= ks; kk += 8) {
                __m128i r0 = _mm_loadu_si128((const __m128i *)(src + 0 * sbo + kk));
                __m128i r1 = _mm_loadu_si128((const __m128i *)(src + 1 * sbo + kk));
                __m128i r2 = _mm_loadu_si128((const __m128i *)(src + 2 * sbo + kk));
                __m128i r3 = _mm_loadu_si128((const __m128i *)(src + 3 * sbo + kk));
                __m128i r4 = _mm_loadu_si128((const __m128i *)(src + 4 * sbo + kk));
                __m128i r5 = _mm_loadu_si128((const __m128i *)(src + 5 * sbo + kk));
                __m128i r6 = _mm_loadu_si128((const __m128i *)(src + 6 * sbo + kk));
                __m128i r7 = _mm_loadu_si128((const __m128i *)(src + 7 * sbo + kk));
                __m128i t0 = _mm_unpacklo_epi16(r0, r1), t1 = _mm_unpackhi_epi16(r0, r1);
                __m128i t2 = _mm_unpacklo_epi16(r2, r3), t3 = _mm_unpackhi_epi16(r2, r3);
                __m128i t4 = _mm_unpacklo_epi16(r4, r5), t5 = _mm_unpackhi_epi16(r4, r5);
                __m128i t6 = _mm_unpacklo_epi16(r6, r7), t7 = _mm_unpackhi_epi16(r6, r7);
                __m128i u0 = _mm_unpacklo_epi32(t0, t2), u1 = _mm_unpackhi_epi32(t0, t2);
                __m128i u2 = _mm_unpacklo_epi32(t1, t3), u3 = _mm_unpackhi_epi32(t1, t3);
                __m128i u4 = _mm_unpacklo_epi32(t4, t6), u5 = _mm_unpackhi_epi32(t4, t6);
                __m128i u6 = _mm_unpacklo_epi32(t5, t7), u7 = _mm_unpackhi_epi32(t5, t7);
                float *d = w->slab + kk * ncp + g;
                _mm256_storeu_ps(d + 0 * ncp, _mm256_cvtph_ps(_mm_unpacklo_epi64(u0, u4)));
                _mm256_storeu_ps(d + 1 * ncp, _mm256_cvtph_ps(_mm_unpackhi_epi64(u0, u4)));
                _mm256_storeu_ps(d + 2 * ncp, _mm256_cvtph_ps(_mm_unpacklo_epi64(u1, u5)));
                _mm256_storeu_ps(d + 3 * ncp, _mm256_cvtph_ps(_mm_unpackhi_epi64(u1, u5)));
                _mm256_storeu_ps(d + 4 * ncp, _mm256_cvtph_ps(_mm_unpacklo_epi64(u2, u6)));
                _mm256_storeu_ps(d + 5 * ncp, _mm256_cvtph_ps(_mm_unpackhi_epi64(u2, u6)));
                _mm256_storeu_ps(d + 6 * ncp, _mm256_cvtph_ps(_mm_unpacklo_epi64(u3, u7)));
                _mm256_storeu_ps(d + 7 * ncp, _mm256_cvtph_ps(_mm_unpackhi_epi64(u3, u7)));
            }
        }
        /* k tail of the slab (only the last slab of K), or an n group past the end of N */
        for (; kk < ks; kk++) {
            float *row = w->slab + kk * ncp + g;
            for (ptrdiff_t i = 0; i < 8; i++)
                row[i] = g + i < nb ? _cvtsh_ss(bc[(n0 + g + i) * sbo + k0 + kk]) : 0.f;
        }
    }
}

/* Closes a trip for the tile's accumulators: round the partial, chain it into r, restart at +0. */
#define CLOSE_TRIP(MR, NV)                                                                   \
    do {                                                                                      \
        for (int i_ = 0; i_ < (MR); i_++)                                                     \
            for (int v_ = 0; v_ < (NV); v_++) {                                               \
                float *rp = r + i_ * ncp + 8 * v_;                                            \
                __m256 p = part16 ? r16v(acc[i_][v_]) : acc[i_][v_];                          \
                if (have_r) {                                                                 \
                    __m256 x = _mm256_add_ps(_mm256_loadu_ps(rp), p);                         \
                    p = acc16 ? r16v(x) : x;                                                  \
                }                                                                             \
                _mm256_storeu_ps(rp, p);                                                      \
                acc[i_][v_] = _mm256_setzero_ps();                                            \
            }                                                                                 \
    } while (0)

/* rows [0, MR) x columns [0, 8*NV) of a tile over the slab's ks k's (MR, NV compile-time) */
SIMD_INLINE void tile_simd(const int MR, const int NV, const float *a32, ptrdiff_t K,
                           const float *slab, ptrdiff_t ncp, float *s, float *r,
                           ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t kb, int acc_given, int part16, int acc16) {
    __m256 acc[MR_MAX][4];
    ptrdiff_t t = k0 / kb, in_trip = k0 % kb;
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = in_trip ? _mm256_loadu_ps(s + i * ncp + 8 * v) : _mm256_setzero_ps();
    for (ptrdiff_t kk = 0; kk < ks; kk++) {
        __m256 wv[4];
        for (int v = 0; v < NV; v++) wv[v] = _mm256_loadu_ps(slab + kk * ncp + 8 * v);
        for (int i = 0; i < MR; i++) {
            __m256 av = _mm256_broadcast_ss(a32 + i * K + k0 + kk);
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(av, wv[v], acc[i][v]);
        }
        if (++in_trip == kb) {
            int have_r = acc_given || t > 0;
            CLOSE_TRIP(MR, NV);
            in_trip = 0;
            t++;
        }
    }
    if (in_trip)
        for (int i = 0; i < MR; i++)
            for (int v = 0; v < NV; v++) _mm256_storeu_ps(s + i * ncp + 8 * v, acc[i][v]);
}

SIMD_FN static void slab_rows_simd(const job_t *j, scratch_t *w, ptrdiff_t k0, ptrdiff_t ks, ptrdiff_t nbp) {
    const ptrdiff_t M = j->M, K = j->K, ncp = j->ncp, kb = j->kb;
    const int ag = j->acc_given, p16 = j->part16, a16 = j->acc16;
    ptrdiff_t m0 = 0;
    if (M == 1) {
        for (ptrdiff_t n = 0; n < nbp; n += 32)
            tile_simd(1, 4, w->a32, K, w->slab + n, ncp, w->s + n, w->r + n, k0, ks, kb, ag, p16, a16);
        return;
    }
    for (; m0 < M; m0 += MR_MAX) {
        ptrdiff_t mr = M - m0 < MR_MAX ? M - m0 : MR_MAX;
        const float *am = w->a32 + m0 * K;
        float *sm = w->s + m0 * ncp, *rm = w->r + m0 * ncp;
        for (ptrdiff_t n = 0; n < nbp; n += 16) {
            switch (mr) {
            case 6: tile_simd(6, 2, am, K, w->slab + n, ncp, sm + n, rm + n, k0, ks, kb, ag, p16, a16); break;
            case 5: tile_simd(5, 2, am, K, w->slab + n, ncp, sm + n, rm + n, k0, ks, kb, ag, p16, a16); break;
            case 4: tile_simd(4, 2, am, K, w->slab + n, ncp, sm + n, rm + n, k0, ks, kb, ag, p16, a16); break;
            case 3: tile_simd(3, 2, am, K, w->slab + n, ncp, sm + n, rm + n, k0, ks, kb, ag, p16, a16); break;
            case 2: tile_simd(2, 2, am, K, w->slab + n, ncp, sm + n, rm + n, k0, ks, kb, ag, p16, a16); break;
            default: tile_simd(1, 2, am, K, w->slab + n, ncp, sm + n, rm + n, k0, ks, kb, ag, p16, a16); break;
            }
        }
    }
}

static int cpu_has_simd(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

#else
static int cpu_has_simd(void) { return 0; }
#endif

int seqmm_has_simd(void) { return cpu_has_simd(); }

/* ---------------------------------------------------------------- work items and threads */

static void run_item(const job_t *j, scratch_t *w, ptrdiff_t item) {
    ptrdiff_t c = item / j->chunks, n0 = (item % j->chunks) * j->nc;
    ptrdiff_t nb = j->N - n0 < j->nc ? j->N - n0 : j->nc;
    ptrdiff_t nbp = (nb + NC_ALIGN - 1) / NC_ALIGN * NC_ALIGN;
    const uint16_t *bc = j->b + c * j->sbc;
    convert_a(j, w, c);
    if (j->acc_given) load_r(j, w, c, n0, nb);
    for (ptrdiff_t k0 = 0; k0 < j->K; k0 += KS) {
        ptrdiff_t ks = j->K - k0 < KS ? j->K - k0 : KS;
#if SEQMM_X86
        if (j->simd) {
            slab_simd(j, w, bc, k0, ks, n0, nb, nbp);
            slab_rows_simd(j, w, k0, ks, nbp);
            continue;
        }
#endif
        slab_portable(j, w, bc, k0, ks, n0, nb, nbp);
        slab_rows_portable(j, w, k0, ks, nbp);
    }
    store_out(j, w, c, n0, nb);
}

typedef struct {
    const job_t *job;
    ptrdiff_t lo, hi;
    int failed;
} part_t;

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
    w.a32 = malloc(fl * (size_t)(j->M * j->K));
    w.slab = malloc(fl * (size_t)(KS * j->ncp));
    w.s = malloc(fl * (size_t)(j->M * j->ncp));
    w.r = malloc(fl * (size_t)(j->M * j->ncp));
    w.cur_c = -1;
    if (!w.a32 || !w.slab || !w.s || !w.r) p->failed = 1;
    else
        for (ptrdiff_t it = p->lo; it < p->hi; it++) run_item(j, &w, it);
    free(w.a32); free(w.slab); free(w.s); free(w.r);
#if SEQMM_X86
    _mm_setcsr(csr);
#endif
    return NULL;
}

#define MAX_THREADS 64

int seqmm_kloop(const uint16_t *a, ptrdiff_t sac, ptrdiff_t sam, ptrdiff_t sak,
                const uint16_t *b, ptrdiff_t sbc, ptrdiff_t sbo, void *out,
                ptrdiff_t C, ptrdiff_t M, ptrdiff_t N, ptrdiff_t trips, ptrdiff_t kb,
                int nt, int part16, int acc16, int acc_given, int threads, int force_portable) {
    job_t j;
    if (C <= 0 || M <= 0 || N <= 0 || trips <= 0 || kb <= 0) return 0;
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    j.a = a; j.sac = sac; j.sam = sam; j.sak = sak;
    j.b = b; j.sbc = sbc; j.sbo = sbo; j.out = out;
    j.C = C; j.M = M; j.N = N; j.K = trips * kb; j.trips = trips; j.kb = kb;
    j.nt = nt; j.part16 = part16; j.acc16 = acc16; j.acc_given = acc_given;
    j.simd = !force_portable && cpu_has_simd();
    /* columns per item: at most NC_MAX; with one c, enough items that the threads share evenly */
    ptrdiff_t chunks = (N + NC_MAX - 1) / NC_MAX;
    if (C == 1 && threads > 1) chunks = (chunks + threads - 1) / threads * threads;
    if (chunks > N) chunks = N;
    j.nc = (N + chunks - 1) / chunks;
    j.nc = (j.nc + 7) / 8 * 8;
    j.chunks = (N + j.nc - 1) / j.nc;
    j.ncp = (j.nc + NC_ALIGN - 1) / NC_ALIGN * NC_ALIGN;
    ptrdiff_t items = C * j.chunks;
    if (threads > items) threads = (int)items;

    part_t parts[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        parts[i].job = &j;
        parts[i].lo = items * i / threads;
        parts[i].hi = items * (i + 1) / threads;
        parts[i].failed = 0;
        started[i] = 0;
    }
    for (int i = 1; i < threads; i++)
        started[i] = pthread_create(&tids[i], NULL, run_part, &parts[i]) == 0;
    run_part(&parts[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i]) pthread_join(tids[i], NULL);
        else run_part(&parts[i]);   /* no thread: do its share here (same result) */
    }
    for (int i = 0; i < threads; i++)
        if (parts[i].failed) return 1;
    return 0;
}
