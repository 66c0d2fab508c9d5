/* Batched Y = W X on the file's rows for one thread: the loop over the table's dot (the scalar
 * level, and rows off a packed group; AVX2 and AVX-512 run the packed kernels of
 * quant_pgemm_avx2.c and quant_pgemm_vnni_avx512.c instead). */
#include "llm/quant_internal.h"

static bool is_block(uint32_t type) { return type == TS_QT_Q8_0 || type == TS_QT_Q4_0 || type == TS_QT_Q4_1; }

void ts__quant_gemm_with(const ts__quant_table *t, uint32_t type, const void *W, size_t row_bytes, int64_t rows,
                         int64_t cols, const float *xf, int64_t ldx, const ts__qbatch *x, int T, float *y,
                         int64_t ldy) {
  if (rows <= 0 || T <= 0) return;
  ts__dot_fn f = ts__quant_dot_fn(t, type);
  const uint8_t *w = W;
  const int64_t nb = cols / TS_QK;
  for (int tk = 0; tk < T; tk++) {
    ts_quant_act a = {cols, NULL, NULL, NULL, NULL};
    const float *xr = NULL;
    if (is_block(type)) {
      a.q = (int8_t *)(x->q + (size_t)tk * (size_t)cols);
      a.d = (float *)(x->d + (size_t)tk * (size_t)nb);
      a.sum = (int32_t *)(x->sum + (size_t)tk * (size_t)nb);
      a.s = (float *)(x->s + (size_t)tk * (size_t)nb);
    } else {
      xr = xf + (size_t)tk * (size_t)ldx;
    }
    for (int64_t r = 0; r < rows; r++) y[(size_t)tk * (size_t)ldy + (size_t)r] = f(cols, w + (size_t)r * row_bytes, xr, &a);
  }
}
