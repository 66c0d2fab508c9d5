/* Quant kernels: formats, quantizer error bounds, activation quantizer (every ISA bit-identical to
 * the reference), dots (every ISA vs the reference, and the reference vs the fp64 truth), matvec.
 *
 * Tolerances:
 *  - dequantize: exact against an independent decoder written here from the block layouts.
 *  - quantize -> dequantize: the per-element bounds stated in quant.h, computed per block from the
 *    block's own d (and m) as the reference quantizer defines them (+1e-6 relative slack).
 *  - activation quantizer: bit-identical q, d, sum, s (same fp32 multiply, same rounding). d and
 *    s are fp16 roundings (relative error <= 2^-11): |x - q d| <= d/2 + 127 |d - amax/127|
 *    <= (0.5 + 127 / 2048) d (1 + 2^-11) < 0.563 d, and |s - d_fp32 sum| <= 2^-11 |s|.
 *  - SIMD dot vs reference dot, block types: llama.cpp's operation order (llm/cpu_order.h: exact
 *    integer lane sums, one fp32 fma per block per lane, a fixed tree), so equal bit for bit;
 *    matvec too. Float types (accumulated in double by the reference, in fp32 lanes by SIMD):
 *    2 (n + 8) eps * sum |w_i x_i| (recursive-summation bound, doubled).
 *  - reference dot vs sum deq(w) x in double: the activation rounding, |x - q d_x| < 0.563 d_x
 *    per element, so |diff| <= sum_i |w_i| 0.563 d_x(b_i); Q4_1 (w = n d + m, its m term from s):
 *    sum_i (|n_i d| + |m|) 0.563 d_x + |m| 2^-11 |s| per block; plus the reference's fp32
 *    accumulation of nb block terms, 2 (nb + 8) eps * sum_b |term_b|. */
#include <float.h>
#include <math.h>

#include "llm/quant_internal.h"
#include "tessera/quant.h"
#include "tst.h"
#include "tst_dispatch.h"

#define LVNAME(i) ts__level_name(ts__quant_dispatch.variants[i].level)

static const uint32_t kTypes[] = {TS_QT_F32,  TS_QT_F16,  TS_QT_BF16, TS_QT_Q8_0, TS_QT_Q4_0,
                                  TS_QT_Q4_1, TS_QT_Q5_0, TS_QT_Q4_K, TS_QT_Q6_K};
#define NTYPES 9
/* the references, in kTypes' order */
static const ts__dot_fn kRefs[NTYPES] = {ts__dot_f32_ref,  ts__dot_f16_ref,  ts__dot_bf16_ref,
                                         ts__dot_q8_0_ref, ts__dot_q4_0_ref, ts__dot_q4_1_ref,
                                         ts__dot_q5_0_ref, ts__dot_q4_k_ref, ts__dot_q6_k_ref};
#define TABLE_DOTS(tb) \
  {(tb)->dot_f32, (tb)->dot_f16, (tb)->dot_bf16, (tb)->dot_q8_0, (tb)->dot_q4_0, (tb)->dot_q4_1, (tb)->dot_q5_0, (tb)->dot_q4_k, (tb)->dot_q6_k}

static bool is_block(uint32_t t) { return ts__qt_block(t); }
static bool is_k(uint32_t t) { return ts__qt_kquant(t); }
/* elements per block (1 for float types) */
static int64_t blk_of(uint32_t t) { return ts_qtype_block_elems(t); }

