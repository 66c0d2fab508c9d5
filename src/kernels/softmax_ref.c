/* Scalar reference row softmax in double: y = exp(x - max) / sum; an all -inf row gives zeros. */
#include <math.h>

#include "kernels/kernels_internal.h"

void ts__softmax_rows_ref(int64_t rows, int64_t n, const float *x, int64_t ldx, float *y,
                          int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    double mx = -INFINITY;
    int has_nan = 0;
    for (int64_t j = 0; j < n; j++) {
      if (xr[j] != xr[j]) has_nan = 1;
      if (xr[j] > mx) mx = xr[j];
    }
    if (mx == -INFINITY && !has_nan) {
      for (int64_t j = 0; j < n; j++) yr[j] = 0.0f;
      continue;
    }
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += exp((double)xr[j] - mx);
    if (has_nan) s = NAN;
    /* read x[j] before writing y[j]: in place is fine */
    for (int64_t j = 0; j < n; j++) yr[j] = (float)(exp((double)xr[j] - mx) / s);
  }
}
