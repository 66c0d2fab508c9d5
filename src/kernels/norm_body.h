/* LayerNorm and RMSNorm over rows, compiled per ISA by norm_avx2.c / norm_avx512.c after their
 * vf_* layer. LayerNorm takes two passes for the statistics (sum, then the centred sum of squares)
 * so a large common offset does not cancel the variance away; each sum runs in two vector chains
 * and the scalar mean / 1/sqrt are formed in double. gamma / beta may be NULL (1 / 0). */
#include <math.h>

#define TS__CAT_(a, b) a##b
#define TS__CAT(a, b) TS__CAT_(a, b)

static inline int tail_of(int64_t n, int64_t i) { return (int)(n - i < VL ? n - i : VL); }

/* y = (x - shift) * scale * gamma + beta over one row (beta NULL: no add; gamma NULL: no mul). */
static inline void norm_apply(int64_t n, const float *xr, float *yr, float shift, float scale,
                              const float *gamma, const float *beta) {
  const vf vs = vf_set1(shift), vk = vf_set1(scale);
  for (int64_t i = 0; i < n; i += VL) {
    int cnt = tail_of(n, i);
    vf v = vf_mul(vf_sub(vf_load_part(xr + i, cnt, 0.0f), vs), vk);
    if (gamma) v = vf_mul(v, vf_load_part(gamma + i, cnt, 0.0f));
    if (beta) v = vf_add(v, vf_load_part(beta + i, cnt, 0.0f));
    if (cnt == VL)
      vf_storeu(yr + i, v);
    else
      vf_store_part(yr + i, v, cnt);
  }
}

void TS__CAT(ts__layernorm_rows_, VSFX)(int64_t rows, int64_t n, const float *x, int64_t ldx,
                                        const float *gamma, const float *beta, float eps, float *y,
                                        int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    if (n == 0) continue;
    vf s0 = vf_zero(), s1 = vf_zero();
    int64_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
      s0 = vf_add(s0, vf_loadu(xr + i));
      s1 = vf_add(s1, vf_loadu(xr + i + VL));
    }
    for (; i < n; i += VL) s0 = vf_add(s0, vf_load_part(xr + i, tail_of(n, i), 0.0f));
    const float mean = (float)((double)vf_hsum(vf_add(s0, s1)) / (double)n);
    const vf vm = vf_set1(mean);
    s0 = s1 = vf_zero();
    for (i = 0; i + 2 * VL <= n; i += 2 * VL) {
      vf d0 = vf_sub(vf_loadu(xr + i), vm), d1 = vf_sub(vf_loadu(xr + i + VL), vm);
      s0 = vf_fmadd(d0, d0, s0);
      s1 = vf_fmadd(d1, d1, s1);
    }
    for (; i < n; i += VL) {
      int cnt = tail_of(n, i);
      vf d = vf_sub(vf_load_part(xr + i, cnt, mean), vm); /* tail lanes: mean - mean = 0 */
      s0 = vf_fmadd(d, d, s0);
    }
    const double var = (double)vf_hsum(vf_add(s0, s1)) / (double)n;
    const float rstd = (float)(1.0 / sqrt(var + (double)eps));
    norm_apply(n, xr, yr, mean, rstd, gamma, beta);
  }
}

void TS__CAT(ts__rmsnorm_rows_, VSFX)(int64_t rows, int64_t n, const float *x, int64_t ldx,
                                      const float *gamma, float eps, float *y, int64_t ldy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * ldx;
    float *yr = y + r * ldy;
    if (n == 0) continue;
    vf s0 = vf_zero(), s1 = vf_zero();
    int64_t i = 0;
    for (; i + 2 * VL <= n; i += 2 * VL) {
      vf a = vf_loadu(xr + i), b = vf_loadu(xr + i + VL);
      s0 = vf_fmadd(a, a, s0);
      s1 = vf_fmadd(b, b, s1);
    }
    for (; i < n; i += VL) {
      vf a = vf_load_part(xr + i, tail_of(n, i), 0.0f);
      s0 = vf_fmadd(a, a, s0);
    }
    const double ms = (double)vf_hsum(vf_add(s0, s1)) / (double)n;
    const float rstd = (float)(1.0 / sqrt(ms + (double)eps));
    norm_apply(n, xr, yr, 0.0f, rstd, gamma, NULL);
  }
}
