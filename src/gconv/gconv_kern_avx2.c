/* AVX2 + FMA partition kernel, the same contract as the AVX-512 one (64-column tiles, rows in
 * near-equal blocks of <= 6). With 16 ymm registers a 6-row block covers 16 columns at a time
 * (6 x 2 accumulators + 2 B vectors + 1 broadcast = 15 registers), so a 64-column tile is four
 * 16-column passes over the same B rows (L1-resident: KC rows x 64 B per pass). */
#include <immintrin.h>

#include "gconv/gconv_internal.h"
#include "kernels/simd_avx2.h" /* ts__mask8 */

#define ALWAYS_INLINE static inline __attribute__((always_inline))


/* mr rows x 16 columns at column j; m0/m1 the valid lanes of the two 8-column halves. */
ALWAYS_INLINE void ukr(const int mr, int64_t kc, const float *w, const float *b, const int32_t *off, float *const *c,
                       int64_t j, __m256i m0, __m256i m1, int acc) {
  __m256 a0[TS_GCONV_MR], a1[TS_GCONV_MR];
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    a0[r] = acc ? _mm256_maskload_ps(c[r] + j, m0) : _mm256_setzero_ps();
    a1[r] = acc ? _mm256_maskload_ps(c[r] + j + 8, m1) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; k++) {
    const float *bk = b + off[k] + j;
    __m256 b0 = _mm256_maskload_ps(bk, m0), b1 = _mm256_maskload_ps(bk + 8, m1);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m256 x = _mm256_broadcast_ss(w + k * mr + r);
      a0[r] = _mm256_fmadd_ps(x, b0, a0[r]);
      a1[r] = _mm256_fmadd_ps(x, b1, a1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    _mm256_maskstore_ps(c[r] + j, m0, a0[r]);
    _mm256_maskstore_ps(c[r] + j + 8, m1, a1[r]);
  }
}

static void block(int mr, int64_t kc, const float *w, const float *b, const int32_t *off, float *const *c, int64_t j,
                  __m256i m0, __m256i m1, int acc) {
  switch (mr) {
    case 6: ukr(6, kc, w, b, off, c, j, m0, m1, acc); break;
    case 5: ukr(5, kc, w, b, off, c, j, m0, m1, acc); break;
    case 4: ukr(4, kc, w, b, off, c, j, m0, m1, acc); break;
    case 3: ukr(3, kc, w, b, off, c, j, m0, m1, acc); break;
    case 2: ukr(2, kc, w, b, off, c, j, m0, m1, acc); break;
    default: ukr(1, kc, w, b, off, c, j, m0, m1, acc); break;
  }
}

void ts__gconv_kern_avx2(int rows, int64_t K, const float *wp, const float *b, const int32_t *off, float *const *c,
                         int64_t j0, int64_t j1) {
  const int nb = (rows + TS_GCONV_MR - 1) / TS_GCONV_MR, base = nb ? rows / nb : 0, extra = nb ? rows % nb : 0;
  for (int64_t t = j0; t < j1; t += TS_GCONV_NR) {
    const int64_t t1 = j1 - t < TS_GCONV_NR ? j1 : t + TS_GCONV_NR;
    for (int64_t k0 = 0; k0 < K || (K == 0 && k0 == 0); k0 += TS_GCONV_KC) {
      const int64_t kc = K - k0 < TS_GCONV_KC ? K - k0 : TS_GCONV_KC;
      for (int64_t j = t; j < t1; j += 16) {
        const int width = t1 - j < 16 ? (int)(t1 - j) : 16;
        const __m256i m0 = ts__mask8(width), m1 = ts__mask8(width - 8);
        int r0 = 0;
        for (int bi = 0; bi < nb; bi++) {
          const int mb = base + (bi < extra);
          block(mb, kc, wp + (int64_t)r0 * K + k0 * mb, b, off + k0, c + r0, j, m0, m1, k0 > 0);
          r0 += mb;
        }
      }
      if (K == 0) break;
    }
  }
}
