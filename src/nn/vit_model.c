/* Vision Transformer: configurations, parameter initialization and buffer allocation (everything a
 * forward needs, for a fixed batch and token count). The forward pass is in vit_forward.c. */
#include <string.h>

#include "nn/nn_internal.h"

ts_status ts_nn_vit_config_preset(const char *name, int64_t res, ts_nn_vit_config *out) {
  if (!name || !out) return ts_error(TS_ERR_INVALID_ARG, "vit: NULL model name or config");
  ts_nn_vit_config c = {.patch = 16, .in_chans = 3, .classes = 1000, .ln_eps = 1e-6f, .init_std = 0.02f, .seed = 1};
  if (strcmp(name, "deit-s") == 0) {
    c.dim = 384, c.heads = 6, c.depth = 12, c.mlp = 1536;
  } else if (strcmp(name, "vit-b16") == 0) {
    c.dim = 768, c.heads = 12, c.depth = 12, c.mlp = 3072;
  } else if (strcmp(name, "tiny") == 0) {
    c.dim = 64, c.heads = 2, c.depth = 2, c.mlp = 128, c.classes = 10;
  } else {
    return ts_error(TS_ERR_INVALID_ARG, "vit: unknown model '%s' (deit-s, vit-b16, tiny)", name);
  }
  if (res < c.patch || res % c.patch != 0 || res > 16384)
    return ts_error(TS_ERR_INVALID_ARG, "vit: resolution %lld is not a multiple of the patch %lld in [%lld, 16384]",
                    (long long)res, (long long)c.patch, (long long)c.patch);
  c.img_h = c.img_w = res;
  *out = c;
  return TS_OK;
}

ts_status ts_nn_vit_config_validate(const ts_nn_vit_config *c) {
  if (!c) return ts_error(TS_ERR_INVALID_ARG, "vit config: NULL");
  const struct {
    const char *name;
    int64_t v, hi;
  } f[] = {{"dim", c->dim, 1 << 16},     {"heads", c->heads, 1 << 12},     {"depth", c->depth, 1 << 12},
           {"mlp", c->mlp, 1 << 18},     {"patch", c->patch, 1 << 10},     {"in_chans", c->in_chans, 1 << 10},
           {"classes", c->classes, 1 << 20}, {"img_h", c->img_h, 1 << 16}, {"img_w", c->img_w, 1 << 16}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].v < 1 || f[i].v > f[i].hi)
      return ts_error(TS_ERR_INVALID_ARG, "vit config: %s = %lld is not in [1, %lld]", f[i].name, (long long)f[i].v,
                      (long long)f[i].hi);
  if (c->dim % c->heads != 0)
    return ts_error(TS_ERR_INVALID_ARG, "vit config: dim = %lld is not a multiple of heads = %lld", (long long)c->dim,
                    (long long)c->heads);
  if (c->img_h % c->patch != 0 || c->img_w % c->patch != 0)
    return ts_error(TS_ERR_INVALID_ARG, "vit config: image %lld x %lld is not a multiple of patch = %lld",
                    (long long)c->img_h, (long long)c->img_w, (long long)c->patch);
  if ((c->img_h / c->patch) * (c->img_w / c->patch) > (1 << 20))
    return ts_error(TS_ERR_INVALID_ARG, "vit config: %lld tokens is more than 2^20",
                    (long long)((c->img_h / c->patch) * (c->img_w / c->patch)));
  if (!(c->ln_eps >= 0 && c->ln_eps < 1e30f)) return ts_error(TS_ERR_INVALID_ARG, "vit config: ln_eps = %g", (double)c->ln_eps);
  if (!(c->init_std >= 0 && c->init_std < 1e30f))
    return ts_error(TS_ERR_INVALID_ARG, "vit config: init_std = %g", (double)c->init_std);
  return TS_OK;
}

