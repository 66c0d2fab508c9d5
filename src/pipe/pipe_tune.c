/* The offline baseline GOPipe's automatic granularity is measured against: every ladder tile run
 * as a fixed granularity, timed in interleaved rounds, the fastest kept in the artifact store
 * ("pipe-gran") with its provenance. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "pipe/pipe_internal.h"

static const ts__artifact_kind k_gran = {"pipe-gran", 1};

static void tune_key(const ts_pipe_desc *d, const ts_pipe_opts *o, char key[17]) {
  ts_hash h;
  ts_hash_init(&h, "pipe-gran-v1");
  ts_hash_str(&h, d->name);
  ts_hash_i64(&h, d->width), ts_hash_i64(&h, d->height), ts_hash_i64(&h, d->nstages);
  for (int s = 0; s < d->nstages; s++) {
    const ts_pipe_stage *st = &d->stage[s];
    ts_hash_str(&h, st->name);
    ts_hash_i64(&h, st->level), ts_hash_i64(&h, st->channels), ts_hash_i64(&h, st->nin);
    for (int i = 0; i < st->nin; i++) ts_hash_i64(&h, st->in[i].from), ts_hash_i64(&h, st->in[i].halo);
  }
  ts_hash_i64(&h, o->frames), ts_hash_i64(&h, o->threads), ts_hash_i64(&h, o->inflight);
  ts_hash_i64(&h, o->queue), ts_hash_i64(&h, o->copy);
  ts_hash_hex(&h, key);
}

typedef struct tune_ctx {
  const ts_pipe_desc *d;
  ts_pipe_opts o;
  bool progress;
  ts_pipe_tune_result *r;
} tune_ctx;

typedef struct cand {
  const ts_pipe_desc *d;
  ts_pipe_opts o;
} cand;

static ts_status run_cand(void *arg) {
  cand *c = arg;
  return ts_pipe_run(c->d, &c->o, NULL);
}

ts_status ts__pipe_tune_from_cjson(const cJSON *data, ts_pipe_tune_result *out) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(data, "candidates");
  const cJSON *best = cJSON_GetObjectItemCaseSensitive(data, "best");
  int n = cJSON_GetArraySize(arr);
  if (!cJSON_IsArray(arr) || n < 1 || n > TS_PIPE_TUNE_MAX || !cJSON_IsNumber(best) || !(best->valuedouble >= 0) ||
      best->valuedouble >= n || best->valuedouble != (int)best->valuedouble)
    return ts_error(TS_ERR_FORMAT, "pipe-gran: expected candidates[1..%d] and an integer best below their count",
                    TS_PIPE_TUNE_MAX);
  ts_pipe_tune_result r;
  memset(&r, 0, sizeof r);
  r.n = n;
  r.best = (int)best->valuedouble;
  for (int i = 0; i < n; i++) {
    const cJSON *e = cJSON_GetArrayItem(arr, i);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(e, "tile_w"), *h = cJSON_GetObjectItemCaseSensitive(e, "tile_h");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "median_s");
    if (!cJSON_IsNumber(w) || !cJSON_IsNumber(h) || !(w->valuedouble >= 1) || !(h->valuedouble >= 1) ||
        w->valuedouble > 1 << 20 || h->valuedouble > 1 << 20 || w->valuedouble != (int)w->valuedouble ||
        h->valuedouble != (int)h->valuedouble || !((cJSON_IsNumber(m) && m->valuedouble >= 0) || cJSON_IsNull(m)))
      return ts_error(TS_ERR_FORMAT, "pipe-gran: candidate %d is not {tile_w, tile_h >= 1, median_s >= 0 or null}", i);
    r.e[i].tile_w = (int)w->valuedouble;
    r.e[i].tile_h = (int)h->valuedouble;
    r.e[i].pruned = cJSON_IsNull(m);
    r.e[i].median_s = r.e[i].pruned ? NAN : m->valuedouble;
  }
  if (r.e[r.best].pruned) return ts_error(TS_ERR_FORMAT, "pipe-gran: the best candidate has no time");
  *out = r;
  return TS_OK;
}

cJSON *ts__pipe_tune_to_cjson(const ts_pipe_tune_result *r) {
  cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "candidates");
  bool ok = j && arr && cJSON_AddNumberToObject(j, "best", r->best);
  for (int i = 0; ok && i < r->n; i++) {
    cJSON *e = cJSON_CreateObject();
    ok = e && cJSON_AddItemToArray(arr, e) && cJSON_AddNumberToObject(e, "tile_w", r->e[i].tile_w) &&
         cJSON_AddNumberToObject(e, "tile_h", r->e[i].tile_h) &&
         (r->e[i].pruned ? cJSON_AddNullToObject(e, "median_s") != NULL
                         : cJSON_AddNumberToObject(e, "median_s", r->e[i].median_s) != NULL);
  }
  if (!ok) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

static ts_status tune_accept(void *arg, const cJSON *data, const ts_provenance *prov) {
  tune_ctx *c = arg;
  ts_provenance here;
  ts_provenance_here(&here, ts_isa_active(), c->o.threads);
  if (!ts_provenance_matches(prov, &here, TS_PROV_THREADS, NULL, 0))
    return ts_error(TS_ERR_NOT_FOUND, "pipe-gran: made on another machine");
  ts_pipe_tune_result r;
  TS_TRY(ts__pipe_tune_from_cjson(data, &r));
  r.cached = true;
  r.prov = *prov;
  *c->r = r;
  return TS_OK;
}

static ts_status tune_compute(void *arg, cJSON **data, ts_provenance *prov) {
  tune_ctx *c = arg;
  *data = NULL;
  int tw[TS_PIPE_TUNE_MAX], th[TS_PIPE_TUNE_MAX];
  int n = ts_pipe_ladder(c->d->width, c->d->height, tw, th, TS_PIPE_TUNE_MAX);
  cand cs[TS_PIPE_TUNE_MAX];
  ts_measure_fn fn[TS_PIPE_TUNE_MAX];
  void *args[TS_PIPE_TUNE_MAX];
  for (int i = 0; i < n; i++) {
    cs[i].d = c->d;
    cs[i].o = c->o;
    cs[i].o.gran = TS_PIPE_GRAN_FIXED;
    cs[i].o.tile_w = tw[i];
    cs[i].o.tile_h = th[i];
    cs[i].o.sink = NULL;
    cs[i].o.timeline = false;
    fn[i] = run_cand;
    args[i] = &cs[i];
  }
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = 1;
  mo.rounds = 3;
  mo.min_time_s = 0;
  mo.prune = 1.5;
  mo.alternate = true;
  ts_measure_result res[TS_PIPE_TUNE_MAX];
  if (c->progress)
    fprintf(stderr, "pipe tune: %s %dx%d, %d tiles x (1 + 3 rounds) of %lld frames...\n", c->d->name ? c->d->name : "",
            c->d->width, c->d->height, n, (long long)c->o.frames);
  TS_TRY(ts_measure_run(n, fn, args, &mo, res, NULL));
  ts_pipe_tune_result *r = c->r;
  memset(r, 0, sizeof *r);
  r->n = n;
  r->best = -1;
  for (int i = 0; i < n; i++) {
    r->e[i].tile_w = tw[i];
    r->e[i].tile_h = th[i];
    r->e[i].pruned = res[i].s.n == 0;
    r->e[i].median_s = r->e[i].pruned ? NAN : res[i].s.median;
    if (!r->e[i].pruned && (r->best < 0 || r->e[i].median_s < r->e[r->best].median_s)) r->best = i;
  }
  if (r->best < 0) return ts_error(TS_ERR_INTERNAL, "pipe tune: no candidate was timed");
  ts_provenance_here(prov, ts_isa_active(), c->o.threads);
  snprintf(prov->clock, sizeof prov->clock, "%s", ts_clock_name(TS_CLOCK_WALL));
  r->prov = *prov;
  *data = ts__pipe_tune_to_cjson(r); /* NULL (out of memory): the result stands, nothing is kept */
  return TS_OK;
}

