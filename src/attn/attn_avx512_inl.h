/* Inline helpers shared by the AVX-512 attention kernel files (attn_kern_avx512.c,
 * attn_kern_bf16_avx512.c, attn_kern_diag_avx512.c); include only from files compiled with the
 * AVX-512 flags. Helpers other rooms use too live in kernels/simd_avx512.h. */
#ifndef TS_ATTN_AVX512_INL_H
#define TS_ATTN_AVX512_INL_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn/attn_internal.h"
#include "kernels/simd_avx512.h" /* ts__mask16, ts__transpose16 */

#define UNROLL _Pragma("GCC unroll 16")

/* Pins a vector to a register: GCC otherwise folds a load that several FMAs share into each of them
 * (one K row of the DIAG kernels' Q K^T blocks read 2-4 times, a V row of their P V runs, or of the
 * P V kernels' 2- and 3-row blocks, up to 4 times), and the loads, not the FMAs, then bound the loop
 * (per allowed cell, window2d k = 7 in L1: DIAG Q K^T 1.13 -> 0.97 ns, P V 0.66 -> 0.58 ns, one
 * thread). */
#define PIN(x) __asm__("" : "+v"(x))

/* 2^x for x in about [-151, 128]: x = n + f, |f| <= 1/2, 2^f by its degree-7 Taylor polynomial in
 * f ln 2 (truncation < 1e-9 relative), then scaled by 2^n (vscalefps: exact, underflows to 0). */
static inline __attribute__((always_inline)) __m512 exp2_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-151.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(128.0f));
  __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.525273380405984e-05f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530393381606e-04f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618129107628477e-03f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550410866482158e-02f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402265069591007e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471805599453e-01f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* Online-softmax update for one sub-tile (contract: ts__attn_kern.softmax). pp == NULL: P^T
 * overwrites st in fp32. pp != NULL (bf16 dot path): P goes to pp [ceil(bc/2)][lds] as bf16 pairs,
 * dword (pair p, row i) = (P[i][2p], P[i][2p+1]) in the (low, high) halves, zero past bc; st is
 * left as scores. The running sum l always adds the fp32 P. */
static inline __attribute__((always_inline)) void softmax_impl(float *st, int64_t lds, int bc, int br,
                                                               const uint16_t *mask, float c, float *m, float *l,
                                                               float *alpha, uint32_t *pp) {
  const int nv = (br + 15) / 16;
  const __m512 vc = _mm512_set1_ps(c), ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
#ifdef __AVX512BF16__ /* the bf16 pairs only where built with BF16 (attn_kern_bf16_avx512.c; CMakeLists.txt) */
  const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
#else
  (void)pp; /* NULL in files built without BF16 */
#endif
  for (int v = 0; v < nv; v++) {
    const __mmask16 lm = ts__mask16(br - 16 * v);
    const uint16_t *mk = mask ? mask + v : NULL;
    float *s = st + 16 * v;
    __m512 mt0 = ninf, mt1 = ninf;
    int j = 0;
    for (; j + 1 < bc; j += 2) {
      __m512 x0 = _mm512_loadu_ps(s + j * lds), x1 = _mm512_loadu_ps(s + (j + 1) * lds);
      mt0 = mk ? _mm512_mask_max_ps(mt0, mk[j * nv], mt0, x0) : _mm512_max_ps(mt0, x0);
      mt1 = mk ? _mm512_mask_max_ps(mt1, mk[(j + 1) * nv], mt1, x1) : _mm512_max_ps(mt1, x1);
    }
    if (j < bc) {
      __m512 x0 = _mm512_loadu_ps(s + j * lds);
      mt0 = mk ? _mm512_mask_max_ps(mt0, mk[j * nv], mt0, x0) : _mm512_max_ps(mt0, x0);
    }
    const __m512 mo = _mm512_loadu_ps(m + 16 * v);
    const __m512 mn = _mm512_max_ps(mo, _mm512_mul_ps(_mm512_max_ps(mt0, mt1), vc));
    const __m512 al = exp2_ps(_mm512_sub_ps(mo, mn));
    __m512 sum0 = zero, sum1 = zero;
    for (j = 0; j < bc; j += 2) {
      __m512 p0 = exp2_ps(_mm512_fmsub_ps(_mm512_loadu_ps(s + j * lds), vc, mn)), p1 = zero;
      if (mk) p0 = _mm512_maskz_mov_ps(mk[j * nv], p0);
      if (j + 1 < bc) {
        p1 = exp2_ps(_mm512_fmsub_ps(_mm512_loadu_ps(s + (j + 1) * lds), vc, mn));
        if (mk) p1 = _mm512_maskz_mov_ps(mk[(j + 1) * nv], p1);
      }
#ifdef __AVX512BF16__
      if (pp) {
        __m512i b = (__m512i)_mm512_cvtne2ps_pbh(p1, p0); /* [p0 x16 | p1 x16] as bf16 */
        _mm512_storeu_si512(pp + (j / 2) * lds + 16 * v, _mm512_permutexvar_epi16(inter, b));
      } else
#endif
      {
        _mm512_storeu_ps(s + j * lds, p0);
        if (j + 1 < bc) _mm512_storeu_ps(s + (j + 1) * lds, p1);
      }
      sum0 = _mm512_add_ps(sum0, p0);
      sum1 = _mm512_add_ps(sum1, p1);
    }
    const __m512 ln = _mm512_fmadd_ps(_mm512_loadu_ps(l + 16 * v), al, _mm512_add_ps(sum0, sum1));
    _mm512_mask_storeu_ps(m + 16 * v, lm, mn);
    _mm512_mask_storeu_ps(l + 16 * v, lm, ln);
    _mm512_storeu_ps(alpha + 16 * v, al);
  }
}

