/* Scalar references of Q5_0 and the K-quants (Q4_K, Q6_K): dequantize, a round-to-nearest
 * quantizer, the activation's Q8_K form and the row dots in llama.cpp's CPU orders (quant.h has the
 * formats, quant_internal.h the orders). The integer parts are exact, so every SIMD variant must
 * give these floats bit for bit (tests/test_quant.c). Facts taken from llama.cpp's ggml (block
 * layouts, quantize_row_q8_K_ref, the x86 Q6_K dot and the repacked Q4_K gemv/gemm); the code is
 * tessera's. */
#include <math.h>
#include <string.h>

#include "llm/cpu_order.h"
#include "llm/quant_internal.h"

static inline int clampi(float v, float lo, float hi) { return (int)fminf(fmaxf(v, lo), hi); }

static inline uint32_t rd32(const uint8_t *p) {
  uint32_t u;
  memcpy(&u, p, 4);
  return u;
}

/* element e (0..31) of a Q5_0 block, unsigned 0..31 */
static inline int q5_0_at(const ts__blk_q5_0 *b, int e) {
  const uint32_t qh = rd32(b->qh);
  const int lo = e < 16 ? b->qs[e] & 0xF : b->qs[e - 16] >> 4;
  return lo | (int)((qh >> e) & 1u) << 4;
}

/* element e (0..255) of a Q4_K super-block, 0..15, and its sub-block e / 32 */
static inline int q4_k_at(const ts__blk_q4_k *b, int e) {
  const int j = e / 32, p = j / 2, i = e % 32;
  return j % 2 ? b->qs[32 * p + i] >> 4 : b->qs[32 * p + i] & 0xF;
}

/* element e (0..255) of a Q6_K super-block, unsigned 0..63 (the stored value + 32) */
static inline int q6_k_at(const ts__blk_q6_k *b, int e) {
  const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
  const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
  const int lo = k == 0 ? ql[l] & 0xF : k == 1 ? ql[l + 32] & 0xF : k == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
  return lo | ((qh[l] >> (2 * k)) & 3) << 4;
}

/* ---- dequantize -------------------------------------------------------------------------- */

void ts__dequant_k_ref(uint32_t type, const void *src, float *dst, int64_t n) {
  switch (type) {
    case TS_QT_Q5_0: {
      const ts__blk_q5_0 *b = src;
      for (int64_t k = 0; k < n / 32; k++) {
        const float d = ts_f16_to_f32(b[k].d);
        for (int e = 0; e < 32; e++) dst[32 * k + e] = (float)(q5_0_at(&b[k], e) - 16) * d;
      }
      return;
    }
    case TS_QT_Q4_K: { /* (d sc) q - dmin m, each product rounded to fp32 (ggml's order) */
      const ts__blk_q4_k *b = src;
      for (int64_t k = 0; k < n / 256; k++) {
        const float d = ts_f16_to_f32(b[k].d), dmin = ts_f16_to_f32(b[k].dmin);
        for (int j = 0; j < 8; j++) {
          int sc, m;
          ts__q4k_scale_min(b[k].scales, j, &sc, &m);
          const float d1 = d * (float)sc, m1 = dmin * (float)m;
          for (int i = 0; i < 32; i++) dst[256 * k + 32 * j + i] = d1 * (float)q4_k_at(&b[k], 32 * j + i) - m1;
        }
      }
      return;
    }
    case TS_QT_Q6_K: { /* (d sc) q */
      const ts__blk_q6_k *b = src;
      for (int64_t k = 0; k < n / 256; k++) {
        const float d = ts_f16_to_f32(b[k].d);
        for (int e = 0; e < 256; e++)
          dst[256 * k + e] = d * (float)b[k].scales[e / 16] * (float)(q6_k_at(&b[k], e) - 32);
      }
      return;
    }
    default: return;
  }
}

/* ---- quantize (round to nearest; quant.h) -------------------------------------------------- */

static void quant_q5_0(const float *x, ts__blk_q5_0 *b) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < 32; i++)
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      vmax = x[i];
    }
  const float d = vmax / -16.0f, id = d != 0 ? 1.0f / d : 0.0f;
  b->d = ts_f32_to_f16(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; j++) {
    const int lo = clampi(floorf(x[j] * id + 16.5f), 0, 31), hi = clampi(floorf(x[j + 16] * id + 16.5f), 0, 31);
    b->qs[j] = (uint8_t)((lo & 15) | (hi & 15) << 4);
    qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
  }
  memcpy(b->qh, &qh, 4);
}

