/* AVX2 (+FMA, F16C) AXPY over selected rows of a transposed Q8_0 / Q4_1 copy (sparse_internal.h):
 * four input rows per pass over the output blocks, so that y is loaded and stored once per four
 * rows; each block's 32 weights widened to fp32 and multiplied in with the row's coefficient times
 * the block scale (Q4_1: plus the four rows' c m, summed once per block). */
#include <immintrin.h>
#include <string.h>

#include "llm/llm_avx2.h"
#include "llm/quant_internal.h"
#include "llm/sparse_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* 32 weights of a Q4_1 block as 4 x 8 fp32 (nibble values 0..15) */
static inline void q4_1_w(const ts__blk_q4_1 *b, __m256 w[4]) {
  const __m128i v = _mm_loadu_si128((const __m128i *)b->qs), m = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  w[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  w[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
}
static inline void q8_0_w(const ts__blk_q8_0 *b, __m256 w[4]) {
  for (int g = 0; g < 4; g++)
    w[g] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->q + 8 * g))));
}

/* The rows a pass will read PF_AHEAD selections later, prefetched (T0) line by line: the selected
 * rows are scattered segments that the hardware prefetchers do not follow across the gaps. */
#define PF_AHEAD 8
#ifndef GDOT_AHEAD
#define GDOT_AHEAD 24
#endif
static inline void pf_rows(const uint8_t *base, size_t stride, const int32_t *idx, int k, int n, size_t bytes) {
  for (int u = k; u < k + 4 && u < n; u++) {
    const char *p = (const char *)(base + (size_t)idx[u] * stride);
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
    _mm_prefetch(p + bytes - 1, _MM_HINT_T0);
  }
}

/* (c d, c m) of a Q4_1 block for coefficient c: the block's two fp16 scales converted at once */
static inline __m128 q4_1_cdm(const ts__blk_q4_1 *b, __m128 c) {
  uint32_t dm;
  memcpy(&dm, &b->d, 4);
  return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dm)), c);
}

/* Four input rows per pass over the output blocks, in two accumulator sets (rows 0, 2 and 1, 3),
 * so that no block waits on a chain of four dependent FMAs; the rows' c m summed in a vector and
 * added once per block. */
void ts__axpy_q4_1_avx2(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n,
                        float *y) {
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const ts__blk_q4_1 *r[4];
    __m128 cv[4];
    for (int u = 0; u < 4; u++) r[u] = (const ts__blk_q4_1 *)(base + (size_t)idx[k + u] * stride), cv[u] = _mm_set1_ps(c[k + u]);
    pf_rows(base, stride, idx, k + PF_AHEAD, n, (size_t)nblk * sizeof(ts__blk_q4_1));
    for (int64_t j = 0; j < nblk; j++) {
      __m256 a[4], b[4], w[4];
      for (int g = 0; g < 4; g++) a[g] = _mm256_loadu_ps(y + 32 * j + 8 * g), b[g] = _mm256_setzero_ps();
      const __m128 s0 = q4_1_cdm(r[0] + j, cv[0]), s1 = q4_1_cdm(r[1] + j, cv[1]);
      const __m128 s2 = q4_1_cdm(r[2] + j, cv[2]), s3 = q4_1_cdm(r[3] + j, cv[3]);
      q4_1_w(r[0] + j, w);
      __m256 cd = _mm256_broadcastss_ps(s0);
      for (int g = 0; g < 4; g++) a[g] = _mm256_fmadd_ps(cd, w[g], a[g]);
      q4_1_w(r[1] + j, w);
      cd = _mm256_broadcastss_ps(s1);
      for (int g = 0; g < 4; g++) b[g] = _mm256_fmadd_ps(cd, w[g], b[g]);
      q4_1_w(r[2] + j, w);
      cd = _mm256_broadcastss_ps(s2);
      for (int g = 0; g < 4; g++) a[g] = _mm256_fmadd_ps(cd, w[g], a[g]);
      q4_1_w(r[3] + j, w);
      cd = _mm256_broadcastss_ps(s3);
      for (int g = 0; g < 4; g++) b[g] = _mm256_fmadd_ps(cd, w[g], b[g]);
      const __m128 sm = _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)); /* lane 1: sum of c m */
      const __m256 vb = _mm256_broadcastss_ps(_mm_movehdup_ps(sm));
      for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 32 * j + 8 * g, _mm256_add_ps(_mm256_add_ps(a[g], b[g]), vb));
    }
  }
  if (k < n) ts__axpy_q4_1_ref(base, stride, nblk, idx + k, c + k, n - k, y);
}

