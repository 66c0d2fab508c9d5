/* AVX-512 forms of cpu_order.h's exp and 16-lane sum, for the LLM room's *_avx512.c files only. */
#ifndef TS_LLM_AVX512_H
#define TS_LLM_AVX512_H

#include <immintrin.h>
#include <math.h>

/* ggml's AVX-512 exp, lane for lane equal to ts__vexpf (same operations). */
static inline __m512 ts__vexpf16(__m512 x) {
  const __m512 r = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
  const __m512 n = _mm512_sub_ps(z, r);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 res = _mm512_scalef_ps(j, n);
  if (!d) return res;
  const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ), _mm512_set1_ps(INFINITY),
                                          _mm512_setzero_ps());
  return _mm512_mask_blend_ps(d, res, alt);
}

/* cpu_order.h's sum16: (v_i + v_(i+8)), then + 4 apart, then (u0+u2) + (u1+u3). */
static inline float ts__sum16v(__m512 v) {
  const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 w = _mm_add_ps(u, _mm_movehl_ps(u, u)); /* u0+u2, u1+u3 */
  return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)));
}

/* The same tree across 16 vectors (lane k of the result = sum16 of lane k of a[0..15]);
 * destroys a. */
static inline __m512 ts__sum16x(__m512 a[16]) {
  for (int i = 0; i < 8; i++) a[i] = _mm512_add_ps(a[i], a[i + 8]);
  for (int i = 0; i < 4; i++) a[i] = _mm512_add_ps(a[i], a[i + 4]);
  return _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
}

#endif
