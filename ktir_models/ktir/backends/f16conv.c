/* f16conv: float16 <-> float32 array conversions with numpy's exact results, at memory speed.
 *
 * numpy converts float16 one element at a time (~3-7 ns per element here); these loops use the
 * F16C instructions where the CPU has them (16 lanes at a time where it also has AVX-512).
 * Results are bit-identical to numpy's ``astype`` for every input, NaN payloads included:
 *   f16 -> f32: exact (subnormals, infinities, signed zeros); a NaN keeps its payload (the
 *               instruction would quiet a signalling NaN, so vectors holding a NaN take the
 *               scalar path);
 *   f32 -> f16: round to nearest even, overflow to infinity, subnormal results; a NaN becomes
 *               0x7c00 | (significand >> 13), or 0x7c01 when that is 0 (numpy's rule).
 * Compiled into the same library as seqmm.c (seqmm.py builds both); the caller says whether
 * the F16C path may run (seqmm_has_simd). Never compile with -ffast-math.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t h2f_bits(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {  /* zero or subnormal: m * 2^-24 is exact in f32 */
        float f = (float)m * 5.9604644775390625e-8f;
        uint32_t b;
        memcpy(&b, &f, 4);
        return sign | b;
    }
    if (e == 31) return sign | 0x7f800000u | (m << 13);
    return sign | ((e + 112u) << 23) | (m << 13);
}

static inline uint16_t f2h_bits(uint32_t x) {
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        uint16_t r = (uint16_t)(0x7c00u + ((ax & 0x7fffffu) >> 13));
        return sign | (uint16_t)(r == 0x7c00u ? 0x7c01u : r);
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00u;   /* rounds to 65520 or more: infinity */
    if (ax >= 0x38800000u) {                         /* a normal f16 */
        uint32_t r = ax - 0x38000000u;               /* rebias the exponent 127 -> 15 */
        r += 0xfffu + ((r >> 13) & 1u);              /* round to nearest even */
        return sign | (uint16_t)(r >> 13);
    }
    if (ax <= 0x33000000u) return sign;              /* at most half the least subnormal */
    uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;                       /* 14 .. 24 */
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SEQMM_NO_SIMD)
#include <immintrin.h>
#define CVT_SIMD 1

__attribute__((target("avx2,f16c")))
static void h2f_f16c(const uint16_t *x, uint32_t *y, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)),
                                      _mm_set1_epi16(0x7c00));
        if (!_mm_testz_si128(nan, nan)) {
            for (int k = 0; k < 8; k++) y[i + k] = h2f_bits(x[i + k]);
            continue;
        }
        _mm256_storeu_ps((float *)(y + i), _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) y[i] = h2f_bits(x[i]);
}

__attribute__((target("avx2,f16c")))
static void f2h_f16c(const uint32_t *x, uint16_t *y, ptrdiff_t n) {
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, absmask), inf);
        if (!_mm256_testz_si256(nan, nan)) {
            for (int k = 0; k < 8; k++) y[i + k] = f2h_bits(x[i + k]);
            continue;
        }
        __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(b),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    for (; i < n; i++) y[i] = f2h_bits(x[i]);
}

/* the same conversions 16 lanes at a time (AVX-512); a vector holding a NaN takes the scalar
   path, as above, and so does the tail */
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
static void h2f_avx512(const uint16_t *x, uint32_t *y, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(x + i));
        if (_mm256_cmpgt_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)), _mm256_set1_epi16(0x7c00))) {
            for (int k = 0; k < 16; k++) y[i + k] = h2f_bits(x[i + k]);
            continue;
        }
        _mm512_storeu_ps((float *)(y + i), _mm512_cvtph_ps(h));
    }
    for (; i < n; i++) y[i] = h2f_bits(x[i]);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
static void f2h_avx512(const uint32_t *x, uint16_t *y, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i b = _mm512_loadu_si512((const void *)(x + i));
        if (_mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000))) {
            for (int k = 0; k < 16; k++) y[i + k] = f2h_bits(x[i + k]);
            continue;
        }
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_castsi512_ps(b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) y[i] = f2h_bits(x[i]);
}
#else
#define CVT_SIMD 0
#endif

