/* AVX2 quant kernels: one 32-element block per 256-bit vector, in llama.cpp's order (the 8 lanes
 * of cpu_order.h; equal to the reference bit for bit). Integer lane sums use maddubs (u8 x s8 ->
 * s16 pairs) + madd (-> s32), which cannot saturate here: Q4 nibbles are <= 15 (2 * 15 * 127 <
 * 32767), and Q8_0 uses |w| x sign(x, w) (2 * 128 * 127 = 32512 < 32767; activations are never
 * -128). */
#include <immintrin.h>
#include <string.h>

#include "llm/quant_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The 8 int32 lanes of one block: lane g = exact sum of elements 4g..4g+3 of u x s (maddubs pairs,
 * madd pairs of pairs). */
static inline __m256 lanes(__m256i u, __m256i s) {
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

/* Q4_0's (q - 8) x: maddubs(8, x) is taken off in int16 (|pair sums| <= 2032): still exact. */
static inline __m256 lanes_q4_0(__m256i u, __m256i s) {
  __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(_mm256_set1_epi8(8), s));
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/* [lo nibbles | hi nibbles] = elements 0..31 of a 4-bit block in order */
static inline __m256i nib_one(const uint8_t *qa) {
  __m128i a = _mm_loadu_si128((const __m128i *)qa);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(a, 4), a), _mm256_set1_epi8(0x0F));
}

static inline __m256i ld_act(const ts_quant_act *xq, int64_t k) { return _mm256_loadu_si256((const __m256i *)(xq->q + 32 * k)); }

/* llama.cpp's order (cpu_order.h): one accumulator, one fma per block, hsum8 (= hsum256's tree). */
float ts__dot_q8_0_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q8_0 *b = row;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / 32; k++) {
    __m256i w = _mm256_loadu_si256((const __m256i *)b[k].q);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[k].d) * xq->d[k]), lanes(_mm256_abs_epi8(w), _mm256_sign_epi8(ld_act(xq, k), w)), acc);
  }
  return hsum256(acc);
}

float ts__dot_q4_0_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q4_0 *b = row;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / 32; k++)
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[k].d) * xq->d[k]), lanes_q4_0(nib_one(b[k].qs), ld_act(xq, k)), acc);
  return hsum256(acc);
}

float ts__dot_q4_1_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q4_1 *b = row;
  __m256 acc = _mm256_setzero_ps();
  float summs = 0; /* m_w s_x is exact in fp32: added block after block */
  for (int64_t k = 0; k < n / 32; k++) {
    summs += h2f(b[k].m) * xq->s[k];
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[k].d) * xq->d[k]), lanes(nib_one(b[k].qs), ld_act(xq, k)), acc);
  }
  return hsum256(acc) + summs;
}

/* ---- float dots (8 lanes, 4 accumulators, scalar tail) ---------------------------------- */

static inline __m256 ld_f32(const void *p, int64_t i) { return _mm256_loadu_ps((const float *)p + i); }
static inline __m256 ld_f16(const void *p, int64_t i) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
static inline __m256 ld_bf16(const void *p, int64_t i) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
static inline float sc_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
static inline float sc_f16(const void *p, int64_t i) {
  uint16_t h;
  memcpy(&h, (const uint16_t *)p + i, 2);
  return h2f(h);
}
static inline float sc_bf16(const void *p, int64_t i) {
  uint16_t h;
  memcpy(&h, (const uint16_t *)p + i, 2);
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#define FLOAT_DOT(NAME, LD, SC)                                                                  \
  float NAME(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {               \
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),        \
           a3 = _mm256_setzero_ps();                                                            \
    int64_t i = 0;                                                                              \
    for (; i + 32 <= n; i += 32) {                                                              \
      a0 = _mm256_fmadd_ps(LD(row, i), _mm256_loadu_ps(x + i), a0);                             \
      a1 = _mm256_fmadd_ps(LD(row, i + 8), _mm256_loadu_ps(x + i + 8), a1);                     \
      a2 = _mm256_fmadd_ps(LD(row, i + 16), _mm256_loadu_ps(x + i + 16), a2);                   \
      a3 = _mm256_fmadd_ps(LD(row, i + 24), _mm256_loadu_ps(x + i + 24), a3);                   \
    }                                                                                           \
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(LD(row, i), _mm256_loadu_ps(x + i), a0);    \
    float t = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));             \
    for (; i < n; i++) t += SC(row, i) * x[i];                                                  \
    return t;                                                                                   \
  }

FLOAT_DOT(ts__dot_f32_avx2, ld_f32, sc_f32)
FLOAT_DOT(ts__dot_f16_avx2, ld_f16, sc_f16)
FLOAT_DOT(ts__dot_bf16_avx2, ld_bf16, sc_bf16)

/* ---- activation: same fp32 multiply and cvtps2dq (nearest even) as the reference ---------- */

void ts__act_quantize_avx2(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum, float *sx) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t k = 0; k < n / 32; k++) {
    const float *xb = x + 32 * k;
    __m256 v[4], m = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      m = _mm256_max_ps(m, _mm256_and_ps(v[j], absmask));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float amax = _mm_cvtss_f32(h);
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v[0], vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v[1], vid));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v[2], vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v[3], vid));
    /* packs work per 128-bit lane: the permute restores element order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(q + 32 * k), p);
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    const float dk = amax / 127.0f;
    d[k] = _cvtsh_ss(_cvtss_sh(dk, 0));
    sum[k] = _mm_cvtsi128_si32(s4);
    sx[k] = _cvtsh_ss(_cvtss_sh(dk * (float)sum[k], 0));
  }
}
