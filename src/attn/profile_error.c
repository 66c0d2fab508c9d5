/* Model error statistics: predicted against measured block times (relative error quantiles and
 * correlations), used by bench/bench_attn_model.c to judge a cost model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/attn_profile.h"
#include "tessera/measure.h"

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
  if (!out || n < 1 || n > INT32_MAX || !measured || !predicted)
    return ts_error(TS_ERR_INVALID_ARG, "attn model error: NULL arrays/output or n = %lld not in [1, 2^31)", (long long)n);
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
    scale = ts_median(tmp, (int)n);
  }
  out->n = n, out->scale = scale;
  for (int64_t i = 0; i < n; i++) {
    pred[i] = predicted[i] * scale;
    tmp[i] = fabs(pred[i] - measured[i]) / measured[i];
    out->sum_measured += measured[i], out->sum_predicted += pred[i], out->mean_rel += tmp[i];
  }
  out->mean_rel /= (double)n;
  out->median_rel = ts_quantile(tmp, (int)n, 0.5); /* sorts tmp */
  out->p90_rel = ts_quantile(tmp, (int)n, 0.9);
  out->max_rel = tmp[n - 1];
  out->pearson = pearson(pred, measured, n, false);
  out->pearson_log = pearson(pred, measured, n, true);
  free(tmp), free(pred);
  return TS_OK;
}
