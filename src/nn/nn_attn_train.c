/* Attention backends in training (nn.h, "attention backends in training"): the forward that keeps
 * the log-sum-exp (and optionally the raw scores) and the backward. The reference kind runs the
 * double-precision references of attn.h / attn_train.h, with the lse computed here in double; every
 * other kind runs its plan through ts_attn_execute_train and a ts_attn_bwd executor bound to it. */
#include <math.h>

#include "nn/nn_internal.h"

int64_t ts_nn_attn_score_floats(const ts_nn_attn *a) {
  return a && a->plan ? ts_attn_score_floats(a->plan) : 0;
}

static void bwd_free(ts_attn_bwd *b) { ts_attn_bwd_destroy(b); }

ts_status ts_nn_attn_train_prepare(ts_nn_attn *a, const ts_context *ctx) {
  if (!a) return ts_error(TS_ERR_INVALID_ARG, "nn attn train: NULL backend");
  if (!a->plan || a->bwd) return TS_OK;
  ts_status s = ts_attn_bwd_create(&a->bwd, ctx, a->plan, TS_ATTN_BWD_AUTO);
  if (s != TS_OK) {
    a->bwd = NULL;
    ts_error_prefix("nn attn %s backward: ", ts_nn_attn_kind_name(a->kind));
    return s;
  }
  a->bwd_free = bwd_free;
  return TS_OK;
}

static inline bool allowed(const ts_bitmap *m, int64_t i, int64_t j) {
  return (m->bits[i * m->stride + (j >> 6)] >> (j & 63)) & 1;
}

/* lse [batch*heads][n] of the reference: ln sum over allowed keys of exp(q.k / sqrt(d)), in double;
 * -INFINITY for a row with no allowed key (attn_train.h's convention). */
static void reference_lse(const ts_nn_attn *a, const float *Q, const float *K, float *lse, int64_t bh) {
  const int64_t n = a->n, d = a->d;
  const double scale = 1.0 / sqrt((double)d);
#pragma omp parallel for schedule(static) collapse(2)
  for (int64_t h = 0; h < bh; h++)
    for (int64_t i = 0; i < n; i++) {
      const float *q = Q + (h * n + i) * d, *k = K + h * n * d;
      double mx = -INFINITY, sum = 0;
      for (int pass = 0; pass < 2; pass++)
        for (int64_t j = 0; j < n; j++) {
          if (!allowed(&a->mask, i, j)) continue;
          double s = 0;
          for (int64_t e = 0; e < d; e++) s += (double)q[e] * (double)k[j * d + e];
          s *= scale;
          if (pass == 0) mx = s > mx ? s : mx;
          else sum += exp(s - mx);
        }
      lse[h * n + i] = sum > 0 ? (float)(mx + log(sum)) : -INFINITY;
    }
}

ts_status ts_nn_attn_run_train(ts_nn_attn *a, const ts_context *ctx, const float *Q, const float *K, const float *V,
                               float *O, float *lse, float *scores, int64_t batch, int64_t heads) {
  if (!a) return ts_error(TS_ERR_INVALID_ARG, "nn attn run train: NULL backend");
  if (!lse) return ts_error(TS_ERR_INVALID_ARG, "nn attn run train: NULL lse");
  if (a->plan) return ts_attn_execute_train(ctx, a->plan, Q, K, V, O, lse, scores, batch, heads, a->n, a->d);
  TS_TRY(ts_attn_reference(&a->mask, Q, K, V, O, batch, heads, a->n, a->d));
  if (batch > 0 && heads > 0) reference_lse(a, Q, K, lse, batch * heads);
  return TS_OK;
}

ts_status ts_nn_attn_backward(ts_nn_attn *a, const ts_context *ctx, const float *Q, const float *K, const float *V,
                              const float *O, const float *dO, const float *lse, const float *scores, float *dQ,
                              float *dK, float *dV, int64_t batch, int64_t heads) {
  if (!a) return ts_error(TS_ERR_INVALID_ARG, "nn attn backward: NULL backend");
  if (!a->plan) return ts_attn_reference_backward(&a->mask, Q, K, V, dO, dQ, dK, dV, batch, heads, a->n, a->d);
  if (!a->bwd) TS_TRY(ts_nn_attn_train_prepare(a, ctx));
  return ts_attn_backward(ctx, a->bwd, Q, K, V, O, dO, lse, scores, dQ, dK, dV, batch, heads, a->n, a->d);
}
