/* Convolution descriptor validation, algorithm names, and the plan lifecycle that dispatches to
 * each algorithm's hooks (conv_internal.h). */
#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"

static const char *const algo_names[TS_CONV_ALGO_COUNT] = {
    "reference", "direct", "im2col", "kn2row", "implicit", "winograd_f2", "winograd_f4", "fft", "depthwise"};

static const ts__conv_algo_ops *const algo_ops[TS_CONV_ALGO_COUNT] = {
    &ts__conv_ops_reference,   &ts__conv_ops_direct,      &ts__conv_ops_im2col,
    &ts__conv_ops_kn2row,      &ts__conv_ops_implicit,    &ts__conv_ops_winograd_f2,
    &ts__conv_ops_winograd_f4, &ts__conv_ops_fft,         &ts__conv_ops_depthwise};

ts_conv_desc ts_conv_desc_make(int n, int c, int h, int w, int k, int r, int s) {
  ts_conv_desc d;
  memset(&d, 0, sizeof d);
  d.n = n, d.c = c, d.h = h, d.w = w, d.k = k, d.r = r, d.s = s;
  d.stride_h = d.stride_w = 1;
  d.dilation_h = d.dilation_w = 1;
  d.groups = 1;
  return d;
}

void ts_conv_desc_set_geometry(ts_conv_desc *d, int stride, int pad, int dilation) {
  d->stride_h = d->stride_w = stride;
  d->pad_top = d->pad_bottom = d->pad_left = d->pad_right = pad;
  d->dilation_h = d->dilation_w = dilation;
}

const char *ts_conv_algo_name(ts_conv_algo a) {
  return (unsigned)a < TS_CONV_ALGO_COUNT ? algo_names[a] : "unknown";
}

ts_status ts_conv_algo_parse(const char *name, ts_conv_algo *out) {
  if (!name || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_algo_parse: NULL argument");
  for (int i = 0; i < TS_CONV_ALGO_COUNT; i++)
    if (!strcmp(name, algo_names[i])) return *out = (ts_conv_algo)i, TS_OK;
  if (!strcmp(name, "winograd")) return *out = TS_CONV_WINOGRAD_F4, TS_OK;
  return ts_error(TS_ERR_NOT_FOUND,
                  "unknown convolution algorithm '%s' (reference, direct, im2col, kn2row, implicit, "
                  "winograd_f2, winograd_f4, fft, depthwise)", name);
}

ts_status ts_conv_output_dims(const ts_conv_desc *d, int *p, int *q) {
  if (!d) return ts_error(TS_ERR_INVALID_ARG, "conv: NULL descriptor");
  const struct { const char *name; int v, min; } f[] = {
      {"n", d->n, 1}, {"c", d->c, 1}, {"h", d->h, 1}, {"w", d->w, 1}, {"k", d->k, 1}, {"r", d->r, 1},
      {"s", d->s, 1}, {"stride_h", d->stride_h, 1}, {"stride_w", d->stride_w, 1},
      {"pad_top", d->pad_top, 0}, {"pad_bottom", d->pad_bottom, 0}, {"pad_left", d->pad_left, 0},
      {"pad_right", d->pad_right, 0}, {"dilation_h", d->dilation_h, 1}, {"dilation_w", d->dilation_w, 1},
      {"groups", d->groups, 1}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].v < f[i].min || f[i].v > (1 << 24))
      return ts_error(TS_ERR_INVALID_ARG, "conv: %s = %d out of range [%d, 2^24]", f[i].name, f[i].v, f[i].min);
  if (d->c % d->groups || d->k % d->groups)
    return ts_error(TS_ERR_SHAPE, "conv: groups = %d must divide c = %d and k = %d", d->groups, d->c, d->k);
  const int64_t eh = (int64_t)(d->r - 1) * d->dilation_h + 1, ew = (int64_t)(d->s - 1) * d->dilation_w + 1;
  const int64_t hp = (int64_t)d->h + d->pad_top + d->pad_bottom, wp = (int64_t)d->w + d->pad_left + d->pad_right;
  if (eh > hp || ew > wp)
    return ts_error(TS_ERR_SHAPE, "conv: kernel extent %lldx%lld exceeds the padded input %lldx%lld", (long long)eh,
                    (long long)ew, (long long)hp, (long long)wp);
  const int64_t P = (hp - eh) / d->stride_h + 1, Q = (wp - ew) / d->stride_w + 1;
  const int64_t lim = INT32_MAX;
  if ((int64_t)d->n * d->c * hp * wp > lim || (int64_t)d->n * d->k * P * Q > lim ||
      (int64_t)d->k * (d->c / d->groups) * d->r * d->s > lim)
    return ts_error(TS_ERR_OVERFLOW, "conv: a tensor of this descriptor exceeds 2^31 elements");
  if (p) *p = (int)P;
  if (q) *q = (int)Q;
  return TS_OK;
}

