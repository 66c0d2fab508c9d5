/* AVX2 (+FMA, F16C) row dots of Q5_0 and the K-quants in llama.cpp's orders (quant_internal.h;
 * quant_k_ref.c has the references, equal bit for bit: the integer parts are exact and the fp32
 * steps the same). maddubs (u8 x s8 -> s16 pairs) cannot saturate: Q5_0 values <= 31 (2 31 127 <
 * 32767), Q4_K nibbles <= 15, Q6_K values <= 63 (2 63 128 = 16128). */
#include <immintrin.h>
#include <string.h>

#include "llm/llm_avx2.h"
#include "llm/quant_internal.h"

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* cpu_order.h's hsum8: t_i = v_i + v_(i+4); (t0+t2) + (t1+t3) */
static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

/* ---- Q5_0: one block per vector, lane g = elements 4g..4g+3 (as Q4_0) ----------------------- */

float ts__dot_q5_0_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q5_0 *b = row;
  const __m256i v16 = _mm256_set1_epi8(16), one = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / 32; k++) {
    uint32_t qh;
    memcpy(&qh, b[k].qh, 4);
    const __m256i u = ts__q5_0_u8(b[k].qs, qh); /* 0..31 */
    const __m256i s = _mm256_loadu_si256((const __m256i *)(xq->q + 32 * k));
    /* (u - 16) s in int16 pairs: |pair sums| <= 2 31 127 and 2 16 127, the difference exact */
    const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(v16, s));
    const __m256 lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, one));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(b[k].d) * xq->d[k]), lanes, acc);
  }
  return hsum8(acc);
}

/* ---- Q4_K: per super-block the exact S and M, then the two fma chains ----------------------- */

float ts__dot_q4_k_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q4_k *b = row;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  float acc = 0, accm = 0;
  for (int64_t k = 0; k < n / 256; k++) {
    const int8_t *a = xq->kq + 256 * k;
    const int16_t *bs = xq->kbs + 16 * k;
    __m256i S = _mm256_setzero_si256();
    int32_t M = 0;
    for (int p = 0; p < 4; p++) { /* sub-blocks 2p (low nibbles) and 2p + 1 (high) */
      int sc0, m0, sc1, m1;
      ts__q4k_scale_min(b[k].scales, 2 * p, &sc0, &m0);
      ts__q4k_scale_min(b[k].scales, 2 * p + 1, &sc1, &m1);
      const __m256i q = _mm256_loadu_si256((const __m256i *)(b[k].qs + 32 * p));
      const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a + 64 * p)));
      const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a + 64 * p + 32)));
      S = _mm256_add_epi32(S, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)sc0)));
      S = _mm256_add_epi32(S, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)sc1)));
      M += m0 * (bs[4 * p] + bs[4 * p + 1]) + m1 * (bs[4 * p + 2] + bs[4 * p + 3]);
    }
    const float s = (float)hsum_i32(S), m = (float)M;
    acc = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(s), _mm_set_ss(h2f(b[k].d) * xq->kd[k]), _mm_set_ss(acc)));
    accm = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(m), _mm_set_ss(h2f(b[k].dmin) * xq->kd[k]), _mm_set_ss(accm)));
  }
  return acc - accm;
}

/* ---- Q6_K: ggml's 8 lanes ------------------------------------------------------------------- */

/* A Q6_K super-block's integer dot with the Q8_K activation a (kbs: its 16-element sums), as
 * ggml's 8 int32 lanes: lane L holds sub-blocks 2v + L / 4's products (scaled) of elements
 * 32v + 4L.. over v, less 32 (kbs sc) of its two scale groups. Exact; both Q6_K orders below take
 * their floats from it. */
static inline __m256i q6_k_lanes(const ts__blk_q6_k *blk, const int8_t *a, const int16_t *kbs) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  const int8_t *sc = blk->scales;
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
  const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)kbs), sc16), 5);
  __m256i lanes = _mm256_setzero_si256();
  for (int h = 0; h < 2; h++) {
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
    __m256i q[4];
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
    for (int c = 0; c < 4; c++) {
      const int v = 4 * h + c; /* elements 32v.., scales sc[2v] (lanes 0-3), sc[2v + 1] (4-7) */
      const __m256i p16 = _mm256_maddubs_epi16(q[c], _mm256_loadu_si256((const __m256i *)(a + 32 * v)));
      const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[2 * v + 1]), _mm_set1_epi16(sc[2 * v]));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(p16, s));
    }
  }
  return _mm256_sub_epi32(lanes, sub);
}

float ts__dot_q6_k_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q6_k *b = row;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < n / 256; k++) {
    const __m256i lanes = q6_k_lanes(&b[k], xq->kq + 256 * k, xq->kbs + 16 * k);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(xq->kd[k] * h2f(b[k].d)), _mm256_cvtepi32_ps(lanes), acc);
  }
  return hsum8(acc);
}

/* Q4_K in the order of llama.cpp's 4-token gemm: one fma per pair of sub-blocks */
float ts__dot_q4_k4_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q4_k *b = row;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m128 acc = _mm_setzero_ps(), accm = _mm_setzero_ps();
  for (int64_t k = 0; k < n / 256; k++) {
    const int8_t *a = xq->kq + 256 * k;
    const int16_t *bs = xq->kbs + 16 * k;
    const __m128 dd = _mm_set_ss(h2f(b[k].d) * xq->kd[k]), dm = _mm_set_ss(h2f(b[k].dmin) * xq->kd[k]);
    for (int p = 0; p < 4; p++) {
      int sc0, m0, sc1, m1;
      ts__q4k_scale_min(b[k].scales, 2 * p, &sc0, &m0);
      ts__q4k_scale_min(b[k].scales, 2 * p + 1, &sc1, &m1);
      const __m256i q = _mm256_loadu_si256((const __m256i *)(b[k].qs + 32 * p));
      const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a + 64 * p)));
      const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a + 64 * p + 32)));
      const __m256i S = _mm256_add_epi32(_mm256_madd_epi16(p0, _mm256_set1_epi16((short)sc0)),
                                         _mm256_madd_epi16(p1, _mm256_set1_epi16((short)sc1)));
      const int32_t M = m0 * (bs[4 * p] + bs[4 * p + 1]) + m1 * (bs[4 * p + 2] + bs[4 * p + 3]);
      acc = _mm_fmadd_ss(_mm_set_ss((float)hsum_i32(S)), dd, acc);
      accm = _mm_fmadd_ss(_mm_set_ss((float)M), dm, accm);
    }
  }
  return _mm_cvtss_f32(acc) - _mm_cvtss_f32(accm);
}

/* Q6_K in the order of llama.cpp's tiled matmul: the super-block's integer dot (the 8 lanes of
 * ts__dot_q6_k_avx2 summed: exact), d_w times it, fma with kd */
float ts__dot_q6_k_t_avx2(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q6_k *b = row;
  __m128 acc = _mm_setzero_ps();
  for (int64_t k = 0; k < n / 256; k++) {
    const float S = (float)hsum_i32(q6_k_lanes(&b[k], xq->kq + 256 * k, xq->kbs + 16 * k));
    acc = _mm_fmadd_ss(_mm_set_ss(h2f(b[k].d) * S), _mm_set_ss(xq->kd[k]), acc);
  }
  return _mm_cvtss_f32(acc);
}