/* 6-bit scales and mins into Q4_K's 12 bytes (the inverse of ts__q4k_scale_min) */
static void q4k_pack_scales(const int *sc, const int *m, uint8_t *s) {
  for (int j = 0; j < 4; j++) {
    s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

static void quant_q4_k(const float *x, ts__blk_q4_k *b) {
  float s[8], mn[8], smax = 0, mmax = 0;
  for (int j = 0; j < 8; j++) {
    float lo = 0, hi = x[32 * j];
    for (int i = 0; i < 32; i++) {
      lo = fminf(lo, x[32 * j + i]);
      hi = fmaxf(hi, x[32 * j + i]);
    }
    s[j] = (hi - lo) / 15.0f;
    mn[j] = -lo;
    smax = fmaxf(smax, s[j]);
    mmax = fmaxf(mmax, mn[j]);
  }
  b->d = ts_f32_to_f16(smax / 63.0f);
  b->dmin = ts_f32_to_f16(mmax / 63.0f);
  const float d = ts_f16_to_f32(b->d), dmin = ts_f16_to_f32(b->dmin);
  int sc[8], m[8];
  for (int j = 0; j < 8; j++) {
    sc[j] = d > 0 ? clampi(rintf(s[j] / d), 0, 63) : 0;
    m[j] = dmin > 0 ? clampi(rintf(mn[j] / dmin), 0, 63) : 0;
  }
  q4k_pack_scales(sc, m, b->scales);
  memset(b->qs, 0, sizeof b->qs);
  for (int j = 0; j < 8; j++) {
    const float step = d * (float)sc[j], off = dmin * (float)m[j], inv = step > 0 ? 1.0f / step : 0.0f;
    for (int i = 0; i < 32; i++) {
      const int q = clampi(rintf((x[32 * j + i] + off) * inv), 0, 15);
      b->qs[32 * (j / 2) + i] |= (uint8_t)(j % 2 ? q << 4 : q);
    }
  }
}

static void quant_q6_k(const float *x, ts__blk_q6_k *b) {
  float s[16], smax = 0;
  for (int g = 0; g < 16; g++) {
    float amax = 0;
    for (int i = 0; i < 16; i++) amax = fmaxf(amax, fabsf(x[16 * g + i]));
    s[g] = amax / 31.0f;
    smax = fmaxf(smax, s[g]);
  }
  b->d = ts_f32_to_f16(smax / 127.0f);
  const float d = ts_f16_to_f32(b->d);
  memset(b->ql, 0, sizeof b->ql);
  memset(b->qh, 0, sizeof b->qh);
  for (int g = 0; g < 16; g++) {
    const int sc = d > 0 ? clampi(rintf(s[g] / d), 0, 127) : 0;
    b->scales[g] = (int8_t)sc;
    const float step = d * (float)sc, inv = step > 0 ? 1.0f / step : 0.0f;
    for (int i = 0; i < 16; i++) {
      const int e = 16 * g + i, u = clampi(rintf(x[e] * inv), -32, 31) + 32;
      const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
      uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
      if (k == 0) ql[l] |= (uint8_t)(u & 15);
      else if (k == 1) ql[l + 32] |= (uint8_t)(u & 15);
      else if (k == 2) ql[l] |= (uint8_t)((u & 15) << 4);
      else ql[l + 32] |= (uint8_t)((u & 15) << 4);
      qh[l] |= (uint8_t)((u >> 4) << (2 * k));
    }
  }
}

void ts__quantize_k_ref(uint32_t type, const float *src, void *dst, int64_t n) {
  switch (type) {
    case TS_QT_Q5_0:
      for (int64_t k = 0; k < n / 32; k++) quant_q5_0(src + 32 * k, (ts__blk_q5_0 *)dst + k);
      return;
    case TS_QT_Q4_K:
      for (int64_t k = 0; k < n / 256; k++) quant_q4_k(src + 256 * k, (ts__blk_q4_k *)dst + k);
      return;
    case TS_QT_Q6_K:
      for (int64_t k = 0; k < n / 256; k++) quant_q6_k(src + 256 * k, (ts__blk_q6_k *)dst + k);
      return;
    default: return;
  }
}

/* ---- the activation's Q8_K form ------------------------------------------------------------ */

/* GGML's quantize_row_q8_K_ref: the first element of largest |x| gives iscale = -127 / v; kq =
 * rint of the fp32 product (its nearest_int adds 1.5 2^23 to it: the same nearest-even integer for
 * |v| < 2^22), at most 127; kd = 1 / iscale. llama.cpp's other Q8_K quantizer (the 4-row
 * ggml_quantize_mat_q8_K_4x8 that its repacked Q4_K gemm reads) takes +amax over -amax when both
 * occur: then kq and kd are both negated, which no dot can tell (-a * -b is a * b in IEEE
 * arithmetic, and float(-S) = -float(S)). An all-zero super-block gets kd = 0, kq = 0, kbs = 0. */
void ts__act_quantize_k_ref(int64_t n, const float *x, int8_t *kq, float *kd, int16_t *kbs) {
  for (int64_t k = 0; k < n / 256; k++) {
    const float *xb = x + 256 * k;
    int8_t *q = kq + 256 * k;
    float amax = 0, vmax = 0;
    for (int j = 0; j < 256; j++) {
      const float ax = fabsf(xb[j]);
      if (ax > amax) {
        amax = ax;
        vmax = xb[j];
      }
    }
    if (!(amax > 0)) {
      memset(q, 0, 256);
      kd[k] = 0;
      memset(kbs + 16 * k, 0, 16 * sizeof *kbs);
      continue;
    }
    const float iscale = -127.0f / vmax;
    for (int j = 0; j < 256; j++) {
      const float p = iscale * xb[j];
      q[j] = (int8_t)clampi(rintf(p), -128, 127);
    }
    for (int g = 0; g < 16; g++) {
      int s = 0;
      for (int i = 0; i < 16; i++) s += q[16 * g + i];
      kbs[16 * k + g] = (int16_t)s;
    }
    kd[k] = 1.0f / iscale;
  }
}

/* ---- dots -------------------------------------------------------------------------------- */

float ts__dot_q5_0_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q5_0 *b = row;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < n / 32; k++) {
    const int8_t *a = xq->q + 32 * k;
    const float dd = ts_f16_to_f32(b[k].d) * xq->d[k];
    for (int g = 0; g < 8; g++) {
      int32_t s = 0;
      for (int e = 4 * g; e < 4 * g + 4; e++) s += (q5_0_at(&b[k], e) - 16) * a[e];
      acc[g] = fmaf(dd, (float)s, acc[g]);
    }
  }
  return ts__hsum8(acc);
}

