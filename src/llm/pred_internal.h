/* Activation predictors' kernels (issue 39, tessera/llm_pred.h): training-free guesses of which
 * neurons of a ReLU-gated MLP are zero, from bits of the gate weights and of the token's
 * normalized MLP input x.
 *
 *   sign-bit (SparseInfer): sw[i] = sign bits of W_gate row i (1 = negative), sx of x;
 *     neg_i = popcount(sw[i] XOR sx) over the d bits, the number of negative products.
 *   Grasp (group-based): x's non-outlier elements fall into three magnitude groups a (per-token
 *     sigma bins of |x|), masks gm[a] and group means gv[a]; W_gate's row i carries its sign bits
 *     and one magnitude bit bw[i] (|w| above the row's median), the row's two mean magnitudes
 *     u0[i], u1[i]. With D = sw[i] XOR sx (negative products) the estimate of W_gate[i] . x over
 *     the non-outliers is
 *       est_i = sum_a gv[a] (u0[i] (n_a - 2 pc(gm[a] & D)) + (u1[i] - u0[i]) (pc(gm[a] & bw) - 2 pc(gm[a] & bw & D)))
 *     (n_a the group's size); the outliers' exact part is added by the caller.
 * The forms return the same integers (counts), so the scalar reference and every SIMD form agree
 * exactly up to the fp32 sums of est (the same order in every form: a = 0, 1, 2 per row). */
#ifndef TS_LLM_PRED_INTERNAL_H
#define TS_LLM_PRED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/dispatch.h"

#define TS__PRED_MAXW 128 /* 64-bit words of a row: d <= 8192 */
#define TS__PRED_G 3      /* Grasp's magnitude groups of non-outliers (the 2-bit code's fourth value: outlier) */

/* A token's codes of x (every thread builds its own). */
typedef struct ts__pred_x {
  int nw;
  uint64_t sx[TS__PRED_MAXW];
  uint64_t gm[TS__PRED_G][TS__PRED_MAXW];
  float gv[TS__PRED_G];
  int gn[TS__PRED_G];
} ts__pred_x;

typedef void (*ts__signbit_fn)(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n, int32_t *neg);
typedef void (*ts__grasp_fn)(const uint64_t *sw, const uint64_t *bw, int nw, const ts__pred_x *px, int64_t n,
                             const float *u0, const float *u1, float *est);
typedef struct ts__pred_kern {
  ts__signbit_fn signs;
  ts__grasp_fn grasp;
} ts__pred_kern;

/* rows [0, n) of sw / bw (nw words each) */
void ts__signbit_ref(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n, int32_t *neg);
void ts__signbit_avx2(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n, int32_t *neg);
void ts__signbit_popcnt_avx512(const uint64_t *sw, int nw, const uint64_t *sx, int64_t n, int32_t *neg);
void ts__grasp_ref(const uint64_t *sw, const uint64_t *bw, int nw, const ts__pred_x *px, int64_t n, const float *u0,
                   const float *u1, float *est);
void ts__grasp_avx2(const uint64_t *sw, const uint64_t *bw, int nw, const ts__pred_x *px, int64_t n, const float *u0,
                    const float *u1, float *est);
void ts__grasp_popcnt_avx512(const uint64_t *sw, const uint64_t *bw, int nw, const ts__pred_x *px, int64_t n,
                             const float *u0, const float *u1, float *est);

extern ts__dispatch ts__pred_dispatch;
const ts__pred_kern *ts__pred_kern_active(void);

/* x's codes: sign bits, and (grasp) the outliers |x_j| > mean + k std of |x| into oidx/oval
 * (returned count), the rest into the three groups split at mean -/+ std / 2. */
int ts__pred_codes(const float *x, int64_t d, float k, bool grasp, ts__pred_x *px, int32_t *oidx, float *oval);

/* The combination of a row's counts (shared by every form: the same fp32 operations). */
static inline float ts__grasp_combine(const ts__pred_x *px, float u0, float u1, const int32_t c1[TS__PRED_G],
                                      const int32_t c2[TS__PRED_G], const int32_t c3[TS__PRED_G]) {
  float e = 0.0f;
  for (int a = 0; a < TS__PRED_G; a++)
    e += px->gv[a] * (u0 * (float)(px->gn[a] - 2 * c1[a]) + (u1 - u0) * (float)(c2[a] - 2 * c3[a]));
  return e;
}

#endif