void ts__axpy_q8_0_avx2(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n,
                        float *y) {
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const ts__blk_q8_0 *r[4];
    for (int u = 0; u < 4; u++) r[u] = (const ts__blk_q8_0 *)(base + (size_t)idx[k + u] * stride);
    pf_rows(base, stride, idx, k + PF_AHEAD, n, (size_t)nblk * sizeof(ts__blk_q8_0));
    for (int64_t j = 0; j < nblk; j++) {
      __m256 a[4], w[4];
      for (int g = 0; g < 4; g++) a[g] = _mm256_loadu_ps(y + 32 * j + 8 * g);
      for (int u = 0; u < 4; u++) {
        const ts__blk_q8_0 *b = r[u] + j;
        const __m256 cd = _mm256_set1_ps(c[k + u] * h2f(b->d));
        q8_0_w(b, w);
        for (int g = 0; g < 4; g++) a[g] = _mm256_fmadd_ps(cd, w[g], a[g]);
      }
      for (int g = 0; g < 4; g++) _mm256_storeu_ps(y + 32 * j + 8 * g, a[g]);
    }
  }
  if (k < n) ts__axpy_q8_0_ref(base, stride, nblk, idx + k, c + k, n - k, y);
}

/* ---- rows by index against an int8 activation (the active neurons' up rows) ------------------- */

static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Rows in pairs, as the packed decode kernel reads a row pair (quant_pgemm_avx2.c): one 32-byte
 * register holds both rows' 16 nibble bytes of a block, lo = q & 15 against the activation's
 * elements 0..15 in both 128-bit lanes and hi = q >> 4 against 16..31 (maddubs, the two int16
 * results added: 2 x 2 x 15 x 127 < 32767, then madd by ones), so lanes 0-3 are row a's and 4-7 row
 * b's; each row's (d, m) pair is one 32-bit load, both rows' converted by one vcvtph2ps and scaled
 * by (d_x, s_x) in one multiply. Four pairs (8 rows) per pass share the activation's loads. */
static inline __m256i x_lanes(const int8_t *xq, int hi) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xq + 16 * hi)));
}

void ts__gdot_q4_1_avx2(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x,
                        float *out) {
  const int64_t nb = x->n / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi16(1);
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2);
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    const ts__blk_q4_1 *r[8];
    for (int u = 0; u < 8; u++) r[u] = (const ts__blk_q4_1 *)(data + (size_t)rows[k + u] * row_bytes);
    pf_rows(data, row_bytes, rows, k + GDOT_AHEAD, n, row_bytes);
    pf_rows(data, row_bytes, rows, k + GDOT_AHEAD + 4, n, row_bytes);
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 ms[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
      const __m256i xlo = x_lanes(x->q + 32 * b, 0), xhi = x_lanes(x->q + 32 * b, 1);
      const __m128 dxs = _mm_setr_ps(x->d[b], x->s[b], x->d[b], x->s[b]);
      for (int p = 0; p < 4; p++) {
        const ts__blk_q4_1 *ra = r[2 * p] + b, *rb = r[2 * p + 1] + b;
        const __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)ra->qs)),
                                                  _mm_loadu_si128((const __m128i *)rb->qs), 1);
        const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi));
        uint32_t dma, dmb;
        memcpy(&dma, &ra->d, 4);
        memcpy(&dmb, &rb->d, 4);
        /* [d_a d_x, m_a s_x, d_b d_x, m_b s_x] */
        const __m128 sc = _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)dma), (int)dmb, 1)), dxs);
        ms[p] = _mm_add_ps(ms[p], sc);
        const __m256 sd = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(sc), spread);
        a[p] = _mm256_fmadd_ps(sd, _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, one)), a[p]);
      }
    }
    for (int p = 0; p < 4; p++) {
      float mm[4];
      _mm_storeu_ps(mm, ms[p]);
      const __m128 lo4 = _mm256_castps256_ps128(a[p]), hi4 = _mm256_extractf128_ps(a[p], 1);
      __m128 t = _mm_hadd_ps(lo4, hi4); /* [a01 a23 b01 b23] */
      t = _mm_hadd_ps(t, t);            /* [a b a b] */
      out[k + 2 * p] = _mm_cvtss_f32(t) + mm[1];
      out[k + 2 * p + 1] = _mm_cvtss_f32(_mm_movehdup_ps(t)) + mm[3];
    }
  }
  for (; k < n; k++) out[k] = ts__dot_q4_1_avx2(x->n, data + (size_t)rows[k] * row_bytes, NULL, x);
}

