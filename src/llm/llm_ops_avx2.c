/* AVX2 (+FMA, F16C) RoPE, SwiGLU, RMSNorm and fp16 conversion in the order of llama.cpp's AVX2
 * build (cpu_order.h; llm_ops.c has the references; tests/test_llm.c checks equality bit for bit). */
#include <immintrin.h>
#include <math.h>

#include "llm/llm_avx2.h"
#include "llm/llm_internal.h"

/* NORM pairs (2i, 2i+1), 4 per vector (as ts__rope_avx512): even lane fma(x0, c, -(x1 s)), odd
 * lane fma(x0, s, x1 c). */
void ts__rope_avx2(float *v, const float *cs, int n_rot, int neox) {
  if (neox || n_rot % 8) {
    ts__rope_ref(v, cs, n_rot, neox);
    return;
  }
  const __m256 neg_even = _mm256_castsi256_ps(_mm256_set1_epi64x((long long)0x80000000u));
  for (int i = 0; i < n_rot; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i), c = _mm256_loadu_ps(cs + i);
    const __m256 xe = _mm256_moveldup_ps(x), xo = _mm256_movehdup_ps(x);
    const __m256 add = _mm256_xor_ps(_mm256_mul_ps(xo, _mm256_permute_ps(c, 0xB1)), neg_even);
    _mm256_storeu_ps(v + i, _mm256_fmadd_ps(xe, c, add));
  }
}

void ts__swiglu_avx2(int64_t n, float *g, const float *u) {
  const int64_t nv = n & ~(int64_t)7;
  for (int64_t i = 0; i < nv; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 e = ts__vexpf8v(_mm256_sub_ps(_mm256_setzero_ps(), x));
    _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i)));
  }
  if (nv < n) ts__swiglu_ref8(n - nv, g + nv, u + nv); /* the tail: expf, as llama.cpp */
}

/* F16C's conversion: ts_f32_to_f16's bits for every input (see ts__f16_avx512). */
void ts__f16_avx2(int64_t n, const float *x, uint16_t *y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  if (i < n) ts__f16_ref(n - i, x + i, y + i);
}

/* element j's square in double lane j % 16 (four vectors of 4 doubles: lanes 0-3, 4-7, 8-11,
 * 12-15), summed in the reference's tree */
void ts__rmsnorm_avx2(int64_t n, const float *x, const float *w, float eps, float *y) {
  if (n % 16) {
    ts__rmsnorm_ref(n, x, w, eps, y);
    return;
  }
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t j = 0; j < n; j += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + j), v1 = _mm256_loadu_ps(x + j + 8);
    const __m256 s0 = _mm256_mul_ps(v0, v0), s1 = _mm256_mul_ps(v1, v1);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(s0)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(s0, 1)));
    a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(s1)));
    a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(s1, 1)));
  }
  /* t = lanes i + (i+8): a0+a2 (t0-3), a1+a3 (t4-7); u = t_i + t_(i+4) */
  const __m256d u = _mm256_add_pd(_mm256_add_pd(a0, a2), _mm256_add_pd(a1, a3));
  const __m128d v2 = _mm_add_pd(_mm256_castpd256_pd128(u), _mm256_extractf128_pd(u, 1)); /* u0+u2, u1+u3 */
  const double sum = _mm_cvtsd_f64(v2) + _mm_cvtsd_f64(_mm_unpackhi_pd(v2, v2));
  const float mean = (float)(sum / (double)n);
  const __m256 sc = _mm256_set1_ps(1.0f / sqrtf(mean + eps));
  for (int64_t j = 0; j < n; j += 8)
    _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), sc), _mm256_loadu_ps(w + j)));
}
