/* AVX2 instantiation of the depthwise kernel (conv_direct_tmpl.h): 8 lanes. The direct
 * algorithm's AVX2 kernel puts output channels in the lanes instead (conv_direct_oc_avx2.c): on
 * this template's 4 channels x 2 column vectors it ran 1.3-3x slower (3x3 layers of ResNet and
 * VGG16, one thread, 2026-12-07, AMD EPYC Zen 3 with 512 KiB L2), every input value loaded for 4
 * output channels instead of 16. */
#include <immintrin.h>

#define VEC __m256
#define VW 8
#define VZERO() _mm256_setzero_ps()
#define VLOADU(p) _mm256_loadu_ps(p)
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VRELU(v) _mm256_max_ps(_mm256_setzero_ps(), v) /* returns v when v is NaN */
/* first n lanes: a sliding window over {-1 x 8, 0 x 8} */
static const int mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
#define VSTORE_N(p, v, n) _mm256_maskstore_ps(p, _mm256_loadu_si256((const __m256i *)(mask_table + 8 - (n))), v)
#define FN(name) name##_avx2_impl

#include "conv/conv_direct_tmpl.h"

void ts__conv_dw_rows_avx2(const ts__conv_direct_args *a, int p0, int p1) {
  ts__conv_dw_rows_avx2_impl(a, p0, p1);
}
