/* Scalar reference LayerNorm / RMSNorm: statistics accumulated in double (two passes for the
 * variance), output rounded once to float. */
#include <math.h>

#include "kernels/kernels_internal.h"

void ts__layernorm_rows_ref(int64_t rows, int64_t n, const float *x, int64_t ldx, const float *gamma,
                            const float *beta, float eps, float *y, int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    if (n == 0) continue;
    double s = 0, v = 0;
    for (int64_t j = 0; j < n; j++) s += xr[j];
    const double mean = s / (double)n;
    for (int64_t j = 0; j < n; j++) v += ((double)xr[j] - mean) * ((double)xr[j] - mean);
    const double rstd = 1.0 / sqrt(v / (double)n + (double)eps);
    for (int64_t j = 0; j < n; j++) {
      double t = ((double)xr[j] - mean) * rstd;
      if (gamma) t *= gamma[j];
      if (beta) t += beta[j];
      yr[j] = (float)t;
    }
  }
}

void ts__rmsnorm_rows_ref(int64_t rows, int64_t n, const float *x, int64_t ldx, const float *gamma,
                          float eps, float *y, int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    if (n == 0) continue;
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += (double)xr[j] * xr[j];
    const double rstd = 1.0 / sqrt(s / (double)n + (double)eps);
    for (int64_t j = 0; j < n; j++) {
      double t = (double)xr[j] * rstd;
      if (gamma) t *= gamma[j];
      yr[j] = (float)t;
    }
  }
}
