/* Register-blocked direct and depthwise convolution kernels, written once over a small vector
 * vocabulary that conv_direct_avx512.c and conv_direct_avx2.c define before including this file:
 *   VEC, VW (lanes), KB (output channels per block), VZERO(), VLOADU(p), VSET1(x), VFMA(a,b,c) = a*b+c,
 *   VADD, VRELU(v) (NaN stays NaN), VLOAD_N / VSTORE_N(p, v, n) (first n lanes; load zeroes the
 *   rest), FN(name) (name suffix).
 *
 * Direct: accumulators acc[KB][QV] hold KB output channels x QV*VW output columns of one output row;
 * every (c, r, s) tap loads QV input vectors once and multiplies them by KB broadcast weights, so
 * the loads are shared by KB channels. Input is the padded, phase-split copy (conv_internal.h),
 * so the QV*VW inputs of one tap are contiguous for every stride. */
#include "conv/conv_internal.h"

#ifndef TS_CONV_TMPL_DW_ONLY
/* Channels [c0, c1) of one tile; `first`: start from zero (else from the partial sums stored in
 * the output), `last`: add the bias, apply ReLU. */
static inline __attribute__((always_inline)) void FN(direct_tile)(const ts__conv_direct_args *a, int p, int q0, int c0,
                                                                   int c1, int first, int last, const int QV) {
  const ts_conv_desc *d = a->d;
  const ts__conv_pad_geom *g = a->g;
  const int R = d->r, S = d->s, P = a->p, Q = a->q, sw = g->sw;
  const size_t pq = (size_t)P * Q;
  VEC acc[KB][2];
  for (int kk = 0; kk < KB; kk++)
    for (int v = 0; v < QV; v++) {
      const int n = Q - q0 - v * VW;
      acc[kk][v] = first || kk >= a->kvalid || n <= 0 ? VZERO()
                                                      : VLOAD_N(a->out + kk * pq + (size_t)p * Q + q0 + v * VW, n < VW ? n : VW);
    }
  const size_t rowlen = (size_t)sw * g->wrow;
  const float *wv = a->wp + (size_t)c0 * R * S * KB;
  for (int c = c0; c < c1; c++) {
    const float *xc = a->xp + (size_t)c * g->plane;
    for (int r = 0; r < R; r++) {
      const float *xr = xc + (size_t)(p * d->stride_h + r * d->dilation_h) * rowlen + q0;
      for (int s = 0; s < S; s++, wv += KB) {
        const float *x = xr + a->soff[s];
        VEC xv[2];
        for (int v = 0; v < QV; v++) xv[v] = VLOADU(x + v * VW);
        for (int kk = 0; kk < KB; kk++) {
          const VEC w = VSET1(wv[kk]);
          for (int v = 0; v < QV; v++) acc[kk][v] = VFMA(xv[v], w, acc[kk][v]);
        }
      }
    }
  }
  for (int kk = 0; kk < a->kvalid; kk++) {
    const VEC b = VSET1(a->bias[kk]);
    float *o = a->out + kk * pq + (size_t)p * Q + q0;
    for (int v = 0; v < QV; v++) {
      const int n = Q - q0 - v * VW;
      if (n <= 0) break;
      VEC y = acc[kk][v];
      if (last) {
        y = VADD(y, b);
        if (d->relu) y = VRELU(y);
      }
      VSTORE_N(o + v * VW, y, n < VW ? n : VW);
    }
  }
}

/* Channel blocks of ~8 KiB of packed weights (they stay in L1 while every tile of the rows
 * [p0, p1) uses them); partial sums go through the output between blocks. */
static void FN(ts__conv_direct_rows)(const ts__conv_direct_args *a, int p0, int p1) {
  const int Q = a->q, rs = a->d->r * a->d->s;
  int cb = 8192 / (rs * KB * (int)sizeof(float));
  if (cb < 1) cb = 1;
  for (int c0 = 0; c0 < a->cg; c0 += cb) {
    const int c1 = a->cg - c0 < cb ? a->cg : c0 + cb, first = c0 == 0, last = c1 == a->cg;
    for (int p = p0; p < p1; p++) {
      int q0 = 0;
      for (; Q - q0 > VW; q0 += 2 * VW) FN(direct_tile)(a, p, q0, c0, c1, first, last, 2);
      if (q0 < Q) FN(direct_tile)(a, p, q0, c0, c1, first, last, 1);
    }
  }
}

#endif

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
