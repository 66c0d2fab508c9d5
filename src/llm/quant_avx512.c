/* AVX-512 quant kernels (F/BW/VL/DQ + VNNI): float dots, the activation quantizer; the block
 * dots are the AVX2 ones (see below). */
#include <immintrin.h>
#include <string.h>

#include "llm/quant_internal.h"

/* ---- block dots -------------------------------------------------------------------------- */

/* llama.cpp's order has one 8-lane accumulator per row (cpu_order.h): a row dot is 256 bits wide by
 * definition, so the AVX-512 level runs the AVX2 kernels for single rows; the LLM runtime's
 * multi-row kernels (quant_pgemm_vnni_avx512.c) fill 512 bits with several rows instead. */
float ts__dot_q8_0_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q8_0_avx2(n, row, x, xq);
}
float ts__dot_q4_0_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q4_0_avx2(n, row, x, xq);
}
float ts__dot_q4_1_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q4_1_avx2(n, row, x, xq);
}

/* ---- float dots -------------------------------------------------------------------------- */

static inline __m512 ld_f32(const void *p, int64_t i, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}
static inline __m512 ld_f16(const void *p, int64_t i, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
}
static inline __m512 ld_bf16(const void *p, int64_t i, __mmask16 m) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

#define FLOAT_DOT(NAME, LD)                                                                  \
  float NAME(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {           \
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),    \
           a3 = _mm512_setzero_ps();                                                        \
    const __mmask16 all = 0xFFFF;                                                           \
    int64_t i = 0;                                                                          \
    for (; i + 64 <= n; i += 64) {                                                          \
      a0 = _mm512_fmadd_ps(LD(row, i, all), _mm512_loadu_ps(x + i), a0);                    \
      a1 = _mm512_fmadd_ps(LD(row, i + 16, all), _mm512_loadu_ps(x + i + 16), a1);          \
      a2 = _mm512_fmadd_ps(LD(row, i + 32, all), _mm512_loadu_ps(x + i + 32), a2);          \
      a3 = _mm512_fmadd_ps(LD(row, i + 48, all), _mm512_loadu_ps(x + i + 48), a3);          \
    }                                                                                       \
    for (; i < n; i += 16) {                                                                \
      __mmask16 m = n - i >= 16 ? all : (__mmask16)((1u << (n - i)) - 1u);                  \
      a0 = _mm512_fmadd_ps(LD(row, i, m), _mm512_maskz_loadu_ps(m, x + i), a0);             \
    }                                                                                       \
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))); \
  }

FLOAT_DOT(ts__dot_f32_avx512, ld_f32)
FLOAT_DOT(ts__dot_f16_avx512, ld_f16)
FLOAT_DOT(ts__dot_bf16_avx512, ld_bf16)

/* ---- activation -------------------------------------------------------------------------- */

void ts__act_quantize_avx512(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum, float *sx) {
  for (int64_t k = 0; k < n / 32; k++) {
    __m512 v0 = _mm512_loadu_ps(x + 32 * k), v1 = _mm512_loadu_ps(x + 32 * k + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    __m512 vid = _mm512_set1_ps(id);
    __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
    __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    _mm_storeu_si128((__m128i *)(q + 32 * k), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128((__m128i *)(q + 32 * k + 16), _mm512_cvtsepi32_epi8(i1));
    const float dk = amax / 127.0f;
    d[k] = _cvtsh_ss(_cvtss_sh(dk, 0));
    sum[k] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    sx[k] = _cvtsh_ss(_cvtss_sh(dk * (float)sum[k], 0));
  }
}