static void *xalloc(size_t n) {
  void *p = ts_malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Q4_K element i of a row, from quant.h's layout: its sub-block's scale and min, the 4-bit value,
 * the super-block's d and dmin. */
static void q4k_parts(const uint8_t *row, int64_t i, int *sc, int *m, int *q, float *d, float *dmin) {
  const uint8_t *p = row + 144 * (i / 256), *s = p + 4, *qs = p + 16;
  const int e = (int)(i % 256), j = e / 32;
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
  const int byte = qs[32 * (j / 2) + e % 32];
  *q = j % 2 ? byte >> 4 : byte & 15;
  *d = ts_f16_to_f32(rd16(p));
  *dmin = ts_f16_to_f32(rd16(p + 2));
}

/* Q6_K element i: its group's scale, the signed 6-bit value (-32..31), d. */
static void q6k_parts(const uint8_t *row, int64_t i, int *sc, int *q, float *d) {
  const uint8_t *p = row + 210 * (i / 256);
  const int e = (int)(i % 256), h = e / 128, k = e % 128 / 32, l = e % 32;
  const uint8_t *ql = p + 64 * h, *qh = p + 128 + 32 * h;
  const int lo = k == 0 ? ql[l] & 15 : k == 1 ? ql[l + 32] & 15 : k == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
  *q = (lo | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
  *sc = (int8_t)p[192 + e / 16];
  *d = ts_f16_to_f32(rd16(p + 208));
}

/* Independent decoder from the byte layouts in quant.h. */
static float decode(uint32_t t, const uint8_t *row, int64_t i) {
  int64_t b = i / 32, j = i % 32;
  switch (t) {
    case TS_QT_F32: { float f; memcpy(&f, row + 4 * i, 4); return f; }
    case TS_QT_F16: return ts_f16_to_f32(rd16(row + 2 * i));
    case TS_QT_BF16: { uint32_t u = (uint32_t)rd16(row + 2 * i) << 16; float f; memcpy(&f, &u, 4); return f; }
    case TS_QT_Q8_0: { const uint8_t *p = row + 34 * b; return ts_f16_to_f32(rd16(p)) * (float)(int8_t)p[2 + j]; }
    case TS_QT_Q4_0: {
      const uint8_t *p = row + 18 * b;
      int q = j < 16 ? (p[2 + j] & 15) : (p[2 + j - 16] >> 4);
      return ts_f16_to_f32(rd16(p)) * (float)(q - 8);
    }
    case TS_QT_Q4_1: {
      const uint8_t *p = row + 20 * b;
      int q = j < 16 ? (p[4 + j] & 15) : (p[4 + j - 16] >> 4);
      return ts_f16_to_f32(rd16(p)) * (float)q + ts_f16_to_f32(rd16(p + 2));
    }
    case TS_QT_Q5_0: {
      const uint8_t *p = row + 22 * b;
      const uint32_t qh = (uint32_t)p[2] | (uint32_t)p[3] << 8 | (uint32_t)p[4] << 16 | (uint32_t)p[5] << 24;
      int q = (j < 16 ? (p[6 + j] & 15) : (p[6 + j - 16] >> 4)) | (int)((qh >> j) & 1) << 4;
      return ts_f16_to_f32(rd16(p)) * (float)(q - 16);
    }
    case TS_QT_Q4_K: {
      int sc, m, q;
      float d, dmin;
      q4k_parts(row, i, &sc, &m, &q, &d, &dmin);
      return d * (float)sc * (float)q - dmin * (float)m;
    }
    case TS_QT_Q6_K: {
      int sc, q;
      float d;
      q6k_parts(row, i, &sc, &q, &d);
      return d * (float)sc * (float)q;
    }
  }
  return NAN;
}

/* Random valid row bytes: random bits, with finite fp16 scales/values (exponent field not all ones). */
static void random_row(uint32_t t, uint8_t *row, int64_t n, ts_rng *r) {
  size_t rb;
  ts_qtype_row_bytes(t, n, &rb);
  for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)ts_rng_next(r);
  if (t == TS_QT_F32) {
    for (int64_t i = 0; i < n; i++) { float f = ts_rng_normal(r); memcpy(row + 4 * i, &f, 4); }
  } else if (t == TS_QT_F16 || t == TS_QT_BF16) {
    for (int64_t i = 0; i < n; i++) {
      uint16_t h = t == TS_QT_F16 ? ts_f32_to_f16(ts_rng_normal(r)) : ts_f32_to_bf16(ts_rng_normal(r));
      memcpy(row + 2 * i, &h, 2);
    }
  } else if (is_k(t)) { /* finite scales: Q4_K's d and dmin lead the block, Q6_K's d ends it */
    size_t bb = ts_qtype_block_bytes(t);
    for (int64_t b = 0; b < n / 256; b++) {
      uint16_t d = ts_f32_to_f16(0.001f + 0.004f * (float)ts_rng_uniform(r));
      memcpy(row + bb * b + (t == TS_QT_Q6_K ? 208 : 0), &d, 2);
      if (t == TS_QT_Q4_K) {
        uint16_t dm = ts_f32_to_f16(0.002f * (float)ts_rng_uniform(r));
        memcpy(row + bb * b + 2, &dm, 2);
      }
    }
  } else {
    size_t bb = ts_qtype_block_bytes(t);
    for (int64_t b = 0; b < n / 32; b++) {
      uint16_t d = ts_f32_to_f16(0.01f + 0.05f * (float)ts_rng_uniform(r));
      memcpy(row + bb * b, &d, 2);
      if (t == TS_QT_Q4_1) {
        uint16_t m = ts_f32_to_f16(-0.4f * (float)ts_rng_uniform(r));
        memcpy(row + bb * b + 2, &m, 2);
      }
    }
  }
}

static void test_types(void) {
  size_t rb = 0;
  CHECK_OK(ts_qtype_row_bytes(TS_QT_Q4_1, 576, &rb));
  CHECK(rb == 360, "q4_1 576 -> %zu", rb);
  CHECK_OK(ts_qtype_row_bytes(TS_QT_Q8_0, 576, &rb));
  CHECK(rb == 612, "q8_0 576 -> %zu", rb);
  CHECK_OK(ts_qtype_row_bytes(TS_QT_Q6_K, 256, &rb));
  CHECK(rb == 210, "q6_k 256 -> %zu", rb);
  CHECK_ERR_CONTAINS(ts_qtype_row_bytes(TS_QT_Q4_0, 33, &rb), "block size 32");
  CHECK_STATUS(ts_qtype_row_bytes(77, 32, &rb), TS_ERR_DTYPE);
  for (int i = 0; i < NTYPES; i++) {
    uint32_t t = 999;
    CHECK_OK(ts_qtype_parse(ts_qtype_name(kTypes[i]), &t));
    CHECK(t == kTypes[i] && ts_qtype_has_kernels(t), "parse %s", ts_qtype_name(kTypes[i]));
  }
  CHECK(!ts_qtype_known(4) && !ts_qtype_known(31) && ts_qtype_known(TS_QT_BF16), "known ids");
  CHECK(strcmp(ts_qtype_name(4), "unknown") == 0, "name of a removed id");
  CHECK(!ts_qtype_has_kernels(TS_QT_Q5_K) && !ts_qtype_has_kernels(TS_QT_Q2_K), "q5_k, q2_k have no kernels");
  CHECK_OK(ts_qtype_row_bytes(TS_QT_Q4_K, 1024, &rb));
  CHECK(rb == 576, "q4_k 1024 -> %zu", rb);
  CHECK_OK(ts_qtype_row_bytes(TS_QT_Q5_0, 640, &rb));
  CHECK(rb == 440, "q5_0 640 -> %zu", rb);
  CHECK_ERR_CONTAINS(ts_qtype_row_bytes(TS_QT_Q4_K, 640, &rb), "block size 256");
}

/* Dequantize of random bytes matches the independent decoder exactly. */
static void test_dequant(void) {
  ts_rng r;
  ts_rng_seed(&r, 11);
  const int64_t n = 512;
  uint8_t *row = xalloc(4 * n);
  float *out = tst_alloc_guarded(n);
  for (int ti = 0; ti < NTYPES; ti++) {
    uint32_t t = kTypes[ti];
    random_row(t, row, n, &r);
    tst_poison(out, n);
    CHECK_OK(ts_quant_dequantize_row(t, row, out, n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != decode(t, row, i);
    CHECK(bad == 0 && tst_guard_ok(out, n), "dequant %s: %d mismatches", ts_qtype_name(t), bad);
  }
  ts_free(row);
  ts_free(out);
}

/* Fills x with blocks of different character: normal, zero, constant, one outlier, all negative. */
static void quant_input(float *x, int64_t n, ts_rng *r) {
  for (int64_t i = 0; i < n; i++) x[i] = ts_rng_normal(r) * (1.0f + (float)(i / 32 % 5));
  if (n >= 160) {
    for (int i = 0; i < 32; i++) x[32 + i] = 0;
    for (int i = 0; i < 32; i++) x[64 + i] = 0.75f;
    x[96 + 5] = -40.0f;
    for (int i = 0; i < 32; i++) x[128 + i] = -fabsf(x[128 + i]) - 1;
  }
}

static void test_quant_roundtrip(void) {
  ts_rng r;
  ts_rng_seed(&r, 12);
  const int64_t n = 1024;
  float *x = xalloc(n * 4), *y = tst_alloc_guarded(n);
  uint8_t *q = xalloc(4 * n);
  for (int ti = 0; ti < NTYPES; ti++) {
    uint32_t t = kTypes[ti];
    quant_input(x, n, &r);
    CHECK_OK(ts_quant_quantize_row(t, x, q, n));
    tst_poison(y, n);
    CHECK_OK(ts_quant_dequantize_row(t, q, y, n));
    int bad = 0;
    double worst = 0;
    for (int64_t b = 0; b < n / 32; b++) {
      const float *xb = x + 32 * b;
      float amax = 0, vmax = 0, lo = xb[0], hi = xb[0];
      for (int i = 0; i < 32; i++) {
        if (fabsf(xb[i]) > amax) { amax = fabsf(xb[i]); vmax = xb[i]; }
        lo = fminf(lo, xb[i]);
        hi = fmaxf(hi, xb[i]);
      }
      for (int i = 0; i < 32; i++) {
        double e = fabs((double)y[32 * b + i] - xb[i]), bound;
        if (t == TS_QT_F32) bound = 0;
        else if (t == TS_QT_F16) bound = fabs(xb[i]) * 0x1p-11 + 0x1p-25;
        else if (t == TS_QT_BF16) bound = fabs(xb[i]) * 0x1p-8;
        else if (t == TS_QT_Q8_0) {
          double d = amax / 127.0;
          bound = d / 2 + 127 * fabs(d - ts_f16_to_f32(ts_f32_to_f16((float)d)));
        } else if (t == TS_QT_Q4_0) {
          double d = vmax / -8.0, d16 = ts_f16_to_f32(ts_f32_to_f16((float)d));
          double clamped = d != 0 && xb[i] / d + 8 > 15.5;
          bound = (clamped ? fabs(d) : fabs(d) / 2) + 8 * fabs(d - d16);
        } else if (t == TS_QT_Q5_0) {
          double d = vmax / -16.0, d16 = ts_f16_to_f32(ts_f32_to_f16((float)d));
          double clamped = d != 0 && xb[i] / d + 16 > 31.5;
          bound = (clamped ? fabs(d) : fabs(d) / 2) + 16 * fabs(d - d16);
        } else if (t == TS_QT_Q4_K) {
          /* half a step inside the block's representable range [-dmin m, 15 d sc - dmin m] (its
           * decoded, rounded scales), plus how far x lies outside it (the clamp) */
          int sc, m, qv;
          float d, dmin;
          q4k_parts(q, 32 * b + i, &sc, &m, &qv, &d, &dmin);
          const double step = (double)d * sc, off = (double)dmin * m;
          bound = step / 2 + fmax(0, fmax(xb[i] - (15 * step - off), -off - xb[i])) + 1e-6 * (step + off);
        } else if (t == TS_QT_Q6_K) {
          int sc, qv;
          float d;
          q6k_parts(q, 32 * b + i, &sc, &qv, &d);
          const double step = (double)d * sc;
          bound = step / 2 + fmax(0, fmax(xb[i] - 31 * step, -32 * step - xb[i])) + 1e-6 * step;
        } else {
          double d = (hi - lo) / 15.0;
          bound = d / 2 + 15 * fabs(d - ts_f16_to_f32(ts_f32_to_f16((float)d))) +
                  fabs(lo - ts_f16_to_f32(ts_f32_to_f16(lo)));
        }
        bound = bound * (1 + 1e-6) + 1e-6 * amax;
        if (e > bound) bad++;
        if (bound > 0 && e / bound > worst) worst = e / bound;
      }
    }
    CHECK(bad == 0 && tst_guard_ok(y, n), "quantize %s: %d elements past the bound (worst err/bound %.3f)",
          ts_qtype_name(t), bad, worst);
    /* zero block round-trips to exact zeros */
    if (is_block(t)) CHECK(y[40] == 0 && y[63] == 0, "%s zero block -> %g %g", ts_qtype_name(t), y[40], y[63]);
  }
  CHECK_STATUS(ts_quant_quantize_row(TS_QT_Q4_1, x, q, 48), TS_ERR_SHAPE);
  CHECK_STATUS(ts_quant_quantize_row(TS_QT_Q6_K, x, q, 320), TS_ERR_SHAPE);
  CHECK_STATUS(ts_quant_quantize_row(TS_QT_Q5_K, x, q, 256), TS_ERR_DTYPE);
  ts_free(x);
  ts_free(y);
  ts_free(q);
}

static void act_alloc(ts_quant_act *a, int64_t n, void **mem) {
  size_t bytes = ts_quant_act_bytes(n);
  *mem = xalloc(bytes + 1);
  /* odd address: the layout must cope with any alignment */
  CHECK_OK(ts_quant_act_init(a, n, (char *)*mem + 1, bytes));
}

static void test_act(void) {
  ts_rng r;
  ts_rng_seed(&r, 13);
  const int64_t sizes[] = {32, 64, 96, 576, 1536};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    int64_t n = sizes[si];
    float *x = xalloc(n * 4);
    quant_input(x, n, &r);
    if (n >= 64) x[33] = 1e-30f; /* a tiny block value next to zeros */
    void *m0;
    ts_quant_act ref;
    act_alloc(&ref, n, &m0);
    ts__act_quantize_ref(n, x, ref.q, ref.d, ref.sum, ref.s);
    /* reference properties: |q| <= 127, sum matches, |x - q d| <= d/2 */
    int bad = 0;
    for (int64_t b = 0; b < n / 32; b++) {
      int32_t s = 0;
      /* |q d16 - x| <= |q dk - x| + |q| |dk - d16| with dk = amax / 127 (fp32) and d16 its fp16
       * rounding: dk / 2 plus 127 times the fp16 rounding error, relative 2^-11 for normal values and
       * absolute 2^-25 once dk falls into fp16's subnormal range (then d16 may even be 0) */
      double amax = 0;
      for (int i = 0; i < 32; i++) amax = fmax(amax, fabs(x[32 * b + i]));
      const double dk = amax / 127;
      const double qbound = dk * 0.5 * (1 + 1e-6) + 127 * fmax(dk * 0x1p-11, 0x1p-25);
      for (int i = 0; i < 32; i++) {
        int q = ref.q[32 * b + i];
        s += q;
        if (q < -127 || q > 127 || fabs((double)q * ref.d[b] - x[32 * b + i]) > qbound) bad++;
      }
      if (s != ref.sum[b]) bad++;
      /* d and s are fp16 values; s is the fp16 rounding of (d before rounding) * sum */
      if (ts_f16_to_f32(ts_f32_to_f16(ref.d[b])) != ref.d[b] || ts_f16_to_f32(ts_f32_to_f16(ref.s[b])) != ref.s[b]) bad++;
      if (fabs(ref.s[b] - (double)ref.d[b] * s) > 2.1 * 0x1p-11 * (fabs(ref.s[b]) + fabs((double)ref.d[b] * s)) + 1e-30) bad++;
    }
    CHECK(bad == 0, "n=%lld reference activation: %d bad values", (long long)n, bad);
    TST_EACH_VARIANT(&ts__quant_dispatch, v, ts__quant_table, tb) {
      void *m1;
      ts_quant_act a;
      act_alloc(&a, n, &m1);
      tb->act_quantize(n, x, a.q, a.d, a.sum, a.s);
      CHECK(memcmp(a.q, ref.q, (size_t)n) == 0 && memcmp(a.d, ref.d, (size_t)n / 8) == 0 &&
                memcmp(a.sum, ref.sum, (size_t)n / 8) == 0 && memcmp(a.s, ref.s, (size_t)n / 8) == 0,
            "act quantize %s n=%lld differs from the reference", LVNAME(v), (long long)n);
      ts_free(m1);
    }
    ts_free(m0);
    ts_free(x);
  }
  ts_quant_act a;
  char mem[64];
  CHECK_STATUS(ts_quant_act_init(&a, 48, mem, sizeof mem), TS_ERR_SHAPE);
  CHECK_STATUS(ts_quant_act_init(&a, 64, mem, 8), TS_ERR_INVALID_ARG);
}

/* The Q8_K form (quant.h): per super-block, v = the first element of largest |x|, iscale = -127 / v,
 * kq = rint(fp32(iscale x)) exactly, kd = 1 / iscale, kbs the sums of 16; every level's table
 * gives the same bytes; the public quantizer fills it when n % 256 == 0 (and only then). */
static void test_act_k(void) {
  ts_rng r;
  ts_rng_seed(&r, 17);
  const int64_t sizes[] = {256, 512, 1536};
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    const int64_t n = sizes[si];
    float *x = xalloc(n * 4);
    quant_input(x, n, &r);
    if (n >= 512) {
      for (int i = 256; i < 512; i++) x[i] = 0; /* an all-zero super-block */
      if (n > 512) x[700] = -x[600] - 100, x[600] = -x[700]; /* +amax and -amax both: the first wins */
    }
    void *m0;
    ts_quant_act a;
    act_alloc(&a, n, &m0);
    CHECK(a.kq && a.kd && a.kbs, "n=%lld: the Q8_K form is laid out", (long long)n);
    CHECK_OK(ts_quant_act_quantize(&a, x));
    int bad = 0;
    for (int64_t k = 0; k < n / 256; k++) {
      float amax = 0, v = 0;
      for (int j = 0; j < 256; j++)
        if (fabsf(x[256 * k + j]) > amax) amax = fabsf(x[256 * k + j]), v = x[256 * k + j];
      if (amax == 0) {
        for (int j = 0; j < 256; j++) bad += a.kq[256 * k + j] != 0;
        for (int g = 0; g < 16; g++) bad += a.kbs[16 * k + g] != 0;
        bad += a.kd[k] != 0;
        continue;
      }
      const float is = -127.0f / v;
      bad += a.kd[k] != 1.0f / is;
      for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int i = 0; i < 16; i++) {
          const int64_t e = 256 * k + 16 * g + i;
          const float p = is * x[e];
          sum += a.kq[e];
          bad += a.kq[e] != (int)rintf(p) || abs(a.kq[e]) > 127;
        }
        bad += a.kbs[16 * k + g] != sum;
      }
    }
    CHECK(bad == 0, "n=%lld Q8_K form: %d values off the definition", (long long)n, bad);
    TST_EACH_VARIANT(&ts__quant_dispatch, v, ts__quant_table, tb) {
      void *m1;
      ts_quant_act b;
      act_alloc(&b, n, &m1);
      tb->act_quantize_k(n, x, b.kq, b.kd, b.kbs);
      CHECK(!memcmp(b.kq, a.kq, (size_t)n) && !memcmp(b.kd, a.kd, (size_t)n / 64) && !memcmp(b.kbs, a.kbs, (size_t)n / 8),
            "Q8_K form %s n=%lld differs", LVNAME(v), (long long)n);
      ts_free(m1);
    }
    ts_free(m0);
    ts_free(x);
  }
  void *m2;
  ts_quant_act c;
  act_alloc(&c, 96, &m2);
  CHECK(!c.kq && !c.kd && !c.kbs, "n=96 has no Q8_K form");
  ts_free(m2);
}

