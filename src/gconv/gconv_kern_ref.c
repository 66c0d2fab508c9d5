/* Scalar reference of the partition kernel (ts_gconv_kernel_ref) and the pieces every variant
 * shares: row blocking, weight packing, dispatch and the checked public entry point. */
#include "gconv/gconv_internal.h"

int ts_gconv_row_blocks(int rows, int *heights) {
  if (rows <= 0) return 0;
  const int nb = (rows + TS_GCONV_MR - 1) / TS_GCONV_MR, base = rows / nb, extra = rows % nb;
  if (heights)
    for (int i = 0; i < nb; i++) heights[i] = base + (i < extra);
  return nb;
}

/* Block of row i: its first row r0 and height mb. */
static void block_of(int rows, int i, int *r0, int *mb) {
  const int nb = ts_gconv_row_blocks(rows, NULL), base = rows / nb, extra = rows % nb;
  int start = 0;
  for (int bi = 0; bi < nb; bi++) {
    int h = base + (bi < extra);
    if (i < start + h) {
      *r0 = start, *mb = h;
      return;
    }
    start += h;
  }
  *r0 = start, *mb = 1; /* not reached for 0 <= i < rows */
}

void ts_gconv_pack_weights(int rows, int64_t K, const float *w, int64_t ldw, float *wp) {
  for (int i = 0; i < rows; i++) {
    int r0, mb;
    block_of(rows, i, &r0, &mb);
    float *blk = wp + (int64_t)r0 * K;
    for (int64_t k = 0; k < K; k++) blk[k * mb + (i - r0)] = w[(int64_t)i * ldw + k];
  }
}

void ts_gconv_kernel_ref(int rows, int64_t K, const float *wp, const float *b, const int32_t *off, float *const *c,
                         int64_t j0, int64_t j1) {
  for (int i = 0; i < rows; i++) {
    int r0, mb;
    block_of(rows, i, &r0, &mb);
    const float *blk = wp + (int64_t)r0 * K;
    for (int64_t j = j0; j < j1; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += (double)blk[k * mb + (i - r0)] * (double)b[off[k] + j];
      c[i][j] = (float)s;
    }
  }
}

static const ts__gconv_kern_variant g_ref = {ts_gconv_kernel_ref}, g_avx2 = {ts__gconv_kern_avx2},
                                    g_avx512 = {ts__gconv_kern_avx512};
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX2, &g_avx2}, {TS__LV_AVX512, &g_avx512}};
ts__dispatch ts__gconv_dispatch = TS__DISPATCH("gconv", g_variants);

ts__gconv_kern_fn ts__gconv_kern(void) {
  return ((const ts__gconv_kern_variant *)ts__dispatch_table(&ts__gconv_dispatch))->fn;
}

ts_isa ts_gconv_kernel_isa(void) { return ts__level_isa(ts__dispatch_level(&ts__gconv_dispatch)); }

ts_status ts_gconv_kernel_run(int rows, int64_t K, const float *wp, const float *b, const int32_t *off,
                              float *const *c, int64_t j0, int64_t j1) {
  if (rows < 0 || K < 0 || j0 < 0 || j1 < j0 || K > INT32_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "gconv kernel: bad sizes rows=%d K=%lld columns [%lld, %lld)", rows, (long long)K,
                    (long long)j0, (long long)j1);
  if (rows == 0 || j1 == j0) return TS_OK;
  if (!c || (K > 0 && (!wp || !b || !off))) return ts_error(TS_ERR_INVALID_ARG, "gconv kernel: NULL buffer");
  for (int i = 0; i < rows; i++)
    if (!c[i]) return ts_error(TS_ERR_INVALID_ARG, "gconv kernel: output row %d is NULL", i);
  ts__gconv_kern()(rows, K, wp, b, off, c, j0, j1);
  return TS_OK;
}
