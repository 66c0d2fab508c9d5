/* The predictors' kernels at the AVX2 level (x86-64-v3): hardware POPCNT on 64-bit words, two rows
 * per pass sharing the loads of x's codes. Counts equal the reference's (integers). */
#include <immintrin.h>

#include "llm/pred_internal.h"

/* Rows of a fixed word count NW, four per pass sharing x's words in registers: the loops unroll
 * fully (a row of d 384 is 6 words: 6 xor + 6 popcnt + adds). */
#define SIGNBIT_FIXED(NW)                                                                                       \
  __attribute__((target("popcnt"))) static void signbit_##NW(const uint64_t *sw, const uint64_t *sx, int64_t n, \
                                                            int32_t *neg) {                                     \
    uint64_t x[NW];                                                                                             \
    for (int j = 0; j < NW; j++) x[j] = sx[j];                                                                  \
    int64_t i = 0;                                                                                              \
    for (; i + 4 <= n; i += 4) {                                                                                \
      const uint64_t *a = sw + (size_t)i * NW;                                                                  \
      long long c0 = 0, c1 = 0, c2 = 0, c3 = 0;                                                                 \
      for (int j = 0; j < NW; j++) {                                                                            \
        c0 += _mm_popcnt_u64(a[j] ^ x[j]);                                                                      \
        c1 += _mm_popcnt_u64(a[NW + j] ^ x[j]);                                                                 \
        c2 += _mm_popcnt_u64(a[2 * NW + j] ^ x[j]);                                                             \
        c3 += _mm_popcnt_u64(a[3 * NW + j] ^ x[j]);                                                             \
      }                                                                                                         \
      neg[i] = (int32_t)c0, neg[i + 1] = (int32_t)c1, neg[i + 2] = (int32_t)c2, neg[i + 3] = (int32_t)c3;       \
    }                                                                                                           \
    for (; i < n; i++) {                                                                                        \
      long long c = 0;                                                                                          \
      for (int j = 0; j < NW; j++) c += _mm_popcnt_u64(sw[(size_t)i * NW + j] ^ x[j]);                          \
      neg[i] = (int32_t)c;                                                                                      \
    }                                                                                                           \
  }
SIGNBIT_FIXED(4)
SIGNBIT_FIXED(6)
SIGNBIT_FIXED(8)
SIGNBIT_FIXED(9)
SIGNBIT_FIXED(12)
SIGNBIT_FIXED(16)

__attribute__((target("popcnt"))) void ts__signbit_avx2(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n,
                                                        int32_t *neg) {
  switch (nw) { /* the model shapes at hand: d 256, 384, 512, 576, 768, 1024 */
    case 4: signbit_4(sw, sx, n, neg); return;
    case 6: signbit_6(sw, sx, n, neg); return;
    case 8: signbit_8(sw, sx, n, neg); return;
    case 9: signbit_9(sw, sx, n, neg); return;
    case 12: signbit_12(sw, sx, n, neg); return;
    case 16: signbit_16(sw, sx, n, neg); return;
    default: break;
  }
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
