/* Layer descriptors, connectivity checks and hashing, and the dense masked reference. */
#include <math.h>
#include <string.h>

#include "gconv/gconv_internal.h"
#include "tessera/measure.h"

ts_status ts_gconv_layer_check(const ts_gconv_layer *l) {
  if (!l) return ts_error(TS_ERR_INVALID_ARG, "gconv layer: NULL");
  const struct {
    const char *name;
    int v, lo, hi;
  } f[] = {{"n", l->n, 1, 1 << 20},        {"cin", l->cin, 1, 1 << 24}, {"cout", l->cout, 1, 1 << 24},
           {"h", l->h, 1, 1 << 16},        {"w", l->w, 1, 1 << 16},     {"ksize", l->ksize, 1, 3},
           {"stride", l->stride, 1, 4}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].v < f[i].lo || f[i].v > f[i].hi)
      return ts_error(TS_ERR_INVALID_ARG, "gconv layer: %s must be in [%d, %d], got %d", f[i].name, f[i].lo, f[i].hi,
                      f[i].v);
  if (l->ksize != 1 && l->ksize != 3)
    return ts_error(TS_ERR_INVALID_ARG, "gconv layer: ksize must be 1 or 3, got %d", l->ksize);
  /* every offset the kernels form is int32: channel planes (padded, or im2col rows) of one image */
  int pad = l->ksize / 2;
  double plane = (double)(l->h + 2 * pad) * (l->w + 2 * pad) + 64;
  double rows = (double)l->cin * l->ksize * l->ksize;
  if (rows * plane > 2147483647.0 || (double)l->cout * plane > 2147483647.0)
    return ts_error(TS_ERR_OVERFLOW, "gconv layer: %d x %d x %d x %d per image exceeds the int32 offset limit", l->cin,
                    l->ksize * l->ksize, l->h, l->w);
  return TS_OK;
}

void ts_gconv_layer_out(const ts_gconv_layer *l, int *ho, int *wo) {
  int pad = l->ksize / 2;
  if (ho) *ho = (l->h + 2 * pad - l->ksize) / l->stride + 1;
  if (wo) *wo = (l->w + 2 * pad - l->ksize) / l->stride + 1;
}

double ts_gconv_layer_flops(const ts_gconv_layer *l, int64_t nnz) {
  int ho, wo;
  ts_gconv_layer_out(l, &ho, &wo);
  return 2.0 * l->n * ho * wo * l->ksize * l->ksize * (double)nnz;
}

ts_status ts_gconv_conn_check(const ts_gconv_layer *l, const ts_csr *conn) {
  TS_TRY(ts_gconv_layer_check(l));
  if (!conn) return ts_error(TS_ERR_INVALID_ARG, "gconv: connectivity is NULL");
  if (conn->rows != l->cout || conn->cols != l->cin)
    return ts_error(TS_ERR_SHAPE, "gconv: connectivity is %lld x %lld, the layer needs cout x cin = %d x %d",
                    (long long)conn->rows, (long long)conn->cols, l->cout, l->cin);
  return ts_csr_validate(conn);
}

uint64_t ts_gconv_conn_hash(const ts_csr *conn) {
  ts_hash h;
  ts_hash_init(&h, "gconv-conn");
  ts_hash_i64(&h, conn->rows), ts_hash_i64(&h, conn->cols);
  ts_hash_bytes(&h, conn->rowptr, (size_t)(conn->rows + 1) * sizeof(int64_t));
  ts_hash_bytes(&h, conn->col, (size_t)conn->nnz * sizeof(int32_t));
  return h.h;
}

ts_status ts_gconv_reference(const ts_gconv_layer *l, const ts_csr *conn, const float *weights, const float *in,
                             float *out) {
  TS_TRY(ts_gconv_conn_check(l, conn));
  if (!weights || !in || !out) return ts_error(TS_ERR_INVALID_ARG, "gconv reference: NULL buffer");
  int ho, wo;
  ts_gconv_layer_out(l, &ho, &wo);
  const int k = l->ksize, pad = k / 2;
  const int64_t hw = (int64_t)l->h * l->w, ohw = (int64_t)ho * wo;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < l->n; b++)
    for (int o = 0; o < l->cout; o++) {
      float *y = out + ((int64_t)b * l->cout + o) * ohw;
      for (int i = 0; i < ho; i++)
        for (int j = 0; j < wo; j++) {
          double s = 0;
          for (int64_t e = conn->rowptr[o]; e < conn->rowptr[o + 1]; e++) {
            const int c = conn->col[e];
            const float *x = in + ((int64_t)b * l->cin + c) * hw, *wt = weights + ((int64_t)o * l->cin + c) * k * k;
            for (int r = 0; r < k; r++) {
              int yy = i * l->stride - pad + r;
              if (yy < 0 || yy >= l->h) continue;
              for (int q = 0; q < k; q++) {
                int xx = j * l->stride - pad + q;
                if (xx >= 0 && xx < l->w) s += (double)wt[r * k + q] * (double)x[(int64_t)yy * l->w + xx];
              }
            }
          }
          y[(int64_t)i * wo + j] = (float)s;
        }
    }
  return TS_OK;
}
