/* ViT training step (nn.h, "ViT training"): the driver over the blocks (vit_backward.c), the
 * stem and head with the cross-entropy loss, SGD, the per-layer memory strategies and the arena
 * they size, and the parameter table. Arena use in one step, lo = kept, hi = working:
 *
 *   forward   hi: work                          lo: x0 | per block l: x_{l+1} (+ its saved set unless
 *             (a CHECKPOINT block's saved set      CHECKPOINT) | head: LN statistics, pooled, logits
 *              on top of it, dropped after)
 *   backward  hi: work (+ the head's dlogits, dpooled; + a CHECKPOINT block's saved set made again)
 *             lo: dropped block by block (lo_mark) as the backward passes them
 *
 * so the high-water mark is at most ts_nn_vit_train_bound. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_internal.h"

static const char *const strategy_names[TS_NN_MEM_COUNT] = {"recompute", "store_scores", "checkpoint"};

const char *ts_nn_mem_strategy_name(ts_nn_mem_strategy s) {
  return (unsigned)s < TS_NN_MEM_COUNT ? strategy_names[s] : "?";
}

ts_status ts_nn_mem_strategy_parse(const char *name, ts_nn_mem_strategy *out) {
  for (int k = 0; name && out && k < TS_NN_MEM_COUNT; k++)
    if (strcmp(name, strategy_names[k]) == 0) return *out = (ts_nn_mem_strategy)k, TS_OK;
  return ts_error(TS_ERR_INVALID_ARG, "vit train: unknown memory strategy '%s' (recompute, store_scores, checkpoint)",
                  name ? name : "");
}

/* ---- memory -------------------------------------------------------------------------------- */

ts_status ts_nn_vit_train_mem(const ts_nn_vit *m, ts_nn_vit_mem *out) {
  if (!m || !out) return ts_error(TS_ERR_INVALID_ARG, "vit train mem: NULL model or output");
  if (!m->attn) return ts_error(TS_ERR_INVALID_ARG, "vit train mem: no attention backend (ts_nn_vit_set_attn)");
  const int64_t R = m->batch * m->n, D = m->cfg.dim, B = m->batch, C = m->cfg.classes;
  const int64_t x = ts__arena_bytes(R * D);
  out->fixed = x + 2 * ts__arena_bytes(R) + ts__arena_bytes(B * D) + ts__arena_bytes(B * C);
  out->scratch = ts__vit_work_bytes(m) + ts__arena_bytes(B * C) + ts__arena_bytes(B * D);
  out->layer[TS_NN_MEM_RECOMPUTE] = x + ts__vit_saved_bytes(m, false);
  out->layer[TS_NN_MEM_STORE_SCORES] = x + ts__vit_saved_bytes(m, true);
  out->layer[TS_NN_MEM_CHECKPOINT] = x;
  out->remat = ts__vit_saved_bytes(m, false);
  return TS_OK;
}

int64_t ts_nn_vit_train_bound(const ts_nn_vit_mem *mm, const ts_nn_mem_strategy *s, int64_t depth) {
  if (!mm) return -1;
  int64_t b = mm->fixed + mm->scratch;
  bool ck = false;
  for (int64_t l = 0; l < depth; l++) {
    ts_nn_mem_strategy k = s ? s[l] : TS_NN_MEM_RECOMPUTE;
    if ((unsigned)k >= TS_NN_MEM_COUNT) return -1;
    b += mm->layer[k];
    ck |= k == TS_NN_MEM_CHECKPOINT;
  }
  return ck ? b + mm->remat : b;
}

