/* Batched Y = W X on the file's rows for one thread: the loop over the table's dot (the scalar
 * level, rows off a packed group, and the types without packed kernels: Q5_0 and the K-quants;
 * AVX2 and AVX-512 run the packed kernels of quant_pgemm_avx2.c and quant_pgemm_vnni_avx512.c for
 * Q8_0, Q4_0 and Q4_1 instead). Tokens go in chunks of TCHUNK, each row read once per chunk while
 * it stays in L1 (the outputs are independent dots: any loop order gives the same bits). */
#include "llm/quant_internal.h"

#define TCHUNK 16

void ts__quant_gemm_with(const ts__quant_table *t, uint32_t type, const void *W, size_t row_bytes, int64_t rows,
                         int64_t cols, const float *xf, int64_t ldx, const ts__qbatch *x, int T, float *y,
                         int64_t ldy) {
  if (rows <= 0 || T <= 0) return;
  ts__dot_fn f = ts__quant_dot_fn(t, type);
  const uint8_t *w = W;
  const int64_t nb = cols / TS_QK;
  /* the K-quants' batch orders for llama.cpp's matmul of tokens gfrom.. (quant_internal.h) */
  const int gn = x->gn > 0 ? x->gn : T - x->gfrom, g1 = x->gfrom + gn - gn % 4;
  if (type == TS_QT_Q6_K && gn >= 8) f = t->dot_q6_k_t;
  for (int t0 = 0; t0 < T; t0 += TCHUNK) {
    const int tn = T - t0 < TCHUNK ? T - t0 : TCHUNK;
    ts_quant_act a[TCHUNK];
    const float *xr[TCHUNK];
    ts__dot_fn ft[TCHUNK];
    for (int i = 0; i < tn; i++) {
      const int tk = t0 + i;
      ft[i] = type == TS_QT_Q4_K && tk >= x->gfrom && tk < g1 ? t->dot_q4_k4 : f;
      a[i] = (ts_quant_act){cols, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
      xr[i] = NULL;
      if (ts__qt_kquant(type)) {
        a[i].kq = (int8_t *)(x->kq + (size_t)tk * (size_t)cols);
        a[i].kd = (float *)(x->kd + (size_t)tk * (size_t)(cols / TS_QKK));
        a[i].kbs = (int16_t *)(x->kbs + (size_t)tk * (size_t)(cols / 16));
      } else if (ts__qt_block32(type)) {
        a[i].q = (int8_t *)(x->q + (size_t)tk * (size_t)cols);
        a[i].d = (float *)(x->d + (size_t)tk * (size_t)nb);
        a[i].sum = (int32_t *)(x->sum + (size_t)tk * (size_t)nb);
        a[i].s = (float *)(x->s + (size_t)tk * (size_t)nb);
      } else {
        xr[i] = xf + (size_t)tk * (size_t)ldx;
      }
    }
    for (int64_t r = 0; r < rows; r++) {
      const uint8_t *wr = w + (size_t)r * row_bytes;
      for (int i = 0; i < tn; i++) y[(size_t)(t0 + i) * (size_t)ldy + (size_t)r] = ft[i](cols, wr, xr[i], &a[i]);
    }
  }
}