/* Magnitude sum of the reference's per-block terms (block types) or products (float types). */
static double term_mag(uint32_t t, const uint8_t *row, int64_t n, const float *x, const ts_quant_act *xq) {
  double m = 0;
  if (t == TS_QT_Q4_K) { /* |d sc q| + |dmin m| per element, times |kd kq| */
    for (int64_t i = 0; i < n; i++) {
      int sc, mm, q;
      float d, dmin;
      q4k_parts(row, i, &sc, &mm, &q, &d, &dmin);
      m += (fabs((double)d * sc * q) + fabs((double)dmin * mm)) * fabs(xq->kd[i / 256]) * abs(xq->kq[i]);
    }
    return m;
  }
  if (t == TS_QT_Q6_K) { /* each element in a lane's positive part (q + 32) and in a subtraction (32) */
    for (int64_t i = 0; i < n; i++) {
      int sc, q;
      float d;
      q6k_parts(row, i, &sc, &q, &d);
      m += fabs((double)d * sc) * (abs(q + 32) + 32) * fabs(xq->kd[i / 256]) * abs(xq->kq[i]);
    }
    return m;
  }
  if (!is_block(t)) {
    for (int64_t i = 0; i < n; i++) m += fabs((double)decode(t, row, i) * x[i]);
    return m;
  }
  for (int64_t i = 0; i < n; i++) {
    double w = decode(t, row, i);
    /* |d_w q_w| d_x |q_x|: the magnitude of this element's share of the block's integer sum */
    double wq = t == TS_QT_Q4_1 ? fabs(w - ts_f16_to_f32(rd16(row + 20 * (i / 32) + 2))) : fabs(w);
    m += wq * xq->d[i / 32] * abs(xq->q[i]);
  }
  if (t == TS_QT_Q4_1)
    for (int64_t b = 0; b < n / 32; b++) m += fabs(ts_f16_to_f32(rd16(row + 20 * b + 2)) * xq->s[b]);
  return m;
}

