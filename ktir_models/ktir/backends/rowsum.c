/* rowsum: f32 sums of rows in numpy's order, so that a reduction's bits stay numpy's.
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
 * length; a length outside [0, length] returns 1 before anything is written. tests/ktir/test_row_sums.py checks the bits against numpy's own reduction.
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