void ts__gdot_q8_0_avx2(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x,
                        float *out) {
  const int64_t nb = x->n / 32;
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const ts__blk_q8_0 *r[4];
    for (int u = 0; u < 4; u++) r[u] = (const ts__blk_q8_0 *)(data + (size_t)rows[k + u] * row_bytes);
    pf_rows(data, row_bytes, rows, k + PF_AHEAD, n, row_bytes);
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
      const __m256i xq = _mm256_loadu_si256((const __m256i *)(x->q + 32 * b));
      const __m256i ax = _mm256_sign_epi8(xq, xq); /* |x| and w sign(x): maddubs takes unsigned x signed */
      const float dx = x->d[b];
      for (int u = 0; u < 4; u++) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)r[u][b].q);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w, xq)), _mm256_set1_epi16(1));
        a[u] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(r[u][b].d) * dx), _mm256_cvtepi32_ps(p), a[u]);
      }
    }
    for (int u = 0; u < 4; u++) out[k + u] = hsum8(a[u]);
  }
  for (; k < n; k++) out[k] = ts__dot_q8_0_avx2(x->n, data + (size_t)rows[k] * row_bytes, NULL, x);
}

/* Four rows per pass, each row's block step the Q5_0 row dot's (quant_k_avx2.c: the same lanes,
 * the same fma per block and the same final sum, so each result equals ts__dot_q5_0_avx2's and
 * the reference's bit for bit); the activation block loaded once for the four. */
void ts__gdot_q5_0_avx2(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x,
                        float *out) {
  const int64_t nb = x->n / 32;
  const __m256i v16 = _mm256_set1_epi8(16), one = _mm256_set1_epi16(1);
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const ts__blk_q5_0 *r[4];
    for (int u = 0; u < 4; u++) r[u] = (const ts__blk_q5_0 *)(data + (size_t)rows[k + u] * row_bytes);
    pf_rows(data, row_bytes, rows, k + PF_AHEAD, n, row_bytes);
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
      const __m256i s = _mm256_loadu_si256((const __m256i *)(x->q + 32 * b));
      const __m256i s16 = _mm256_maddubs_epi16(v16, s); /* 16 s in pairs: the offset's term */
      for (int u = 0; u < 4; u++) {
        uint32_t qh;
        memcpy(&qh, r[u][b].qh, 4);
        const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(ts__q5_0_u8(r[u][b].qs, qh), s), s16);
        const __m256 lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, one));
        a[u] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(r[u][b].d) * x->d[b]), lanes, a[u]);
      }
    }
    for (int u = 0; u < 4; u++) out[k + u] = ts__hsum8v(a[u]);
  }
  for (; k < n; k++) out[k] = ts__dot_q5_0_avx2(x->n, data + (size_t)rows[k] * row_bytes, NULL, x);
}