/* Carves `count` floats from an arena (64-byte aligned pieces: counts rounded up to 16). */
static float *take(float **cur, int64_t count) {
  float *p = *cur;
  *cur += (count + 15) / 16 * 16;
  return p;
}

static int64_t padded(int64_t count) { return (count + 15) / 16 * 16; }

static void fill_normal(ts_rng *r, float *p, int64_t count, float mean, float std) {
  for (int64_t i = 0; i < count; i++) p[i] = mean + std * ts_rng_normal(r);
}

ts_status ts_nn_vit_create(ts_nn_vit **out, ts_context *ctx, const ts_nn_vit_config *cfg, int64_t batch) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "vit: NULL output handle");
  *out = NULL;
  TS_TRY(ts_nn_vit_config_validate(cfg));
  if (batch < 1 || batch > 4096) return ts_error(TS_ERR_INVALID_ARG, "vit: batch %lld is not in [1, 4096]", (long long)batch);
  const ts_nn_vit_config c = *cfg;
  int64_t gh = c.img_h / c.patch, gw = c.img_w / c.patch, n = gh * gw, pdim = c.in_chans * c.patch * c.patch;
  int64_t D = c.dim, M = c.mlp;
  /* Parameter count (each piece padded to 16 floats) and activation count, in doubles first so
   * an absurd configuration fails cleanly instead of overflowing. */
  double per_layer = 4.0 * padded(D) + padded(D * 3 * D) + padded(3 * D) + padded(D * D) + padded(D) + padded(D * M) +
                     padded(M) + padded(M * D) + padded(D);
  double nw = (double)padded(pdim * D) + padded(D) + (double)padded(n * D) + c.depth * per_layer + 2.0 * padded(D) +
              (double)padded(D * c.classes) + padded(c.classes);
  double rows = (double)batch * n, bigw = (double)(M > pdim ? M : pdim);
  double na = 2 * padded((int64_t)(rows * D)) + padded((int64_t)(rows * 3 * D)) + 3.0 * padded((int64_t)(rows * D)) +
              rows * bigw + 16 + padded(batch * D);
  if (nw > 4e9 || na > 8e9)
    return ts_error(TS_ERR_OVERFLOW, "vit: %.3g parameters and %.3g activation floats are too many", nw, na);
  ts_nn_vit *m = ts_calloc(1, sizeof *m);
  if (!m) return TS_ERR_OOM;
  m->layers = ts_calloc((size_t)c.depth, sizeof *m->layers);
  m->weights = ts_malloc((size_t)nw * sizeof(float));
  m->acts = ts_malloc((size_t)na * sizeof(float));
  if (!m->layers || !m->weights || !m->acts) {
    ts_nn_vit_destroy(m);
    return TS_ERR_OOM;
  }
  m->cfg = c;
  m->ctx = ctx;
  m->nweights = (int64_t)nw;
  m->batch = batch, m->gh = gh, m->gw = gw, m->n = n, m->hd = D / c.heads, m->pdim = pdim;

  ts_rng r;
  ts_rng_seed(&r, c.seed);
  float sd = c.init_std, *w = m->weights;
  m->w_pe = take(&w, pdim * D), fill_normal(&r, m->w_pe, pdim * D, 0, sd);
  m->b_pe = take(&w, D), fill_normal(&r, m->b_pe, D, 0, sd);
  m->pos = take(&w, n * D), fill_normal(&r, m->pos, n * D, 0, sd);
  for (int64_t l = 0; l < c.depth; l++) {
    ts__vit_layer *L = &m->layers[l];
    L->ln1_g = take(&w, D), fill_normal(&r, L->ln1_g, D, 1, sd);
    L->ln1_b = take(&w, D), fill_normal(&r, L->ln1_b, D, 0, sd);
    L->wqkv = take(&w, D * 3 * D), fill_normal(&r, L->wqkv, D * 3 * D, 0, sd);
    L->bqkv = take(&w, 3 * D), fill_normal(&r, L->bqkv, 3 * D, 0, sd);
    L->wo = take(&w, D * D), fill_normal(&r, L->wo, D * D, 0, sd);
    L->bo = take(&w, D), fill_normal(&r, L->bo, D, 0, sd);
    L->ln2_g = take(&w, D), fill_normal(&r, L->ln2_g, D, 1, sd);
    L->ln2_b = take(&w, D), fill_normal(&r, L->ln2_b, D, 0, sd);
    L->w1 = take(&w, D * M), fill_normal(&r, L->w1, D * M, 0, sd);
    L->b1 = take(&w, M), fill_normal(&r, L->b1, M, 0, sd);
    L->w2 = take(&w, M * D), fill_normal(&r, L->w2, M * D, 0, sd);
    L->b2 = take(&w, D), fill_normal(&r, L->b2, D, 0, sd);
  }
  m->lnf_g = take(&w, D), fill_normal(&r, m->lnf_g, D, 1, sd);
  m->lnf_b = take(&w, D), fill_normal(&r, m->lnf_b, D, 0, sd);
  m->w_head = take(&w, D * c.classes), fill_normal(&r, m->w_head, D * c.classes, 0, sd);
  m->b_head = take(&w, c.classes), fill_normal(&r, m->b_head, c.classes, 0, sd);

  int64_t R = batch * n;
  float *a = m->acts;
  m->x = take(&a, R * D);
  m->h = take(&a, R * D);
  m->qkv = take(&a, R * 3 * D);
  m->q = take(&a, R * D);
  m->k = take(&a, R * D);
  m->v = take(&a, R * D);
  m->big = take(&a, R * (M > pdim ? M : pdim));
  m->pooled = take(&a, batch * D);
  *out = m;
  return TS_OK;
}

