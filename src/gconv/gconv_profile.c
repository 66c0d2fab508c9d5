/* Profiler: times the partition kernel (the executor's own, resolved by dispatch) over a grid of
 * partition heights x B-row counts x last-tile vector counts, one thread, thread CPU time.
 *
 * One entry: rows r, K B rows spread over a buffer of min(K, 1024) distinct rows of 576 floats
 * (one channel plane each, so rows sit in different pages as input channels do), 8 tiles: for 4
 * vectors one call over 512 columns (the executor's chunk), for v < 4 eight calls each on a
 * v*16-column window of a different tile. Timed by the core engine (tessera/measure.h) on the
 * thread clock: one warm-up call, then `passes` samples, each repeating the call until min_time_s
 * and taking the mean per tile; the table keeps the median of the passes. The profile is kept in
 * the artifact store (gconv_profile_json.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/artifact_internal.h"
#include "gconv/gconv_internal.h"

static const char *const level_names[TS_GCONV_PROFILE_LEVEL_COUNT] = {"quick", "standard"};

const char *ts_gconv_profile_level_name(ts_gconv_profile_level l) {
  return l >= 0 && l < TS_GCONV_PROFILE_LEVEL_COUNT ? level_names[l] : "?";
}

ts_status ts_gconv_profile_level_parse(const char *name, ts_gconv_profile_level *out) {
  for (int i = 0; name && i < TS_GCONV_PROFILE_LEVEL_COUNT; i++)
    if (strcmp(name, level_names[i]) == 0) {
      *out = (ts_gconv_profile_level)i;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "gconv profile level '%s' is not one of quick, standard", name ? name : "(null)");
}

void ts_gconv_profile_free(ts_gconv_profile *p) {
  if (!p) return;
  ts_free(p->seconds);
  memset(p, 0, sizeof *p);
}

/* The level's grid and timing. */
static void level_grid(ts_gconv_profile_level level, ts_gconv_profile *p) {
  static const int32_t rq[] = {1, 4, 6, 12}, kq[] = {8, 64, 512};
  static const int32_t rs[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32};
  static const int32_t ks[] = {4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  const bool q = level == TS_GCONV_PROFILE_QUICK;
  p->nrows = q ? 4 : 14;
  p->nk = q ? 3 : 12;
  memcpy(p->rows, q ? rq : rs, (size_t)p->nrows * sizeof(int32_t));
  memcpy(p->ks, q ? kq : ks, (size_t)p->nk * sizeof(int32_t));
  p->passes = q ? 1 : 3;
  p->min_time_s = q ? 2e-4 : 2e-3;
}

#define PROF_TILES 8
#define PROF_STRIDE 576
#define PROF_UNIQ 1024

typedef struct bench_buf {
  float *b, *wp, *c;
  int32_t *off;
  float *crow[TS_GCONV_PROFILE_MAX];
} bench_buf;

typedef struct entry_call {
  const bench_buf *bb;
  ts__gconv_kern_fn kern;
  int rows, nv;
  int64_t K;
} entry_call;

/* One call: the 4-vector chunk, or PROF_TILES windows of nv vectors. */
static ts_status call_entry(void *arg) {
  const entry_call *e = arg;
  const bench_buf *bb = e->bb;
  if (e->nv == 4) e->kern(e->rows, e->K, bb->wp, bb->b, bb->off, bb->crow, 0, PROF_TILES * 64);
  else
    for (int s = 0; s < PROF_TILES; s++) e->kern(e->rows, e->K, bb->wp, bb->b, bb->off, bb->crow, s * 64, s * 64 + 16 * e->nv);
  return TS_OK;
}

/* Seconds per tile of one entry: the median of `passes` samples of min_time s each. */
static ts_status time_entry(const bench_buf *bb, int rows, int64_t K, int nv, int passes, double min_time, double *sec) {
  entry_call e = {bb, ts__gconv_kern(), rows, nv, K};
  ts_measure_opts o = ts_measure_opts_default();
  o.clock = TS_CLOCK_THREAD_CPU, o.warmup = 1, o.rounds = o.max_rounds = passes, o.min_time_s = 0;
  o.min_sample_s = min_time;
  ts_measure_result r;
  TS_TRY(ts_measure_one(call_entry, &e, &o, &r));
  *sec = r.s.median / PROF_TILES;
  return TS_OK;
}

void ts__gconv_profile_provenance(ts_gconv_profile *p, ts_gconv_profile_level level) {
  ts_provenance pv;
  ts_provenance_here(&pv, ts_gconv_kernel_isa(), 1);
  p->version = TS_GCONV_PROFILE_VERSION;
  memcpy(p->cpu_model, pv.cpu_model, sizeof p->cpu_model);
  snprintf(p->kernels, sizeof p->kernels, "%.15s", pv.kernels);
  memcpy(p->tessera_version, pv.tessera_version, sizeof p->tessera_version);
  memcpy(p->date, pv.date, sizeof p->date);
  snprintf(p->level, sizeof p->level, "%s", ts_gconv_profile_level_name(level));
  snprintf(p->clock, sizeof p->clock, "%s", ts_clock_name(TS_CLOCK_THREAD_CPU));
  p->threads = pv.threads;
  level_grid(level, p);
}

ts_status ts_gconv_profile_measure(ts_gconv_profile_level level, bool progress, ts_gconv_profile *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "gconv profile: NULL output");
  memset(out, 0, sizeof *out);
  if (level < 0 || level >= TS_GCONV_PROFILE_LEVEL_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "gconv profile: level %d out of range", (int)level);
  ts_gconv_profile *p = out;
  ts__gconv_profile_provenance(p, level);
  const int maxr = p->rows[p->nrows - 1];
  const int64_t maxk = p->ks[p->nk - 1], nent = (int64_t)p->nrows * p->nk * 4;
  bench_buf bb;
  memset(&bb, 0, sizeof bb);
  p->seconds = ts_calloc((size_t)nent, sizeof(double));
  bb.b = ts_malloc((size_t)PROF_UNIQ * PROF_STRIDE * sizeof(float));
  bb.wp = ts_malloc((size_t)maxr * (size_t)maxk * sizeof(float));
  bb.c = ts_malloc((size_t)maxr * PROF_TILES * 64 * sizeof(float));
  bb.off = ts_malloc((size_t)maxk * sizeof(int32_t));
  ts_status s = p->seconds && bb.b && bb.wp && bb.c && bb.off ? TS_OK : ts_error(TS_ERR_OOM, "gconv profile: out of memory");
  if (s == TS_OK) {
    ts_rng r;
    ts_rng_seed(&r, 7);
    for (int64_t i = 0; i < (int64_t)PROF_UNIQ * PROF_STRIDE; i++) bb.b[i] = (float)ts_rng_uniform(&r) - 0.5f;
    for (int64_t i = 0; i < maxr * maxk; i++) bb.wp[i] = (float)ts_rng_uniform(&r) - 0.5f;
    /* B rows in a scattered order over the distinct planes, as a partition's union is */
    for (int64_t k = 0; k < maxk; k++) bb.off[k] = (int32_t)(((k * 389) % PROF_UNIQ) * PROF_STRIDE);
    for (int i = 0; i < maxr; i++) bb.crow[i] = bb.c + (int64_t)i * PROF_TILES * 64;
  }
  ts_progress pr;
  if (progress && s == TS_OK) ts_progress_begin(&pr, "gconv profile", nent);
  const double t0 = ts_now();
  for (int ri = 0; s == TS_OK && ri < p->nrows; ri++)
    for (int ki = 0; ki < p->nk; ki++)
      for (int v = 1; s == TS_OK && v <= 4; v++) {
        const int64_t at = ((int64_t)ri * p->nk + ki) * 4 + (v - 1);
        s = time_entry(&bb, p->rows[ri], p->ks[ki], v, p->passes, p->min_time_s, &p->seconds[at]);
        if (progress) ts_progress_update(&pr, at + 1);
      }
  if (progress && s == TS_OK) ts_progress_end(&pr);
  p->measure_s = ts_now() - t0;
  ts_free(bb.b), ts_free(bb.wp), ts_free(bb.c), ts_free(bb.off);
  if (s != TS_OK) ts_gconv_profile_free(p);
  return s;
  return TS_OK;
}