/* y[i] = f32(x[i]) for n contiguous elements; simd: 0 portable C, 1 F16C, 2 or more AVX-512 */
void seqmm_cvt_h2f(const uint16_t *x, uint32_t *y, ptrdiff_t n, int simd) {
#if CVT_SIMD
    if (simd >= 2) { h2f_avx512(x, y, n); return; }
    if (simd) { h2f_f16c(x, y, n); return; }
#endif
    (void)simd;
    for (ptrdiff_t i = 0; i < n; i++) y[i] = h2f_bits(x[i]);
}

/* y[i] = f16(x[i]) (round to nearest even) for n contiguous elements */
void seqmm_cvt_f2h(const uint32_t *x, uint16_t *y, ptrdiff_t n, int simd) {
#if CVT_SIMD
    if (simd >= 2) { f2h_avx512(x, y, n); return; }
    if (simd) { f2h_f16c(x, y, n); return; }
#endif
    (void)simd;
    for (ptrdiff_t i = 0; i < n; i++) y[i] = f2h_bits(x[i]);
}

/* ---------------------------------------------------------------- f16 binary arithmetic
 * out[i] = f16(f32(a[i]) OP f32(b[i])) for OP = + - * / (op 0..3): what numpy computes for
 * np.OP(a, b, dtype=float32).astype(float16) (IEEE f32 arithmetic is correctly rounded, the
 * conversions are the ones above), bit for bit except in one case IEEE leaves open: when both
 * operands are NaN, which payload the NaN result carries (compilers may swap the operands of a
 * commutative instruction, numpy's and ours alike). Every element, tails included, goes through
 * the same vector instructions. */
#if CVT_SIMD
/* f32 of x[0..m) in 8 lanes (m <= 8), zeros past m: the tail goes through the same
   instructions as full vectors. Exact; a signalling NaN is quieted here instead of by the f32
   operation that reads it, which gives the same quiet NaN. */
__attribute__((target("avx2,f16c"), always_inline))
static inline __m256 widen8_f16c(const uint16_t *x, ptrdiff_t m) {
    uint16_t t[8] = {0};
    if (m < 8) x = memcpy(t, x, (size_t)m * 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x));
}

/* y[0..m) = f16 of z's first m lanes: one vcvtps2ph where no lane is a NaN, else f2h_bits lane
   by lane (numpy's NaN rule). */
