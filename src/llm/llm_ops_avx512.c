/* AVX-512 RoPE and SwiGLU in llama.cpp's order (llm_ops.c has the references; tests/test_llm.c
 * checks equality bit for bit), and the 16-lane vector exp both they and attention use. */
#include <immintrin.h>

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
