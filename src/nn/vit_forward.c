/* Vision Transformer forward pass (fp32). GEMMs go through ts_sgemm (oneDNN, the context's
 * threads); the token-wise steps (unfold, bias adds, LayerNorm, GELU, head packing) are OpenMP
 * loops over rows calling the single-threaded kernels; attention goes to the model's backend.
 * Every buffer comes from the model (vit_model.c): nothing is allocated here. */
#include <omp.h>
#include <string.h>

#include "nn/nn_internal.h"

int ts__vit_threads(const ts_nn_vit *m) { return m->ctx ? ts_context_threads(m->ctx) : ts_default_threads(); }

/* patches [B*n][pdim], row b*n + t = image b's patch at grid cell g = perm[t] (t when no perm),
 * columns ordered (channel, ky, kx) like a conv weight [dim][C][P][P]. */
void ts__vit_unfold(const ts_nn_vit *m, const float *img, float *patches) {
  const int64_t P = m->cfg.patch, C = m->cfg.in_chans, H = m->cfg.img_h, W = m->cfg.img_w, n = m->n;
  const int32_t *perm = m->perm;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < m->batch * n; r++) {
    int64_t b = r / n, t = r % n, g = perm ? perm[t] : t, gy = g / m->gw, gx = g % m->gw;
    float *dst = patches + r * m->pdim;
    for (int64_t c = 0; c < C; c++)
      for (int64_t ky = 0; ky < P; ky++)
        memcpy(dst + (c * P + ky) * P, img + ((b * C + c) * H + gy * P + ky) * W + gx * P, (size_t)P * sizeof(float));
  }
}

/* x[r] += bias (+ pos[grid cell of r] when pos). */
void ts__vit_add_rows(const ts_nn_vit *m, float *x, int64_t ld, int64_t cols, const float *bias, const float *pos) {
  const int64_t n = m->n;
  const int32_t *perm = m->perm;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < m->batch * n; r++) {
    float *row = x + r * ld;
    const float *p = NULL;
    if (pos) {
      int64_t t = r % n;
      p = pos + (perm ? perm[t] : t) * cols;
    }
    for (int64_t j = 0; j < cols; j++) row[j] += bias[j] + (p ? p[j] : 0.0f);
  }
}

/* y = LayerNorm(x) over the B*n rows of dim, in row chunks per thread. */
static ts_status layernorm(const ts_nn_vit *m, const float *x, const float *g, const float *b, float *y) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, chunk = 64;
  ts_status st = TS_OK;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r0 = 0; r0 < R; r0 += chunk) {
    int64_t rows = R - r0 < chunk ? R - r0 : chunk;
    ts_status s = ts_layernorm_rows(rows, D, x + r0 * D, D, g, b, m->cfg.ln_eps, y + r0 * D, D);
    if (s != TS_OK) {
#pragma omp critical(ts_vit_err)
      st = s;
    }
  }
  return st;
}

/* qkv [B*n][3 dim] (+ bias) -> q, k, v [B][heads][n][hd]. */
void ts__vit_pack_qkv(const ts_nn_vit *m, const float *qkv, const float *bqkv, float *q, float *k, float *v) {
  const int64_t n = m->n, D = m->cfg.dim, hd = m->hd, heads = m->cfg.heads;
  float *dst[3] = {q, k, v};
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < m->batch * n; r++) {
    int64_t b = r / n, t = r % n;
    const float *src = qkv + r * 3 * D;
    for (int s = 0; s < 3; s++)
      for (int64_t h = 0; h < heads; h++) {
        float *o = dst[s] + ((b * heads + h) * n + t) * hd;
        const float *in = src + s * D + h * hd, *bias = bqkv + s * D + h * hd;
        for (int64_t j = 0; j < hd; j++) o[j] = in[j] + (bias ? bias[j] : 0.0f);
      }
  }
}

/* O [B][heads][n][hd] -> out [B*n][dim] (head h in columns h*hd ..). */
void ts__vit_unpack_o(const ts_nn_vit *m, const float *O, float *out) {
  const int64_t n = m->n, D = m->cfg.dim, hd = m->hd, heads = m->cfg.heads;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < m->batch * n; r++) {
    int64_t b = r / n, t = r % n;
    for (int64_t h = 0; h < heads; h++)
      memcpy(out + r * D + h * hd, O + ((b * heads + h) * n + t) * hd, (size_t)hd * sizeof(float));
  }
}

