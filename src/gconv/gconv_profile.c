/* Profiler: times the partition kernel (the executor's own, resolved by dispatch) over a grid of
 * partition heights x B-row counts x last-tile vector counts, one thread, thread CPU time.
 *
 * One entry: rows r, K B rows spread over a buffer of min(K, 1024) distinct rows of 576 floats
 * (one channel plane each, so rows sit in different pages as input channels do), 8 tiles: for 4
 * vectors one call over 512 columns (the executor's chunk), for v < 4 eight calls each on a
 * v*16-column window of a different tile. Calls repeat until min_time_s; the entry of a pass is
 * the mean per tile; the table keeps the median of the passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static double thread_cpu(void) {
  struct timespec t;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return ts_now();
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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

/* Seconds per tile of one entry (one pass). */
static double time_entry(const bench_buf *bb, int rows, int64_t K, int nv, double min_time) {
  const ts__gconv_kern_fn kern = ts__gconv_kern();
  const int64_t w = 16 * nv;
  int64_t calls = 0;
  kern(rows, K, bb->wp, bb->b, bb->off, bb->crow, 0, nv == 4 ? PROF_TILES * 64 : w); /* warm-up */
  double t0 = thread_cpu(), t = 0;
  do {
    if (nv == 4) kern(rows, K, bb->wp, bb->b, bb->off, bb->crow, 0, PROF_TILES * 64);
    else
      for (int s = 0; s < PROF_TILES; s++) kern(rows, K, bb->wp, bb->b, bb->off, bb->crow, s * 64, s * 64 + w);
    calls++;
    t = thread_cpu() - t0;
  } while (t < min_time);
  return t / ((double)calls * PROF_TILES);
}

static int dcmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void ts__gconv_profile_provenance(ts_gconv_profile *p, ts_gconv_profile_level level) {
  p->version = TS_GCONV_PROFILE_VERSION;
  snprintf(p->cpu_model, sizeof p->cpu_model, "%s", ts_cpu()->model);
  snprintf(p->kernels, sizeof p->kernels, "%s", ts_isa_name(ts_gconv_kernel_isa()));
  snprintf(p->tessera_version, sizeof p->tessera_version, "%s", ts_version());
  snprintf(p->level, sizeof p->level, "%s", ts_gconv_profile_level_name(level));
  snprintf(p->clock, sizeof p->clock, "thread_cpu");
  p->threads = 1;
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm)) strftime(p->date, sizeof p->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
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
  double *pass = ts_malloc((size_t)p->passes * sizeof(double));
  ts_status s = p->seconds && bb.b && bb.wp && bb.c && bb.off && pass ? TS_OK : TS_ERR_OOM;
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
      for (int v = 1; v <= 4; v++) {
        for (int q = 0; q < p->passes; q++) pass[q] = time_entry(&bb, p->rows[ri], p->ks[ki], v, p->min_time_s);
        qsort(pass, (size_t)p->passes, sizeof(double), dcmp);
        p->seconds[((int64_t)ri * p->nk + ki) * 4 + (v - 1)] = pass[p->passes / 2];
        if (progress) ts_progress_update(&pr, ((int64_t)ri * p->nk + ki) * 4 + v);
      }
  if (progress && s == TS_OK) ts_progress_end(&pr);
  p->measure_s = ts_now() - t0;
  ts_free(bb.b), ts_free(bb.wp), ts_free(bb.c), ts_free(bb.off), ts_free(pass);
  if (s != TS_OK) {
    ts_gconv_profile_free(p);
    return ts_error(TS_ERR_OOM, "gconv profile: out of memory");
  }
  return TS_OK;
}

ts_status ts_gconv_profile_default_path(ts_gconv_profile_level level, char *buf, size_t cap) {
  char dir[4096];
  TS_TRY(ts_cache_dir(dir, sizeof dir));
  int n = snprintf(buf, cap, "%s/gconv_profile_%s_%s.json", dir, ts_gconv_profile_level_name(level),
                   ts_isa_name(ts_gconv_kernel_isa()));
  if (n < 0 || (size_t)n >= cap) return ts_error(TS_ERR_INVALID_ARG, "gconv profile: cache path too long");
  return TS_OK;
}

/* The cached profile matches this machine and request. */
static bool matches(const ts_gconv_profile *c, ts_gconv_profile_level level) {
  ts_gconv_profile want;
  memset(&want, 0, sizeof want);
  ts__gconv_profile_provenance(&want, level);
  return c->version == want.version && strcmp(c->cpu_model, want.cpu_model) == 0 &&
         strcmp(c->kernels, want.kernels) == 0 && strcmp(c->level, want.level) == 0 && c->nrows == want.nrows &&
         c->nk == want.nk && memcmp(c->rows, want.rows, (size_t)c->nrows * sizeof(int32_t)) == 0 &&
         memcmp(c->ks, want.ks, (size_t)c->nk * sizeof(int32_t)) == 0;
}

ts_status ts_gconv_profile_get(ts_gconv_profile_level level, const char *path, bool progress, ts_gconv_profile *out,
                               bool *measured) {
  char def[4200];
  if (!path) {
    TS_TRY(ts_gconv_profile_default_path(level, def, sizeof def));
    path = def;
  }
  if (measured) *measured = false;
  ts_status s = ts_gconv_profile_load(path, out);
  if (s == TS_OK && matches(out, level)) return TS_OK;
  if (s == TS_OK) ts_gconv_profile_free(out);
  TS_TRY(ts_gconv_profile_measure(level, progress, out));
  if (measured) *measured = true;
  if (ts_gconv_profile_save(out, path) != TS_OK)
    fprintf(stderr, "tessera: could not save the gconv profile: %s\n", ts_last_error());
  return TS_OK;
}
