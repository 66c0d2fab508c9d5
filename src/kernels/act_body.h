/* Elementwise activations and exp over rows, compiled per ISA by act_avx2.c / act_avx512.c after
 * their vf_* layer. One loop shape for all: full vectors, then one partial vector per row tail.
 * The switch is outside the loops so each activation gets its own tight loop. */
#include <string.h>

#include "kernels/vmath_body.h"

#define TS__CAT_(a, b) a##b
#define TS__CAT(a, b) TS__CAT_(a, b)

/* y[0..n) = OP(x[0..n)) for one row; OP is an expression of the vf `v`. */
#define TS__ROW_LOOP(OP)                                                  \
  do {                                                                    \
    int64_t i = 0;                                                        \
    for (; i + VL <= n; i += VL) {                                        \
      vf v = vf_loadu(xr + i);                                            \
      vf_storeu(yr + i, (OP));                                            \
    }                                                                     \
    if (i < n) {                                                          \
      int cnt = (int)(n - i);                                             \
      vf v = vf_load_part(xr + i, cnt, 0.0f);                             \
      vf_store_part(yr + i, (OP), cnt);                                   \
    }                                                                     \
  } while (0)

/* tanh-GELU gate argument 2u = 2 sqrt(2/pi) (x + 0.044715 x^3) = x (k0 + k1 x^2) */
static inline vf act_gelu_tanh(vf v) {
  const vf k0 = vf_set1(1.5957691216057308f), k1 = vf_set1(0.0713548162726009f);
  return vm_x_sigmoid(v, vf_mul(v, vf_fmadd(k1, vf_mul(v, v), k0)));
}

void TS__CAT(ts__act_rows_, VSFX)(ts_act act, int64_t rows, int64_t n, const float *x, int64_t ldx,
                                  float *y, int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    switch (act) {
      case TS_ACT_RELU: TS__ROW_LOOP(vf_max(vf_zero(), v)); break; /* NaN: max returns v */
      case TS_ACT_SILU: TS__ROW_LOOP(vm_x_sigmoid(v, v)); break;
      case TS_ACT_GELU_TANH: TS__ROW_LOOP(act_gelu_tanh(v)); break;
      case TS_ACT_GELU_ERF: TS__ROW_LOOP(vm_gelu_erf(v)); break;
      case TS_ACT_TANH: TS__ROW_LOOP(vm_tanh(v)); break;
      default: /* TS_ACT_NONE */
        if (yr != xr) memmove(yr, xr, (size_t)n * sizeof(float));
        break;
    }
  }
}

void TS__CAT(ts__vexp_, VSFX)(int64_t n, const float *x, float *y) {
  const float *xr = x;
  float *yr = y;
  TS__ROW_LOOP(vm_exp(v));
}