/* Gradients, the per-layer arrays and an arena of at least `bytes` (grown, never shrunk). */
static ts_status reserve(ts_nn_vit *m, int64_t bytes) {
  const int64_t L = m->cfg.depth;
  if (!m->grads && !(m->grads = ts_calloc((size_t)m->nweights, sizeof(float)))) return TS_ERR_OOM;
  if (!m->strategy) {
    m->strategy = ts_calloc((size_t)L, sizeof *m->strategy); /* 0 = RECOMPUTE */
    m->saved = ts_calloc((size_t)L, sizeof *m->saved);
    m->xs = ts_calloc((size_t)L + 1, sizeof *m->xs);
    m->lo_mark = ts_calloc((size_t)L, sizeof *m->lo_mark);
    if (!m->strategy || !m->saved || !m->xs || !m->lo_mark) {
      ts_free(m->strategy), ts_free(m->saved), ts_free(m->xs), ts_free(m->lo_mark);
      m->strategy = NULL, m->saved = NULL, m->xs = NULL, m->lo_mark = NULL;
      return TS_ERR_OOM;
    }
  }
  if (m->arena.cap >= bytes) return TS_OK;
  ts_free(m->arena.base);
  memset(&m->arena, 0, sizeof m->arena);
  if (!(m->arena.base = ts_malloc_huge((size_t)bytes))) {
    ts_error_prefix("vit train: activation arena of %lld bytes: ", (long long)bytes);
    return TS_ERR_OOM;
  }
  m->arena.cap = bytes;
  return TS_OK;
}

ts_status ts__vit_train_reserve(ts_nn_vit *m, int64_t extra) {
  ts_nn_vit_mem mm;
  TS_TRY(ts_nn_vit_train_mem(m, &mm));
  TS_TRY(reserve(m, 0));
  int64_t b = ts_nn_vit_train_bound(&mm, m->strategy, m->cfg.depth);
  return reserve(m, b > extra ? b : extra);
}

ts_status ts_nn_vit_train_set_strategies(ts_nn_vit *m, const ts_nn_mem_strategy *s) {
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "vit train: NULL model");
  for (int64_t l = 0; s && l < m->cfg.depth; l++)
    if ((unsigned)s[l] >= TS_NN_MEM_COUNT)
      return ts_error(TS_ERR_INVALID_ARG, "vit train: layer %lld has memory strategy %d (0..%d)", (long long)l, (int)s[l],
                      TS_NN_MEM_COUNT - 1);
  if (!m->attn) return ts_error(TS_ERR_INVALID_ARG, "vit train: no attention backend (ts_nn_vit_set_attn)");
  TS_TRY(reserve(m, 0));
  for (int64_t l = 0; l < m->cfg.depth; l++) m->strategy[l] = s ? s[l] : TS_NN_MEM_RECOMPUTE;
  return ts__vit_train_reserve(m, 0);
}

void ts_nn_vit_train_get_strategies(const ts_nn_vit *m, ts_nn_mem_strategy *s) {
  if (!m || !s) return;
  for (int64_t l = 0; l < m->cfg.depth; l++) s[l] = m->strategy ? m->strategy[l] : TS_NN_MEM_RECOMPUTE;
}

/* ---- the step ------------------------------------------------------------------------------ */

/* Stem: x0 = unfold(images) W_pe + b_pe + pos (patches in w->g). */
static ts_status stem_fwd(ts_nn_vit *m, const float *images, const ts__vit_work *w, float *x0) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim;
  ts__vit_unfold(m, images, w->g);
  TS_TRY(ts_sgemm(m->ctx, TS_NO_TRANS, TS_NO_TRANS, R, D, m->pdim, 1.0f, w->g, m->pdim, m->w_pe, D, 0.0f, x0, D));
  ts__vit_add_rows(m, x0, D, D, m->b_pe, m->pos);
  return TS_OK;
}

/* d b_pe, d pos (token t's row goes to grid cell perm[t]: each cell once) and d W_pe from w->dx. */
static ts_status stem_bwd(ts_nn_vit *m, const float *images, const ts__vit_work *w) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, n = m->n, B = m->batch;
  float *gpos = m->grads + (m->pos - m->weights);
  const int32_t *perm = m->perm;
  ts__colsum(m, R, D, w->dx, m->grads + (m->b_pe - m->weights));
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t t = 0; t < n; t++) {
    float *dst = gpos + (perm ? perm[t] : t) * D;
    for (int64_t j = 0; j < D; j++) {
      double s = 0;
      for (int64_t b = 0; b < B; b++) s += w->dx[(b * n + t) * D + j];
      dst[j] = (float)s;
    }
  }
  ts__vit_unfold(m, images, w->g);
  return ts_sgemm(m->ctx, TS_TRANS, TS_NO_TRANS, m->pdim, D, R, 1.0f, w->g, m->pdim, w->dx, D, 0.0f,
                  m->grads + (m->w_pe - m->weights), D);
}

