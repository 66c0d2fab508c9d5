/* AVX2 (+FMA, F16C) AXPY over selected rows of a transposed Q8_0 / Q4_1 copy (sparse_internal.h):
 * four input rows per pass over the output blocks, so that y is loaded and stored once per four
 * rows; each block's 32 weights widened to fp32 and multiplied in with the row's coefficient times
 * the block scale (Q4_1: plus the four rows' c m, summed once per block). */
#include <immintrin.h>
#include <string.h>

#include "llm/quant_internal.h"
#include "llm/sparse_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* 32 weights of a Q4_1 block as 4 x 8 fp32 (nibble values 0..15) */
static inline void q4_1_w(const ts__blk_q4_1 *b, __m256 w[4]) {
  const __m128i v = _mm_loadu_si128((const __m128i *)b->qs), m = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  w[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  w[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
}
static inline void q8_0_w(const ts__blk_q8_0 *b, __m256 w[4]) {
  for (int g = 0; g < 4; g++)
    w[g] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->q + 8 * g))));
}

/* (c d, c m) of a Q4_1 block for coefficient c: the block's two fp16 scales converted at once */
static inline __m128 q4_1_cdm(const ts__blk_q4_1 *b, __m128 c) {
  uint32_t dm;
  memcpy(&dm, &b->d, 4);
  return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dm)), c);
}

/* Four input rows per pass over the output blocks, in two accumulator sets (rows 0, 2 and 1, 3),
 * so that no block waits on a chain of four dependent FMAs; the rows' c m summed in a vector and
 * added once per block. */
void ts__axpy_q4_1_avx2(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n,
                        float *y) {
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const ts__blk_q4_1 *r[4];
    __m128 cv[4];
    for (int u = 0; u < 4; u++) r[u] = (const ts__blk_q4_1 *)(base + (size_t)idx[k + u] * stride), cv[u] = _mm_set1_ps(c[k + u]);
    for (int64_t j = 0; j < nblk; j++) {
      __m256 a[4], b[4], w[4];
      for (int g = 0; g < 4; g++) a[g] = _mm256_loadu_ps(y + 32 * j + 8 * g), b[g] = _mm256_setzero_ps();
      const __m128 s0 = q4_1_cdm(r[0] + j, cv[0]), s1 = q4_1_cdm(r[1] + j, cv[1]);
      const __m128 s2 = q4_1_cdm(r[2] + j, cv[2]), s3 = q4_1_cdm(r[3] + j, cv[3]);
      q4_1_w(r[0] + j, w);
      __m256 cd = _mm256_broadcastss_ps(s0);
      for (int g = 0; g < 4; g++) a[g] = _mm256_fmadd_ps(cd, w[g], a[g]);
      q4_1_w(r[1] + j, w);
      cd = _mm256_broadcastss_ps(s1);
      for (int g = 0; g < 4; g++) b[g] = _mm256_fmadd_ps(cd, w[g], b[g]);
      q4_1_w(r[2] + j, w);
      cd = _mm256_broadcastss_ps(s2);
      for (int g = 0; g < 4; g++) a[g] = _mm256_fmadd_ps(cd, w[g], a[g]);
      q4_1_w(r[3] + j, w);
      cd = _mm256_broadcastss_ps(s3);
      for (int g = 0; g < 4; g++) b[g] = _mm256_fmadd_ps(cd, w[g], b[g]);
      const __m128 sm = _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)); /* lane 1: sum of c m */
      const __m256 vb = _mm256_broadcastss_ps(_mm_movehdup_ps(sm));
      for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 32 * j + 8 * g, _mm256_add_ps(_mm256_add_ps(a[g], b[g]), vb));
    }
  }
  if (k < n) ts__axpy_q4_1_ref(base, stride, nblk, idx + k, c + k, n - k, y);
}

void ts__axpy_q8_0_avx2(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n,
                        float *y) {
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const ts__blk_q8_0 *r[4];
    for (int u = 0; u < 4; u++) r[u] = (const ts__blk_q8_0 *)(base + (size_t)idx[k + u] * stride);
    for (int64_t j = 0; j < nblk; j++) {
      __m256 a[4], w[4];
      for (int g = 0; g < 4; g++) a[g] = _mm256_loadu_ps(y + 32 * j + 8 * g);
      for (int u = 0; u < 4; u++) {
        const ts__blk_q8_0 *b = r[u] + j;
        const __m256 cd = _mm256_set1_ps(c[k + u] * h2f(b->d));
        q8_0_w(b, w);
        for (int g = 0; g < 4; g++) a[g] = _mm256_fmadd_ps(cd, w[g], a[g]);
      }
      for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 32 * j + 8 * g, a[g]);
    }
  }
  if (k < n) ts__axpy_q8_0_ref(base, stride, nblk, idx + k, c + k, n - k, y);
}
