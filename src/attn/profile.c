/* Attention profiler: levels and options, the profile's grid and provenance, the measurement of
 * every (tile, density, rows, cols) entry, and the cached profile (ts_attn_profile_get). JSON in
 * profile_json.c, the cost model in profile_model.c, block timing in profile_time.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "core/artifact_internal.h"
#include "tessera/hwinfo.h"

static const char *const level_names[TS_ATTN_PROFILE_LEVEL_COUNT] = {"quick", "standard", "full"};

const char *ts_attn_profile_level_name(ts_attn_profile_level l) {
  return (unsigned)l < TS_ATTN_PROFILE_LEVEL_COUNT ? level_names[l] : "?";
}

ts_status ts_attn_profile_level_parse(const char *name, ts_attn_profile_level *out) {
  for (int l = 0; name && l < TS_ATTN_PROFILE_LEVEL_COUNT; l++)
    if (strcmp(name, level_names[l]) == 0) {
      *out = (ts_attn_profile_level)l;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "attn profile: unknown level '%s' (expected quick, standard or full)",
                  name ? name : "(null)");
}

static const char *const pass_names[TS_ATTN_PASS_COUNT] = {"forward", "backward", "train"};

const char *ts_attn_pass_name(ts_attn_pass p) { return (unsigned)p < TS_ATTN_PASS_COUNT ? pass_names[p] : "?"; }

ts_status ts_attn_pass_parse(const char *name, ts_attn_pass *out) {
  for (int k = 0; name && k < TS_ATTN_PASS_COUNT; k++)
    if (strcmp(name, pass_names[k]) == 0) {
      *out = (ts_attn_pass)k;
      return TS_OK;
    }
  return ts_error(TS_ERR_INVALID_ARG, "attn: unknown pass '%s' (expected forward, backward or train)", name ? name : "(null)");
}

ts_attn_profile_opts ts_attn_profile_opts_default(void) {
  ts_attn_profile_opts o = {.level = TS_ATTN_PROFILE_STANDARD, .d = 64, .dtype = TS_F32, .warmup = -1, .repeats = 0,
                            .min_time_s = -1, .seed = 1, .progress = true};
  return o;
}

/* The level's grid and timing (attn_profile.h). */
typedef struct level_def {
  int nsizes, ndens, warmup, repeats, passes;
  double min_time_s;
  int32_t sizes[TS_ATTN_PROFILE_MAX_SIZES];
  double dens[TS_ATTN_PROFILE_MAX_DENS];
} level_def;

static const level_def levels[TS_ATTN_PROFILE_LEVEL_COUNT] = {
    {2, 2, 1, 1, 1, 0.0, {16, 64}, {0.75, 1.0}},
    {9, 3, 1, 3, 3, 1e-3, {8, 16, 32, 48, 64, 96, 128, 192, 256}, {0.6, 0.8, 1.0}},
    {12, 5, 2, 5, 3, 2e-3, {8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256}, {0.6, 0.7, 0.8, 0.9, 1.0}},
};