void ts_nn_vit_destroy(ts_nn_vit *m) {
  if (!m) return;
  ts_free(m->weights);
  ts_free(m->acts);
  ts_free(m->grads);
  ts_free(m->strategy);
  ts_free(m->saved);
  ts_free(m->xs);
  ts_free(m->lo_mark);
  ts_free(m->arena.base);
  ts_free(m->layers);
  ts_free(m);
}

void ts_nn_vit_shape(const ts_nn_vit *m, int64_t *grid_h, int64_t *grid_w, int64_t *n, int64_t *head_dim) {
  if (grid_h) *grid_h = m->gh;
  if (grid_w) *grid_w = m->gw;
  if (n) *n = m->n;
  if (head_dim) *head_dim = m->hd;
}

ts_status ts_nn_vit_set_attn(ts_nn_vit *m, ts_nn_attn *a) {
  if (!m || !a) return ts_error(TS_ERR_INVALID_ARG, "vit set attn: NULL model or backend");
  ts_nn_attn_info info;
  ts_nn_attn_get_info(a, &info);
  if (info.n != m->n || info.d != m->hd)
    return ts_error(TS_ERR_SHAPE, "vit set attn: backend is for %lld tokens, head dim %lld; the model has %lld, %lld",
                    (long long)info.n, (long long)info.d, (long long)m->n, (long long)m->hd);
  m->attn = a;
  m->perm = info.perm;
  return TS_OK;
}

void ts_nn_vit_last_timing(const ts_nn_vit *m, ts_nn_vit_timing *t) {
  if (m && t) *t = m->timing;
}

double ts_nn_vit_flops(const ts_nn_vit *m, int64_t mask_nnz) {
  const ts_nn_vit_config *c = &m->cfg;
  double R = (double)m->batch * m->n, D = (double)c->dim;
  double gemm = 2 * R * m->pdim * D + c->depth * 2 * R * (3 * D * D + D * D + 2 * D * c->mlp) +
                2.0 * m->batch * D * c->classes;
  double attn = (double)c->depth * m->batch * c->heads * 4.0 * m->hd * (double)mask_nnz;
  return gemm + attn;
}
