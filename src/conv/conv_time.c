/* Round-robin timing of several contenders and the per-layer trial (conv.h): every applicable
 * algorithm of one layer (and optionally the baselines) on the same random data, timed in the same
 * rounds, then cross-checked against one reference output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "tessera/measure.h"

ts_conv_time_opts ts_conv_time_opts_default(void) {
  ts_conv_time_opts o;
  memset(&o, 0, sizeof o);
  o.warmup = 2;
  o.repeats = 5;
  o.min_time_s = 0.05;
  o.max_rounds = 40;
  o.prune = 3.0;
  o.max_plan_bytes = (size_t)1 << 30;
  o.seed = 1;
  return o;
}

/* A thin layer over the core engine (tessera/measure.h): the same rounds, warm-up, pruning and
 * stopping rule; a contender that failed reads NaN, a pruned one its fastest warm-up call. */
ts_status ts_conv_time_rounds(int n, const ts_conv_timed_fn *fn, void *const *arg, const bool *prunable,
                              const ts_conv_time_opts *opts, double *ms, bool *pruned) {
  const ts_conv_time_opts o = opts ? *opts : ts_conv_time_opts_default();
  if (n < 1 || !fn || !ms || o.repeats < 1 || o.warmup < 0 || o.max_rounds < o.repeats)
    return ts_error(TS_ERR_INVALID_ARG, "ts_conv_time_rounds: n = %d, repeats = %d, warmup = %d, max_rounds = %d", n,
                    o.repeats, o.warmup, o.max_rounds);
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = o.warmup, mo.rounds = o.repeats, mo.max_rounds = o.max_rounds, mo.min_time_s = o.min_time_s;
  mo.prune = o.prune > 0 ? o.prune : 0, mo.prunable = prunable;
  ts_measure_result *res = calloc((size_t)n, sizeof *res);
  if (!res) return ts_error(TS_ERR_OOM, "ts_conv_time_rounds: out of memory");
  ts_status s = ts_measure_run(n, (const ts_measure_fn *)fn, arg, &mo, res, NULL);
  int ok = 0;
  for (int i = 0; i < n; i++) {
    const bool live = res[i].status == TS_OK;
    ms[i] = !live ? NAN : res[i].pruned ? 1e3 * res[i].best_warmup_s : res[i].s.n > 0 ? 1e3 * res[i].s.median : NAN;
    if (pruned) pruned[i] = live && res[i].pruned;
    ok += live;
  }
  if (s == TS_OK && !ok) { /* every contender failed (some after timed rounds): the last error stands */
    for (int i = n - 1; i >= 0 && s == TS_OK; i--) s = res[i].status;
  }
  free(res);
  return s;
}

/* ---- trials --------------------------------------------------------------------------------- */

enum { MAX_CONTENDERS = TS_CONV_ALGO_COUNT + TS_CONV_BASE_COUNT };

typedef struct contender {
  struct ts_conv_trial *t;
  bool baseline, ran, pruned;
  ts_conv_algo algo;
  ts_conv_baseline_kind base;
  ts_conv_plan *plan;
  void *ws;
  ts_conv_baseline *b;
  double ms, rel_diff;
  char why[256];
} contender;

struct ts_conv_trial {
  ts_context *ctx;
  ts_conv_desc d;
  ts_conv_time_opts o;
  size_t nx, nw, ny;
  float *x, *w, *b, *y, *y0;
  int n; /* TS_CONV_ALGO_COUNT + baselines added */
  contender c[MAX_CONTENDERS];
};

static float *random_floats(size_t n, ts_rng *r) {
  float *p = ts_malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; p && i < n; i++) p[i] = (float)(2.0 * ts_rng_uniform(r) - 1.0);
  return p;
}

static void keep_why(contender *c, const char *prefix) {
  snprintf(c->why, sizeof c->why, "%s%s", prefix, ts_last_error());
}