ts_status ts_attn_profile_init(ts_attn_profile *p, const ts_attn_profile_opts *o) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "attn profile: NULL profile");
  memset(p, 0, sizeof *p);
  ts_attn_profile_opts def = ts_attn_profile_opts_default();
  if (!o) o = &def;
  if ((unsigned)o->level >= TS_ATTN_PROFILE_LEVEL_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: level %d is not quick, standard or full", (int)o->level);
  if (o->d < 1 || o->d > 4096) return ts_error(TS_ERR_INVALID_ARG, "attn profile: d = %lld is not in [1, 4096]", (long long)o->d);
  if (o->dtype != TS_F32 && o->dtype != TS_BF16)
    return ts_error(TS_ERR_DTYPE, "attn profile: dtype %s is not f32 or bf16", ts_dtype_name(o->dtype));
  if ((unsigned)o->pass >= TS_ATTN_PASS_COUNT)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: pass %d is not forward, backward or train", (int)o->pass);
  const level_def *L = &levels[o->level];
  p->pass = o->pass;
  p->version = TS_ATTN_PROFILE_VERSION;
  ts_provenance_here(&p->prov, ts_isa_active(), 1); /* the timed executes run on one thread */
  snprintf(p->prov.clock, sizeof p->prov.clock, "%s", ts_clock_name(o->wall_clock ? TS_CLOCK_WALL : TS_CLOCK_THREAD_CPU));
  ts_hwinfo_profile_key_here(0, p->prov.profile);
  snprintf(p->level, sizeof p->level, "%s", level_names[o->level]);
  p->d = o->d, p->dtype = o->dtype;
  p->warmup = o->warmup >= 0 ? o->warmup : L->warmup;
  p->repeats = o->repeats > 0 ? o->repeats : L->repeats;
  p->passes = o->passes > 0 ? o->passes : L->passes;
  if (p->passes > TS_ATTN_PROFILE_MAX_PASSES)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: passes = %d is more than %d", p->passes, TS_ATTN_PROFILE_MAX_PASSES);
  p->min_time_s = o->min_time_s >= 0 ? o->min_time_s : L->min_time_s;
  /* grid */
  const int32_t *sizes = o->sizes && o->nsizes > 0 ? o->sizes : L->sizes;
  int ns = o->sizes && o->nsizes > 0 ? o->nsizes : L->nsizes;
  const double *dens = o->densities && o->ndens > 0 ? o->densities : L->dens;
  int nd = o->densities && o->ndens > 0 ? o->ndens : L->ndens;
  const ts_attn_tile *menu = o->menu;
  int nm = o->nmenu;
  if (!menu || nm < 1) nm = ts_attn_default_menu(&menu);
  if (ns > TS_ATTN_PROFILE_MAX_SIZES || nd > TS_ATTN_PROFILE_MAX_DENS || nm > TS_ATTN_PROFILE_MAX_MENU)
    return ts_error(TS_ERR_INVALID_ARG, "attn profile: %d sizes, %d densities, %d tiles exceed the limits %d, %d, %d", ns, nd,
                    nm, TS_ATTN_PROFILE_MAX_SIZES, TS_ATTN_PROFILE_MAX_DENS, TS_ATTN_PROFILE_MAX_MENU);
  for (int i = 0; i < ns; i++)
    if (sizes[i] < 1 || sizes[i] > TS_ATTN_PROFILE_MAX_SIDE || (i > 0 && sizes[i] <= sizes[i - 1]))
      return ts_error(TS_ERR_INVALID_ARG, "attn profile: sizes[%d] = %d is not ascending in [1, %d]", i, sizes[i],
                      TS_ATTN_PROFILE_MAX_SIDE);
  for (int i = 0; i < nd; i++)
    if (!(dens[i] > 0 && dens[i] <= 1) || (i > 0 && dens[i] <= dens[i - 1]))
      return ts_error(TS_ERR_INVALID_ARG, "attn profile: densities[%d] = %g is not ascending in (0, 1]", i, dens[i]);
  for (int i = 0; i < nm; i++)
    if (menu[i].br < 1 || menu[i].br > TS_ATTN_TILE_MAX || menu[i].bc < 1 || menu[i].bc > TS_ATTN_TILE_MAX)
      return ts_error(TS_ERR_INVALID_ARG, "attn profile: menu[%d] = %d x %d is not in [1, %d]^2", i, menu[i].br,
                      menu[i].bc, TS_ATTN_TILE_MAX);
  p->nsizes = ns, p->ndens = nd, p->nmenu = nm;
  memcpy(p->sizes, sizes, (size_t)ns * sizeof *sizes);
  memcpy(p->densities, dens, (size_t)nd * sizeof *dens);
  memcpy(p->menu, menu, (size_t)nm * sizeof *menu);
  p->seconds = ts_calloc((size_t)nm * nd * ns * ns, sizeof(double));
  p->overhead = ts_calloc((size_t)ns * ns, sizeof(double));
  if (!p->seconds || !p->overhead) {
    ts_attn_profile_free(p);
    return ts_error(TS_ERR_OOM, "attn profile: cannot allocate the %d x %d x %d x %d table", nm, nd, ns, ns);
  }
  return TS_OK;
}

void ts_attn_profile_free(ts_attn_profile *p) {
  if (!p) return;
  ts_free(p->seconds);
  ts_free(p->overhead);
  p->seconds = p->overhead = NULL;
}

