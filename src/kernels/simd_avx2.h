/* AVX2 helpers for every room (ts__ names), and the 8-lane fp32 vector layer (AVX2 + FMA) with the
 * same names and semantics as simd_avx512.h; see there. Only for files compiled with the AVX2
 * flags (*_avx2.c). */
#ifndef TS_SIMD_AVX2_H
#define TS_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* ---- shared helpers ------------------------------------------------------------------------ */

/* The first n of 8 lanes all ones, the rest zero (none for n <= 0, all for n >= 8), as
 * maskload / maskstore / blendv want it. */
static inline __attribute__((always_inline)) __m256i ts__mask8(int64_t n) {
  const int c = n > 8 ? 8 : n < 0 ? 0 : (int)n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---- vf_ layer ----------------------------------------------------------------------------- */

#define VL 8
#define VSFX avx2
typedef __m256 vf;
typedef __m256 vmask; /* all-ones / all-zeros lanes */

static inline vf vf_set1(float a) { return _mm256_set1_ps(a); }
static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_storeu(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline __m256i vf__head(int cnt) { return ts__mask8(cnt); }
/* first cnt lanes from p, the others `fill` (maskload does not touch masked-off memory) */
static inline vf vf_load_part(const float *p, int cnt, float fill) {
  __m256i m = vf__head(cnt);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void vf_store_part(float *p, vf v, int cnt) { _mm256_maskstore_ps(p, vf__head(cnt), v); }

static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vf_fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vf_fnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vf_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf vf_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf vf_copysign(vf a, vf s) {
  const vf sign = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, s));
}
static inline vf vf_round(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* p * 2^n for integer-valued n in [-252, 254]: two steps of 2^(n/2) keep each factor a normal
 * float, so results overflow to inf and underflow gradually exactly like scalef. */
static inline vf vf_ldexp(vf p, vf n) {
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i h1 = _mm256_srai_epi32(ni, 1), h2 = _mm256_sub_epi32(ni, h1);
  const __m256i bias = _mm256_set1_epi32(127);
  vf s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h1, bias), 23));
  vf s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static inline vmask vf_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vmask vf_ge(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
static inline vf vf_select(vmask m, vf a, vf b) { return _mm256_blendv_ps(b, a, m); }

static inline float vf_hsum(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
static inline float vf_hmax(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#endif
