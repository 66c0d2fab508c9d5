/* Layer inputs from files: a connectivity (.npy of 0/1 values, or a Matrix Market pattern) and
 * the weights of a layer (.npy fp32 [cout][cin][k][k], or [cout][cin] for k = 1). Unlike a sparse
 * pattern (nonzero = connected), a connectivity .npy must hold only 0 and 1: any other value
 * (0.5, -1, NaN) most likely means a weight tensor was passed as the connectivity, which would
 * silently become a dense layer. Every error names the file. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gconv/gconv_internal.h"
#include "tessera/io.h"

/* Element o (in elements) of t's data as a double. */
static double elem(const ts_tensor *t, int64_t o) {
  const void *d = t->data;
  switch (t->dtype) {
    case TS_BOOL:
    case TS_U8: return ((const uint8_t *)d)[o];
    case TS_I8: return ((const int8_t *)d)[o];
    case TS_I32: return ((const int32_t *)d)[o];
    case TS_I64: return (double)((const int64_t *)d)[o];
    case TS_F32: return ((const float *)d)[o];
    case TS_F64: return ((const double *)d)[o];
    case TS_F16: return ts_f16_to_f32(((const uint16_t *)d)[o]);
    case TS_BF16: return ts_bf16_to_f32(((const uint16_t *)d)[o]);
    default: return NAN;
  }
}

static bool has_ext(const char *path, const char *ext) {
  const char *dot = strrchr(path, '.');
  return dot && !strchr(dot, '/') && strcasecmp(dot, ext) == 0;
}

ts_status ts_gconv_conn_load(const char *path, ts_csr *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!path || !out) return ts_error(TS_ERR_INVALID_ARG, "gconv connectivity: NULL argument");
  if (!has_ext(path, ".npy")) return ts_pattern_load(path, out); /* .mtx: its entries are the connections */
  ts_tensor t;
  TS_TRY(ts_npy_read(path, &t));
  ts_status s = TS_OK;
  /* ts_npy_read gives a contiguous array (bool already 0/1) */
  if (t.ndim == 2)
    for (int64_t i = 0; s == TS_OK && i < t.shape[0]; i++)
      for (int64_t j = 0; j < t.shape[1]; j++) {
        const double v = elem(&t, i * t.shape[1] + j);
        if (v != 0 && v != 1) {
          s = ts_error(TS_ERR_FORMAT,
                       "%s: connectivity entry (%lld, %lld) is %g: a connectivity holds only 0 and 1 (output channel x "
                       "input channel)",
                       path, (long long)i, (long long)j, v);
          break;
        }
      }
  if (s == TS_OK) {
    s = ts_csr_from_tensor(&t, out);
    if (s != TS_OK) ts_error_prefix("%s: ", path);
  }
  ts_tensor_free(&t);
  if (s == TS_OK && (out->rows < 1 || out->cols < 1)) {
    s = ts_error(TS_ERR_SHAPE, "%s: connectivity is %lld x %lld; a layer needs at least one output and one input channel",
                 path, (long long)out->rows, (long long)out->cols);
    ts_csr_free(out);
  }
  return s;
}

ts_status ts_gconv_weights_load(const char *path, const ts_gconv_layer *l, float **out) {
  if (out) *out = NULL;
  if (!path || !l || !out) return ts_error(TS_ERR_INVALID_ARG, "gconv weights: NULL argument");
  TS_TRY(ts_gconv_layer_check(l));
  const int k = l->ksize;
  ts_tensor t;
  TS_TRY(ts_npy_read(path, &t));
  ts_status s = TS_OK;
  const bool shape4 = t.ndim == 4 && t.shape[0] == l->cout && t.shape[1] == l->cin && t.shape[2] == k && t.shape[3] == k;
  const bool shape2 = k == 1 && t.ndim == 2 && t.shape[0] == l->cout && t.shape[1] == l->cin;
  if (t.dtype != TS_F32)
    s = ts_error(TS_ERR_DTYPE, "%s: weights must be float32 (<f4), got %s", path, ts_dtype_name(t.dtype));
  else if (!shape4 && !shape2) {
    char got[96];
    int n = 0;
    got[0] = 0;
    for (int d = 0; d < t.ndim && d < TS_MAX_DIMS && n < 70; d++)
      n += snprintf(got + n, sizeof got - (size_t)n, "%s%lld", d ? ", " : "", (long long)t.shape[d]);
    s = ts_error(TS_ERR_SHAPE, "%s: weights of shape (%s); the layer needs (cout, cin, k, k) = (%d, %d, %d, %d)%s", path,
                 got, l->cout, l->cin, k, k, k == 1 ? " or (cout, cin)" : "");
  }
  const size_t n = (size_t)l->cout * l->cin * k * k;
  float *w = s == TS_OK ? ts_malloc(n * sizeof(float)) : NULL;
  if (s == TS_OK && !w) s = ts_error(TS_ERR_OOM, "%s: out of memory for %zu weights", path, n);
  if (s == TS_OK) {
    memcpy(w, t.data, n * sizeof(float)); /* contiguous C order: [cout][cin][k][k] either way */
    for (size_t i = 0; i < n && s == TS_OK; i++)
      if (!isfinite(w[i])) s = ts_error(TS_ERR_FORMAT, "%s: weight %zu is not finite (%g)", path, i, (double)w[i]);
  }
  ts_tensor_free(&t);
  if (s != TS_OK) {
    ts_free(w);
    return s;
  }
  *out = w;
  return TS_OK;
}
