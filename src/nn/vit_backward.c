/* One transformer block in training: its forward, keeping what the backward needs (ts__vit_saved),
 * and its backward. Shapes: R = batch * n token rows, D = dim, M = mlp, q/k/v/o [B][heads][n][hd].
 *
 *   forward   h1 = LN1(x_in); q|k|v = h1 Wqkv + bqkv; o = attn(q, k, v) (lse, scores kept);
 *             xmid = x_in + unpack(o) Wo + bo; h2 = LN2(xmid); u = h2 W1 + b1;
 *             x_out = xmid + GELU(u) W2 + b2
 *   backward  (dx = dLoss/dx_out) g = GELU(u): dW2 = g^T dx, db2, du = (dx W2^T) GELU'(u);
 *             h2 again from xmid and LN2's statistics: dW1 = h2^T du, db1, dx += LN2'(du W1^T);
 *             dWo = unpack(o)^T dx, dbo, do = pack(dx Wo^T); dq, dk, dv = attn'(...);
 *             dqkv = unpack(dq|dk|dv): dWqkv = h1^T dqkv (h1 again from x_in), dbqkv,
 *             dx += LN1'(dqkv Wqkv^T).
 * The residual paths are the `+=`: dx is updated in place from dLoss/dx_out to dLoss/dx_in. */
#include <string.h>

#include "nn/nn_internal.h"

static int64_t score_floats(const ts_nn_vit *m) { return ts_nn_attn_score_floats(m->attn); }

int64_t ts__vit_saved_bytes(const ts_nn_vit *m, bool store_scores) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, M = m->cfg.mlp, BH = m->batch * m->cfg.heads;
  int64_t b = 4 * ts__arena_bytes(R) + 5 * ts__arena_bytes(R * D) + ts__arena_bytes(BH * m->n) + ts__arena_bytes(R * M);
  if (store_scores) b += ts__arena_bytes(BH * score_floats(m));
  return b;
}

int64_t ts__vit_work_bytes(const ts_nn_vit *m) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, M = m->cfg.mlp, W = M > m->pdim ? M : m->pdim;
  return 7 * ts__arena_bytes(R * D) + 2 * ts__arena_bytes(R * W) + ts__arena_bytes(R * 3 * D);
}

ts_status ts__vit_saved_alloc(ts_nn_vit *m, bool hi, bool store_scores, ts__vit_saved *sv) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, M = m->cfg.mlp, BH = m->batch * m->cfg.heads;
  float *(*take)(ts__arena *, int64_t) = hi ? ts__arena_hi : ts__arena_lo;
  ts__arena *a = &m->arena;
  memset(sv, 0, sizeof *sv);
  if (!(sv->mean1 = take(a, R)) || !(sv->rstd1 = take(a, R)) || !(sv->q = take(a, R * D)) || !(sv->k = take(a, R * D)) ||
      !(sv->v = take(a, R * D)) || !(sv->o = take(a, R * D)) || !(sv->lse = take(a, BH * m->n)) ||
      !(sv->xmid = take(a, R * D)) || !(sv->mean2 = take(a, R)) || !(sv->rstd2 = take(a, R)) || !(sv->u = take(a, R * M)))
    return TS_ERR_INTERNAL;
  if (store_scores && !(sv->scores = take(a, BH * score_floats(m)))) return TS_ERR_INTERNAL;
  return TS_OK;
}

ts_status ts__vit_work_alloc(ts_nn_vit *m, ts__vit_work *w) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, M = m->cfg.mlp, W = M > m->pdim ? M : m->pdim;
  ts__arena *a = &m->arena;
  memset(w, 0, sizeof *w);
  if (!(w->dx = ts__arena_hi(a, R * D)) || !(w->dt = ts__arena_hi(a, R * D)) || !(w->h = ts__arena_hi(a, R * D)) ||
      !(w->g = ts__arena_hi(a, R * W)) || !(w->du = ts__arena_hi(a, R * W)) || !(w->dq = ts__arena_hi(a, R * D)) ||
      !(w->dk = ts__arena_hi(a, R * D)) || !(w->dv = ts__arena_hi(a, R * D)) || !(w->dob = ts__arena_hi(a, R * D)) ||
      !(w->dqkv = ts__arena_hi(a, R * 3 * D)))
    return TS_ERR_INTERNAL;
  return TS_OK;
}

void ts__vit_grad_layer(const ts_nn_vit *m, const ts__vit_layer *L, ts__vit_layer *gl) {
#define G(f) gl->f = m->grads + (L->f - m->weights)
  G(ln1_g), G(ln1_b), G(wqkv), G(bqkv), G(wo), G(bo), G(ln2_g), G(ln2_b), G(w1), G(b1), G(w2), G(b2);
#undef G
}

/* g = GELU(u) over R x M, row chunks per thread. */
static ts_status gelu(const ts_nn_vit *m, const float *u, float *g) {
  const int64_t R = m->batch * m->n, M = m->cfg.mlp, chunk = 32;
  ts_status st = TS_OK;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r0 = 0; r0 < R; r0 += chunk) {
    int64_t rows = R - r0 < chunk ? R - r0 : chunk;
    ts_status s = ts_activation(TS_ACT_GELU_ERF, rows, M, u + r0 * M, M, g + r0 * M, M);
    if (s != TS_OK) {
#pragma omp critical(ts_vit_train_err)
      st = s;
    }
  }
  return st;
}