/* One vector of the 16 sums: lane 4c + j = sum of the lanes of v[4j + c] (8 blends, 22 shuffles and
 * 15 adds): 4 rows x 4 keys of dot products with the head dimension in the lanes (DIAG items, small
 * sub-tiles) become one vector whose 128-bit lane c holds key c's 4 rows. */
static inline __attribute__((always_inline)) __m512 reduce16(const __m512 v[16]) {
  __m512 s1[8], s2[4], s3[2];
  UNROLL for (int p = 0; p < 8; p++) /* [v2p: 0+2, 1+3 | v2p+1: 2+0, 3+1] (128-bit chunks): a blend and a shuffle */
    s1[p] = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, v[2 * p], v[2 * p + 1]),
                          _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x4E));
  UNROLL for (int p = 0; p < 4; p++) /* 128-bit lane c = v[4p + c]'s 4 partial sums */
    s2[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * p], s1[2 * p + 1], 0x88),
                          _mm512_shuffle_f32x4(s1[2 * p], s1[2 * p + 1], 0xDD));
  UNROLL for (int p = 0; p < 2; p++) /* lane c: [v[8p+c], v[8p+4+c], v[8p+c], v[8p+4+c]] partials */
    s3[p] = _mm512_add_ps(_mm512_unpacklo_ps(s2[2 * p], s2[2 * p + 1]), _mm512_unpackhi_ps(s2[2 * p], s2[2 * p + 1]));
  return _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x44), _mm512_shuffle_ps(s3[0], s3[1], 0xEE));
}

/* reduce16's result stored to S^T: 128-bit lane t (key t's 4 rows) to st + t lds, for t < T. */
static inline __attribute__((always_inline)) void store_lanes4(float *st, int64_t lds, __m512 s, int T) {
  _mm_storeu_ps(st, _mm512_castps512_ps128(s));
  if (T > 1) _mm_storeu_ps(st + lds, _mm512_extractf32x4_ps(s, 1));
  if (T > 2) _mm_storeu_ps(st + 2 * lds, _mm512_extractf32x4_ps(s, 2));
  if (T > 3) _mm_storeu_ps(st + 3 * lds, _mm512_extractf32x4_ps(s, 3));
}

#endif