static void level_key(ts_gconv_profile_level level, char *key, size_t cap) {
  snprintf(key, cap, "%s-%s", ts_gconv_profile_level_name(level), ts_isa_name(ts_gconv_kernel_isa()));
}

ts_status ts_gconv_profile_default_path(ts_gconv_profile_level level, char *buf, size_t cap) {
  char key[64];
  level_key(level, key, sizeof key);
  return ts_artifact_path(TS__GCONV_PROFILE_KIND, key, buf, cap);
}

/* The stored profile matches this machine and request. */
static bool matches(const ts_gconv_profile *c, ts_gconv_profile_level level) {
  ts_gconv_profile want;
  memset(&want, 0, sizeof want);
  ts__gconv_profile_provenance(&want, level);
  ts_provenance made, here;
  ts__gconv_profile_prov(c, &made), ts__gconv_profile_prov(&want, &here);
  return c->version == want.version && ts_provenance_matches(&made, &here, 0, NULL, 0) &&
         strcmp(c->level, want.level) == 0 && c->nrows == want.nrows && c->nk == want.nk &&
         memcmp(c->rows, want.rows, (size_t)c->nrows * sizeof(int32_t)) == 0 &&
         memcmp(c->ks, want.ks, (size_t)c->nk * sizeof(int32_t)) == 0;
}

