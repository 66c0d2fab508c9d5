/* The predictors' kernels with AVX-512 VPOPCNTDQ: 8 words per VPOPCNTQ, lanes summed per row at the
 * end; a masked load covers a row's last words. Counts equal the reference's (integers).
 * Not run on the machines this was written on (2026-12-07: AMD EPYC Zen 3 class, no AVX-512); the
 * tests check it against the reference wherever the CPU has VPOPCNTDQ. */
#include <immintrin.h>

#include "llm/pred_internal.h"

static inline __m512i ld(const uint64_t *p, int j, int nw) {
  const int left = nw - j;
  const __mmask8 m = left >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << left) - 1);
  return _mm512_maskz_loadu_epi64(m, p + j);
}

void ts__signbit_popcnt_avx512(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n, int32_t *neg) {
  for (int64_t i = 0; i < n; i++) {
    const uint64_t *w = sw + (size_t)i * (size_t)nw;
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < nw; j += 8)
      acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(_mm512_xor_si512(ld(w, j, nw), ld(sx, j, nw))));
    neg[i] = (int32_t)_mm512_reduce_add_epi64(acc);
  }
}

void ts__grasp_popcnt_avx512(const uint64_t *sw, const uint64_t *bw, int nw, const ts__pred_x *px, int64_t n,
                             const float *u0, const float *u1, float *est) {
  for (int64_t i = 0; i < n; i++) {
    const uint64_t *w = sw + (size_t)i * (size_t)nw, *b = bw + (size_t)i * (size_t)nw;
    __m512i a[TS__PRED_G], c[TS__PRED_G], e[TS__PRED_G];
    for (int g = 0; g < TS__PRED_G; g++) a[g] = c[g] = e[g] = _mm512_setzero_si512();
    for (int j = 0; j < nw; j += 8) {
      const __m512i D = _mm512_xor_si512(ld(w, j, nw), ld(px->sx, j, nw)), B = ld(b, j, nw);
      for (int g = 0; g < TS__PRED_G; g++) {
        const __m512i G = ld(px->gm[g], j, nw), GB = _mm512_and_si512(G, B);
        a[g] = _mm512_add_epi64(a[g], _mm512_popcnt_epi64(_mm512_and_si512(G, D)));
        c[g] = _mm512_add_epi64(c[g], _mm512_popcnt_epi64(GB));
        e[g] = _mm512_add_epi64(e[g], _mm512_popcnt_epi64(_mm512_and_si512(GB, D)));
      }
    }
    int32_t c1[TS__PRED_G], c2[TS__PRED_G], c3[TS__PRED_G];
    for (int g = 0; g < TS__PRED_G; g++) {
      c1[g] = (int32_t)_mm512_reduce_add_epi64(a[g]);
      c2[g] = (int32_t)_mm512_reduce_add_epi64(c[g]);
      c3[g] = (int32_t)_mm512_reduce_add_epi64(e[g]);
    }
    est[i] = ts__grasp_combine(px, u0[i], u1[i], c1, c2, c3);
  }
}
