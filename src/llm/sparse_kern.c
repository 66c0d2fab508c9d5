/* Scalar forms of activation sparsity's AXPY (sparse_internal.h) and its dispatch table. fp32,
 * one input row at a time, in the order the SIMD forms use per element (a block's scale times the
 * coefficient, then an FMA per element; Q4_1 adds c * m once per block and element): the runtime
 * fallback; the tests compare every form with a double-precision reference. */
#include <math.h>

#include "llm/sparse_internal.h"
#include "llm/quant_internal.h"

void ts__axpy_q8_0_ref(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n,
                       float *y) {
  for (int k = 0; k < n; k++) {
    const ts__blk_q8_0 *b = (const ts__blk_q8_0 *)(base + (size_t)idx[k] * stride);
    for (int64_t j = 0; j < nblk; j++) {
      const float cd = c[k] * ts_f16_to_f32(b[j].d);
      for (int i = 0; i < 32; i++) y[32 * j + i] = fmaf(cd, (float)b[j].q[i], y[32 * j + i]);
    }
  }
}

void ts__axpy_q4_1_ref(const uint8_t *base, size_t stride, int64_t nblk, const int32_t *idx, const float *c, int n,
                       float *y) {
  for (int k = 0; k < n; k++) {
    const ts__blk_q4_1 *b = (const ts__blk_q4_1 *)(base + (size_t)idx[k] * stride);
    for (int64_t j = 0; j < nblk; j++) {
      const float cd = c[k] * ts_f16_to_f32(b[j].d), cm = c[k] * ts_f16_to_f32(b[j].m);
      for (int i = 0; i < 32; i++) {
        const int q = i < 16 ? b[j].qs[i] & 0xF : b[j].qs[i - 16] >> 4;
        y[32 * j + i] += fmaf(cd, (float)q, cm);
      }
    }
  }
}

void ts__gdot_q8_0_ref(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out) {
  for (int k = 0; k < n; k++) out[k] = ts__dot_q8_0_ref(x->n, data + (size_t)rows[k] * row_bytes, NULL, x);
}
void ts__gdot_q4_1_ref(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out) {
  for (int k = 0; k < n; k++) out[k] = ts__dot_q4_1_ref(x->n, data + (size_t)rows[k] * row_bytes, NULL, x);
}
void ts__gdot_q5_0_ref(const uint8_t *data, size_t row_bytes, const int32_t *rows, int n, const ts_quant_act *x, float *out) {
  for (int k = 0; k < n; k++) out[k] = ts__dot_q5_0_ref(x->n, data + (size_t)rows[k] * row_bytes, NULL, x);
}

/* Two levels: the AVX2 forms also serve AVX-512 machines (no AVX-512 form yet: the machines these
 * were written and measured on, 2026-12-07, had no AVX-512 to check one against the reference). */
static const ts__sparse_kern g_ref = {ts__axpy_q8_0_ref, ts__axpy_q4_1_ref, ts__gdot_q8_0_ref, ts__gdot_q4_1_ref,
                                      ts__gdot_q5_0_ref};
static const ts__sparse_kern g_avx2 = {ts__axpy_q8_0_avx2, ts__axpy_q4_1_avx2, ts__gdot_q8_0_avx2, ts__gdot_q4_1_avx2,
                                       ts__gdot_q5_0_avx2};
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX2, &g_avx2}};
ts__dispatch ts__sparse_dispatch = TS__DISPATCH("llm_sparse", g_variants);

const ts__sparse_kern *ts__sparse_kern_active(void) { return ts__dispatch_table(&ts__sparse_dispatch); }

ts__axpy_fn ts__sparse_axpy(const ts__sparse_kern *k, uint32_t type) {
  return type == TS_QT_Q8_0 ? k->axpy_q8_0 : type == TS_QT_Q4_1 ? k->axpy_q4_1 : NULL;
}

ts__gdot_fn ts__sparse_gdot(const ts__sparse_kern *k, uint32_t type) {
  return type == TS_QT_Q8_0 ? k->gdot_q8_0 : type == TS_QT_Q4_1 ? k->gdot_q4_1 : type == TS_QT_Q5_0 ? k->gdot_q5_0 : NULL;
}

void ts__tmat_axpy(const ts__sparse_kern *k, const ts__tmat *t, int64_t r0, int64_t r1, const int32_t *idx,
                   const float *c, int n, float *y) {
  const ts__axpy_fn f = ts__sparse_axpy(k, t->type);
  for (int p = 0; p < t->npiece && n > 0; p++) {
    const int64_t a = r0 > t->cut[p] ? r0 : t->cut[p], b = r1 < t->cut[p + 1] ? r1 : t->cut[p + 1];
    if (a >= b) continue;
    f(t->at[p] + (size_t)((a - t->cut[p]) / 32) * t->bsz, t->seg[p], (b - a + 31) / 32, idx, c, n, y + (a - r0));
  }
}
