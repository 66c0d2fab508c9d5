/* 8-lane helpers the convolution room's AVX2 files share (conv_winograd_cl_avx2.c,
 * conv_direct_oc_avx2.c). Included only by *_avx2.c files. */
#ifndef TS_CONV_AVX2_INL_H
#define TS_CONV_AVX2_INL_H

#include <immintrin.h>

/* r[i] lane j <- r[j] lane i: unpacks, shuffles, then 128-bit halves (24 shuffles). */
static inline __attribute__((always_inline)) void ts__conv_transpose8(__m256 *r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* The first n lanes of v to p[0..n) with plain 128-, 64- and 32-bit stores (n a compile-time
 * constant where inlined): AMD's masked stores (vmaskmovps) are microcoded and slow. */
static inline __attribute__((always_inline)) void ts__conv_store_first(float *p, __m256 v, const int n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 h = _mm256_castps256_ps128(v);
  int k = n;
  if (k >= 4) {
    _mm_storeu_ps(p, h);
    h = _mm256_extractf128_ps(v, 1), p += 4, k -= 4;
  }
  if (k >= 2) {
    _mm_storel_pi((__m64 *)p, h);
    h = _mm_movehl_ps(h, h), p += 2, k -= 2;
  }
  if (k) _mm_store_ss(p, h);
}

#endif
