/* The row-wise pieces of the ViT training step: the activation arena, LayerNorm forward with its
 * statistics and its backward, column sums (bias gradients), the exact GELU's derivative and the
 * linear layers' backward through ts_sgemm. Token-wise loops are OpenMP over rows (or, for sums over
 * rows, over column chunks, so that no two threads write one output) with double accumulation. */
#include <math.h>
#include <string.h>

#include "nn/nn_internal.h"

/* ---- arena --------------------------------------------------------------------------------- */

int64_t ts__arena_bytes(int64_t floats) { return (floats * (int64_t)sizeof(float) + 63) / 64 * 64; }

static void arena_mark(ts__arena *a) {
  if (a->lo + a->hi > a->peak) a->peak = a->lo + a->hi;
}

float *ts__arena_lo(ts__arena *a, int64_t floats) {
  int64_t b = ts__arena_bytes(floats);
  if (a->lo + a->hi + b > a->cap) {
    ts_error(TS_ERR_INTERNAL, "vit train: activation arena of %lld bytes is full (%lld + %lld held, %lld asked)",
             (long long)a->cap, (long long)a->lo, (long long)a->hi, (long long)b);
    return NULL;
  }
  float *p = (float *)(a->base + a->lo);
  a->lo += b;
  arena_mark(a);
  return p;
}

float *ts__arena_hi(ts__arena *a, int64_t floats) {
  int64_t b = ts__arena_bytes(floats);
  if (a->lo + a->hi + b > a->cap) {
    ts_error(TS_ERR_INTERNAL, "vit train: activation arena of %lld bytes is full (%lld + %lld held, %lld asked)",
             (long long)a->cap, (long long)a->lo, (long long)a->hi, (long long)b);
    return NULL;
  }
  a->hi += b;
  arena_mark(a);
  return (float *)(a->base + a->cap - a->hi);
}

/* ---- LayerNorm ----------------------------------------------------------------------------- */

void ts__ln_apply(const ts_nn_vit *m, int64_t R, const float *x, const float *mean, const float *rstd, const float *g,
                  const float *b, float *y) {
  const int64_t D = m->cfg.dim;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = x + r * D;
    float *yr = y + r * D;
    const float mu = mean[r], rs = rstd[r];
    for (int64_t j = 0; j < D; j++) yr[j] = (xr[j] - mu) * rs * g[j] + b[j];
  }
}

void ts__ln_fwd(const ts_nn_vit *m, int64_t R, const float *x, const float *g, const float *b, float *y, float *mean,
                float *rstd) {
  const int64_t D = m->cfg.dim;
  const double eps = m->cfg.ln_eps;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = x + r * D;
    double s = 0, ss = 0;
    for (int64_t j = 0; j < D; j++) s += xr[j];
    const double mu = s / (double)D;
    for (int64_t j = 0; j < D; j++) ss += (xr[j] - mu) * (xr[j] - mu);
    mean[r] = (float)mu;
    rstd[r] = (float)(1.0 / sqrt(ss / (double)D + eps));
  }
  ts__ln_apply(m, R, x, mean, rstd, g, b, y);
}

/* Columns per chunk of the sums over rows: one thread owns a chunk's outputs. */
enum { COLS = 64 };

