/* AVX-512 helpers for every room, and the 16-lane fp32 vector layer of the row kernels. Only for
 * files compiled with the AVX-512 flags (*_avx512.c and the extension files).
 *
 * ts__ helpers: the small pieces more than one room's kernels use (attention, convolution, the
 * GEMM tile, the LLM), kept here so that no room includes another room's private header.
 *
 * vf_ layer (softmax, activations, norms): the family bodies (*_body.h) are written once against
 * these names and compiled per ISA by including this header or simd_avx2.h first. Semantics shared
 * by both layers: vf_max(a, b) / vf_min(a, b) return b when either is NaN (the x86 max/min rule),
 * so put the value that must propagate NaN second. vf_load_part/vf_store_part touch only the first
 * `cnt` (0..VL) elements: no read or write past a row's end. */
#ifndef TS_SIMD_AVX512_H
#define TS_SIMD_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* ---- shared helpers ------------------------------------------------------------------------ */

/* The first n lanes of 16 (none for n <= 0, all for n >= 16): a row's tail for masked loads and
 * stores. */
static inline __attribute__((always_inline)) __mmask16 ts__mask16(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* In-register transpose of 16 rows of 16 floats: r[c] becomes column c (lane i of r[c] = lane c
 * of the old r[i]). 64 shuffles: unpack pairs, 4 x 4 blocks in 128-bit lanes, then the 128-bit
 * lanes across registers. */
static inline __attribute__((always_inline)) void ts__transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int a = 0; a < 16; a += 2) t[a] = _mm512_unpacklo_ps(r[a], r[a + 1]), t[a + 1] = _mm512_unpackhi_ps(r[a], r[a + 1]);
  for (int a = 0; a < 16; a += 4) {
    u[a] = _mm512_shuffle_ps(t[a], t[a + 2], 0x44), u[a + 1] = _mm512_shuffle_ps(t[a], t[a + 2], 0xEE);
    u[a + 2] = _mm512_shuffle_ps(t[a + 1], t[a + 3], 0x44), u[a + 3] = _mm512_shuffle_ps(t[a + 1], t[a + 3], 0xEE);
  }
  /* u[4g + c] lane L = column 4L + c of rows 4g..4g+3 */
  for (int h = 0; h < 16; h += 8)
    for (int c = 0; c < 4; c++) {
      t[h + c] = _mm512_shuffle_f32x4(u[h + c], u[h + 4 + c], 0x88);     /* columns c, c + 8 */
      t[h + 4 + c] = _mm512_shuffle_f32x4(u[h + c], u[h + 4 + c], 0xDD); /* columns c + 4, c + 12 */
    }
  for (int c = 0; c < 8; c++) {
    r[c] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(t[c], t[c + 8], 0xDD);
  }
}

/* ---- vf_ layer ----------------------------------------------------------------------------- */

#define VL 16
#define VSFX avx512
typedef __m512 vf;
typedef __mmask16 vmask;

static inline vf vf_set1(float a) { return _mm512_set1_ps(a); }
static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_storeu(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline __mmask16 vf__head(int cnt) { return ts__mask16(cnt); }
/* first cnt lanes from p, the others `fill` */
static inline vf vf_load_part(const float *p, int cnt, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), vf__head(cnt), p);
}
static inline void vf_store_part(float *p, vf v, int cnt) { _mm512_mask_storeu_ps(p, vf__head(cnt), v); }

static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vf_fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a*b + c */
static inline vf vf_fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a*b */
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vf_min(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline vf vf_abs(vf a) { return _mm512_abs_ps(a); }
/* magnitude of a with the sign of s */
static inline vf vf_copysign(vf a, vf s) {
  const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(a), _mm512_castps_si512(s), sign, 0xD8)); /* sign ? s : a, bitwise */
}
static inline vf vf_round(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* p * 2^n for integer-valued n; overflow gives inf, underflow gradual (scalef does both) */
static inline vf vf_ldexp(vf p, vf n) { return _mm512_scalef_ps(p, n); }

static inline vmask vf_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vmask vf_ge(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
/* m ? a : b per lane */
static inline vf vf_select(vmask m, vf a, vf b) { return _mm512_mask_blend_ps(m, b, a); }

static inline float vf_hsum(vf a) { return _mm512_reduce_add_ps(a); }
static inline float vf_hmax(vf a) { return _mm512_reduce_max_ps(a); }

#endif