ts_status ts_conv_trial_create(ts_conv_trial **out, ts_context *ctx, const ts_conv_desc *d, unsigned algos,
                               const ts_conv_time_opts *opts) {
  return ts__conv_trial_create_opts(out, ctx, d, algos, opts, NULL);
}

ts_status ts__conv_trial_create_opts(ts_conv_trial **out, ts_context *ctx, const ts_conv_desc *d, unsigned algos,
                                     const ts_conv_time_opts *opts, const ts__conv_plan_opts *po) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_trial_create: NULL trial pointer");
  *out = NULL;
  int P, Q;
  TS_TRY(ts_conv_output_dims(d, &P, &Q));
  ts_conv_trial *t = calloc(1, sizeof *t);
  if (!t) return ts_error(TS_ERR_OOM, "ts_conv_trial_create: out of memory");
  t->ctx = ctx, t->d = *d, t->o = opts ? *opts : ts_conv_time_opts_default();
  t->nx = (size_t)d->n * d->c * d->h * d->w;
  t->nw = (size_t)d->k * (d->c / d->groups) * d->r * d->s;
  t->ny = (size_t)d->n * d->k * P * Q;
  ts_rng r;
  ts_rng_seed(&r, t->o.seed);
  t->x = random_floats(t->nx, &r), t->w = random_floats(t->nw, &r), t->b = random_floats((size_t)d->k, &r);
  t->y = ts_malloc(t->ny * sizeof(float)), t->y0 = ts_malloc(t->ny * sizeof(float));
  t->n = TS_CONV_ALGO_COUNT;
  if (!t->x || !t->w || !t->b || !t->y || !t->y0) {
    ts_conv_trial_destroy(t);
    return ts_error(TS_ERR_OOM, "ts_conv_trial_create: out of memory for the layer's data");
  }
  if (!algos) algos = ((1u << TS_CONV_ALGO_COUNT) - 1) & ~(1u << TS_CONV_REFERENCE);
  for (int a = 0; a < TS_CONV_ALGO_COUNT; a++) {
    contender *c = &t->c[a];
    c->t = t, c->algo = (ts_conv_algo)a, c->ms = c->rel_diff = NAN;
    if (!(algos >> a & 1u)) {
      snprintf(c->why, sizeof c->why, "not a candidate");
      continue;
    }
    if (ts_conv_supported(d, c->algo) != TS_OK) {
      keep_why(c, "");
      continue;
    }
    if (ts__conv_plan_create_opts(&c->plan, ctx, d, c->algo, po) != TS_OK) {
      keep_why(c, "plan failed: ");
      continue;
    }
    const size_t mem = ts_conv_plan_memory(c->plan);
    if (mem > t->o.max_plan_bytes) {
      snprintf(c->why, sizeof c->why, "%s: its plan needs %.0f MB, above the trial budget of %.0f MB",
               ts_conv_algo_name(c->algo), mem / 1e6, t->o.max_plan_bytes / 1e6);
    } else {
      const size_t wsz = ts_conv_plan_workspace_size(c->plan);
      if (wsz && !(c->ws = ts_malloc(wsz))) snprintf(c->why, sizeof c->why, "out of memory for a %zu-byte workspace", wsz);
      else if (ts_conv_plan_set_weights(c->plan, t->w, t->b) != TS_OK) keep_why(c, "set_weights failed: ");
      else continue;
    }
    ts_free(c->ws), c->ws = NULL;
    ts_conv_plan_destroy(c->plan), c->plan = NULL;
  }
  *out = t;
  return TS_OK;
}

ts_status ts_conv_trial_add_baseline(ts_conv_trial *t, ts_conv_baseline_kind kind) {
  if (!t || t->n >= MAX_CONTENDERS) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_trial_add_baseline: no room");
  contender *c = &t->c[t->n++];
  memset(c, 0, sizeof *c);
  c->t = t, c->baseline = true, c->base = kind, c->ms = c->rel_diff = NAN;
  const ts_status s = ts_conv_baseline_create(&c->b, t->ctx, &t->d, kind, t->w, t->b);
  if (s != TS_OK) keep_why(c, "");
  return s;
}

