/* Small AVX-512 helpers shared by the convolution kernels (included only by *_avx512.c files). */
#ifndef TS_CONV_AVX512_INL_H
#define TS_CONV_AVX512_INL_H

#include <immintrin.h>

/* r[i] lane j -> r[j] lane i. After the first two steps r[4 g + c] holds, in its 128-bit lane L,
 * rows 4 g .. 4 g + 3 of column 4 L + c; the last two gather the four lanes L of the groups. */
static inline void ts__transpose16(__m512 *r) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int c = 0; c < 4; c++) {
    const __m512 x = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), x2 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    const __m512 y = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), y2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    t[c] = _mm512_shuffle_f32x4(x, y, 0x88), t[8 + c] = _mm512_shuffle_f32x4(x, y, 0xDD);
    t[4 + c] = _mm512_shuffle_f32x4(x2, y2, 0x88), t[12 + c] = _mm512_shuffle_f32x4(x2, y2, 0xDD);
  }
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

#endif
