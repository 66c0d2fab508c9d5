/* Scalar forms of the predictors' kernels (pred_internal.h), the codes of x, and the dispatch. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "llm/pred_internal.h"

static inline int pc64(uint64_t v) { return __builtin_popcountll(v); }

void ts__signbit_ref(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n, int32_t *neg) {
  for (int64_t i = 0; i < n; i++) {
    const uint64_t *w = sw + (size_t)i * (size_t)nw;
    int c = 0;
    for (int j = 0; j < nw; j++) c += pc64(w[j] ^ sx[j]);
    neg[i] = c;
  }
}

void ts__grasp_ref(const uint64_t *sw, const uint64_t *bw, int nw, const ts__pred_x *px, int64_t n, const float *u0,
                   const float *u1, float *est) {
  for (int64_t i = 0; i < n; i++) {
    const uint64_t *w = sw + (size_t)i * (size_t)nw, *b = bw + (size_t)i * (size_t)nw;
    int32_t c1[TS__PRED_G] = {0}, c2[TS__PRED_G] = {0}, c3[TS__PRED_G] = {0};
    for (int j = 0; j < nw; j++) {
      const uint64_t D = w[j] ^ px->sx[j];
      for (int a = 0; a < TS__PRED_G; a++) {
        const uint64_t g = px->gm[a][j], gb = g & b[j];
        c1[a] += pc64(g & D);
        c2[a] += pc64(gb);
        c3[a] += pc64(gb & D);
      }
    }
    est[i] = ts__grasp_combine(px, u0[i], u1[i], c1, c2, c3);
  }
}

int ts__pred_codes(const float *x, int64_t d, float k, bool grasp, ts__pred_x *px, int32_t *oidx, float *oval) {
  const int nw = (int)((d + 63) / 64);
  px->nw = nw;
  memset(px->sx, 0, (size_t)nw * sizeof(uint64_t));
  for (int64_t j = 0; j < d; j++)
    if (signbit(x[j])) px->sx[j >> 6] |= (uint64_t)1 << (j & 63);
  if (!grasp) return 0;
  double s = 0, s2 = 0;
  for (int64_t j = 0; j < d; j++) {
    const double a = fabs((double)x[j]);
    s += a, s2 += a * a;
  }
  const double mu = s / (double)d, var = s2 / (double)d - mu * mu, sd = var > 0 ? sqrt(var) : 0;
  const float lo = (float)(mu - 0.5 * sd), hi = (float)(mu + 0.5 * sd), out = (float)(mu + (double)k * sd);
  double gs[TS__PRED_G] = {0};
  for (int a = 0; a < TS__PRED_G; a++) memset(px->gm[a], 0, (size_t)nw * sizeof(uint64_t)), px->gn[a] = 0;
  int no = 0;
  for (int64_t j = 0; j < d; j++) {
    const float a = fabsf(x[j]);
    if (a > out) {
      oidx[no] = (int32_t)j, oval[no++] = x[j];
      continue;
    }
    const int g = a < lo ? 0 : a < hi ? 1 : 2;
    px->gm[g][j >> 6] |= (uint64_t)1 << (j & 63);
    px->gn[g]++;
    gs[g] += a;
  }
  for (int a = 0; a < TS__PRED_G; a++) px->gv[a] = px->gn[a] ? (float)(gs[a] / px->gn[a]) : 0.0f;
  return no;
}

/* The AVX2 level is x86-64-v3's scalar POPCNT (4 per cycle on Zen 3, 1 on Intel cores), which beats
 * a pshufb nibble count for rows of 6-9 words; the AVX-512 level counts 8 words per VPOPCNTQ. */
static const ts__pred_kern g_ref = {ts__signbit_ref, ts__grasp_ref};
static const ts__pred_kern g_avx2 = {ts__signbit_avx2, ts__grasp_avx2};
static const ts__pred_kern g_v512 = {ts__signbit_popcnt_avx512, ts__grasp_popcnt_avx512};
static const ts__variant g_variants[] = {{TS__LV_SCALAR, &g_ref}, {TS__LV_AVX2, &g_avx2}, {TS__LV_AVX512_VPOPCNTDQ, &g_v512}};
ts__dispatch ts__pred_dispatch = TS__DISPATCH("llm_pred", g_variants);

const ts__pred_kern *ts__pred_kern_active(void) { return ts__dispatch_table(&ts__pred_dispatch); }