double ts_conv_flops(const ts_conv_desc *d) {
  int p, q;
  if (ts_conv_output_dims(d, &p, &q) != TS_OK) return 0;
  return 2.0 * d->n * d->k * p * q * (double)(d->c / d->groups) * d->r * d->s;
}

ts_status ts_conv_supported(const ts_conv_desc *d, ts_conv_algo a) {
  TS_TRY(ts_conv_output_dims(d, NULL, NULL));
  if ((unsigned)a >= TS_CONV_ALGO_COUNT) return ts_error(TS_ERR_INVALID_ARG, "conv: unknown algorithm %d", (int)a);
  return algo_ops[a]->check ? algo_ops[a]->check(d) : TS_OK;
}

static const char *const wino_sched_names[TS__WINO_SCHED_COUNT] = {"auto", "fused", "staged", "clane",
                                                                   "clane-private", "clane-shared"};

const char *ts__conv_wino_schedule_name(int sched) {
  return sched >= 0 && sched < TS__WINO_SCHED_COUNT ? wino_sched_names[sched] : "unknown";
}

ts_status ts__conv_wino_schedule_parse(const char *name, int *out) {
  for (int i = 0; name && i < TS__WINO_SCHED_COUNT; i++)
    if (!strcmp(name, wino_sched_names[i])) return *out = i, TS_OK;
  return ts_error(TS_ERR_NOT_FOUND,
                  "unknown Winograd schedule '%s' (auto, fused, staged, clane, clane-private, clane-shared)",
                  name ? name : "");
}

ts_status ts_conv_plan_create(ts_conv_plan **plan, ts_context *ctx, const ts_conv_desc *d, ts_conv_algo a) {
  return ts__conv_plan_create_opts(plan, ctx, d, a, NULL);
}

ts_status ts__conv_plan_create_opts(ts_conv_plan **plan, ts_context *ctx, const ts_conv_desc *d, ts_conv_algo a,
                                    const ts__conv_plan_opts *o) {
  if (!plan) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_plan_create: NULL plan pointer");
  *plan = NULL;
  if (o && (o->wino_schedule < 0 || o->wino_schedule >= TS__WINO_SCHED_COUNT))
    return ts_error(TS_ERR_INVALID_ARG, "ts_conv_plan_create: Winograd schedule %d out of range", o->wino_schedule);
  int p, q;
  TS_TRY(ts_conv_supported(d, a));
  TS_TRY(ts_conv_output_dims(d, &p, &q));
  ts_conv_plan *pl = calloc(1, sizeof *pl);
  if (!pl) return ts_error(TS_ERR_OOM, "ts_conv_plan_create: out of memory");
  pl->d = *d;
  pl->algo = a;
  pl->ctx = ctx;
  pl->threads = ctx ? ts_context_threads(ctx) : ts_default_threads();
  if (pl->threads < 1) pl->threads = 1;
  pl->p = p, pl->q = q;
  pl->cg = d->c / d->groups, pl->kg = d->k / d->groups;
  pl->ops = algo_ops[a];
  if (o) pl->opts = *o;
  pl->kern = pl->opts.kern ? pl->opts.kern : ts__conv_kern_active();
  const size_t wn = (size_t)d->k * pl->cg * d->r * d->s;
  pl->weights = ts_malloc(wn * sizeof(float));
  pl->bias = ts_malloc((size_t)d->k * sizeof(float));
  if (!pl->weights || !pl->bias) {
    ts_conv_plan_destroy(pl);
    return ts_error(TS_ERR_OOM, "ts_conv_plan_create: out of memory for %zu weights", wn);
  }
  ts_status st = pl->ops->init ? pl->ops->init(pl) : TS_OK;
  if (st != TS_OK) {
    ts_conv_plan_destroy(pl);
    return st;
  }
  *plan = pl;
  return TS_OK;
}

void ts_conv_plan_destroy(ts_conv_plan *pl) {
  if (!pl) return;
  if (pl->ops && pl->ops->destroy) pl->ops->destroy(pl);
  ts_free(pl->weights);
  ts_free(pl->bias);
  free(pl);
}