static ts_status run_contender(void *arg) {
  contender *c = arg;
  const ts_conv_trial *t = c->t;
  const ts_status s = c->baseline ? ts_conv_baseline_execute(c->b, t->x, t->y) : ts_conv_execute(c->plan, t->x, t->y, c->ws);
  if (s != TS_OK) keep_why(c, "execute failed: ");
  return s;
}

static double rel_diff(const float *y, const float *ref, size_t n) {
  double dmax = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    const double e = fabs((double)y[i] - ref[i]);
    if (!(e <= dmax)) dmax = e; /* NaN wins */
    if (fabs(ref[i]) > m) m = fabs(ref[i]);
  }
  return m > 0 ? dmax / m : dmax;
}

ts_status ts_conv_trial_run(ts_conv_trial *t) {
  if (!t) return ts_error(TS_ERR_INVALID_ARG, "ts_conv_trial_run: NULL trial");
  ts_conv_timed_fn fn[MAX_CONTENDERS];
  void *arg[MAX_CONTENDERS];
  bool prunable[MAX_CONTENDERS], pruned[MAX_CONTENDERS];
  double ms[MAX_CONTENDERS];
  int idx[MAX_CONTENDERS], n = 0;
  for (int i = 0; i < t->n; i++) {
    contender *c = &t->c[i];
    if (!(c->baseline ? c->b != NULL : c->plan != NULL)) continue;
    fn[n] = run_contender, arg[n] = c, prunable[n] = !c->baseline, idx[n++] = i;
  }
  if (!n) return ts_error(TS_ERR_UNSUPPORTED, "conv trial: no algorithm or baseline can run this layer");
  TS_TRY(ts_conv_time_rounds(n, fn, arg, prunable, &t->o, ms, pruned));
  int ref = -1;
  for (int j = 0; j < n; j++) {
    contender *c = &t->c[idx[j]];
    c->ms = ms[j], c->pruned = pruned[j], c->ran = !isnan(ms[j]);
    if (c->ran && (ref < 0 || (c->baseline && !t->c[ref].baseline))) ref = idx[j];
  }
  if (ref < 0) return TS_OK;
  if (run_contender(&t->c[ref]) != TS_OK) return TS_OK;
  memcpy(t->y0, t->y, t->ny * sizeof(float));
  for (int j = 0; j < n; j++) {
    contender *c = &t->c[idx[j]];
    if (c->ran && run_contender(c) == TS_OK) c->rel_diff = rel_diff(t->y, t->y0, t->ny);
  }
  return TS_OK;
}

int ts_conv_trial_count(const ts_conv_trial *t) { return t ? t->n : 0; }

void ts_conv_trial_info_at(const ts_conv_trial *t, int i, ts_conv_trial_info *out) {
  memset(out, 0, sizeof *out);
  out->ms = out->rel_diff = NAN;
  out->impl = out->why = "";
  if (!t || i < 0 || i >= t->n) return;
  const contender *c = &t->c[i];
  out->baseline = c->baseline;
  out->algo = c->algo, out->base = c->base;
  out->name = c->baseline ? ts_conv_baseline_name(c->base) : ts_conv_algo_name(c->algo);
  out->ran = c->ran, out->ms = c->ms, out->pruned = c->pruned, out->rel_diff = c->rel_diff;
  out->impl = c->b ? ts_conv_baseline_impl(c->b) : "";
  out->why = c->why;
}

void ts_conv_trial_destroy(ts_conv_trial *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) {
    ts_conv_plan_destroy(t->c[i].plan);
    ts_free(t->c[i].ws);
    ts_conv_baseline_destroy(t->c[i].b);
  }
  ts_free(t->x), ts_free(t->w), ts_free(t->b), ts_free(t->y), ts_free(t->y0);
  free(t);
}