/* dq, dk, dv [B][heads][n][hd] -> dqkv [R][3 dim] (the inverse of ts__vit_pack_qkv). */
static void unpack_qkv(const ts_nn_vit *m, const float *dq, const float *dk, const float *dv, float *dqkv) {
  const int64_t n = m->n, D = m->cfg.dim, hd = m->hd, heads = m->cfg.heads;
  const float *src[3] = {dq, dk, dv};
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < m->batch * n; r++) {
    int64_t b = r / n, t = r % n;
    for (int s = 0; s < 3; s++)
      for (int64_t h = 0; h < heads; h++)
        memcpy(dqkv + r * 3 * D + s * D + h * hd, src[s] + ((b * heads + h) * n + t) * hd, (size_t)hd * sizeof(float));
  }
}

ts_status ts__vit_block_fwd(ts_nn_vit *m, const ts__vit_layer *L, const float *x_in, ts__vit_saved *sv,
                            const ts__vit_work *w, float *x_out, ts__vit_clock *ck) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, M = m->cfg.mlp;
  ts__ln_fwd(m, R, x_in, L->ln1_g, L->ln1_b, w->h, sv->mean1, sv->rstd1);
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, 3 * D, D, 1.0f, w->h, D, L->wqkv, 3 * D, 0.0f, w->dqkv, 3 * D));
  ts__vit_pack_qkv(m, w->dqkv, L->bqkv, sv->q, sv->k, sv->v);
  double t0 = ts_now();
  TS_TRY(ts_nn_attn_run_train(m->attn, m->ctx, sv->q, sv->k, sv->v, sv->o, sv->lse, sv->scores, m->batch, m->cfg.heads));
  ck->attn_fwd += ts_now() - t0;
  ts__vit_unpack_o(m, sv->o, w->dt);
  memcpy(sv->xmid, x_in, (size_t)(R * D) * sizeof(float));
  ts__vit_add_rows(m, sv->xmid, D, D, L->bo, NULL); /* xmid = x_in + bo, then += attn @ wo */
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, D, D, 1.0f, w->dt, D, L->wo, D, 1.0f, sv->xmid, D));
  ts__ln_fwd(m, R, sv->xmid, L->ln2_g, L->ln2_b, w->h, sv->mean2, sv->rstd2);
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, M, D, 1.0f, w->h, D, L->w1, M, 0.0f, sv->u, M));
  ts__vit_add_rows(m, sv->u, M, M, L->b1, NULL);
  if (!x_out) return TS_OK;
  TS_TRY(gelu(m, sv->u, w->g));
  memcpy(x_out, sv->xmid, (size_t)(R * D) * sizeof(float));
  ts__vit_add_rows(m, x_out, D, D, L->b2, NULL);
  return ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, D, M, 1.0f, w->g, M, L->w2, D, 1.0f, x_out, D);
}

ts_status ts__vit_block_bwd(ts_nn_vit *m, const ts__vit_layer *L, ts__vit_layer *gl, const float *x_in,
                            const ts__vit_saved *sv, const ts__vit_work *w, ts__vit_clock *ck) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, M = m->cfg.mlp;
  /* MLP */
  TS_TRY(gelu(m, sv->u, w->g));
  TS_TRY(ts__linear_bwd(m, R, M, D, w->g, L->w2, w->dx, w->du, false, gl->w2, gl->b2));
  TS_TRY(ts__gelu_bwd(m, R, M, sv->u, w->g, w->du));
  ts__ln_apply(m, R, sv->xmid, sv->mean2, sv->rstd2, L->ln2_g, L->ln2_b, w->h);
  TS_TRY(ts__linear_bwd(m, R, D, M, w->h, L->w1, w->du, w->dt, false, gl->w1, gl->b1));
  ts__ln_bwd(m, R, sv->xmid, sv->mean2, sv->rstd2, L->ln2_g, w->dt, w->dx, true, gl->ln2_g, gl->ln2_b);
  /* attention */
  ts__vit_unpack_o(m, sv->o, w->h);
  TS_TRY(ts__linear_bwd(m, R, D, D, w->h, L->wo, w->dx, w->dt, false, gl->wo, gl->bo));
  ts__vit_pack_heads(m, w->dt, w->dob);
  double t0 = ts_now();
  TS_TRY(ts_nn_attn_backward(m->attn, m->ctx, sv->q, sv->k, sv->v, sv->o, w->dob, sv->lse, sv->scores, w->dq, w->dk,
                             w->dv, m->batch, m->cfg.heads));
  ck->attn_bwd += ts_now() - t0;
  unpack_qkv(m, w->dq, w->dk, w->dv, w->dqkv);
  ts__ln_apply(m, R, x_in, sv->mean1, sv->rstd1, L->ln1_g, L->ln1_b, w->h);
  TS_TRY(ts__linear_bwd(m, R, D, 3 * D, w->h, L->wqkv, w->dqkv, w->dt, false, gl->wqkv, gl->bqkv));
  ts__ln_bwd(m, R, x_in, sv->mean1, sv->rstd1, L->ln1_g, w->dt, w->dx, true, gl->ln1_g, gl->ln1_b);
  return TS_OK;
}