float ts__dot_q4_k_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q4_k *b = row;
  float acc = 0, accm = 0;
  for (int64_t k = 0; k < n / 256; k++) {
    const int8_t *a = xq->kq + 256 * k;
    const int16_t *bs = xq->kbs + 16 * k;
    int32_t S = 0, M = 0;
    for (int j = 0; j < 8; j++) {
      int sc, m;
      ts__q4k_scale_min(b[k].scales, j, &sc, &m);
      int32_t s = 0;
      for (int i = 0; i < 32; i++) s += q4_k_at(&b[k], 32 * j + i) * a[32 * j + i];
      S += sc * s;
      M += m * (bs[2 * j] + bs[2 * j + 1]);
    }
    acc = fmaf((float)S, ts_f16_to_f32(b[k].d) * xq->kd[k], acc);
    accm = fmaf((float)M, ts_f16_to_f32(b[k].dmin) * xq->kd[k], accm);
  }
  return acc - accm;
}

float ts__dot_q6_k_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q6_k *b = row;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < n / 256; k++) {
    const int8_t *a = xq->kq + 256 * k;
    const int16_t *bs = xq->kbs + 16 * k;
    const int8_t *sc = b[k].scales;
    const float dd = xq->kd[k] * ts_f16_to_f32(b[k].d);
    for (int L = 0; L < 8; L++) {
      int32_t lane = 0;
      for (int v = 0; v < 8; v++) {
        int32_t s = 0;
        for (int e = 32 * v + 4 * L; e < 32 * v + 4 * L + 4; e++) s += q6_k_at(&b[k], e) * a[e];
        lane += sc[2 * v + L / 4] * s;
      }
      lane -= 32 * (bs[2 * L] * sc[2 * L] + bs[2 * L + 1] * sc[2 * L + 1]);
      acc[L] = fmaf(dd, (float)lane, acc[L]);
    }
  }
  return ts__hsum8(acc);
}

/* Q4_K in the order of llama.cpp's repacked 4-token gemm (its AVX2 and AVX-512 code alike): the fma
 * per pair of sub-blocks, so 4 per super-block in each chain. */
float ts__dot_q4_k4_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q4_k *b = row;
  float acc = 0, accm = 0;
  for (int64_t k = 0; k < n / 256; k++) {
    const int8_t *a = xq->kq + 256 * k;
    const int16_t *bs = xq->kbs + 16 * k;
    const float dd = ts_f16_to_f32(b[k].d) * xq->kd[k], dm = ts_f16_to_f32(b[k].dmin) * xq->kd[k];
    for (int p = 0; p < 4; p++) {
      int32_t S = 0, M = 0;
      for (int j = 2 * p; j < 2 * p + 2; j++) {
        int sc, m;
        ts__q4k_scale_min(b[k].scales, j, &sc, &m);
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += q4_k_at(&b[k], 32 * j + i) * a[32 * j + i];
        S += sc * s;
        M += m * (bs[2 * j] + bs[2 * j + 1]);
      }
      acc = fmaf((float)S, dd, acc);
      accm = fmaf((float)M, dm, accm);
    }
  }
  return acc - accm;
}

/* Q6_K in the order of llama.cpp's tiled K-quant matmul (ggml-cpu/tiled, matmuls of 8 or more
 * tokens): the super-block's exact integer dot, times d_w, then fma with kd. */
float ts__dot_q6_k_t_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q6_k *b = row;
  float acc = 0;
  for (int64_t k = 0; k < n / 256; k++) {
    const int8_t *a = xq->kq + 256 * k;
    int32_t S = 0;
    for (int g = 0; g < 16; g++) {
      int32_t s = 0;
      for (int e = 16 * g; e < 16 * g + 16; e++) s += (q6_k_at(&b[k], e) - 32) * a[e];
      S += b[k].scales[g] * s;
    }
    const float res = ts_f16_to_f32(b[k].d) * (float)S;
    acc = fmaf(res, xq->kd[k], acc);
  }
  return acc;
}
