/* Winograd F(2,3) / F(4,3) transform constants and the folded linear combination shared by the
 * AVX-512 Winograd schedules (conv_winograd_avx512.c: tiles in the lanes; conv_winograd_cl_avx512.c:
 * channels in the lanes). Included only by *_avx512.c files. */
#ifndef TS_CONV_WINO_AVX512_INL_H
#define TS_CONV_WINO_AVX512_INL_H

#include <immintrin.h>

enum { AM = 6 }; /* largest tile side; also the leading dimension of ts__wino_geom's BT / AT */

static inline __mmask16 lanes_below(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }

/* The transform matrices of conv_winograd.c's points (F(2,3): 0, 1, -1; F(4,3): 0, 1, -1, 1/2,
 * -2) as compile-time constants, so that the unrolled transforms below fold every coefficient:
 * zero terms vanish and +-1 become adds. ts__wino_setup_avx512 checks they equal the plan's. */
static const float BT2[AM][AM] = {{-1, 0, 1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, -1, 0, 1}};
static const float AT2[4][AM] = {{1, 1, 1, 0}, {0, 1, -1, 1}};
static const float BT4[AM][AM] = {{1, -1.5f, -2, 1.5f, 1, 0},  {0, -1, 0.5f, 2.5f, 1, 0},
                                  {0, 1, -2.5f, 0.5f, 1, 0},   {0, -2, -1, 2, 1, 0},
                                  {0, 0.5f, -1, -0.5f, 1, 0},  {0, 1, -1.5f, -2, 1.5f, 1}};
static const float AT4[4][AM] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 0.5f, -2, 0}, {0, 1, 1, 0.25f, 4, 0}, {0, 1, -1, 0.125f, -8, 1}};

/* s = sum_l c[l] * v[l] (c a row of the constant matrices: folded at compile time). */
static inline __attribute__((always_inline)) __m512 comb(const float *c, const __m512 *v, const int n) {
  __m512 s = _mm512_setzero_ps();
  int first = 1;
#pragma GCC unroll 6
  for (int l = 0; l < n; l++) {
    if (c[l] == 0.0f) continue;
    if (first) s = c[l] == 1.0f ? v[l] : c[l] == -1.0f ? _mm512_sub_ps(_mm512_setzero_ps(), v[l]) : _mm512_mul_ps(_mm512_set1_ps(c[l]), v[l]);
    else s = c[l] == 1.0f ? _mm512_add_ps(s, v[l]) : c[l] == -1.0f ? _mm512_sub_ps(s, v[l]) : _mm512_fmadd_ps(_mm512_set1_ps(c[l]), v[l], s);
    first = 0;
  }
  return s;
}

#endif
