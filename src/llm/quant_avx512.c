/* AVX-512 quant kernels (F/BW/VL/DQ + VNNI). Q4_0/Q4_1 dots form their integer block sums with
 * vpdpbusd (u8 x s8 -> s32, no saturation; the nibbles are unsigned 0..15); Q4_0's bias 8 is
 * removed per lane in int32 with a second vpdpbusd against the constant 8, so the lanes hold exact
 * sums of w x (no float cancellation) equal to the reference's. Per-block scales multiply the
 * converted int32 lanes; Q4_1's m_w d_x sum(x) term is accumulated separately. Q8_0 reuses the
 * AVX2 kernel (see below). */
#include <immintrin.h>
#include <string.h>

#include "llm/quant_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* [lo nibbles of a | hi nibbles of a | lo of b | hi of b]: elements 0..31 of two blocks */
static inline __m512i nib_pair(const uint8_t *qa, const uint8_t *qb) {
  __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qa));
  __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qb));
  __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  v = _mm512_mask_blend_epi64(0xCC, v, _mm512_srli_epi16(v, 4));
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

static inline __m256i nib_one(const uint8_t *qa) {
  __m128i a = _mm_loadu_si128((const __m128i *)qa);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(a, 4), a), _mm256_set1_epi8(0x0F));
}

static inline __m512 pair_scale(float s0, float s1) {
  return _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
}

static inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* ---- block dots -------------------------------------------------------------------------- */

/* One body for the three block types: LOADPAIR/LOADONE give the unsigned weight bytes u = w + BIAS
 * (BIAS 8 for Q4_0, 0 for Q4_1); dpbusd(BIAS, x) is subtracted per lane, so the
 * int32 lanes hold exact sums of w x. HAS_M: Q4_1's m_w d_x sum(x) term.
 * Main loop, 16 blocks at a time: one dword gather at the block starts fetches the 16 fp16 scales
 * (and Q4_1's minima in the high halves), converted and multiplied by the activation scales in one
 * go; each block pair then takes its two scales from that vector with one permute (lanes 0-7 block
 * 2j, lanes 8-15 block 2j+1). The 4-block loop and the single-block loop take the remainder. */
#define BLOCK_DOT(NAME, BT, LOADPAIR, LOADONE, BIAS, HAS_M, GROUP16)                                       \
  float NAME(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {               \
    const BT *b = row;                                                                          \
    const int8_t *a = xq->q;                                                                    \
    const int64_t nb = n / 32;                                                                  \
    const __m512i z = _mm512_setzero_si512(), bias = _mm512_set1_epi8((char)(BIAS));            \
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), macc = _mm512_setzero_ps();  \
    float off = 0;                                                                              \
    int64_t k = 0;                                                                              \
    const __m512i gidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), \
                                            _mm512_set1_epi32((int)sizeof(BT)));                \
    for (; k + 16 <= nb; k += 16) {                                                             \
      __m512i dm = _mm512_i32gather_epi32(gidx, (const void *)(b + k), 1);                      \
      __m512 xd = _mm512_loadu_ps(xq->d + k);                                                   \
      __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)), xd);                \
      if (HAS_M) {                                                                              \
        __m512 mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));           \
        macc = _mm512_fmadd_ps(mw, _mm512_loadu_ps(xq->s + k), macc);                           \
      }                                                                                         \
      GROUP16(k);                                                                               \
    }                                                                                           \
    for (; k + 4 <= nb; k += 4) {                                                               \
      float s0 = h2f(b[k].d) * xq->d[k], s1 = h2f(b[k + 1].d) * xq->d[k + 1];                   \
      float s2 = h2f(b[k + 2].d) * xq->d[k + 2], s3 = h2f(b[k + 3].d) * xq->d[k + 3];           \
      __m512i x0 = _mm512_loadu_si512(a + 32 * k), x1 = _mm512_loadu_si512(a + 32 * k + 64);    \
      __m512i p0 = _mm512_dpbusd_epi32(z, LOADPAIR(k), x0);                                     \
      __m512i p1 = _mm512_dpbusd_epi32(z, LOADPAIR(k + 2), x1);                                 \
      if (BIAS) {                                                                               \
        p0 = _mm512_sub_epi32(p0, _mm512_dpbusd_epi32(z, bias, x0));                            \
        p1 = _mm512_sub_epi32(p1, _mm512_dpbusd_epi32(z, bias, x1));                            \
      }                                                                                         \
      acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), pair_scale(s0, s1), acc0);                 \
      acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), pair_scale(s2, s3), acc1);                 \
      if (HAS_M) off += OFF_M(k) + OFF_M(k + 1) + OFF_M(k + 2) + OFF_M(k + 3);                  \
    }                                                                                           \
    __m256 acc2 = _mm256_setzero_ps();                                                          \
    for (; k < nb; k++) {                                                                       \
      float s0 = h2f(b[k].d) * xq->d[k];                                                        \
      __m256i x0 = _mm256_loadu_si256((const __m256i *)(a + 32 * k));                           \
      __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), LOADONE(k), x0);                  \
      if (BIAS)                                                                                 \
        p = _mm256_sub_epi32(p, _mm256_dpbusd_epi32(_mm256_setzero_si256(),                     \
                                                    _mm512_castsi512_si256(bias), x0));         \
      acc2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(s0), acc2);                  \
      if (HAS_M) off += OFF_M(k);                                                               \
    }                                                                                           \
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), macc)) + hsum256(acc2) + off; \
  }

