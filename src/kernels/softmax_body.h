/* Row softmax body, compiled per ISA by softmax_avx2.c / softmax_avx512.c after their vf_* layer.
 * Three passes per row: max; e = exp(x - max) stored into y while summing; y *= 1/sum. In place
 * works because pass 2 reads each x before it writes the same y. A row that is all -inf (max is
 * -inf) is written as zeros (exp(-inf - -inf) would be NaN). */
#include "kernels/vmath_body.h"

#define TS__CAT_(a, b) a##b
#define TS__CAT(a, b) TS__CAT_(a, b)

void TS__CAT(ts__softmax_rows_, VSFX)(int64_t rows, int64_t n, const float *x, int64_t ldx,
                                      float *y, int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    /* max, two vector chains; tail lanes filled with -inf */
    vf m0 = vf_set1(-INFINITY), m1 = m0;
    int64_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
      m0 = vf_max(m0, vf_loadu(xr + i));
      m1 = vf_max(m1, vf_loadu(xr + i + VL));
    }
    for (; i < n; i += VL) m0 = vf_max(m0, vf_load_part(xr + i, (int)(n - i < VL ? n - i : VL), -INFINITY));
    const float mx = vf_hmax(vf_max(m0, m1));
    if (mx == -INFINITY) { /* fully masked row, unless a NaN hid from the max (then all NaN) */
      float fill = 0.0f;
      for (int64_t j = 0; j < n; j++)
        if (xr[j] != xr[j]) fill = NAN;
      for (int64_t j = 0; j < n; j++) yr[j] = fill;
      continue;
    }
    const vf vmx = vf_set1(mx);
    vf s0 = vf_zero(), s1 = vf_zero();
    for (i = 0; i + 2 * VL <= n; i += 2 * VL) {
      vf e0 = vm_exp(vf_sub(vf_loadu(xr + i), vmx));
      vf e1 = vm_exp(vf_sub(vf_loadu(xr + i + VL), vmx));
      vf_storeu(yr + i, e0);
      vf_storeu(yr + i + VL, e1);
      s0 = vf_add(s0, e0);
      s1 = vf_add(s1, e1);
    }
    for (; i < n; i += VL) {
      int cnt = (int)(n - i < VL ? n - i : VL);
      vf e = vm_exp(vf_sub(vf_load_part(xr + i, cnt, -INFINITY), vmx)); /* tail lanes: exp(-inf) = 0 */
      vf_store_part(yr + i, e, cnt);
      s0 = vf_add(s0, e);
    }
    const vf inv = vf_set1(1.0f / vf_hsum(vf_add(s0, s1)));
    for (i = 0; i + VL <= n; i += VL) vf_storeu(yr + i, vf_mul(vf_loadu(yr + i), inv));
    if (i < n) {
      int cnt = (int)(n - i);
      vf_store_part(yr + i, vf_mul(vf_load_part(yr + i, cnt, 0.0f), inv), cnt);
    }
  }
}
