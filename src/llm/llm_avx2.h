/* AVX2 forms of cpu_order.h's AVX2-build exp and 8-lane sums, for the LLM room's *_avx2.c files
 * only. */
#ifndef TS_LLM_AVX2_H
#define TS_LLM_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* ggml's AVX2 exp, lane for lane equal to ts__vexpf8 (same operations). */
static inline __m256 ts__vexpf8v(__m256 x) {
  const __m256 r = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
  const __m256 n = _mm256_sub_ps(z, r);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
  const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  if (!_mm256_movemask_ps(c)) return _mm256_fmadd_ps(j, k, k);
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32((int)0x82000000u));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 d = _mm256_cmp_ps(an, _mm256_set1_ps(192), _CMP_GT_OQ);
  const __m256 mid = _mm256_blendv_ps(_mm256_fmadd_ps(k, j, k), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1), c);
  return _mm256_blendv_ps(mid, _mm256_mul_ps(s1, s1), d);
}

/* cpu_order.h's hsum8: t_i = v_i + v_(i+4); (t0+t2) + (t1+t3). */
static inline float ts__hsum8v(__m256 v) {
  const __m128 t = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  const __m128 w = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)));
}

/* cpu_order.h's hadd8: t_i = v_i + v_(i+4); (t0+t1) + (t2+t3). */
static inline float ts__hadd8v(__m256 v) {
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(h, h));
}

/* 8 fp16 values to fp32 */
static inline __m256 ts__ld8h(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* byte j = 0xFF where bit j of the 32-bit x is set */
static inline __m256i ts__bits_to_bytes(uint32_t x) {
  const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL);
  const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

/* A Q5_0 block's 32 unsigned values (0..31, byte j = element j) from its 16 nibble bytes qs and its
 * fifth bits qh (the little-endian 32-bit word): the Q5_0 row dot's (quant_k_avx2.c) and the
 * indexed row dot's (sparse_kern_avx2.c) one unpacking. */
static inline __m256i ts__q5_0_u8(const uint8_t *qs, uint32_t qh) {
  const __m128i a = _mm_loadu_si128((const __m128i *)qs);
  const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(a, 4), a), _mm256_set1_epi8(0x0F));
  return _mm256_or_si256(u, _mm256_and_si256(ts__bits_to_bytes(qh), _mm256_set1_epi8(16)));
}

#endif
