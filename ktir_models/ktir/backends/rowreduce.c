/* rowreduce: row sums and maxima with numpy's bits, natively.
 *
 * Row sums: f32 sums of rows in numpy's order.
 *
 * numpy sums a contiguous run of float32 values pairwise (its pairwise_sum): a run of fewer than
 * 8 values one after another; of 8 to 128 values into 8 partial sums (value i into partial
 * i % 8, the last n % 8 values left out), combined as ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)), then
 * the values left out added one after another; a longer run split into two halves (the first
 * n/2 rounded down to a multiple of 8), each summed so, and the two sums added. A reduction of a
 * C-contiguous float32 array over its last axis adds that sum to an output that starts at +0.0,
 * so a row of zeros sums to +0.0 whatever their signs. The 8 partial sums are independent lanes
 * (the compiler may run them as vectors: each lane's order is the written one).
 *
 * Semantics: out[i] = 0.0f + pairwise(x + i*stride, n_i), n_i = lengths[i] or, without lengths,
 * length; a length outside [0, length] returns 1 before anything is written. tests/ktir/test_row_reduce.py checks the bits against numpy's own reduction.
 */
#include <stddef.h>

static float pairwise(const float *a, ptrdiff_t n) {
    if (n < 8) {
        float res = 0.0f;
        for (ptrdiff_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        float r[8];
        for (int j = 0; j < 8; j++) r[j] = a[j];
        ptrdiff_t i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    ptrdiff_t half = n / 2;
    half -= half % 8;
    return pairwise(a, half) + pairwise(a + half, n - half);
}

/* 0, or 1 (nothing written) where a length lies outside [0, length] */
int seqmm_row_sums_f32(const float *x, ptrdiff_t rows, ptrdiff_t stride, const ptrdiff_t *lengths,
                       ptrdiff_t length, float *out) {
    if (lengths)
        for (ptrdiff_t i = 0; i < rows; i++)
            if (lengths[i] < 0 || lengths[i] > length) return 1;
    for (ptrdiff_t i = 0; i < rows; i++)
        out[i] = 0.0f + pairwise(x + i * stride, lengths ? lengths[i] : length);
    return 0;
}

/* Row maxima (np.maximum.reduce over the last axis) and the cases numpy alone decides.
 *
 * A maximum does not depend on the order of comparisons except for which of several equal
 * values it returns, and of values that compare equal only +0.0 and -0.0 differ in bits; NaN
 * propagates, and which NaN's bits come out is the order's. So a row's maximum is computed here
 * unless the row holds a NaN or its maximum is zero with zeros of both signs among its values:
 * then the call returns 2 and the caller asks numpy. An empty row (length 0) gives -inf, as
 * numpy's reduction of the row filled with -inf (the ragged steps' padding) does.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* f16conv.c's conversion (the same library), one value at a time: the portable path is exact */
void seqmm_cvt_h2f(const uint16_t *x, uint32_t *y, ptrdiff_t n, int simd);

static float f16_value(uint16_t h) {
    uint32_t bits;
    seqmm_cvt_h2f(&h, &bits, 1, 0);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The maximum as integer keys: an f16 (f32) bit pattern h maps to h ^ ((h >> 15) & 0x7FFF) as a
 * signed integer, which orders every non-NaN value as the float does, with -0.0 (key -1) just
 * below +0.0 (key 0). One pass takes the largest key, whether a NaN was seen and whether a -0.0
 * was: a NaN, or a largest key of +0.0 with a -0.0 seen, leaves the row to numpy. The loops have
 * no early exit, so the compiler may run them as vectors. */
#define ROW_MAX(NAME, T, S, SIGN, MAG_MASK, INF, NEGZERO, MIN_KEY, TO_FLOAT)                    \
    int NAME(const T *x, ptrdiff_t rows, ptrdiff_t stride, const ptrdiff_t *lengths,           \
             ptrdiff_t length, float *out) {                                                    \
        if (lengths)                                                                            \
            for (ptrdiff_t i = 0; i < rows; i++)                                                \
                if (lengths[i] < 0 || lengths[i] > length) return 1;                            \
        for (ptrdiff_t i = 0; i < rows; i++) {                                                  \
            const T *a = x + i * stride;                                                        \
            ptrdiff_t n = lengths ? lengths[i] : length;                                        \
            S best = MIN_KEY;                                                                   \
            T nan = 0, negzero = 0;                                                             \
            for (ptrdiff_t k = 0; k < n; k++) {                                                 \
                T h = a[k];                                                                     \
                S key = (S)(h ^ ((T)((S)h >> SIGN) & MAG_MASK));                                \
                best = key > best ? key : best;                                                 \
                nan |= (T)((h & MAG_MASK) > INF);                                               \
                negzero |= (T)(h == NEGZERO);                                                   \
            }                                                                                   \
            if (n == 0) {                                                                       \
                out[i] = -__builtin_inff();                                                     \
                continue;                                                                       \
            }                                                                                   \
            if (nan || (best == 0 && negzero)) return 2;                                        \
            out[i] = TO_FLOAT((T)((T)best ^ ((T)(best >> SIGN) & MAG_MASK)));                   \
        }                                                                                       \
        return 0;                                                                               \
    }

static float f32_value(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

ROW_MAX(seqmm_row_max_f32_bits, uint32_t, int32_t, 31, 0x7FFFFFFFu, 0x7F800000u, 0x80000000u,
        INT32_MIN, f32_value)
ROW_MAX(seqmm_row_max_f16, uint16_t, int16_t, 15, 0x7FFFu, 0x7C00u, 0x8000u, INT16_MIN, f16_value)

int seqmm_row_max_f32(const float *x, ptrdiff_t rows, ptrdiff_t stride, const ptrdiff_t *lengths,
                      ptrdiff_t length, float *out) {
    return seqmm_row_max_f32_bits((const uint32_t *)(const void *)x, rows, stride, lengths, length, out);
}