double *ts_attn_profile_at(const ts_attn_profile *p, int tile, int dens, int ri, int ci) {
  return p->seconds + (((size_t)tile * p->ndens + dens) * p->nsizes + ri) * p->nsizes + ci;
}

/* rows x cols cells, exactly round(dens * rows * cols) of them allowed (all when dens = 1), by a
 * partial Fisher-Yates shuffle of the cell indices. */
static ts_status random_cells(ts_bitmap *b, int64_t rows, int64_t cols, double dens, ts_rng *r) {
  TS_TRY(ts_bitmap_alloc(b, rows, cols));
  int64_t cells = rows * cols, k = (int64_t)(dens * (double)cells + 0.5);
  if (k >= cells) {
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) ts_bitmap_set(b, i, j, true);
    return TS_OK;
  }
  int32_t *idx = malloc((size_t)cells * sizeof *idx);
  if (!idx) {
    ts_bitmap_free(b);
    return ts_error(TS_ERR_OOM, "attn profile: cannot allocate %lld cell indices", (long long)cells);
  }
  for (int64_t c = 0; c < cells; c++) idx[c] = (int32_t)c;
  for (int64_t c = 0; c < k; c++) {
    int64_t x = c + (int64_t)ts_rng_below(r, (uint64_t)(cells - c));
    int32_t tmp = idx[c];
    idx[c] = idx[x], idx[x] = tmp;
    ts_bitmap_set(b, idx[c] / cols, idx[c] % cols, true);
  }
  free(idx);
  return TS_OK;
}

/* One pass over the grid: every entry's median into sec [nmenu][ndens][ns][ns], ov [ns][ns]. */
static ts_status measure_pass(const ts_attn_profile_opts *o, ts_attn_profile *p, ts__attn_timer *t, double *sec,
                              double *ov, ts_progress *pr, int64_t *done) {
  ts_rng rng;
  ts_rng_seed(&rng, o->seed); /* the same random masks in every pass */
  size_t ns = (size_t)p->nsizes;
  ts_status st = TS_OK;
  /* Shape and density outermost: the random mask is made once and shared by every tile. */
  for (int ri = 0; st == TS_OK && ri < p->nsizes; ri++)
    for (int ci = 0; st == TS_OK && ci < p->nsizes; ci++) {
      st = ts__attn_time_empty(t, p->sizes[ri], p->sizes[ci], &ov[ri * ns + ci]);
      if (st != TS_OK) ts_error_prefix("attn profile: %d x %d empty schedule: ", p->sizes[ri], p->sizes[ci]);
      if (o->progress) ts_progress_update(pr, ++*done);
      for (int di = 0; st == TS_OK && di < p->ndens; di++) {
        ts_bitmap cells = {0};
        st = random_cells(&cells, p->sizes[ri], p->sizes[ci], p->densities[di], &rng);
        ts_attn_seg_kind kind = p->densities[di] >= 1.0 ? TS_ATTN_SEG_FULL : TS_ATTN_SEG_MIXED;
        for (int ti = 0; st == TS_OK && ti < p->nmenu; ti++) {
          st = ts__attn_time_block(t, &cells, kind, p->menu[ti], &sec[(((size_t)ti * p->ndens + di) * ns + ri) * ns + ci]);
          if (st != TS_OK)
            ts_error_prefix("attn profile: %d x %d block, density %g, tile %d x %d: ", p->sizes[ri], p->sizes[ci],
                            p->densities[di], p->menu[ti].br, p->menu[ti].bc);
          if (o->progress) ts_progress_update(pr, ++*done);
        }
        ts_bitmap_free(&cells);
      }
    }
  return st;
}

/* dst[i] = median over the passes of src[pass][i] (src: [passes][n]). */
static void median_of_passes(const double *src, int passes, size_t n, double *dst) {
  double v[TS_ATTN_PROFILE_MAX_PASSES];
  for (size_t i = 0; i < n; i++) {
    for (int k = 0; k < passes; k++) v[k] = src[(size_t)k * n + i];
    dst[i] = ts__attn_round9(ts_median(v, passes));
  }
}