typedef struct prof_get {
  ts_gconv_profile_level level;
  bool progress;
  ts_gconv_profile *out;
} prof_get;

static ts_status prof_accept(void *ctx, const cJSON *data, const ts_provenance *prov) {
  prof_get *g = ctx;
  TS_TRY(ts__gconv_profile_parse(data, prov, "stored gconv profile", g->out));
  if (matches(g->out, g->level)) return TS_OK;
  ts_gconv_profile_free(g->out);
  return ts_error(TS_ERR_NOT_FOUND, "the stored gconv profile was measured elsewhere");
}

static ts_status prof_compute(void *ctx, cJSON **data, ts_provenance *prov) {
  prof_get *g = ctx;
  TS_TRY(ts_gconv_profile_measure(g->level, g->progress, g->out));
  ts__gconv_profile_prov(g->out, prov);
  return ts__gconv_profile_to_json(g->out, false, data);
}

ts_status ts_gconv_profile_get(ts_gconv_profile_level level, const char *path, bool progress, ts_gconv_profile *out,
                               bool *measured) {
  if (measured) *measured = false;
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "gconv profile: NULL output");
  char def[4400];
  TS_TRY(ts_gconv_profile_default_path(level, def, sizeof def));
  if (!path || !strcmp(path, def)) { /* the artifact store */
    char key[64];
    level_key(level, key, sizeof key);
    prof_get g = {level, progress, out};
    const ts__artifact_ops ops = {{TS__GCONV_PROFILE_KIND, TS_GCONV_PROFILE_VERSION}, prof_accept, prof_compute, NULL};
    return ts__artifact_get(&ops, key, &g, measured);
  }
  /* a file of the caller's */
  ts_status s = ts_gconv_profile_load(path, out);
  if (s == TS_OK && matches(out, level)) return TS_OK;
  if (s == TS_OK) ts_gconv_profile_free(out);
  TS_TRY(ts_gconv_profile_measure(level, progress, out));
  if (measured) *measured = true;
  if (ts_gconv_profile_save(out, path) != TS_OK)
    fprintf(stderr, "tessera: could not save the gconv profile: %s\n", ts_last_error());
  return TS_OK;
}
