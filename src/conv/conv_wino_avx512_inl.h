/* The folded linear combination (and the transform constants, conv_wino_consts.h) shared by the
 * AVX-512 Winograd schedules (conv_winograd_avx512.c: tiles in the lanes; conv_winograd_cl_avx512.c:
 * channels in the lanes). Included only by *_avx512.c files. */
#ifndef TS_CONV_WINO_AVX512_INL_H
#define TS_CONV_WINO_AVX512_INL_H

#include <immintrin.h>

#include "conv/conv_wino_consts.h" /* BT2, AT2, BT4, AT4, AM */

static inline __mmask16 lanes_below(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }

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
