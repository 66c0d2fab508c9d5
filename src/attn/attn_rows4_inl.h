/* The small-sub-tile Q K^T kernels' row copy (attn_kern_avx512.c, attn_kern_avx2.c: sub-tiles of
 * <= 4 rows with the head dimension in the lanes). Include only from x86 kernel files. */
#ifndef TS_ATTN_ROWS4_INL_H
#define TS_ATTN_ROWS4_INL_H

#include <stdint.h>
#include <xmmintrin.h>

/* Rows i0 .. i0+3 of a sub-tile's Q^T (qt [d][ldq], at the sub-tile's first row) into qr [4][d];
 * rows past br repeat row br - 1. Full groups of 4 rows go by 4 x 4 transposes. */
static inline __attribute__((always_inline)) void ts__attn_rows4(const float *qt, int64_t ldq, int64_t d, int i0, int br,
                                                                 float *qr) {
  int64_t y = 0;
  if (i0 + 4 <= br)
    for (; y + 4 <= d; y += 4) {
      __m128 a = _mm_loadu_ps(qt + y * ldq + i0), b = _mm_loadu_ps(qt + (y + 1) * ldq + i0);
      __m128 c = _mm_loadu_ps(qt + (y + 2) * ldq + i0), e = _mm_loadu_ps(qt + (y + 3) * ldq + i0);
      _MM_TRANSPOSE4_PS(a, b, c, e); /* a: row i0's dims y .. y+3, b: row i0 + 1's, ... */
      _mm_storeu_ps(qr + y, a), _mm_storeu_ps(qr + d + y, b), _mm_storeu_ps(qr + 2 * d + y, c), _mm_storeu_ps(qr + 3 * d + y, e);
    }
  for (int r = 0; r < 4; r++) {
    const int i = i0 + r < br ? i0 + r : br - 1;
    for (int64_t z = y; z < d; z++) qr[r * d + z] = qt[z * ldq + i];
  }
}

#endif