typedef struct head_saved {
  float *mean, *rstd, *pooled, *logits;
} head_saved;

/* LN -> mean over tokens -> logits; returns the mean cross-entropy in *loss. */
static ts_status head_fwd(ts_nn_vit *m, const float *x, const int32_t *labels, const ts__vit_work *w, head_saved *hs,
                          double *loss) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, B = m->batch, C = m->cfg.classes;
  ts__arena *a = &m->arena;
  if (!(hs->mean = ts__arena_lo(a, R)) || !(hs->rstd = ts__arena_lo(a, R)) || !(hs->pooled = ts__arena_lo(a, B * D)) ||
      !(hs->logits = ts__arena_lo(a, B * C)))
    return TS_ERR_INTERNAL;
  ts__ln_fwd(m, R, x, m->lnf_g, m->lnf_b, w->h, hs->mean, hs->rstd);
  TS_TRY(ts__vit_pool_head(m, w->h, hs->pooled, hs->logits));
  double sum = 0;
  for (int64_t b = 0; b < B; b++) {
    const float *z = hs->logits + b * C;
    double mx = -INFINITY, se = 0;
    for (int64_t c = 0; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    for (int64_t c = 0; c < C; c++) se += exp(z[c] - mx);
    sum += mx + log(se) - z[labels[b]];
  }
  *loss = sum / (double)B;
  return TS_OK;
}

/* dlogits = (softmax - onehot) / B; head and final-LN gradients; w->dx = dLoss/dx_L. */
static ts_status head_bwd(ts_nn_vit *m, const float *x, const int32_t *labels, const ts__vit_work *w,
                          const head_saved *hs) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, B = m->batch, n = m->n, C = m->cfg.classes;
  ts__arena *a = &m->arena;
  const int64_t mark = a->hi;
  float *dz = ts__arena_hi(a, B * C), *dp = dz ? ts__arena_hi(a, B * D) : NULL;
  if (!dp) return TS_ERR_INTERNAL;
  for (int64_t b = 0; b < B; b++) {
    const float *z = hs->logits + b * C;
    double mx = -INFINITY, se = 0;
    for (int64_t c = 0; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    for (int64_t c = 0; c < C; c++) se += exp(z[c] - mx);
    for (int64_t c = 0; c < C; c++) dz[b * C + c] = (float)((exp(z[c] - mx) / se - (c == labels[b])) / (double)B);
  }
  TS_TRY(ts__linear_bwd(m, B, D, C, hs->pooled, m->w_head, dz, dp, false, m->grads + (m->w_head - m->weights),
                        m->grads + (m->b_head - m->weights)));
  const float inv_n = (float)(1.0 / (double)n);
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static)
  for (int64_t r = 0; r < R; r++)
    for (int64_t j = 0; j < D; j++) w->dt[r * D + j] = dp[(r / n) * D + j] * inv_n;
  ts__ln_bwd(m, R, x, hs->mean, hs->rstd, m->lnf_g, w->dt, w->dx, false, m->grads + (m->lnf_g - m->weights),
             m->grads + (m->lnf_b - m->weights));
  a->hi = mark;
  return TS_OK;
}

static void sgd(ts_nn_vit *m, float lr) {
  const int np = ts_nn_vit_param_count(m);
  for (int i = 0; i < np; i++) {
    ts_nn_vit_param p;
    ts_nn_vit_param_get(m, i, &p);
    float *v = p.value;
    const float *g = p.grad;
#pragma omp parallel for num_threads(ts__vit_threads(m)) schedule(static) if (p.count > 65536)
    for (int64_t k = 0; k < p.count; k++) v[k] -= lr * g[k];
  }
}