ts_status ts_attn_profile_measure(const ts_attn_profile_opts *o, ts_attn_profile *out) {
  ts_attn_profile_opts def = ts_attn_profile_opts_default();
  if (!o) o = &def;
  TS_TRY(ts_attn_profile_init(out, o));
  ts_attn_profile *p = out;
  double t0 = ts_now();
  ts__attn_timer t;
  ts_status st = ts__attn_timer_init(&t, p->sizes[p->nsizes - 1], p->d, p->dtype, p->warmup, p->repeats, p->min_time_s,
                                     o->wall_clock);
  if (st == TS_OK) st = ts__attn_timer_set_pass(&t, p->pass);
  if (st != TS_OK) {
    ts_attn_profile_free(p);
    return st;
  }
  size_t ne = (size_t)p->nmenu * p->ndens * p->nsizes * p->nsizes, no = (size_t)p->nsizes * p->nsizes;
  double *sec = malloc((size_t)p->passes * ne * sizeof *sec), *ov = malloc((size_t)p->passes * no * sizeof *ov);
  if (!sec || !ov) st = ts_error(TS_ERR_OOM, "attn profile: cannot allocate %d passes of the table", p->passes);
  ts_progress pr;
  int64_t total = (int64_t)p->passes * p->nsizes * p->nsizes * (p->ndens * p->nmenu + 1), done = 0;
  if (o->progress) ts_progress_begin(&pr, "profiling attention tiles", total);
  /* Whole passes over the grid, each entry's final figure the median of its pass medians: a burst
   * of load from other processes hits one pass of an entry, not all of them. */
  for (int k = 0; st == TS_OK && k < p->passes; k++) st = measure_pass(o, p, &t, sec + k * ne, ov + k * no, &pr, &done);
  if (st == TS_OK) median_of_passes(sec, p->passes, ne, p->seconds), median_of_passes(ov, p->passes, no, p->overhead);
  free(sec), free(ov);
  if (o->progress) ts_progress_end(&pr);
  ts__attn_timer_free(&t);
  p->measure_s = ts__attn_round9(ts_now() - t0);
  if (st != TS_OK) ts_attn_profile_free(p);
  return st;
}

#define PROFILE_KIND "attn-profile"

/* The store's key of a request: <level>-d<d>-<dtype>-<kernels>. */
static ts_status store_key(const ts_attn_profile_opts *o, char *key, size_t cap) {
  int w = snprintf(key, cap, "%s-d%lld-%s-%s%s%s", ts_attn_profile_level_name(o->level), (long long)o->d,
                   ts_dtype_name(o->dtype), ts_isa_name(ts_isa_active()), o->pass ? "-" : "",
                   o->pass ? ts_attn_pass_name(o->pass) : "");
  if (w < 0 || (size_t)w >= cap) return ts_error(TS_ERR_INVALID_ARG, "attn profile: key longer than %zu bytes", cap);
  return TS_OK;
}

ts_status ts_attn_profile_default_path(const ts_attn_profile_opts *o, char *buf, size_t cap) {
  ts_attn_profile_opts def = ts_attn_profile_opts_default();
  if (!o) o = &def;
  char key[80];
  TS_TRY(store_key(o, key, sizeof key));
  return ts_artifact_path(PROFILE_KIND, key, buf, cap);
}

#define WHY(...) (why && cap ? (void)snprintf(why, cap, __VA_ARGS__) : (void)0, false)

bool ts_attn_profile_matches(const ts_attn_profile *p, const ts_attn_profile_opts *o, char *why, size_t cap) {
  ts_attn_profile want;
  if (ts_attn_profile_init(&want, o) != TS_OK) return WHY("invalid request: %s", ts_last_error());
  ts_attn_profile_free(&want);
  if (p->version != TS_ATTN_PROFILE_VERSION) return WHY("format version %d != %d", p->version, TS_ATTN_PROFILE_VERSION);
  if (!ts_provenance_matches(&p->prov, &want.prov, TS_PROV_THREADS | TS_PROV_VERSION, why, cap)) return false;
  if (strcmp(p->level, want.level)) return WHY("level %s != requested %s", p->level, want.level);
  if (p->pass != want.pass) return WHY("pass %s != requested %s", ts_attn_pass_name(p->pass), ts_attn_pass_name(want.pass));
  if (p->d != want.d) return WHY("d %lld != requested %lld", (long long)p->d, (long long)want.d);
  if (strcmp(p->prov.clock, want.prov.clock)) return WHY("clock %s != requested %s", p->prov.clock, want.prov.clock);
  if (p->dtype != want.dtype) return WHY("dtype %s != requested %s", ts_dtype_name(p->dtype), ts_dtype_name(want.dtype));
  if (p->nsizes != want.nsizes || memcmp(p->sizes, want.sizes, (size_t)want.nsizes * sizeof *want.sizes))
    return WHY("size grid differs from the request");
  if (p->ndens != want.ndens || memcmp(p->densities, want.densities, (size_t)want.ndens * sizeof *want.densities))
    return WHY("densities differ from the request");
  if (p->nmenu != want.nmenu || memcmp(p->menu, want.menu, (size_t)want.nmenu * sizeof *want.menu))
    return WHY("tile menu differs from the request");
  return true;
}