ts_status ts_pipe_tune(const ts_pipe_desc *d, const ts_pipe_opts *opts, bool fresh, bool progress,
                       ts_pipe_tune_result *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "ts_pipe_tune: NULL result");
  TS_TRY(ts_pipe_desc_check(d));
  tune_ctx c = {d, opts ? *opts : ts_pipe_opts_default(), progress, out};
  if (c.o.threads == 0) c.o.threads = ts_default_threads();
  c.o.gran = TS_PIPE_GRAN_FIXED; /* the key holds the shared options only; tiles are the candidates */
  c.o.tile_w = c.o.tile_h = 0;
  char key[17];
  tune_key(d, &c.o, key);
  if (fresh) {
    cJSON *data = NULL;
    ts_provenance prov;
    ts_status s = tune_compute(&c, &data, &prov);
    if (s == TS_OK && data && ts__artifact_store(&k_gran, key, data, &prov) != TS_OK)
      ts_error_clear(); /* a read-only cache: the result still stands */
    cJSON_Delete(data);
    return s;
  }
  const ts__artifact_ops ops = {k_gran, tune_accept, tune_compute, NULL};
  ts_status s = ts__artifact_get(&ops, key, &c, NULL);
  if (s != TS_OK && s != TS_ERR_OOM) { /* no usable cache directory: measure for this call only */
    ts_error_clear();
    cJSON *data = NULL;
    ts_provenance prov;
    s = tune_compute(&c, &data, &prov);
    cJSON_Delete(data);
  }
  return s;
}