size_t ts_conv_plan_workspace_size(const ts_conv_plan *pl) { return pl ? pl->workspace : 0; }
size_t ts_conv_plan_memory(const ts_conv_plan *pl) {
  if (!pl) return 0;
  return ((size_t)pl->d.k * pl->cg * pl->d.r * pl->d.s + (size_t)pl->d.k) * sizeof(float) + pl->state_bytes + pl->workspace;
}
ts_conv_algo ts_conv_plan_algo(const ts_conv_plan *pl) { return pl ? pl->algo : TS_CONV_REFERENCE; }

ts_status ts_conv_plan_set_weights(ts_conv_plan *pl, const float *w, const float *bias) {
  if (!pl || !w) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_plan_set_weights: NULL plan or weights");
  const ts_conv_desc *d = &pl->d;
  memcpy(pl->weights, w, (size_t)d->k * pl->cg * d->r * d->s * sizeof(float));
  for (int k = 0; k < d->k; k++) pl->bias[k] = bias ? bias[k] : 0.0f;
  pl->has_weights = 0;
  if (pl->ops->weights) TS_TRY(pl->ops->weights(pl));
  pl->has_weights = 1;
  return TS_OK;
}

ts_status ts_conv_execute(const ts_conv_plan *pl, const float *in, float *out, void *workspace) {
  if (!pl || !in || !out) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_execute: NULL plan, input or output");
  if (!pl->has_weights)
    return ts_error(TS_ERR_INVALID_ARG, "ts_conv_execute (%s): weights not set (call ts_conv_plan_set_weights)",
                    ts_conv_algo_name(pl->algo));
  if (pl->workspace && !workspace)
    return ts_error(TS_ERR_INVALID_ARG, "ts_conv_execute (%s): needs a workspace of %zu bytes, got NULL",
                    ts_conv_algo_name(pl->algo), pl->workspace);
  if ((uintptr_t)workspace % TS__CONV_ALIGN)
    return ts_error(TS_ERR_INVALID_ARG, "ts_conv_execute (%s): workspace must be %d-byte aligned",
                    ts_conv_algo_name(pl->algo), TS__CONV_ALIGN);
  return pl->ops->execute(pl, in, out, workspace);
}

/* ---- shared helpers ------------------------------------------------------------------------ */

ts__conv_pad_geom ts__conv_pad_geometry(const ts_conv_desc *d) {
  ts__conv_pad_geom g;
  g.hp = d->h + d->pad_top + d->pad_bottom;
  g.sw = d->stride_w;
  const int wp = d->w + d->pad_left + d->pad_right;
  g.wrow = (wp + g.sw - 1) / g.sw + TS__CONV_SLACK;
  g.plane = (size_t)g.hp * g.sw * g.wrow;
  return g;
}

void ts__conv_tap_offsets(const ts_conv_desc *d, const ts__conv_pad_geom *g, int *soff) {
  for (int s = 0; s < d->s; s++) {
    const int t = s * d->dilation_w;
    soff[s] = (t % g->sw) * g->wrow + t / g->sw;
  }
}

void ts__conv_pad_input(const ts_conv_desc *d, const ts__conv_pad_geom *g, const float *in, float *xp, int threads) {
  const int nc = d->n * d->c, sw = g->sw;
#pragma omp parallel for num_threads(threads) schedule(static) collapse(2)
  for (int ch = 0; ch < nc; ch++)
    for (int h = 0; h < g->hp; h++) {
      float *row = xp + (size_t)ch * g->plane + (size_t)h * sw * g->wrow;
      memset(row, 0, (size_t)sw * g->wrow * sizeof(float));
      const int ih = h - d->pad_top;
      if (ih < 0 || ih >= d->h) continue;
      const float *src = in + ((size_t)ch * d->h + ih) * d->w;
      if (sw == 1) {
        memcpy(row + d->pad_left, src, (size_t)d->w * sizeof(float));
        continue;
      }
      for (int ph = 0; ph < sw; ph++) { /* padded column j = i sw + ph reads input column j - pad_left */
        float *dst = row + (size_t)ph * g->wrow;
        int i = 0, x = ph - d->pad_left;
        for (; x < 0; x += sw) i++;
        for (; x < d->w; x += sw) dst[i++] = src[x];
      }
    }
}

void ts__conv_epilogue(float *out, int rows, size_t len, size_t ld, const float *bias, int relu) {
  for (int k = 0; k < rows; k++) {
    float *o = out + (size_t)k * ld;
    const float b = bias[k];
    if (relu)
      for (size_t i = 0; i < len; i++) {
        const float v = o[i] + b;
        o[i] = v < 0.0f ? 0.0f : v; /* NaN stays NaN */
      }
    else if (b != 0.0f)
      for (size_t i = 0; i < len; i++) o[i] += b;
  }
}