static ts_status step_args(ts_nn_vit *m, const float *images, const int32_t *labels, float lr) {
  if (!m || !images || !labels) return ts_error(TS_ERR_INVALID_ARG, "vit train step: NULL model, images or labels");
  if (!m->attn) return ts_error(TS_ERR_INVALID_ARG, "vit train step: no attention backend (ts_nn_vit_set_attn)");
  if (!(lr >= 0 && isfinite(lr))) return ts_error(TS_ERR_INVALID_ARG, "vit train step: learning rate %g", (double)lr);
  for (int64_t b = 0; b < m->batch; b++)
    if (labels[b] < 0 || labels[b] >= m->cfg.classes)
      return ts_error(TS_ERR_INVALID_ARG, "vit train step: label[%lld] = %d is not in [0, %lld)", (long long)b,
                      (int)labels[b], (long long)m->cfg.classes);
  return TS_OK;
}

/* Forward and backward of the whole model into the gradients (the arena is laid out anew). */
static ts_status forward_backward(ts_nn_vit *m, const float *images, const int32_t *labels, ts_nn_vit_train_stats *st) {
  const int64_t R = m->batch * m->n, D = m->cfg.dim, L = m->cfg.depth;
  ts__arena *a = &m->arena;
  a->lo = a->hi = a->peak = 0;
  ts__vit_clock ck = {0};
  ts__vit_work w;
  head_saved hs;
  double t0 = ts_now();
  TS_TRY(ts__vit_work_alloc(m, &w));
  if (!(m->xs[0] = ts__arena_lo(a, R * D))) return TS_ERR_INTERNAL;
  TS_TRY(stem_fwd(m, images, &w, m->xs[0]));
  for (int64_t l = 0; l < L; l++) {
    const ts_nn_mem_strategy s = m->strategy[l];
    m->lo_mark[l] = a->lo;
    if (!(m->xs[l + 1] = ts__arena_lo(a, R * D))) return TS_ERR_INTERNAL;
    const int64_t hi = a->hi;
    TS_TRY(ts__vit_saved_alloc(m, s == TS_NN_MEM_CHECKPOINT, s == TS_NN_MEM_STORE_SCORES, &m->saved[l]));
    TS_TRY(ts__vit_block_fwd(m, &m->layers[l], m->xs[l], &m->saved[l], &w, m->xs[l + 1], &ck));
    a->hi = hi; /* a CHECKPOINT block's saved set goes */
  }
  TS_TRY(head_fwd(m, m->xs[L], labels, &w, &hs, &st->loss));
  double t1 = ts_now();
  TS_TRY(head_bwd(m, m->xs[L], labels, &w, &hs));
  for (int64_t l = L - 1; l >= 0; l--) {
    ts__vit_layer gl;
    ts__vit_grad_layer(m, &m->layers[l], &gl);
    const int64_t hi = a->hi;
    if (m->strategy[l] == TS_NN_MEM_CHECKPOINT) {
      double r0 = ts_now();
      TS_TRY(ts__vit_saved_alloc(m, true, false, &m->saved[l]));
      TS_TRY(ts__vit_block_fwd(m, &m->layers[l], m->xs[l], &m->saved[l], &w, NULL, &ck));
      ck.remat += ts_now() - r0;
    }
    TS_TRY(ts__vit_block_bwd(m, &m->layers[l], &gl, m->xs[l], &m->saved[l], &w, &ck));
    a->hi = hi;
    a->lo = m->lo_mark[l];
  }
  TS_TRY(stem_bwd(m, images, &w));
  st->forward_s = t1 - t0, st->backward_s = ts_now() - t1;
  st->attn_fwd_s = ck.attn_fwd, st->attn_bwd_s = ck.attn_bwd, st->remat_s = ck.remat;
  st->peak_bytes = a->peak;
  return TS_OK;
}

