/* copy16: a strided array of 2-byte elements copied into C order, cache-blocked.
 *
 * The weight copies of row_major.py (N-contiguous and blocked forms of a transposed weight) are
 * transposes: the source's unit-stride axis is not the destination's. numpy copies those one
 * element at a time along the destination's rows, each element from another cache line (0.25-0.55
 * GB/s measured on a 2-core AMD EPYC VM, ~3 GB of copies in a llama-3.2-1b decode's third pass).
 * Here the two innermost destination axes are walked in TILE x TILE tiles of whole 64-byte lines;
 * where the source runs along the destination's columns (a transpose), each tile's source lines
 * are read whole into a small buffer first and its destination lines written whole from it. The
 * strides of real weights are powers of two, so a tile's lines share cache sets: a tile that had
 * to stay resident in L1 while it is used element by element would evict itself.
 *
 * Semantics: dst[i0][i1][i2][i3] = src[i0*s0 + i1*s1 + i2*s2 + i3*s3] for the extents n0..n3,
 * strides in elements (any sign); dst is C-contiguous. A copy: the bits are the source's.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TILE 32

/* one whole TILE x TILE tile, the source running along r (s2 == 1): dst[r][c] = src[c*s3 + r] */
static void tile_transposed(const uint16_t *src, uint16_t *dst, ptrdiff_t n3, ptrdiff_t s3) {
    uint16_t buf[TILE][TILE];
    for (int c = 0; c < TILE; c++) memcpy(buf[c], src + c * s3, sizeof buf[c]);
    for (int r = 0; r < TILE; r++) {
        uint16_t *d = dst + r * n3;
        for (int c = 0; c < TILE; c++) d[c] = buf[c][r];
    }
}

static void tile_rows(const uint16_t *src, uint16_t *dst, ptrdiff_t n2, ptrdiff_t n3,
                      ptrdiff_t s2, ptrdiff_t s3) {
    if (s3 == 1) {  /* rows already contiguous: row copies */
        for (ptrdiff_t i = 0; i < n2; i++) memcpy(dst + i * n3, src + i * s2, (size_t)n3 * 2);
        return;
    }
    for (ptrdiff_t r0 = 0; r0 < n2; r0 += TILE) {
        ptrdiff_t r1 = r0 + TILE < n2 ? r0 + TILE : n2;
        for (ptrdiff_t c0 = 0; c0 < n3; c0 += TILE) {
            ptrdiff_t c1 = c0 + TILE < n3 ? c0 + TILE : n3;
            if (s2 == 1 && r1 - r0 == TILE && c1 - c0 == TILE) {
                tile_transposed(src + r0 + c0 * s3, dst + r0 * n3 + c0, n3, s3);
                continue;
            }
            for (ptrdiff_t r = r0; r < r1; r++) {
                const uint16_t *s = src + r * s2;
                uint16_t *d = dst + r * n3;
                for (ptrdiff_t c = c0; c < c1; c++) d[c] = s[c * s3];
            }
        }
    }
}

void seqmm_copy16(const uint16_t *src, uint16_t *dst, const ptrdiff_t *shape,
                  const ptrdiff_t *strides) {
    ptrdiff_t n0 = shape[0], n1 = shape[1], n2 = shape[2], n3 = shape[3];
    for (ptrdiff_t i0 = 0; i0 < n0; i0++)
        for (ptrdiff_t i1 = 0; i1 < n1; i1++)
            tile_rows(src + i0 * strides[0] + i1 * strides[1], dst + (i0 * n1 + i1) * n2 * n3,
                      n2, n3, strides[2], strides[3]);
}