static void test_dots(void) {
  ts_rng r;
  ts_rng_seed(&r, 14);
  const int64_t sizes[] = {1, 7, 16, 17, 32, 33, 64, 96, 128, 160, 224, 256, 512, 576, 1536, 2048};
  for (int ti = 0; ti < NTYPES; ti++) {
    uint32_t t = kTypes[ti];
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      int64_t n = sizes[si];
      if (n % blk_of(t)) continue;
      uint8_t *row = xalloc(4 * n);
      float *x = xalloc(4 * n);
      random_row(t, row, n, &r);
      quant_input(x, n, &r);
      void *mem = NULL;
      ts_quant_act xq = {0};
      if (n % 32 == 0) {
        act_alloc(&xq, n, &mem);
        ts__act_quantize_ref(n, x, xq.q, xq.d, xq.sum, xq.s);
        if (xq.kq) ts__act_quantize_k_ref(n, x, xq.kq, xq.kd, xq.kbs);
      }
      float ref = kRefs[ti](n, row, x, &xq);
      /* reference vs the fp64 truth sum deq(w) x */
      double truth = 0, abound = 0;
      for (int64_t i = 0; i < n; i++) {
        truth += (double)decode(t, row, i) * x[i];
        if (!is_block(t)) continue;
        if (is_k(t)) {
          /* |x - kq kd| <= |kd| (1/2 + 2^-24 127) + 127 |kd| 2^-24 (the fp32 product and 1 / iscale)
           * < 0.501 |kd|; and decode's fp32 value differs from the dot's exact weight by at most
           * 2^-23 (|d sc q| + |dmin m|) */
          double wexact;
          if (t == TS_QT_Q4_K) {
            int sc, mm, q;
            float d, dmin;
            q4k_parts(row, i, &sc, &mm, &q, &d, &dmin);
            wexact = fabs((double)d * sc * q) + fabs((double)dmin * mm);
          } else {
            int sc, q;
            float d;
            q6k_parts(row, i, &sc, &q, &d);
            wexact = fabs((double)d * sc * q);
          }
          abound += fabs(decode(t, row, i)) * fabs(xq.kd[i / 256]) * 0.501 + wexact * 0x1p-23 * fabs(x[i]);
        } else if (t == TS_QT_Q4_1) {
          const double m = ts_f16_to_f32(rd16(row + 20 * (i / 32) + 2));
          abound += (fabs(decode(t, row, i) - m) + fabs(m)) * xq.d[i / 32] * 0.563;
          if (i % 32 == 0) abound += fabs(m) * 0x1p-11 * fabs(xq.s[i / 32]) * 1.01;
        } else {
          abound += fabs(decode(t, row, i)) * xq.d[i / 32] * 0.563;
        }
      }
      double mag = term_mag(t, row, n, x, &xq);
      /* fp32 steps: block types one fma per block per lane (K-quants: the lane's int -> float too) */
      double nb = is_k(t) ? (double)n / 256 + 2 : is_block(t) ? (double)n / 32 : (double)n;
      double tolt = abound * 1.0001 + 2 * (nb + 8) * FLT_EPSILON * mag + 1e-30;
      CHECK(fabs(ref - truth) <= tolt, "%s n=%lld: reference dot %.9g vs truth %.9g (bound %.3g)", ts_qtype_name(t),
            (long long)n, ref, truth, tolt);
      double tol = is_block(t) ? 0 : 2 * (nb + 8) * FLT_EPSILON * mag + 1e-30;
      TST_EACH_VARIANT(&ts__quant_dispatch, vi, ts__quant_table, tb) {
        const ts__dot_fn fs[] = TABLE_DOTS(tb);
        float v = fs[ti](n, row, x, &xq);
        CHECK(fabs(v - ref) <= tol, "%s %s n=%lld: %.9g vs reference %.9g (tol %.3g)", ts_qtype_name(t), LVNAME(vi),
              (long long)n, v, ref, tol);
      }
      /* the public, dispatched entry */
      float pv = NAN;
      CHECK_OK(ts_quant_dot(t, row, n, x, is_block(t) ? &xq : NULL, &pv));
      CHECK(fabs(pv - ref) <= tol, "ts_quant_dot %s n=%lld: %.9g vs %.9g", ts_qtype_name(t), (long long)n, pv, ref);
      if (mem) ts_free(mem);
      ts_free(row);
      ts_free(x);
    }
  }
  /* Q8_0 with -128 weights (legal in files, never produced by the quantizer) */
  {
    uint8_t row[34 * 4];
    float x[128];
    ts_rng_seed(&r, 15);
    random_row(TS_QT_Q8_0, row, 128, &r);
    for (int b = 0; b < 4; b++) row[34 * b + 2 + 3] = 0x80;
    quant_input(x, 128, &r);
    void *mem;
    ts_quant_act xq;
    act_alloc(&xq, 128, &mem);
    ts__act_quantize_ref(128, x, xq.q, xq.d, xq.sum, xq.s);
    float ref = ts__dot_q8_0_ref(128, row, x, &xq);
    double tol = 2 * (4 + 8) * FLT_EPSILON * term_mag(TS_QT_Q8_0, row, 128, x, &xq);
    TST_EACH_VARIANT(&ts__quant_dispatch, vi, ts__quant_table, tb) {
      float v = tb->dot_q8_0(128, row, x, &xq);
      CHECK(fabs(v - ref) <= tol, "q8_0 with -128 weights %s: %.9g vs %.9g", LVNAME(vi), v, ref);
    }
    ts_free(mem);
  }
}