__attribute__((target("avx2,f16c"), always_inline))
static inline void narrow8_f16c(__m256 z, uint16_t *y, ptrdiff_t m) {
    uint16_t t[8];
    uint16_t *o = m < 8 ? t : y;
    if (_mm256_movemask_ps(_mm256_cmp_ps(z, z, _CMP_UNORD_Q))) {
        float r[8];
        _mm256_storeu_ps(r, z);
        for (int k = 0; k < 8; k++) {
            uint32_t bits;
            memcpy(&bits, r + k, 4);
            o[k] = f2h_bits(bits);
        }
    } else {
        _mm_storeu_si128((__m128i *)o, _mm256_cvtps_ph(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (m < 8) memcpy(y, t, (size_t)m * 2);
}

/* 8 lanes at a time, the operands widened and the result narrowed in registers; one loop per
   op, so the op is not re-dispatched per vector. (Narrowing through a buffer and f2h_f16c cost
   ~2.5 cycles an element on Zen 3: 13.7 us for 18432 elements; this ~4x less.) */
#define BINOP_F16C(NAME, OPF)                                                                     \
    __attribute__((target("avx2,f16c")))                                                          \
    static void NAME(const uint16_t *a, const uint16_t *b, uint16_t *out, ptrdiff_t n) {         \
        for (ptrdiff_t i = 0; i < n; i += 8) {                                                    \
            ptrdiff_t m = n - i < 8 ? n - i : 8;                                                  \
            narrow8_f16c(OPF(widen8_f16c(a + i, m), widen8_f16c(b + i, m)), out + i, m);          \
        }                                                                                         \
    }
BINOP_F16C(add_f16c, _mm256_add_ps)
BINOP_F16C(sub_f16c, _mm256_sub_ps)
BINOP_F16C(mul_f16c, _mm256_mul_ps)
BINOP_F16C(div_f16c, _mm256_div_ps)

static void binop_f16c(const uint16_t *a, const uint16_t *b, uint16_t *out, ptrdiff_t n, int op) {
    switch (op) {
    case 0: add_f16c(a, b, out, n); break;
    case 1: sub_f16c(a, b, out, n); break;
    case 2: mul_f16c(a, b, out, n); break;
    default: div_f16c(a, b, out, n); break;
    }
}

/* The AVX-512 form: 16 lanes, the operands widened and the result narrowed in registers, the
   tail through masked loads and stores (its idle lanes' results are never stored). No NaN path:
   an f32 operation's NaN is quiet (x86 quiets a NaN operand, and vcvtph2ps already did), and
   for a quiet NaN vcvtps2ph keeps the sign and the top 10 significand bits, numpy's rule (its
   0x7c01 case needs those bits zero, which a quiet NaN's bit 22 rules out). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
static void binop_avx512(const uint16_t *a, const uint16_t *b, uint16_t *out, ptrdiff_t n, int op) {
    for (ptrdiff_t i = 0; i < n; i += 16) {
        ptrdiff_t m = n - i < 16 ? n - i : 16;
        __mmask16 live = (__mmask16)(m == 16 ? 0xffffu : (1u << m) - 1u);
        __m512 x = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, a + i));
        __m512 y = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, b + i));
        __m512 z;
        switch (op) {
        case 0: z = _mm512_add_ps(x, y); break;
        case 1: z = _mm512_sub_ps(x, y); break;
        case 2: z = _mm512_mul_ps(x, y); break;
        default: z = _mm512_div_ps(x, y); break;
        }
        _mm256_mask_storeu_epi16(out + i, live,
                                 _mm512_cvtps_ph(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
}
#endif

static float binop1(float x, float y, int op) {
    switch (op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
    default: return x / y;
    }
}

/* 0: done; 1: op out of range. simd: 0 portable C, 1 F16C (AVX2), 2 or more AVX-512 (the
   path level seqmm_simd_level gives) */
int seqmm_f16_binop(const uint16_t *a, const uint16_t *b, uint16_t *out, ptrdiff_t n, int op,
                    int simd) {
    if (op < 0 || op > 3) return 1;
#if CVT_SIMD
    if (simd >= 2) { binop_avx512(a, b, out, n, op); return 0; }
    if (simd) { binop_f16c(a, b, out, n, op); return 0; }
#endif
    (void)simd;
    for (ptrdiff_t i = 0; i < n; i++) {
        float x, y;
        uint32_t xb = h2f_bits(a[i]), yb = h2f_bits(b[i]);
        memcpy(&x, &xb, 4);
        memcpy(&y, &yb, 4);
        float z = binop1(x, y, op);
        uint32_t zb;
        memcpy(&zb, &z, 4);
        out[i] = f2h_bits(zb);
    }
    return 0;
}

/* ---------------------------------------------------------------- f16 functions by table
 * out[i] = table[x[i]] for n f16 elements: a unary function of an f16 value, given as its f16
 * result at each of the 65536 bit patterns (math.py fills the table with the op's own numpy
 * evaluation, so the lookup is that evaluation's bits). */
void seqmm_f16_lut(const uint16_t *table, const uint16_t *x, uint16_t *out, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) out[i] = table[x[i]];
}

/* ---------------------------------------------------------------- finiteness
 * 1 when any of the n float16 values is an infinity or a NaN (exponent bits all ones), else 0.
 * Chunks keep the inner loop branch-free (vectorised by the compiler) and still stop early. */
int seqmm_f16_any_nonfinite(const uint16_t *x, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i += 4096) {
        ptrdiff_t end = n - i < 4096 ? n : i + 4096;
        unsigned bad = 0;
        for (ptrdiff_t j = i; j < end; j++) bad |= (unsigned)((x[j] & 0x7c00u) == 0x7c00u);
        if (bad) return 1;
    }
    return 0;
}

/* the index of the first of n float16 arrays holding an infinity or a NaN, or -1; v holds each
   array's address and element count, in turn (a forward's outputs in node order, one call a
   pass instead of one per node) */
ptrdiff_t seqmm_f16_first_nonfinite(const int64_t *v, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        if (seqmm_f16_any_nonfinite((const uint16_t *)(intptr_t)v[2 * i], (ptrdiff_t)v[2 * i + 1]))
            return i;
    return -1;
}

/* ---------------------------------------------------------------- the SiLU tail
 * out = R_out(R(R(a / R(k + e)) * u)) elementwise, for the tail of a SiLU-and-product chain
 * (arith.addf of a splat constant k, arith.divf, arith.mulf, and an optional arith.truncf;
 * exec/tape_fusion.py), where R rounds to the chain's type after each operation, as the ops run
 * one by one do: f32 (no rounding) or f16 (widened inputs, each f32 result rounded to f16 by the
 * conversion above and widened again: the correctly rounded f16 operation, since f32 carries
 * 24 >= 2*11 + 2 bits). R_out is the truncf to f16 (or nothing). Each operation is one IEEE f32
 * operation, the same numpy's float32 loops make, so the results are the ops' own bits (for a
 * NaN with a NaN, a NaN carrying either payload, as for the single ops).
 * mode bit 0: a, e, u are f16 (else f32); bit 1: out is f16 (else f32); bit 2: the product is
 * u * s (else s * u). 0: done; 1: a mode that no chain has (f16 inputs, f32 out). */
#define TAIL_CHUNK 256

static void tail_round(float *t, ptrdiff_t m, int simd) {
    uint16_t h[TAIL_CHUNK];
    seqmm_cvt_f2h((const uint32_t *)t, h, m, simd);
    seqmm_cvt_h2f(h, (uint32_t *)t, m, simd);
}

static const float *tail_load(const void *x, ptrdiff_t i, ptrdiff_t m, int f16, float *buf,
                              int simd) {
    if (!f16) return (const float *)x + i;
    seqmm_cvt_h2f((const uint16_t *)x + i, (uint32_t *)buf, m, simd);
    return buf;
}

#if CVT_SIMD
/* The all-f16 chain 8 lanes at a time in registers: each rounding to f16 is a vcvtps2ph +
   vcvtph2ps round trip, which for the quiet NaNs that f32 operations give keeps the sign and the
   top 10 significand bits as f2h_bits + h2f_bits do; an input's signalling NaN is quieted on
   widening instead of by the first operation that reads it (the same quiet NaN). Widened and
   narrowed as binop's operands and results are. */
__attribute__((target("avx2,f16c")))
static __m256 r16_f16c(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

__attribute__((target("avx2,f16c")))
static void silu_tail_f16c(const uint16_t *a, const uint16_t *e, const uint16_t *u, uint16_t *out,
                           ptrdiff_t n, float k, int u_left) {
    const __m256 kv = _mm256_set1_ps(k);
    for (ptrdiff_t i = 0; i < n; i += 8) {
        ptrdiff_t m = n - i < 8 ? n - i : 8;
        __m256 va = widen8_f16c(a + i, m), ve = widen8_f16c(e + i, m), vu = widen8_f16c(u + i, m);
        __m256 t = r16_f16c(_mm256_add_ps(kv, ve));
        t = r16_f16c(_mm256_div_ps(va, t));
        narrow8_f16c(u_left ? _mm256_mul_ps(vu, t) : _mm256_mul_ps(t, vu), out + i, m);
    }
}
#endif

int seqmm_silu_tail(const void *a, const void *e, const void *u, void *out, ptrdiff_t n,
                    float k, int mode, int simd) {
    int f16 = mode & 1, out16 = (mode >> 1) & 1, u_left = (mode >> 2) & 1;
    if (f16 && !out16) return 1;
#if CVT_SIMD
    if (f16 && simd) {
        silu_tail_f16c((const uint16_t *)a, (const uint16_t *)e, (const uint16_t *)u,
                       (uint16_t *)out, n, k, u_left);
        return 0;
    }
#endif
    float ba[TAIL_CHUNK], be[TAIL_CHUNK], bu[TAIL_CHUNK], t[TAIL_CHUNK];
    for (ptrdiff_t i = 0; i < n; i += TAIL_CHUNK) {
        ptrdiff_t m = n - i < TAIL_CHUNK ? n - i : TAIL_CHUNK;
        const float *pa = tail_load(a, i, m, f16, ba, simd);
        const float *pe = tail_load(e, i, m, f16, be, simd);
        const float *pu = tail_load(u, i, m, f16, bu, simd);
        for (ptrdiff_t j = 0; j < m; j++) t[j] = k + pe[j];
        if (f16) tail_round(t, m, simd);
        for (ptrdiff_t j = 0; j < m; j++) t[j] = pa[j] / t[j];
        if (f16) tail_round(t, m, simd);
        if (u_left)
            for (ptrdiff_t j = 0; j < m; j++) t[j] = pu[j] * t[j];
        else
            for (ptrdiff_t j = 0; j < m; j++) t[j] = t[j] * pu[j];
        if (out16) seqmm_cvt_f2h((const uint32_t *)t, (uint16_t *)out + i, m, simd);
        else memcpy((float *)out + i, t, (size_t)m * 4);
    }
    return 0;
}