ts_status ts_nn_vit_train_step(ts_nn_vit *m, const float *images, const int32_t *labels, float lr,
                               ts_nn_vit_train_stats *st) {
  TS_TRY(step_args(m, images, labels, lr));
  ts_nn_vit_train_stats mine;
  if (!st) st = &mine;
  memset(st, 0, sizeof *st);
  double t0 = ts_now();
  TS_TRY(ts__vit_train_reserve(m, 0));
  ts_nn_vit_mem mm;
  TS_TRY(ts_nn_vit_train_mem(m, &mm));
  st->bound_bytes = ts_nn_vit_train_bound(&mm, m->strategy, m->cfg.depth);
  st->arena_bytes = m->arena.cap;
  ts_status s = forward_backward(m, images, labels, st);
  if (s != TS_OK) {
    ts_error_prefix("vit train step: ");
    return s;
  }
  double t1 = ts_now();
  if (lr > 0) sgd(m, lr);
  st->sgd_s = ts_now() - t1;
  st->total_s = ts_now() - t0;
  return TS_OK;
}

/* ---- parameters ---------------------------------------------------------------------------- */

enum { PER_LAYER = 12 };

int ts_nn_vit_param_count(const ts_nn_vit *m) { return m ? (int)(3 + PER_LAYER * m->cfg.depth + 4) : 0; }

ts_status ts_nn_vit_param_get(const ts_nn_vit *m, int i, ts_nn_vit_param *out) {
  if (!m || !out) return ts_error(TS_ERR_INVALID_ARG, "vit param: NULL model or output");
  const int count = ts_nn_vit_param_count(m);
  if (i < 0 || i >= count) return ts_error(TS_ERR_INVALID_ARG, "vit param: index %d is not in [0, %d)", i, count);
  const int64_t D = m->cfg.dim, M = m->cfg.mlp, C = m->cfg.classes;
  memset(out, 0, sizeof *out);
  float *v = NULL;
  int64_t r = 1, c = 0;
  const char *nm = NULL;
  char buf[sizeof out->name];
  if (i < 3) {
    const struct { const char *n; float *p; int64_t r, c; } t[3] = {
        {"patch_embed.weight", m->w_pe, m->pdim, D}, {"patch_embed.bias", m->b_pe, 0, D}, {"pos_embed", m->pos, m->n, D}};
    nm = t[i].n, v = t[i].p, r = t[i].r, c = t[i].c;
  } else if (i < count - 4) {
    const int64_t l = (i - 3) / PER_LAYER;
    const ts__vit_layer *L = &m->layers[l];
    const struct { const char *n; float *p; int64_t r, c; } t[PER_LAYER] = {
        {"norm1.weight", L->ln1_g, 0, D}, {"norm1.bias", L->ln1_b, 0, D},        {"attn.qkv.weight", L->wqkv, D, 3 * D},
        {"attn.qkv.bias", L->bqkv, 0, 3 * D}, {"attn.proj.weight", L->wo, D, D}, {"attn.proj.bias", L->bo, 0, D},
        {"norm2.weight", L->ln2_g, 0, D}, {"norm2.bias", L->ln2_b, 0, D},        {"mlp.fc1.weight", L->w1, D, M},
        {"mlp.fc1.bias", L->b1, 0, M},    {"mlp.fc2.weight", L->w2, M, D},       {"mlp.fc2.bias", L->b2, 0, D}};
    const int k = (i - 3) % PER_LAYER;
    snprintf(buf, sizeof buf, "blocks.%lld.%s", (long long)l, t[k].n);
    nm = buf, v = t[k].p, r = t[k].r, c = t[k].c;
  } else {
    const struct { const char *n; float *p; int64_t r, c; } t[4] = {
        {"norm.weight", m->lnf_g, 0, D}, {"norm.bias", m->lnf_b, 0, D}, {"head.weight", m->w_head, D, C},
        {"head.bias", m->b_head, 0, C}};
    const int k = i - (count - 4);
    nm = t[k].n, v = t[k].p, r = t[k].r, c = t[k].c;
  }
  snprintf(out->name, sizeof out->name, "%s", nm);
  out->value = v;
  out->grad = m->grads ? m->grads + (v - m->weights) : NULL;
  out->ndim = r ? 2 : 1;
  out->shape[0] = r ? r : c, out->shape[1] = r ? c : 0;
  out->count = r ? r * c : c;
  return TS_OK;
}