/* The K-quants' batch orders (quant_internal.h: llama.cpp's repacked 4-token Q4_K gemm and its
 * tiled Q6_K matmul): every level equal to its reference bit for bit; each reference within the
 * same bound of the fp64 truth as the row dots (test_dots), and, the integer parts being exact,
 * within 2 (nb + 8) eps sum_b |term_b| of the row dot's value (only the fp32 accumulation
 * differs: 4 fmas per super-block, or the product d_w S rounded before its fma). */
static void test_k_orders(void) {
  ts_rng r;
  ts_rng_seed(&r, 18);
  const int64_t sizes[] = {256, 512, 1024, 2048};
  static const uint32_t types[] = {TS_QT_Q4_K, TS_QT_Q6_K};
  for (int ti = 0; ti < 2; ti++)
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      const uint32_t t = types[ti];
      const int64_t n = sizes[si];
      uint8_t *row = xalloc(4 * n);
      float *x = xalloc(4 * n);
      random_row(t, row, n, &r);
      quant_input(x, n, &r);
      void *mem;
      ts_quant_act xq;
      act_alloc(&xq, n, &mem);
      CHECK_OK(ts_quant_act_quantize(&xq, x));
      const ts__dot_fn ref = t == TS_QT_Q4_K ? ts__dot_q4_k4_ref : ts__dot_q6_k_t_ref;
      const float v0 = ref(n, row, x, &xq), vrow = (t == TS_QT_Q4_K ? ts__dot_q4_k_ref : ts__dot_q6_k_ref)(n, row, x, &xq);
      const double tol = 2 * ((double)n / 256 * 4 + 8) * FLT_EPSILON * term_mag(t, row, n, x, &xq) + 1e-30;
      CHECK(fabs((double)v0 - vrow) <= tol, "%s n=%lld: batch order %.9g vs row order %.9g (tol %.3g)", ts_qtype_name(t),
            (long long)n, v0, vrow, tol);
      TST_EACH_VARIANT(&ts__quant_dispatch, vi, ts__quant_table, tb) {
        const float v = (t == TS_QT_Q4_K ? tb->dot_q4_k4 : tb->dot_q6_k_t)(n, row, x, &xq);
        CHECK(!memcmp(&v, &v0, 4), "%s batch order %s n=%lld: %.9g vs reference %.9g", ts_qtype_name(t), LVNAME(vi),
              (long long)n, v, v0);
      }
      ts_free(mem);
      ts_free(row);
      ts_free(x);
    }
}

