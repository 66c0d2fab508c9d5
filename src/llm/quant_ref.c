/* Scalar reference kernels: the definition of every format in quant.h. Block-type dots follow
 * llama.cpp's CPU order exactly (cpu_order.h: exact integer lane sums, fp32 fma per block, a fixed
 * reduction tree), so every SIMD variant must reproduce them bit for bit; float-type dots
 * accumulate in double.
 * Float-to-int conversions clamp first, so NaN/Inf input gives unspecified values but no UB. */
#include <math.h>
#include <string.h>

#include "llm/cpu_order.h"
#include "llm/quant_internal.h"

static inline int clampi(float v, float lo, float hi) { return (int)fminf(fmaxf(v, lo), hi); }

/* ---- dequantize -------------------------------------------------------------------------- */

void ts__dequant_ref(uint32_t type, const void *src, float *dst, int64_t n) {
  switch (type) {
    case TS_QT_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case TS_QT_F16: {
      const uint8_t *p = src;
      for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = ts_f16_to_f32(h);
      }
      return;
    }
    case TS_QT_BF16: {
      const uint8_t *p = src;
      for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = ts_bf16_to_f32(h);
      }
      return;
    }
    case TS_QT_Q8_0: {
      const ts__blk_q8_0 *b = src;
      for (int64_t k = 0; k < n / 32; k++) {
        float d = ts_f16_to_f32(b[k].d);
        for (int i = 0; i < 32; i++) dst[32 * k + i] = (float)b[k].q[i] * d;
      }
      return;
    }
    case TS_QT_Q4_0: {
      const ts__blk_q4_0 *b = src;
      for (int64_t k = 0; k < n / 32; k++) {
        float d = ts_f16_to_f32(b[k].d);
        for (int j = 0; j < 16; j++) {
          dst[32 * k + j] = (float)((b[k].qs[j] & 0xF) - 8) * d;
          dst[32 * k + j + 16] = (float)((b[k].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case TS_QT_Q4_1: {
      const ts__blk_q4_1 *b = src;
      for (int64_t k = 0; k < n / 32; k++) {
        float d = ts_f16_to_f32(b[k].d), m = ts_f16_to_f32(b[k].m);
        for (int j = 0; j < 16; j++) {
          dst[32 * k + j] = (float)(b[k].qs[j] & 0xF) * d + m;
          dst[32 * k + j + 16] = (float)(b[k].qs[j] >> 4) * d + m;
        }
      }
      return;
    }
    default: ts__dequant_k_ref(type, src, dst, n); return; /* Q5_0, Q4_K, Q6_K (quant_k_ref.c) */
  }
}

/* ---- quantize ---------------------------------------------------------------------------- */

static void quant_q8_0(const float *x, ts__blk_q8_0 *b) {
  float amax = 0;
  for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
  float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
  b->d = ts_f32_to_f16(d);
  for (int i = 0; i < 32; i++) b->q[i] = (int8_t)clampi(roundf(x[i] * id), -127, 127);
}

/* The signed extreme maps to -8 so the full 16-level range [-8d, 7d] is used. */
static void quant_q4_0(const float *x, ts__blk_q4_0 *b) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < 32; i++)
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      vmax = x[i];
    }
  float d = vmax / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  b->d = ts_f32_to_f16(d);
  for (int j = 0; j < 16; j++) {
    int lo = clampi(floorf(x[j] * id + 8.5f), 0, 15), hi = clampi(floorf(x[j + 16] * id + 8.5f), 0, 15);
    b->qs[j] = (uint8_t)(lo | (hi << 4));
  }
}

static void quant_q4_1(const float *x, ts__blk_q4_1 *b) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; i++) {
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
  }
  float d = (hi - lo) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
  b->d = ts_f32_to_f16(d);
  b->m = ts_f32_to_f16(lo);
  for (int j = 0; j < 16; j++) {
    int a = clampi(floorf((x[j] - lo) * id + 0.5f), 0, 15);
    int c = clampi(floorf((x[j + 16] - lo) * id + 0.5f), 0, 15);
    b->qs[j] = (uint8_t)(a | (c << 4));
  }
}

void ts__quantize_ref(uint32_t type, const float *src, void *dst, int64_t n) {
  switch (type) {
    case TS_QT_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case TS_QT_F16:
      for (int64_t i = 0; i < n; i++) {
        uint16_t h = ts_f32_to_f16(src[i]);
        memcpy((uint8_t *)dst + 2 * i, &h, 2);
      }
      return;
    case TS_QT_BF16:
      for (int64_t i = 0; i < n; i++) {
        uint16_t h = ts_f32_to_bf16(src[i]);
        memcpy((uint8_t *)dst + 2 * i, &h, 2);
      }
      return;
    case TS_QT_Q8_0:
      for (int64_t k = 0; k < n / 32; k++) quant_q8_0(src + 32 * k, (ts__blk_q8_0 *)dst + k);
      return;
    case TS_QT_Q4_0:
      for (int64_t k = 0; k < n / 32; k++) quant_q4_0(src + 32 * k, (ts__blk_q4_0 *)dst + k);
      return;
    case TS_QT_Q4_1:
      for (int64_t k = 0; k < n / 32; k++) quant_q4_1(src + 32 * k, (ts__blk_q4_1 *)dst + k);
      return;
    default: ts__quantize_k_ref(type, src, dst, n); return;
  }
}