/* ---- the cached profile: artifact "attn-profile" (payload: the profile JSON) ------------------ */

typedef struct get_ctx {
  const ts_attn_profile_opts *o;
  ts_attn_profile *out;
} get_ctx;

static ts_status get_accept(void *ctx, const cJSON *data, const ts_provenance *prov) {
  (void)prov; /* the payload carries the same record; matches() judges it with the request */
  get_ctx *c = ctx;
  TS_TRY(ts__attn_profile_from_cjson(data, c->out));
  char why[256];
  if (ts_attn_profile_matches(c->out, c->o, why, sizeof why)) return TS_OK;
  if (c->o->progress) fprintf(stderr, "tessera: the cached attn profile is stale (%s): measuring again\n", why);
  ts_attn_profile_free(c->out);
  return ts_error(TS_ERR_NOT_FOUND, "attn profile: stale (%s)", why);
}

static ts_status get_compute(void *ctx, cJSON **data, ts_provenance *prov) {
  get_ctx *c = ctx;
  TS_TRY(ts_attn_profile_measure(c->o, c->out));
  *prov = c->out->prov;
  if (!(*data = ts__attn_profile_to_cjson(c->out))) { /* measured but not kept: still a result */
    fprintf(stderr, "tessera: cannot build the attn profile's JSON: not cached\n");
  }
  return TS_OK;
}

static ts_status get_check(void *ctx, const cJSON *data) {
  (void)ctx;
  ts_attn_profile q;
  TS_TRY(ts__attn_profile_from_cjson(data, &q));
  ts_attn_profile_free(&q);
  return TS_OK;
}

/* An explicit file: the profile JSON itself (no envelope). */
static ts_status get_file(const ts_attn_profile_opts *o, const char *path, ts_attn_profile *out, bool *measured) {
  ts_status st = ts_attn_profile_load(path, out);
  if (st == TS_OK) {
    char why[256];
    if (ts_attn_profile_matches(out, o, why, sizeof why)) return TS_OK;
    if (o->progress) fprintf(stderr, "tessera: attn profile %s is stale (%s): measuring again\n", path, why);
    ts_attn_profile_free(out);
  } else if (st != TS_ERR_NOT_FOUND) {
    fprintf(stderr, "tessera: ignoring attn profile %s: %s\n", path, ts_last_error());
  }
  TS_TRY(ts_attn_profile_measure(o, out));
  if (measured) *measured = true;
  if (ts_attn_profile_save(out, path) != TS_OK)
    fprintf(stderr, "tessera: cannot save the attn profile: %s\n", ts_last_error());
  return TS_OK;
}

ts_status ts_attn_profile_get(const ts_attn_profile_opts *o, const char *path, ts_attn_profile *out, bool *measured) {
  ts_attn_profile_opts def = ts_attn_profile_opts_default();
  if (!o) o = &def;
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "attn profile get: NULL output");
  memset(out, 0, sizeof *out);
  if (measured) *measured = false;
  if (path) return get_file(o, path, out, measured);
  char key[80];
  TS_TRY(store_key(o, key, sizeof key));
  static const ts__artifact_ops ops = {{PROFILE_KIND, TS_ATTN_PROFILE_VERSION}, get_accept, get_compute, get_check};
  get_ctx c = {o, out};
  return ts__artifact_get(&ops, key, &c, measured);
}
