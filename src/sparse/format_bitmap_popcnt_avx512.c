/* Popcount of a word array with AVX-512 VPOPCNTDQ (8 words per instruction); the tail is a
 * masked load, so no word past n is read. Reference: ts_popcount_words_ref (format_bitmap.c). */
#include <immintrin.h>

#include "format_internal.h"

int64_t ts__popcount_words_avx512(const uint64_t *w, int64_t n) {
  __m512i acc = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(_mm512_loadu_si512((const void *)(w + i))));
  if (i < n) {
    __mmask8 m = (__mmask8)((1u << (n - i)) - 1u);
    acc = _mm512_add_epi64(acc, _mm512_popcnt_epi64(_mm512_maskz_loadu_epi64(m, w + i)));
  }
  return _mm512_reduce_add_epi64(acc);
}
