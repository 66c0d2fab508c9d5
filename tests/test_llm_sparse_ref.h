/* The LLM activation-sparsity tests' shared pieces (test_llm_sparse.c: llama; test_llm_sparse_gemma.c
 * and test_llm_sparse_gemma_cal.c: gemma3): the values of a transposed copy, thresholds placed in
 * gaps of the values, the masked matrix-vector product over a copy in double, and the tiny Gemma 3
 * of the real file's weight types. */
#ifndef TEST_LLM_SPARSE_REF_H
#define TEST_LLM_SPARSE_REF_H

#include <math.h>
#include <stdlib.h>

#include "llm/llm_sparse_internal.h"
#include "llm/quant_internal.h"
#include "test_llm_tiny.h"

/* W[r][j] of a transposed copy, dequantized */
static inline double tm_at(const ts__tmat *t, int64_t r, int64_t j) {
  int p = 0;
  while (r >= t->cut[p + 1]) p++;
  const uint8_t *b = t->at[p] + (size_t)j * t->seg[p] + (size_t)((r - t->cut[p]) / 32) * t->bsz;
  float v[32];
  ts__dequant_ref(t->type, b, v, 32);
  return v[(r - t->cut[p]) % 32];
}

/* A threshold at about quantile q of |v[0..n)| in the widest gap between neighbouring magnitudes
 * near it (the runtime's fp32 values then fall on the same side as the reference's). */
static inline int cmpd(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static inline float gap_threshold(const double *v, int n, double q) {
  double *a = malloc((size_t)n * sizeof *a);
  for (int i = 0; i < n; i++) a[i] = fabs(v[i]);
  qsort(a, (size_t)n, sizeof *a, cmpd);
  const int lo = (int)(n * (q - 0.1)) < 1 ? 1 : (int)(n * (q - 0.1)), hi = (int)(n * (q + 0.1)) >= n ? n - 1 : (int)(n * (q + 0.1));
  int best = lo;
  for (int i = lo; i <= hi; i++)
    if (a[i] / (a[i - 1] + 1e-30) > a[best] / (a[best - 1] + 1e-30)) best = i;
  const float t = (float)sqrt(a[best] * a[best - 1]);
  free(a);
  return t;
}

/* y[r] = sum over |x_j| > t of x_j W[r][j] from the transposed copy (rows n_out) */
static inline void sp_mv(const ts__tmat *t, const double *x, double th, double *y) {
  for (int64_t r = 0; r < t->n_out; r++) {
    double s = 0;
    for (int64_t j = 0; j < t->n_in; j++)
      if (fabs(x[j]) > th) s += x[j] * tm_at(t, r, j);
    y[r] = s;
  }
}

/* The tiny Gemma 3 (test_llm_sparse_gemma.c's header): the Gemma 3 270M Q4_K_M file's types by
 * tensor, on d 192 (no K-quant fits it), 4 heads of 64 (o: 256 wide), n_ff 256, two layers. */
static inline uint32_t g3_type(int l, const char *t, uint32_t w) {
  (void)w;
  if (!strcmp(t, "attn_v")) return l % 2 ? TS_QT_Q8_0 : TS_QT_Q5_0;
  if (!strcmp(t, "attn_output")) return TS_QT_Q4_K;
  if (!strcmp(t, "ffn_down")) return l % 2 ? TS_QT_Q4_K : TS_QT_Q6_K;
  return TS_QT_Q5_0;
}

static inline ts_llm_model *tiny_g3(const char *file) {
  tiny_cfg c = tiny_gemma(TS_QT_Q5_0);
  c.d = 192, c.ff = 256, c.n_head = 4, c.n_kv = 1, c.hd = 64;
  c.wtype_of = g3_type;
  char path[2048];
  tst_tmp_path(path, sizeof path, file);
  tiny_write(&c, path);
  ts_llm_model *m = NULL;
  CHECK_OK(ts_llm_model_load(&m, path));
  return m;
}

#endif