void ts__vit_pack_heads(const ts_nn_vit *m, const float *in, float *O) {
  const int64_t n = m->n, D = m->cfg.dim, hd = m->hd, heads = m->cfg.heads;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < m->batch * n; r++) {
    int64_t b = r / n, t = r % n;
    for (int64_t h = 0; h < heads; h++)
      memcpy(O + ((b * heads + h) * n + t) * hd, in + r * D + h * hd, (size_t)hd * sizeof(float));
  }
}

/* x [B*n][M] += b1, then GELU in place. */
ts_status ts__vit_bias_gelu(const ts_nn_vit *m, float *xs, int64_t M, const float *b1) {
  const int64_t R = m->batch * m->n, chunk = 32;
  ts_status st = TS_OK;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r0 = 0; r0 < R; r0 += chunk) {
    int64_t rows = R - r0 < chunk ? R - r0 : chunk;
    float *x = xs + r0 * M;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < M; j++) x[i * M + j] += b1[j];
    ts_status s = ts_activation(TS_ACT_GELU_ERF, rows, M, x, M, x, M);
    if (s != TS_OK) {
#pragma omp critical(ts_vit_err)
      st = s;
    }
  }
  return st;
}

static ts_status block(ts_nn_vit *m, const ts__vit_layer *L, double *attn_s) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, M = m->cfg.mlp;
  TS_TRY(layernorm(m, m->x, L->ln1_g, L->ln1_b, m->h));
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, 3 * D, D, 1.0f, m->h, D, L->wqkv, 3 * D, 0.0f, m->qkv, 3 * D));
  ts__vit_pack_qkv(m, m->qkv, L->bqkv, m->q, m->k, m->v);
  float *O = m->qkv; /* the QKV output is consumed by pack_qkv: O [B][heads][n][hd] reuses it */
  double t0 = ts_now();
  TS_TRY(ts_nn_attn_run(m->attn, m->ctx, m->q, m->k, m->v, O, m->batch, m->cfg.heads));
  *attn_s += ts_now() - t0;
  ts__vit_unpack_o(m, O, m->h);
  ts__vit_add_rows(m, m->x, D, D, L->bo, NULL); /* x += bo, then x += attn @ wo */
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, D, D, 1.0f, m->h, D, L->wo, D, 1.0f, m->x, D));
  TS_TRY(layernorm(m, m->x, L->ln2_g, L->ln2_b, m->h));
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, M, D, 1.0f, m->h, D, L->w1, M, 0.0f, m->big, M));
  TS_TRY(ts__vit_bias_gelu(m, m->big, M, L->b1));
  ts__vit_add_rows(m, m->x, D, D, L->b2, NULL);
  return ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, D, M, 1.0f, m->big, M, L->w2, D, 1.0f, m->x, D);
}

ts_status ts__vit_pool_head(const ts_nn_vit *m, const float *h, float *pooled, float *logits) {
  const int64_t B = m->batch, D = m->cfg.dim, n = m->n, NC = m->cfg.classes;
  /* Mean over tokens (any order: a permuted backend needs no un-permute). Summed in double. */
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static) collapse(2)
  for (int64_t b = 0; b < B; b++)
    for (int64_t j = 0; j < D; j++) {
      double s = 0;
      for (int64_t t = 0; t < n; t++) s += h[(b * n + t) * D + j];
      pooled[b * D + j] = (float)(s / (double)n);
    }
  for (int64_t b = 0; b < B; b++) memcpy(logits + b * NC, m->b_head, (size_t)NC * sizeof(float));
  return ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, B, NC, D, 1.0f, pooled, D, m->w_head, NC, 1.0f, logits, NC);
}

ts_status ts_nn_vit_forward(ts_nn_vit *m, const float *images, float *logits) {
  if (!m || !images || !logits) return ts_error(TS_ERR_INVALID_ARG, "vit forward: NULL model, images or logits");
  if (!m->attn) return ts_error(TS_ERR_INVALID_ARG, "vit forward: no attention backend (ts_nn_vit_set_attn)");
  const int64_t R = m->batch * m->n, D = m->cfg.dim;
  double t0 = ts_now(), attn_s = 0;
  ts__vit_unfold(m, images, m->big);
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, D, m->pdim, 1.0f, m->big, m->pdim, m->w_pe, D, 0.0f, m->x, D));
  ts__vit_add_rows(m, m->x, D, D, m->b_pe, m->pos);
  for (int64_t l = 0; l < m->cfg.depth; l++) TS_TRY(block(m, &m->layers[l], &attn_s));
  TS_TRY(layernorm(m, m->x, m->lnf_g, m->lnf_b, m->h));
  TS_TRY(ts__vit_pool_head(m, m->h, m->pooled, logits));
  m->timing.total_s = ts_now() - t0;
  m->timing.attn_s = attn_s;
  return TS_OK;
}
