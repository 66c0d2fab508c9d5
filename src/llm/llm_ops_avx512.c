/* AVX-512 RoPE, SwiGLU, RMSNorm and fp16 conversion in llama.cpp's order (llm_ops.c has the
 * references; tests/test_llm.c checks equality bit for bit), and the 16-lane vector exp both they
 * and attention use. */
#include <immintrin.h>
#include <math.h>

#include "llm/llm_avx512.h"
#include "llm/llm_internal.h"

/* NORM pairs (2i, 2i+1), 8 per vector: cs = [c0 s0 c1 s1 ..] is the multiplier of x_even in both
 * lanes of a pair, and x_odd times [s0 c0 ..] with the even lanes negated is the addend:
 * even lane fma(x0, c, -(x1 s)), odd lane fma(x0, s, x1 c). */
void ts__rope_avx512(float *v, const float *cs, int n_rot, int neox) {
  if (neox) {
    ts__rope_ref(v, cs, n_rot, neox);
    return;
  }
  const __m512 neg_even = _mm512_castsi512_ps(_mm512_set1_epi64((long long)0x80000000u));
  for (int i = 0; i < n_rot; i += 16) {
    const __mmask16 m = n_rot - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n_rot - i)) - 1u);
    const __m512 x = _mm512_maskz_loadu_ps(m, v + i), c = _mm512_maskz_loadu_ps(m, cs + i);
    const __m512 xe = _mm512_moveldup_ps(x), xo = _mm512_movehdup_ps(x);
    const __m512 add = _mm512_xor_ps(_mm512_mul_ps(xo, _mm512_permute_ps(c, 0xB1)), neg_even);
    _mm512_mask_storeu_ps(v + i, m, _mm512_fmadd_ps(xe, c, add));
  }
}

void ts__swiglu_avx512(int64_t n, float *g, const float *u) {
  const int64_t nv = n & ~(int64_t)15;
  for (int64_t i = 0; i < nv; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 e = ts__vexpf16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    _mm512_storeu_ps(g + i, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), _mm512_loadu_ps(u + i)));
  }
  if (nv < n) ts__swiglu_ref(n - nv, g + nv, u + nv); /* the tail: expf, as llama.cpp */
}

/* F16C's conversion rounds to nearest even, keeps a NaN's sign and top payload bits with the quiet
 * bit set, and flushes nothing (MXCSR's DAZ is off): ts_f32_to_f16's bits for every input. */
void ts__f16_avx512(int64_t n, const float *x, uint16_t *y) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(y + i, m,
                             _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

/* double lanes 0-7 and 8-15 of the squares, element j in lane j % 16 (the reference's order) */
void ts__rmsnorm_avx512(int64_t n, const float *x, const float *w, float eps, float *y) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j), sq = _mm512_mul_ps(v, v);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(sq, 1)));
  }
  const __m512d t = _mm512_add_pd(lo, hi);
  const __m256d u = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1));
  const __m128d v2 = _mm_add_pd(_mm256_castpd256_pd128(u), _mm256_extractf128_pd(u, 1)); /* u0+u2, u1+u3 */
  const double sum = _mm_cvtsd_f64(v2) + _mm_cvtsd_f64(_mm_unpackhi_pd(v2, v2));
  const float mean = (float)(sum / (double)n);
  const __m512 sc = _mm512_set1_ps(1.0f / sqrtf(mean + eps));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1u);
    _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), sc), _mm512_maskz_loadu_ps(m, w + j)));
  }
}
