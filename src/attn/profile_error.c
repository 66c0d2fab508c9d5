/* Model error statistics: predicted against measured block times (relative error quantiles and
 * correlations), used by bench/bench_attn_model.c to judge a cost model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/attn_profile.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Quantile q of sorted v[0..n) by linear interpolation between order statistics. */
static double quantile(const double *v, int64_t n, double q) {
  double pos = q * (double)(n - 1);
  int64_t i = (int64_t)pos;
  if (i >= n - 1) return v[n - 1];
  return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

static double pearson(const double *x, const double *y, int64_t n, bool logs) {
  double mx = 0, my = 0;
  for (int64_t i = 0; i < n; i++) mx += logs ? log(x[i]) : x[i], my += logs ? log(y[i]) : y[i];
  mx /= (double)n, my /= (double)n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = (logs ? log(x[i]) : x[i]) - mx, b = (logs ? log(y[i]) : y[i]) - my;
    sxy += a * b, sxx += a * a, syy += b * b;
  }
  return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0.0;
}

ts_status ts_attn_model_error_compute(const double *measured, const double *predicted, int64_t n, bool fit_scale,
                                      ts_attn_model_error *out) {
  if (!out || n < 1 || !measured || !predicted)
    return ts_error(TS_ERR_INVALID_ARG, "attn model error: NULL arrays/output or n = %lld < 1", (long long)n);
  memset(out, 0, sizeof *out);
  for (int64_t i = 0; i < n; i++)
    if (!(measured[i] > 0) || !(predicted[i] > 0) || !isfinite(measured[i]) || !isfinite(predicted[i]))
      return ts_error(TS_ERR_INVALID_ARG, "attn model error: entry %lld: measured %g, predicted %g must be positive",
                      (long long)i, measured[i], predicted[i]);
  double *tmp = malloc((size_t)n * sizeof *tmp), *pred = malloc((size_t)n * sizeof *pred);
  if (!tmp || !pred) {
    free(tmp), free(pred);
    return ts_error(TS_ERR_OOM, "attn model error: cannot allocate %lld entries", (long long)n);
  }
  double scale = 1.0;
  if (fit_scale) {
    for (int64_t i = 0; i < n; i++) tmp[i] = measured[i] / predicted[i];
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    scale = quantile(tmp, n, 0.5);
  }
  out->n = n, out->scale = scale;
  for (int64_t i = 0; i < n; i++) {
    pred[i] = predicted[i] * scale;
    tmp[i] = fabs(pred[i] - measured[i]) / measured[i];
    out->sum_measured += measured[i], out->sum_predicted += pred[i], out->mean_rel += tmp[i];
  }
  out->mean_rel /= (double)n;
  qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
  out->median_rel = quantile(tmp, n, 0.5);
  out->p90_rel = quantile(tmp, n, 0.9);
  out->max_rel = tmp[n - 1];
  out->pearson = pearson(pred, measured, n, false);
  out->pearson_log = pearson(pred, measured, n, true);
  free(tmp), free(pred);
  return TS_OK;
}
