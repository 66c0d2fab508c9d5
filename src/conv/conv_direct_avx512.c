/* AVX-512 instantiation of the depthwise kernel (conv_direct_tmpl.h): 16 lanes. The direct
 * algorithm's AVX-512 kernel puts output channels in the lanes instead (conv_direct_oc_avx512.c). */
#include <immintrin.h>

#define VEC __m512
#define VW 16
#define VZERO() _mm512_setzero_ps()
#define VLOADU(p) _mm512_loadu_ps(p)
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VRELU(v) _mm512_max_ps(_mm512_setzero_ps(), v) /* returns v when v is NaN */
#define VSTORE_N(p, v, n) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (n)) - 1u), v)
#define VLOAD_N(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), p)
#define FN(name) name##_avx512_impl

#include "conv/conv_direct_tmpl.h"

void ts__conv_dw_rows_avx512(const ts__conv_direct_args *a, int p0, int p1) {
  ts__conv_dw_rows_avx512_impl(a, p0, p1);
}