/* ---- activation -------------------------------------------------------------------------- */

/* fp32 rounded to fp16 and back (nearest even), as a Q8_0 / Q8_1 block stores its scale. */
static inline float round_f16(float v) { return ts_f16_to_f32(ts_f32_to_f16(v)); }

/* q = rint(x * (127 / amax)) in the default round-to-nearest-even mode: the SIMD variants use the
 * same fp32 multiply and cvtps2dq, so they give the same bytes for finite input. d and s are
 * rounded to fp16 from the fp32 values amax / 127 and (amax / 127) * sum. */
void ts__act_quantize_ref(int64_t n, const float *x, int8_t *q, float *d, int32_t *sum, float *sx) {
  for (int64_t k = 0; k < n / 32; k++) {
    const float *xb = x + 32 * k;
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(xb[i]));
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t s = 0;
    for (int i = 0; i < 32; i++) {
      int v = clampi(rintf(xb[i] * id), -127, 127);
      q[32 * k + i] = (int8_t)v;
      s += v;
    }
    const float dk = amax / 127.0f;
    d[k] = round_f16(dk);
    sum[k] = s;
    sx[k] = round_f16(dk * (float)s);
  }
}

/* ---- dots -------------------------------------------------------------------------------- */

float ts__dot_f32_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const float *w = row;
  double acc = 0;
  for (int64_t i = 0; i < n; i++) acc += (double)w[i] * x[i];
  return (float)acc;
}

float ts__dot_f16_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const uint8_t *p = row;
  double acc = 0;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    acc += (double)ts_f16_to_f32(h) * x[i];
  }
  return (float)acc;
}

float ts__dot_bf16_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const uint8_t *p = row;
  double acc = 0;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    acc += (double)ts_bf16_to_f32(h) * x[i];
  }
  return (float)acc;
}

/* Block-type dots in llama.cpp's order (cpu_order.h): lane g of block k holds the exact integer
 * sum of elements 4g..4g+3, acc[g] = fma(d_w d_x, lane, acc[g]) block after block, then hsum8. The
 * product d_w d_x of two fp16 values is exact in fp32, as is the Q4_1 offset term m_w s_x. */
typedef int32_t (*lane_fn)(const void *blk, const int8_t *a, int g); /* one lane's integer sum */

static int32_t lane_q8_0(const void *blk, const int8_t *a, int g) {
  const ts__blk_q8_0 *b = blk;
  int32_t s = 0;
  for (int e = 4 * g; e < 4 * g + 4; e++) s += (int32_t)b->q[e] * a[e];
  return s;
}

/* element e of a 4-bit block: the low nibbles are elements 0..15, the high nibbles 16..31 */
static inline int nib(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }

static int32_t lane_q4_0(const void *blk, const int8_t *a, int g) {
  const ts__blk_q4_0 *b = blk;
  int32_t s = 0;
  for (int e = 4 * g; e < 4 * g + 4; e++) s += (nib(b->qs, e) - 8) * a[e];
  return s;
}

static int32_t lane_q4_1(const void *blk, const int8_t *a, int g) {
  const ts__blk_q4_1 *b = blk;
  int32_t s = 0;
  for (int e = 4 * g; e < 4 * g + 4; e++) s += nib(b->qs, e) * a[e];
  return s;
}

static float dot_blocks(int64_t n, const uint8_t *row, size_t bsize, lane_fn lane, const ts_quant_act *xq) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < n / 32; k++) {
    const uint8_t *blk = row + (size_t)k * bsize;
    uint16_t dh;
    memcpy(&dh, blk, 2); /* every block starts with its fp16 scale */
    const float dd = ts_f16_to_f32(dh) * xq->d[k];
    for (int g = 0; g < 8; g++) acc[g] = fmaf(dd, (float)lane(blk, xq->q + 32 * k, g), acc[g]);
  }
  return ts__hsum8(acc);
}

float ts__dot_q8_0_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return dot_blocks(n, row, sizeof(ts__blk_q8_0), lane_q8_0, xq);
}

float ts__dot_q4_0_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  return dot_blocks(n, row, sizeof(ts__blk_q4_0), lane_q4_0, xq);
}

float ts__dot_q4_1_ref(int64_t n, const void *row, const float *x, const ts_quant_act *xq) {
  const ts__blk_q4_1 *b = row;
  float summs = 0;
  for (int64_t k = 0; k < n / 32; k++) summs += ts_f16_to_f32(b[k].m) * xq->s[k];
  return dot_blocks(n, row, sizeof(ts__blk_q4_1), lane_q4_1, xq) + summs;
}