/* 16 blocks of Q4_0/Q4_1, four per vector: the 16-byte nibble arrays of blocks k+4g..k+4g+3 fill
 * the four 128-bit lanes; lo = q & 15 are elements 0-15 and hi = q >> 4 elements 16-31 of each
 * lane's block, so lane i of the int32 result belongs to block 4g + i/4. The activation's 128
 * contiguous bytes of those blocks are split into the matching lo/hi halves with two lane
 * shuffles. Q4_0's bias 8 is removed with dpbusd(8, x) over both halves. */
#define GROUP16_QUADS(k)                                                                           \
  for (int g4 = 0; g4 < 4; g4++) {                                                                 \
    const int64_t kb = (k) + 4 * g4;                                                               \
    __m512i w = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b[kb].qs));                \
    w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)b[kb + 1].qs), 1);                  \
    w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)b[kb + 2].qs), 2);                  \
    w = _mm512_inserti32x4(w, _mm_loadu_si128((const __m128i *)b[kb + 3].qs), 3);                  \
    __m512i lo = _mm512_and_si512(w, NIB_MASK), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), NIB_MASK);      \
    __m512i xa = _mm512_loadu_si512(a + 32 * kb), xb = _mm512_loadu_si512(a + 32 * kb + 64);       \
    __m512i xlo = _mm512_shuffle_i64x2(xa, xb, 0x88), xhi = _mm512_shuffle_i64x2(xa, xb, 0xDD);   \
    __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, lo, xlo), hi, xhi);                     \
    if (BIASQ) p = _mm512_sub_epi32(p, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, bias, xlo), bias, xhi)); \
    __m512i iq = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2); \
    __m512 s4 = _mm512_permutexvar_ps(_mm512_add_epi32(iq, _mm512_set1_epi32(4 * g4)), sc);        \
    if (g4 & 1) acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s4, acc1);                           \
    else acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), s4, acc0);                                  \
  }

#define Q4_PAIR(k) nib_pair(b[k].qs, b[(k) + 1].qs)
#define Q4_ONE(k) nib_one(b[k].qs)
/* Q4_1's minimum term of block k (only expanded where HAS_M, so only for Q4_1 blocks) */
#define OFF_M(k) (h2f(((const ts__blk_q4_1 *)(const void *)b)[k].m) * xq->s[k])

#define NIB_MASK _mm512_set1_epi8(0x0F)
#define BIASQ 1
BLOCK_DOT(ts__dot_q4_0_avx512, ts__blk_q4_0, Q4_PAIR, Q4_ONE, 8, 0, GROUP16_QUADS)
#undef BIASQ
#define BIASQ 0
BLOCK_DOT(ts__dot_q4_1_avx512, ts__blk_q4_1, Q4_PAIR, Q4_ONE, 0, 1, GROUP16_QUADS)
#undef BIASQ
#undef NIB_MASK

/* Q8_0: the AVX2 kernel (|w| x sign(x, w) with maddubs, one block per 256-bit vector) measured
 * faster on Zen 4 than every 512-bit form tried (two blocks per vector with vpdpbusd, with the
 * +128 bias or the sign trick: 576x1536, one thread, 30.9 us vs 34.6-35.6 us), since a 512-bit op
 * costs two 256-bit ones there and Q8_0's bytes need no shuffling. */
float ts__dot_q8_0_avx512(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return ts__dot_q8_0_avx2(n, row, x, xq);
}

/* ---- float dots -------------------------------------------------------------------------- */

static inline __m512 ld_f32(const void *p, int64_t i, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}
static inline __m512 ld_f16(const void *p, int64_t i, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
}
static inline __m512 ld_bf16(const void *p, int64_t i, __mmask16 m) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

#define FLOAT_DOT(NAME, LD)                                                                  \
  float NAME(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {           \
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),    \
           a3 = _mm512_setzero_ps();                                                        \
    const __mmask16 all = 0xFFFF;                                                           \
    int64_t i = 0;                                                                          \
    for (; i + 64 <= n; i += 64) {                                                          \
      a0 = _mm512_fmadd_ps(LD(row, i, all), _mm512_loadu_ps(x + i), a0);                    \
      a1 = _mm512_fmadd_ps(LD(row, i + 16, all), _mm512_loadu_ps(x + i + 16), a1);          \
      a2 = _mm512_fmadd_ps(LD(row, i + 32, all), _mm512_loadu_ps(x + i + 32), a2);          \
      a3 = _mm512_fmadd_ps(LD(row, i + 48, all), _mm512_loadu_ps(x + i + 48), a3);          \
    }                                                                                       \
    for (; i < n; i += 16) {                                                                \
      __mmask16 m = n - i >= 16 ? all : (__mmask16)((1u << (n - i)) - 1u);                  \
      a0 = _mm512_fmadd_ps(LD(row, i, m), _mm512_maskz_loadu_ps(m, x + i), a0);             \
    }                                                                                       \
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))); \
  }

FLOAT_DOT(ts__dot_f32_avx512, ld_f32)
FLOAT_DOT(ts__dot_f16_avx512, ld_f16)
FLOAT_DOT(ts__dot_bf16_avx512, ld_bf16)

/* ---- activation -------------------------------------------------------------------------- */

void ts__act_quantize_avx512(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum, float *sx) {
  for (int64_t k = 0; k < n / 32; k++) {
    __m512 v0 = _mm512_loadu_ps(x + 32 * k), v1 = _mm512_loadu_ps(x + 32 * k + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    __m512 vid = _mm512_set1_ps(id);
    __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
    __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    _mm_storeu_si128((__m128i *)(q + 32 * k), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128((__m128i *)(q + 32 * k + 16), _mm512_cvtsepi32_epi8(i1));
    const float dk = amax / 127.0f;
    d[k] = _cvtsh_ss(_cvtss_sh(dk, 0));
    sum[k] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    sx[k] = _cvtsh_ss(_cvtss_sh(dk * (float)sum[k], 0));
  }
}