void ts__ln_bwd(const ts_nn_vit *m, int64_t R, const float *x, const float *mean, const float *rstd, const float *g,
                const float *dy, float *dx, bool accumulate, float *dg, float *db) {
  const int64_t D = m->cfg.dim;
  /* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g: one row each */
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = x + r * D, *dyr = dy + r * D;
    float *dxr = dx + r * D;
    const double mu = mean[r], rs = rstd[r];
    double s1 = 0, s2 = 0;
    for (int64_t j = 0; j < D; j++) {
      double dh = (double)dyr[j] * g[j];
      s1 += dh;
      s2 += dh * (xr[j] - mu) * rs;
    }
    const double a = s1 / (double)D, c = s2 / (double)D;
    for (int64_t j = 0; j < D; j++) {
      double v = rs * ((double)dyr[j] * g[j] - a - (xr[j] - mu) * rs * c);
      dxr[j] = accumulate ? (float)(dxr[j] + v) : (float)v;
    }
  }
  /* dg = sum_r dy xhat, db = sum_r dy: column chunks */
  const int64_t chunks = (D + COLS - 1) / COLS;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t j0 = c * COLS, nj = D - j0 < COLS ? D - j0 : COLS;
    double sg[COLS] = {0}, sb[COLS] = {0};
    for (int64_t r = 0; r < R; r++) {
      const float *xr = x + r * D + j0, *dyr = dy + r * D + j0;
      const double mu = mean[r], rs = rstd[r];
      for (int64_t j = 0; j < nj; j++) {
        sg[j] += (double)dyr[j] * ((xr[j] - mu) * rs);
        sb[j] += dyr[j];
      }
    }
    for (int64_t j = 0; j < nj; j++) dg[j0 + j] = (float)sg[j], db[j0 + j] = (float)sb[j];
  }
}

void ts__colsum(const ts_nn_vit *m, int64_t R, int64_t cols, const float *x, float *out) {
  const int64_t chunks = (cols + COLS - 1) / COLS;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t j0 = c * COLS, nj = cols - j0 < COLS ? cols - j0 : COLS;
    double s[COLS] = {0};
    for (int64_t r = 0; r < R; r++) {
      const float *xr = x + r * cols + j0;
      for (int64_t j = 0; j < nj; j++) s[j] += xr[j];
    }
    for (int64_t j = 0; j < nj; j++) out[j0 + j] = (float)s[j];
  }
}

/* ---- GELU (erf) ---------------------------------------------------------------------------- */

ts_status ts__gelu_bwd(const ts_nn_vit *m, int64_t R, int64_t cols, const float *u, const float *g, float *du) {
  /* GELU'(u) = Phi(u) + u phi(u). Phi(u) = GELU(u) / u (the forward's value, relative error that of
   * the GELU kernel), and 1/2 + u / sqrt(2 pi) for |u| < 2^-10 (error below u^3 / 15 < 1e-10);
   * phi(u) = exp(-u^2 / 2) / sqrt(2 pi) through the vector exp. */
  enum { CH = 256 };
  const float inv_sqrt_2pi = 0.3989422804014327f;
  ts_status st = TS_OK;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < R; r++) {
    float e[CH];
    for (int64_t j0 = 0; j0 < cols; j0 += CH) {
      const int64_t nj = cols - j0 < CH ? cols - j0 : CH;
      const float *ur = u + r * cols + j0, *gr = g + r * cols + j0;
      float *dr = du + r * cols + j0;
      for (int64_t j = 0; j < nj; j++) e[j] = -0.5f * ur[j] * ur[j];
      ts_status s = ts_vexp(nj, e, e);
      if (s != TS_OK) {
#pragma omp critical(ts_vit_train_err)
        st = s;
      }
      for (int64_t j = 0; j < nj; j++) {
        const float x = ur[j];
        const float Phi = fabsf(x) < 0x1p-10f ? 0.5f + x * inv_sqrt_2pi : gr[j] / x;
        dr[j] *= Phi + x * e[j] * inv_sqrt_2pi;
      }
    }
  }
  return st;
}

/* ---- linear layers ------------------------------------------------------------------------- */

ts_status ts__linear_bwd(ts_nn_vit *m, int64_t R, int64_t I, int64_t O, const float *X, const float *W,
                         const float *dY, float *dX, bool acc, float *dW, float *db) {
  TS_TRY(ts_sgemm(m->ctx, TS_TRANS, TS_NO_TRANS, I, O, R, 1.0f, X, I, dY, O, 0.0f, dW, O));
  if (db) ts__colsum(m, R, O, dY, db);
  if (dX) TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_TRANS, R, I, O, 1.0f, dY, O, W, O, acc ? 1.0f : 0.0f, dX, I));
  return TS_OK;
}
