/* The register-blocked depthwise convolution kernel, written once over a small vector vocabulary
 * that conv_direct_avx512.c and conv_direct_avx2.c define before including this file:
 *   VEC, VW (lanes), VZERO(), VLOADU(p), VSET1(x), VFMA(a,b,c) = a*b+c, VADD, VRELU(v) (NaN stays
 *   NaN), VSTORE_N(p, v, n) (the first n lanes), FN(name) (name suffix).
 * Input is the padded, phase-split copy (conv_internal.h), so the VW inputs of one tap are
 * contiguous for every stride. (The direct algorithm's vector kernels put output channels in the
 * lanes instead: conv_direct_oc_avx512.c, conv_direct_oc_avx2.c.) */
#include "conv/conv_internal.h"

/* Depthwise: one channel; accumulators acc[PB][QV] cover PB output rows x QV*VW columns, and each
 * broadcast weight tap is shared by all PB*QV vectors. */
enum { DW_PB = 4 };
static inline __attribute__((always_inline)) void FN(dw_tile)(const ts__conv_direct_args *a, int p, int np, int q0,
                                                               const int QV) {
  const ts_conv_desc *d = a->d;
  const ts__conv_pad_geom *g = a->g;
  const int R = d->r, S = d->s, Q = a->q, sw = g->sw;
  const size_t rowlen = (size_t)sw * g->wrow;
  VEC acc[DW_PB][2];
  for (int i = 0; i < DW_PB; i++)
    for (int v = 0; v < QV; v++) acc[i][v] = VZERO();
  for (int r = 0; r < R; r++)
    for (int s = 0; s < S; s++) {
      const VEC w = VSET1(a->wp[r * S + s]);
      const float *x0 = a->xp + a->soff[s] + q0;
      for (int i = 0; i < DW_PB; i++) {
        if (i >= np) break;
        const float *x = x0 + (size_t)((p + i) * d->stride_h + r * d->dilation_h) * rowlen;
        for (int v = 0; v < QV; v++) acc[i][v] = VFMA(VLOADU(x + v * VW), w, acc[i][v]);
      }
    }
  const VEC b = VSET1(a->bias[0]);
  for (int i = 0; i < np; i++) {
    float *o = a->out + (size_t)(p + i) * Q + q0;
    for (int v = 0; v < QV; v++) {
      const int n = Q - q0 - v * VW;
      if (n <= 0) break;
      VEC y = VADD(acc[i][v], b);
      if (d->relu) y = VRELU(y);
      VSTORE_N(o + v * VW, y, n < VW ? n : VW);
    }
  }
}

static void FN(ts__conv_dw_rows)(const ts__conv_direct_args *a, int p0, int p1) {
  const int Q = a->q;
  for (int p = p0; p < p1; p += DW_PB) {
    const int np = p1 - p < DW_PB ? p1 - p : DW_PB;
    int q0 = 0;
    for (; Q - q0 > VW; q0 += 2 * VW) FN(dw_tile)(a, p, np, q0, 2);
    if (q0 < Q) FN(dw_tile)(a, p, np, q0, 1);
  }
}
