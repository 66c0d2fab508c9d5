/* AVX2 (+FMA) inference of the activation predictor (pred_mlp.h): both layers are row-major
 * matrix-vector products (W1 [r][d], W2 [n][r]), done 8 rows at a time with one 8-lane fp32
 * accumulator per row (x loaded once per 8 rows), the 8 accumulators reduced together by a
 * hadd tree into one vector of 8 sums, bias added (and ReLU for the hidden layer) in vector form.
 * Columns past the last multiple of 8 go through masked loads; rows past it one at a time. */
#include <immintrin.h>

#include "llm/llm_avx2.h"
#include "llm/pred_mlp.h"

/* the 8 horizontal sums of a[0..8) as one vector */
static inline __m256 sum8x8(const __m256 a[8]) {
  const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

/* y[i] = act(dot(W[i][0..cols), x) + bias[i]) for i < rows; act = ReLU when relu. */
static void matvec(const float *W, int rows, int cols, const float *x, const float *bias, float *y, int relu) {
  const int c8 = cols & ~7, rem = cols - c8;
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 xt = _mm256_maskload_ps(x + c8, tail); /* zeros past cols */
  const __m256 zero = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= rows; i += 8) {
    const float *w = W + (size_t)i * cols;
    __m256 acc[8];
    for (int q = 0; q < 8; q++) acc[q] = zero;
    for (int k = 0; k < c8; k += 8) {
      const __m256 xv = _mm256_loadu_ps(x + k);
      for (int q = 0; q < 8; q++) acc[q] = _mm256_fmadd_ps(_mm256_loadu_ps(w + (size_t)q * cols + k), xv, acc[q]);
    }
    if (rem)
      for (int q = 0; q < 8; q++) acc[q] = _mm256_fmadd_ps(_mm256_maskload_ps(w + (size_t)q * cols + c8, tail), xt, acc[q]);
    __m256 v = _mm256_add_ps(sum8x8(acc), _mm256_loadu_ps(bias + i));
    if (relu) v = _mm256_max_ps(v, zero);
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < rows; i++) {
    const float *w = W + (size_t)i * cols;
    __m256 acc = zero;
    for (int k = 0; k < c8; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), acc);
    if (rem) acc = _mm256_fmadd_ps(_mm256_maskload_ps(w + c8, tail), xt, acc);
    const float v = ts__hsum8v(acc) + bias[i];
    y[i] = relu && !(v > 0) ? 0.0f : v;
  }
}

void ts__pmlp_logits_avx2(const ts__pmlp *p, const float *x, float *logits, float *scratch) {
  matvec(p->w1, p->r, p->d, x, p->b1, scratch, 1);
  matvec(p->w2, p->n, p->r, scratch, p->b2, logits, 0);
}
