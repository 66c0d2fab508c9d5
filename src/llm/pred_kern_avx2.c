/* The predictors' kernels at the AVX2 level (x86-64-v3): hardware POPCNT on 64-bit words, two rows
 * per pass sharing the loads of x's codes. Counts equal the reference's (integers). */
#include <immintrin.h>

#include "llm/pred_internal.h"

__attribute__((target("popcnt"))) void ts__signbit_avx2(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n,
                                                        int32_t *neg) {
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const uint64_t *a = sw + (size_t)i * (size_t)nw, *b = a + nw;
    long long c0 = 0, c1 = 0;
    for (int j = 0; j < nw; j++) {
      c0 += _mm_popcnt_u64(a[j] ^ sx[j]);
      c1 += _mm_popcnt_u64(b[j] ^ sx[j]);
    }
    neg[i] = (int32_t)c0, neg[i + 1] = (int32_t)c1;
  }
  for (; i < n; i++) {
    const uint64_t *a = sw + (size_t)i * (size_t)nw;
    long long c0 = 0;
    for (int j = 0; j < nw; j++) c0 += _mm_popcnt_u64(a[j] ^ sx[j]);
    neg[i] = (int32_t)c0;
  }
}

__attribute__((target("popcnt"))) void ts__grasp_avx2(const uint64_t *sw, const uint64_t *bw, int nw,
                                                      const ts__pred_x *px, int64_t n, const float *u0,
                                                      const float *u1, float *est) {
  for (int64_t i = 0; i < n; i++) {
    const uint64_t *w = sw + (size_t)i * (size_t)nw, *b = bw + (size_t)i * (size_t)nw;
    long long a1 = 0, a2 = 0, a3 = 0, b1 = 0, b2 = 0, b3 = 0, d1 = 0, d2 = 0, d3 = 0;
    for (int j = 0; j < nw; j++) {
      const uint64_t D = w[j] ^ px->sx[j], B = b[j];
      const uint64_t g0 = px->gm[0][j], g1 = px->gm[1][j], g2 = px->gm[2][j];
      a1 += _mm_popcnt_u64(g0 & D), b1 += _mm_popcnt_u64(g0 & B), d1 += _mm_popcnt_u64(g0 & B & D);
      a2 += _mm_popcnt_u64(g1 & D), b2 += _mm_popcnt_u64(g1 & B), d2 += _mm_popcnt_u64(g1 & B & D);
      a3 += _mm_popcnt_u64(g2 & D), b3 += _mm_popcnt_u64(g2 & B), d3 += _mm_popcnt_u64(g2 & B & D);
    }
    const int32_t c1[TS__PRED_G] = {(int32_t)a1, (int32_t)a2, (int32_t)a3};
    const int32_t c2[TS__PRED_G] = {(int32_t)b1, (int32_t)b2, (int32_t)b3};
    const int32_t c3[TS__PRED_G] = {(int32_t)d1, (int32_t)d2, (int32_t)d3};
    est[i] = ts__grasp_combine(px, u0[i], u1[i], c1, c2, c3);
  }
}