static void test_matvec(void) {
  ts_rng r;
  ts_rng_seed(&r, 16);
  ts_context *ctx1 = NULL, *ctx2 = NULL;
  CHECK_OK(ts_context_create(&ctx1, 1));
  CHECK_OK(ts_context_create(&ctx2, 2));
  const int64_t shapes[][2] = {{1, 32}, {3, 64}, {7, 96}, {17, 576}, {257, 576}, {5, 1536}, {130, 1536}, {9, 4160}, {33, 2048}};
  for (int ti = 0; ti < NTYPES; ti++) {
    uint32_t t = kTypes[ti];
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      int64_t rows = shapes[si][0], cols = shapes[si][1];
      if (cols % blk_of(t)) continue;
      size_t rb;
      CHECK_OK(ts_qtype_row_bytes(t, cols, &rb));
      uint8_t *W = xalloc(rb * rows);
      float *x = xalloc(4 * cols), *y = tst_alloc_guarded(rows), *yref = xalloc(4 * rows);
      for (int64_t i = 0; i < rows; i++) random_row(t, W + rb * i, cols, &r);
      quant_input(x, cols, &r);
      void *mem;
      ts_quant_act xq;
      act_alloc(&xq, cols, &mem);
      ts__act_quantize_ref(cols, x, xq.q, xq.d, xq.sum, xq.s);
      if (xq.kq) ts__act_quantize_k_ref(cols, x, xq.kq, xq.kd, xq.kbs);
      for (int64_t i = 0; i < rows; i++) yref[i] = kRefs[ti](cols, W + rb * i, x, &xq);
      for (int c = 0; c < 2; c++) {
        tst_poison(y, rows);
        CHECK_OK(ts_quant_matvec(c ? ctx2 : ctx1, t, W, rows, cols, x, y));
        int bad = 0;
        for (int64_t i = 0; i < rows; i++) {
          double nb = (double)cols;
          double tol = is_block(t) ? 0 : 2 * (nb + 8) * FLT_EPSILON * term_mag(t, W + rb * i, cols, x, &xq) + 1e-30;
          if (!(fabs(y[i] - yref[i]) <= tol)) bad++;
        }
        CHECK(bad == 0 && tst_guard_ok(y, rows), "matvec %s %lldx%lld threads=%d: %d rows off", ts_qtype_name(t),
              (long long)rows, (long long)cols, c + 1, bad);
      }
      /* pre-quantized activation path gives the same numbers */
      float *y2 = tst_alloc_guarded(rows);
      tst_poison(y2, rows);
      CHECK_OK(ts_quant_matvec_act(ctx2, t, W, rows, cols, x, is_block(t) ? &xq : NULL, y2));
      CHECK(memcmp(y, y2, 4 * rows) == 0 && tst_guard_ok(y2, rows), "matvec_act %s differs", ts_qtype_name(t));
      ts_free(y2);
      ts_free(mem);
      ts_free(W);
      ts_free(x);
      ts_free(y);
      ts_free(yref);
    }
  }
  /* errors */
  float x[256] = {0}, y[4];
  uint8_t W[4 * 256 * 4] = {0};
  CHECK_ERR_CONTAINS(ts_quant_matvec(ctx1, TS_QT_Q4_1, W, 2, 48, x, y), "multiple of");
  CHECK_STATUS(ts_quant_matvec(ctx1, TS_QT_Q8_0, W, 2, 33, x, y), TS_ERR_SHAPE);
  CHECK_STATUS(ts_quant_matvec(ctx1, TS_QT_Q5_K, W, 1, 256, x, y), TS_ERR_DTYPE);
  CHECK_ERR_CONTAINS(ts_quant_matvec(ctx1, TS_QT_Q6_K, W, 1, 64, x, y), "block size 256");
  {
    ts_quant_act no_k = {.n = 256, .q = (int8_t *)W, .d = x, .sum = (int32_t *)W, .s = x};
    CHECK_ERR_CONTAINS(ts_quant_matvec_act(ctx1, TS_QT_Q4_K, W, 1, 256, x, &no_k, y), "Q8_K form");
  }
  CHECK_STATUS(ts_quant_matvec(ctx1, 77, W, 1, 32, x, y), TS_ERR_DTYPE);
  CHECK_STATUS(ts_quant_matvec(ctx1, TS_QT_F32, W, -1, 32, x, y), TS_ERR_SHAPE);
  CHECK_STATUS(ts_quant_matvec(ctx1, TS_QT_Q4_0, W, 1, 32, NULL, y), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_quant_matvec_act(ctx1, TS_QT_Q4_0, W, 1, 32, x, NULL, y), TS_ERR_INVALID_ARG);
  float f = 0;
  CHECK_STATUS(ts_quant_dot(TS_QT_Q8_0, W, 32, x, NULL, &f), TS_ERR_INVALID_ARG);
  /* zero columns: y = 0 for every type */
  for (int ti = 0; ti < NTYPES; ti++) {
    float yz[3] = {NAN, NAN, NAN};
    CHECK_OK(ts_quant_matvec(ctx1, kTypes[ti], W, 3, 0, x, yz));
    CHECK(yz[0] == 0 && yz[1] == 0 && yz[2] == 0, "%s with 0 columns", ts_qtype_name(kTypes[ti]));
    CHECK_OK(ts_quant_dot(kTypes[ti], W, 0, x, NULL, &f));
    CHECK(f == 0, "%s dot of length 0", ts_qtype_name(kTypes[ti]));
  }
  /* f32 with an odd column count works (no blocks) */
  float w7[3 * 7], x7[7], y7[3];
  for (int i = 0; i < 21; i++) w7[i] = (float)(i % 5) - 2;
  for (int i = 0; i < 7; i++) x7[i] = (float)i * 0.5f;
  CHECK_OK(ts_quant_matvec(ctx1, TS_QT_F32, w7, 3, 7, x7, y7));
  for (int rr = 0; rr < 3; rr++) {
    float e = 0;
    for (int i = 0; i < 7; i++) e += w7[rr * 7 + i] * x7[i];
    CHECK(fabsf(y7[rr] - e) < 1e-5f, "f32 7-col row %d: %g vs %g", rr, y7[rr], e);
  }
  ts_context_destroy(ctx1);
  ts_context_destroy(ctx2);
}

