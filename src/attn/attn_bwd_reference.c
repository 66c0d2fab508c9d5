/* Reference attention backward: explicit mask, double accumulation, the forward recomputed per row
 * (softmax over allowed keys only). The yardstick of the backward kernels (tests/test_attn_bwd.c);
 * O(batch * heads * nnz * d), single-threaded. Formulas: tessera/attn_train.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/attn_train.h"

static inline int allowed(const ts_bitmap *m, int64_t i, int64_t j) {
  return (int)((m->bits[i * m->stride + (j >> 6)] >> (j & 63)) & 1);
}

ts_status ts_attn_reference_backward(const ts_bitmap *mask, const float *Q, const float *K, const float *V,
                                     const float *dO, float *dQ, float *dK, float *dV, int64_t batch, int64_t heads,
                                     int64_t n, int64_t d) {
  if (!mask || !mask->bits) return ts_error(TS_ERR_INVALID_ARG, "attn reference backward: NULL mask");
  if (mask->rows != n || mask->cols != n || mask->stride < (n + 63) / 64)
    return ts_error(TS_ERR_SHAPE, "attn reference backward: mask is %lld x %lld, expected %lld x %lld",
                    (long long)mask->rows, (long long)mask->cols, (long long)n, (long long)n);
  if (batch < 0 || heads < 0 || n < 1 || d < 1)
    return ts_error(TS_ERR_INVALID_ARG, "attn reference backward: bad shape batch %lld heads %lld n %lld d %lld",
                    (long long)batch, (long long)heads, (long long)n, (long long)d);
  size_t tot, hd;
  if (!ts_mul_size((size_t)batch, (size_t)heads, &tot) || !ts_mul_size(tot, (size_t)n, &tot) ||
      !ts_mul_size(tot, (size_t)d, &tot) || !ts_mul_size((size_t)n, (size_t)d, &hd))
    return ts_error(TS_ERR_OVERFLOW, "attn reference backward: tensor size overflows");
  if (tot == 0) return TS_OK;
  if (!Q || !K || !V || !dO || !dQ || !dK || !dV)
    return ts_error(TS_ERR_INVALID_ARG, "attn reference backward: NULL Q, K, V, dO, dQ, dK or dV");
  double *p = malloc((size_t)n * sizeof *p), *dp = malloc((size_t)n * sizeof *dp);
  double *o = malloc((size_t)d * sizeof *o), *gq = malloc((size_t)d * sizeof *gq);
  double *gk = calloc(hd, sizeof *gk), *gv = calloc(hd, sizeof *gv);
  if (!p || !dp || !o || !gq || !gk || !gv) {
    free(p), free(dp), free(o), free(gq), free(gk), free(gv);
    return ts_error(TS_ERR_OOM, "attn reference backward: cannot allocate its buffers (n = %lld, d = %lld)", (long long)n,
                    (long long)d);
  }
  const double scale = 1.0 / sqrt((double)d);
  for (int64_t h = 0; h < batch * heads; h++) {
    const float *q = Q + h * n * d, *k = K + h * n * d, *v = V + h * n * d, *go = dO + h * n * d;
    memset(gk, 0, hd * sizeof *gk);
    memset(gv, 0, hd * sizeof *gv);
    for (int64_t i = 0; i < n; i++) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; j++) {
        if (!allowed(mask, i, j)) continue;
        double s = 0;
        for (int64_t x = 0; x < d; x++) s += (double)q[i * d + x] * (double)k[j * d + x];
        p[j] = s * scale;
        if (p[j] > mx) mx = p[j];
      }
      for (int64_t j = 0; j < n; j++)
        if (allowed(mask, i, j)) sum += (p[j] = exp(p[j] - mx));
      for (int64_t x = 0; x < d; x++) o[x] = gq[x] = 0;
      if (sum > 0) {
        for (int64_t j = 0; j < n; j++) {
          if (!allowed(mask, i, j)) continue;
          p[j] /= sum;
          double t = 0;
          for (int64_t x = 0; x < d; x++) {
            o[x] += p[j] * (double)v[j * d + x];
            t += (double)go[i * d + x] * (double)v[j * d + x];
          }
          dp[j] = t;
        }
        double dr = 0; /* dO[i] . O[i] = sum_j P dP */
        for (int64_t x = 0; x < d; x++) dr += (double)go[i * d + x] * o[x];
        for (int64_t j = 0; j < n; j++) {
          if (!allowed(mask, i, j)) continue;
          const double ds = p[j] * (dp[j] - dr) * scale;
          for (int64_t x = 0; x < d; x++) {
            gq[x] += ds * (double)k[j * d + x];
            gk[j * d + x] += ds * (double)q[i * d + x];
            gv[j * d + x] += p[j] * (double)go[i * d + x];
          }
        }
      }
      for (int64_t x = 0; x < d; x++) dQ[h * n * d + i * d + x] = (float)gq[x];
    }
    for (size_t e = 0; e < hd; e++) {
      dK[(size_t)h * hd + e] = (float)gk[e];
      dV[(size_t)h * hd + e] = (float)gv[e];
    }
  }
  free(p), free(dp), free(o), free(gq), free(gk), free(gv);
  return TS_OK;
}
