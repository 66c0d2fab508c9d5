/* Scalar reference activations and exp, evaluated in double with libm. The tanh-GELU reference
 * uses x / (1 + exp(-2u)), which equals 0.5 x (1 + tanh(u)) exactly in real arithmetic but does
 * not cancel for negative x, so it stays a faithful reference where the output is tiny. */
#include <math.h>
#include <string.h>

#include "kernels/kernels_internal.h"

static double ref_act(ts_act act, double x) {
  switch (act) {
    case TS_ACT_RELU: return x < 0 ? 0.0 : x; /* NaN and -0 pass through, as the vector max does */
    case TS_ACT_SILU:
      if (isinf(x)) return x > 0 ? x : -0.0;
      return x / (1.0 + exp(-x));
    case TS_ACT_GELU_TANH: {
      if (isinf(x)) return x > 0 ? x : -0.0;
      double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
      return x / (1.0 + exp(-2.0 * u));
    }
    case TS_ACT_GELU_ERF:
      if (isinf(x)) return x > 0 ? x : -0.0;
      return 0.5 * x * erfc(-x * 0.70710678118654752);
    case TS_ACT_TANH: return tanh(x);
    default: return x;
  }
}

void ts__act_rows_ref(ts_act act, int64_t rows, int64_t n, const float *x, int64_t ldx, float *y,
                      int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    if (act == TS_ACT_NONE) {
      if (yr != xr) memmove(yr, xr, (size_t)n * sizeof(float));
      continue;
    }
    for (int64_t j = 0; j < n; j++) yr[j] = (float)ref_act(act, xr[j]);
  }
}

void ts__vexp_ref(int64_t n, const float *x, float *y) {
  for (int64_t j = 0; j < n; j++) y[j] = (float)exp((double)x[j]);
}