/* Blocks at odd addresses (GGUF allows alignment 1): quantize, dequantize and dot from buf + 1 give
 * the same bits as from an aligned buffer (and no misaligned access: the sanitizer build runs this
 * with UBSan fatal). */
static void test_unaligned(void) {
  static const uint32_t types[] = {TS_QT_Q8_0, TS_QT_Q4_0, TS_QT_Q4_1, TS_QT_Q5_0, TS_QT_Q4_K, TS_QT_Q6_K};
  const int64_t n = 256;
  ts_rng r;
  ts_rng_seed(&r, 29);
  float *x = xalloc(n * 4), *d0 = xalloc(n * 4), *d1 = xalloc(n * 4);
  quant_input(x, n, &r);
  void *m0;
  ts_quant_act xq;
  act_alloc(&xq, n, &m0);
  CHECK_OK(ts_quant_act_quantize(&xq, x));
  for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
    size_t rb = 0;
    CHECK_OK(ts_qtype_row_bytes(types[ti], n, &rb));
    uint8_t *a = xalloc((int64_t)rb + 64), *u = xalloc((int64_t)rb + 64);
    CHECK_OK(ts_quant_quantize_row(types[ti], x, a, n));
    CHECK_OK(ts_quant_quantize_row(types[ti], x, u + 1, n));
    CHECK(memcmp(a, u + 1, rb) == 0, "%s: quantize at an odd address", ts_qtype_name(types[ti]));
    CHECK_OK(ts_quant_dequantize_row(types[ti], a, d0, n));
    CHECK_OK(ts_quant_dequantize_row(types[ti], u + 1, d1, n));
    CHECK(memcmp(d0, d1, (size_t)n * 4) == 0, "%s: dequantize at an odd address", ts_qtype_name(types[ti]));
    float y0 = 0, y1 = 1;
    CHECK_OK(ts_quant_dot(types[ti], a, n, x, &xq, &y0));
    CHECK_OK(ts_quant_dot(types[ti], u + 1, n, x, &xq, &y1));
    CHECK(memcmp(&y0, &y1, 4) == 0, "%s: dot at an odd address", ts_qtype_name(types[ti]));
    ts_free(a), ts_free(u);
  }
  ts_free(m0), ts_free(x), ts_free(d0), ts_free(d1);
}

int main(void) {
  printf("quant kernels at %s (supported %s)\n", ts__level_name(ts__dispatch_level(&ts__quant_dispatch)),
         ts_isa_name(ts_isa_supported()));
  test_types();
  test_dequant();
  test_quant_roundtrip();
  test_act();
  test_act_k();
  test_dots();
  test_k_orders();
  test_matvec();
  test_unaligned();
  return tst_finish();
}
