/* Attention profiler and cost model: level names, option validation, a quick measurement on a
 * tiny grid, JSON round trip, malformed files (errors name the field), provenance mismatch ->
 * re-measurement, interpolation rules on a synthetic table (exact at grid points, monotone and
 * log-linear between them, proportional beyond, clamped below), the tile chooser with the
 * profiled cost, the residue estimate, model-error statistics and block measurement. No timing
 * asserts: measured entries are only checked to be positive and finite. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "attn/profile_internal.h"
#include "io/json_internal.h"
#include "tessera/attn_profile.h"
#include "tst.h"

static char g_dir[256];

static void test_levels(void) {
  ts_attn_profile_level l;
  for (int i = 0; i < TS_ATTN_PROFILE_LEVEL_COUNT; i++) {
    CHECK_OK(ts_attn_profile_level_parse(ts_attn_profile_level_name((ts_attn_profile_level)i), &l));
    CHECK(l == (ts_attn_profile_level)i, "level %d parsed as %d", i, (int)l);
  }
  CHECK_ERR_CONTAINS(ts_attn_profile_level_parse("fast", &l), "fast");
  CHECK(strcmp(ts_attn_profile_level_name(TS_ATTN_PROFILE_LEVEL_COUNT), "?") == 0, "out of range name");
}

static void test_options(void) {
  ts_attn_profile p;
  ts_attn_profile_opts o = ts_attn_profile_opts_default();
  CHECK_OK(ts_attn_profile_init(&p, &o));
  const ts_attn_tile *menu;
  int nm = ts_attn_default_menu(&menu);
  CHECK(p.nsizes == 9 && p.ndens == 3 && p.nmenu == nm && p.sizes[8] == 256 && p.densities[2] == 1.0,
        "standard grid %d x %d x %d", p.nsizes, p.ndens, p.nmenu);
  CHECK(p.prov.threads == 1 && p.d == 64 && p.dtype == TS_F32 && strcmp(p.level, "standard") == 0 && p.prov.cpu_model[0] &&
            strcmp(p.prov.kernels, ts_isa_name(ts_isa_active())) == 0 && p.prov.date[0] &&
            strcmp(p.prov.clock, "thread_cpu") == 0 && strcmp(p.prov.tessera_version, ts_version()) == 0,
        "provenance");
  ts_attn_profile_free(&p);
  int32_t bad_sizes[3] = {8, 8, 16};
  o.sizes = bad_sizes, o.nsizes = 3;
  CHECK_ERR_CONTAINS(ts_attn_profile_init(&p, &o), "sizes[1]");
  o = ts_attn_profile_opts_default();
  double bad_dens[2] = {0.5, 1.5};
  o.densities = bad_dens, o.ndens = 2;
  CHECK_ERR_CONTAINS(ts_attn_profile_init(&p, &o), "densities[1]");
  o = ts_attn_profile_opts_default();
  ts_attn_tile bad_menu[1] = {{0, 16}};
  o.menu = bad_menu, o.nmenu = 1;
  CHECK_ERR_CONTAINS(ts_attn_profile_init(&p, &o), "menu[0]");
  o = ts_attn_profile_opts_default();
  o.dtype = TS_F16;
  CHECK_STATUS(ts_attn_profile_init(&p, &o), TS_ERR_DTYPE);
  o = ts_attn_profile_opts_default();
  o.d = 0;
  CHECK_ERR_CONTAINS(ts_attn_profile_init(&p, &o), "d = 0");
}

/* The tiny measured grid every measuring test uses (well under a second). */
static const int32_t tiny_sizes[2] = {8, 24};
static const double tiny_dens[2] = {0.75, 1.0};
static const ts_attn_tile tiny_menu[3] = {{8, 16}, {16, 16}, {16, 32}};

static ts_attn_profile_opts tiny_opts(void) {
  ts_attn_profile_opts o = ts_attn_profile_opts_default();
  o.level = TS_ATTN_PROFILE_QUICK;
  o.sizes = tiny_sizes, o.nsizes = 2, o.densities = tiny_dens, o.ndens = 2, o.menu = tiny_menu, o.nmenu = 3;
  o.progress = false;
  return o;
}

static bool prov_equal(const ts_provenance *a, const ts_provenance *b) {
  return !strcmp(a->cpu_model, b->cpu_model) && !strcmp(a->kernels, b->kernels) && a->threads == b->threads &&
         !strcmp(a->date, b->date) && !strcmp(a->tessera_version, b->tessera_version) && !strcmp(a->clock, b->clock) &&
         !strcmp(a->profile, b->profile);
}

static bool profiles_equal(const ts_attn_profile *a, const ts_attn_profile *b) {
  if (a->version != b->version || !prov_equal(&a->prov, &b->prov) || strcmp(a->level, b->level) || a->pass != b->pass || a->d != b->d || a->dtype != b->dtype || a->warmup != b->warmup ||
      a->passes != b->passes || a->repeats != b->repeats || a->min_time_s != b->min_time_s ||
      a->measure_s != b->measure_s ||
      a->nsizes != b->nsizes || a->ndens != b->ndens || a->nmenu != b->nmenu)
    return false;
  if (memcmp(a->sizes, b->sizes, (size_t)a->nsizes * sizeof *a->sizes) ||
      memcmp(a->densities, b->densities, (size_t)a->ndens * sizeof *a->densities) ||
      memcmp(a->menu, b->menu, (size_t)a->nmenu * sizeof *a->menu))
    return false;
  size_t ne = (size_t)a->nmenu * a->ndens * a->nsizes * a->nsizes, no = (size_t)a->nsizes * a->nsizes;
  return memcmp(a->seconds, b->seconds, ne * sizeof(double)) == 0 &&
         memcmp(a->overhead, b->overhead, no * sizeof(double)) == 0;
}

static void test_measure_and_roundtrip(void) {
  ts_attn_profile_opts o = tiny_opts();
  ts_attn_profile p, q;
  CHECK_OK(ts_attn_profile_measure(&o, &p));
  size_t ne = (size_t)p.nmenu * p.ndens * p.nsizes * p.nsizes;
  CHECK(ne == 24, "entries %zu", ne);
  int bad = 0;
  for (size_t i = 0; i < ne; i++) bad += !(p.seconds[i] > 0 && isfinite(p.seconds[i]));
  CHECK(bad == 0, "%d entries not positive and finite", bad);
  for (int i = 0; i < 4; i++) bad += !(p.overhead[i] > 0 && isfinite(p.overhead[i]));
  CHECK(bad == 0, "%d overhead entries not positive and finite", bad);
  CHECK(p.measure_s > 0, "measure_s %g", p.measure_s);
  CHECK(ts_attn_profile_matches(&p, &o, NULL, 0), "fresh profile does not match its request");
  /* bf16 runs too */
  ts_attn_profile pb;
  o.dtype = TS_BF16;
  o.sizes = tiny_sizes, o.nsizes = 1, o.passes = 3;
  CHECK_OK(ts_attn_profile_measure(&o, &pb));
  if (pb.seconds)
    CHECK(pb.seconds[0] > 0 && pb.dtype == TS_BF16 && pb.passes == 3, "bf16 entry %g, %d passes", pb.seconds[0], pb.passes);
  ts_attn_profile_free(&pb);
  o.passes = 16;
  CHECK_ERR_CONTAINS(ts_attn_profile_measure(&o, &pb), "passes");
  ts_attn_profile_free(&pb);
  o = tiny_opts();
  /* in memory */
  char *text = NULL;
  CHECK_OK(ts_attn_profile_to_json(&p, &text));
  CHECK_OK(ts_attn_profile_from_json(text, &q));
  CHECK(profiles_equal(&p, &q), "JSON round trip differs");
  ts_attn_profile_free(&q);
  free(text);
  CHECK_ERR_CONTAINS(ts_attn_profile_from_json("[1, 2", &q), "attn profile: invalid JSON");
  cJSON *j = ts__attn_profile_to_cjson(&p); /* the internal form */
  CHECK(j != NULL, "to_cjson");
  CHECK_OK(ts__attn_profile_from_cjson(j, &q));
  CHECK(profiles_equal(&p, &q), "cJSON round trip differs");
  ts_attn_profile_free(&q);
  cJSON_Delete(j);
  /* file */
  char path[512];
  snprintf(path, sizeof path, "%s/rt.json", g_dir);
  CHECK_OK(ts_attn_profile_save(&p, path));
  CHECK_OK(ts_attn_profile_load(path, &q));
  CHECK(profiles_equal(&p, &q), "file round trip differs");
  ts_attn_profile_free(&q);
  ts_attn_profile_free(&p);
}

/* A synthetic profile: sizes {8, 16, 32, 128}, densities {0.5, 1}, menu {8x16, 16x16, 32x32},
 * t = (tile + 1) * 1e-6 * (r + 2 c) * (1 + dens) (monotone in r, c and density), overhead
 * 1e-8 * (1 + ri + 2 ci) (below every entry). */
static const int32_t syn_sizes[4] = {8, 16, 32, 128};
static const double syn_dens[2] = {0.5, 1.0};
static const ts_attn_tile syn_menu[3] = {{8, 16}, {16, 16}, {32, 32}};

static ts_status synthetic(ts_attn_profile *p, bool random_values) {
  ts_attn_profile_opts o = ts_attn_profile_opts_default();
  o.sizes = syn_sizes, o.nsizes = 4, o.densities = syn_dens, o.ndens = 2, o.menu = syn_menu, o.nmenu = 3;
  TS_TRY(ts_attn_profile_init(p, &o));
  ts_rng r;
  ts_rng_seed(&r, 99);
  for (int t = 0; t < 3; t++)
    for (int d = 0; d < 2; d++)
      for (int i = 0; i < 4; i++)
        for (int c = 0; c < 4; c++)
          *ts_attn_profile_at(p, t, d, i, c) =
              random_values ? 1e-6 * (1 + ts_rng_uniform(&r))
                            : (t + 1) * 1e-6 * (syn_sizes[i] + 2.0 * syn_sizes[c]) * (1 + syn_dens[d]);
  for (int i = 0; i < 4; i++)
    for (int c = 0; c < 4; c++) p->overhead[i * 4 + c] = 1e-8 * (1 + i + 2 * c);
  return TS_OK;
}

static double T(const ts_attn_profile *p, int t, int d, int i, int c) { return *ts_attn_profile_at(p, t, d, i, c); }
static double O(const ts_attn_profile *p, int i, int c) { return p->overhead[i * p->nsizes + c]; }

static double pred(const ts_attn_cost_model *m, int64_t r, int64_t c, int64_t nnz, ts_attn_tile t) {
  double s = NAN;
  ts_status st = ts_attn_cost_model_predict(m, r, c, nnz, t, &s);
  return st == TS_OK ? s : NAN;
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void test_interpolation(void) {
  ts_attn_profile p;
  CHECK_OK(synthetic(&p, false));
  ts_attn_cost_model *m = NULL;
  CHECK_OK(ts_attn_cost_model_create(&m, &p));
  if (!m) return;
  /* exact at every grid point of every tile and density */
  int bad = 0;
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < 4; i++)
      for (int c = 0; c < 4; c++) {
        int64_t cells = (int64_t)syn_sizes[i] * syn_sizes[c];
        bad += !near(pred(m, syn_sizes[i], syn_sizes[c], cells / 2, syn_menu[t]), T(&p, t, 0, i, c));
        bad += !near(pred(m, syn_sizes[i], syn_sizes[c], cells, syn_menu[t]), T(&p, t, 1, i, c));
      }
  CHECK(bad == 0, "%d grid points not exact", bad);
  ts_attn_tile t1 = syn_menu[1];
  /* log-linear: at the geometric mean of two sizes, the mean of the two entries */
  CHECK(near(pred(m, 64, 16, 64 * 16, t1), 0.5 * (T(&p, 1, 1, 2, 1) + T(&p, 1, 1, 3, 1))), "rows 64: %g",
        pred(m, 64, 16, 64 * 16, t1));
  CHECK(near(pred(m, 32, 64, 32 * 64, t1), 0.5 * (T(&p, 1, 1, 2, 2) + T(&p, 1, 1, 2, 3))), "cols 64");
  /* monotone and inside the neighbours' range along rows, cols and density */
  int nonmono = 0;
  double prev = 0;
  for (int64_t r = 1; r <= 300; r++) {
    double v = pred(m, r, 40, 40 * r, t1);
    nonmono += !(v >= prev), prev = v;
  }
  prev = 0;
  for (int64_t c = 1; c <= 300; c++) {
    double v = pred(m, 20, c, 20 * c / 2, t1);
    nonmono += !(v >= prev), prev = v;
  }
  double v20 = pred(m, 20, 40, 0, t1);
  prev = 0;
  for (int64_t z = 0; z <= 800; z++) {
    double v = pred(m, 20, 40, z, t1);
    nonmono += !(v >= prev), prev = v;
  }
  CHECK(nonmono == 0, "%d non-monotone steps", nonmono);
  double lo = pred(m, 16, 32, 16 * 32, t1), hi = pred(m, 32, 32, 32 * 32, t1), mid = pred(m, 24, 32, 24 * 32, t1);
  CHECK(mid > lo && mid < hi, "between neighbours: %g < %g < %g", lo, mid, hi);
  /* density: linear between levels (not full), clamped below the lowest */
  CHECK(near(pred(m, 16, 16, 192, t1), 0.5 * (T(&p, 1, 0, 1, 1) + T(&p, 1, 1, 1, 1))), "density 0.75");
  CHECK(near(pred(m, 16, 16, 10, t1), T(&p, 1, 0, 1, 1)) && near(v20, pred(m, 20, 40, 400, t1)),
        "density below the lowest level is clamped");
  CHECK(pred(m, 16, 16, 255, t1) < T(&p, 1, 1, 1, 1) && pred(m, 16, 16, 255, t1) > T(&p, 1, 0, 1, 1), "density 255/256");
  /* beyond the grid: proportional; below: clamped */
  CHECK(near(pred(m, 256, 16, 256 * 16, t1), 2 * T(&p, 1, 1, 3, 1)), "rows 256: %g vs %g", pred(m, 256, 16, 256 * 16, t1),
        2 * T(&p, 1, 1, 3, 1));
  CHECK(near(pred(m, 512, 384, 512 * 384, t1), 4 * 3 * T(&p, 1, 1, 3, 3)), "512 x 384");
  /* below the smallest size: the overhead stays, the work part shrinks with the side */
  double o00 = O(&p, 0, 0), t00 = T(&p, 1, 1, 0, 0);
  CHECK(near(pred(m, 4, 2, 8, t1), o00 + (t00 - o00) * (4.0 / 8) * (2.0 / 8)), "below the grid: %g", pred(m, 4, 2, 8, t1));
  CHECK(near(pred(m, 8, 8, 64, t1), t00), "at the smallest size");
  double tb = 1000.0 / 128 * T(&p, 1, 1, 3, 0), ob = O(&p, 3, 0);
  CHECK(near(pred(m, 1000, 2, 2000, t1), ob + (tb - ob) * 2.0 / 8), "rows beyond, cols below: %g",
        pred(m, 1000, 2, 2000, t1));
  /* the ts_attn_cost_fn adapter */
  ts_block b = {.row0 = 5, .col0 = 7, .rows = 32, .cols = 128, .nnz = 32 * 128};
  CHECK(near(ts_attn_cost_profiled(&b, syn_menu[2], m), T(&p, 2, 1, 2, 3) - O(&p, 2, 3)), "cost fn: %g",
        ts_attn_cost_profiled(&b, syn_menu[2], m));
  /* the overhead: exact at grid points, log-linear between, clamped (never scaled) outside */
  double ov = NAN;
  CHECK_OK(ts_attn_cost_model_overhead(m, 32, 128, &ov));
  CHECK(near(ov, O(&p, 2, 3)), "overhead 32 x 128: %g", ov);
  CHECK_OK(ts_attn_cost_model_overhead(m, 64, 1000, &ov));
  CHECK(near(ov, 0.5 * (O(&p, 2, 3) + O(&p, 3, 3))), "overhead 64 x 1000: %g", ov);
  CHECK_OK(ts_attn_cost_model_overhead(m, 2, 3, &ov));
  CHECK(near(ov, O(&p, 0, 0)), "overhead 2 x 3: %g", ov);
  CHECK_STATUS(ts_attn_cost_model_overhead(m, 0, 3, &ov), TS_ERR_INVALID_ARG);
  CHECK(ts_attn_cost_profiled(&b, (ts_attn_tile){64, 64}, m) >= 1e300, "tile outside the menu");
  b.nnz = -1;
  CHECK(ts_attn_cost_profiled(&b, t1, m) >= 1e300, "invalid block");
  double s;
  CHECK_STATUS(ts_attn_cost_model_predict(m, 16, 16, 0, (ts_attn_tile){64, 64}, &s), TS_ERR_NOT_FOUND);
  CHECK_STATUS(ts_attn_cost_model_predict(m, 0, 16, 0, t1, &s), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_attn_cost_model_predict(m, 4, 4, 17, t1, &s), TS_ERR_INVALID_ARG);
  const ts_attn_tile *menu;
  CHECK(ts_attn_cost_model_menu(m, &menu) == 3 && menu[2].br == 32, "menu");
  ts_attn_cost_model_destroy(m);
  /* the model is a copy: it survives the profile */
  CHECK_OK(ts_attn_cost_model_create(&m, &p));
  double keep = T(&p, 0, 0, 0, 0);
  ts_attn_profile_free(&p);
  CHECK(near(pred(m, 8, 8, 32, syn_menu[0]), keep), "model after the profile is freed");
  ts_attn_cost_model_destroy(m);
  CHECK_STATUS(ts_attn_cost_model_create(&m, &p), TS_ERR_INVALID_ARG);
  /* a hand-edited grid is rejected, not read out of order */
  CHECK_OK(synthetic(&p, false));
  p.sizes[2] = 16;
  CHECK_ERR_CONTAINS(ts_attn_cost_model_create(&m, &p), "sizes[2]");
  p.sizes[2] = 32, p.densities[0] = 0;
  CHECK_ERR_CONTAINS(ts_attn_cost_model_create(&m, &p), "densities[0]");
  ts_attn_profile_free(&p);
}

static void test_choose_and_residue(void) {
  ts_attn_profile p;
  CHECK_OK(synthetic(&p, true));
  ts_attn_cost_model *m = NULL;
  CHECK_OK(ts_attn_cost_model_create(&m, &p));
  if (!m) return;
  /* one block per (grid point, density level) */
  ts_block blocks[32];
  ts_attn_tile out[32], want[32];
  int nb = 0;
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < 4; i++)
      for (int c = 0; c < 4; c++) {
        int64_t cells = (int64_t)syn_sizes[i] * syn_sizes[c];
        blocks[nb] = (ts_block){.row0 = 0, .col0 = 0, .rows = syn_sizes[i], .cols = syn_sizes[c],
                                .nnz = d ? cells : cells / 2};
        int best = 0;
        for (int t = 1; t < 3; t++)
          if (T(&p, t, d, i, c) < T(&p, best, d, i, c)) best = t;
        want[nb++] = syn_menu[best];
      }
  CHECK_OK(ts_attn_choose_tiles(blocks, nb, syn_menu, 3, ts_attn_cost_profiled, m, out));
  int wrong = 0;
  for (int b = 0; b < nb; b++) wrong += out[b].br != want[b].br || out[b].bc != want[b].bc;
  CHECK(wrong == 0, "%d blocks did not get the table's argmin", wrong);
  /* residue: cells at (0,0), (1,15), (0,16), (9,0), (20,47) of a 24 x 48 pattern, tile 8 x 16:
   * sub-tiles (0,0) (0,1) (1,0) (2,2) are non-empty = 4; a segment cols [16, 48) sees 2. */
  ts_csr cells = {0};
  const int64_t pos[5][2] = {{0, 0}, {0, 16}, {1, 15}, {9, 0}, {20, 47}};
  CHECK_OK(ts_csr_alloc(&cells, 24, 48, 5, false));
  if (cells.rowptr) {
    for (int k = 0; k < 5; k++) cells.rowptr[pos[k][0] + 1]++, cells.col[k] = (int32_t)pos[k][1];
    for (int i = 0; i < 24; i++) cells.rowptr[i + 1] += cells.rowptr[i];
    CHECK_OK(ts_csr_validate(&cells));
    double s = NAN;
    int64_t ne = -1;
    CHECK_OK(ts_attn_cost_model_residue(m, &cells, 0, 24, 0, 48, syn_menu[0], &s, &ne));
    CHECK(ne == 4 && near(s, 4 * (T(&p, 0, 0, 0, 1) - O(&p, 0, 1))), "residue: %lld sub-tiles, %g s", (long long)ne, s);
    CHECK_OK(ts_attn_cost_model_residue(m, &cells, 0, 24, 16, 32, syn_menu[0], &s, &ne));
    CHECK(ne == 2, "residue cols [16, 48): %lld", (long long)ne);
    CHECK_ERR_CONTAINS(ts_attn_cost_model_residue(m, &cells, 0, 25, 0, 48, syn_menu[0], &s, &ne), "not inside");
    CHECK_STATUS(ts_attn_cost_model_residue(m, &cells, 0, 24, 0, 48, (ts_attn_tile){64, 64}, &s, &ne), TS_ERR_NOT_FOUND);
  }
  ts_csr_free(&cells);
  ts_attn_cost_model_destroy(m);
  ts_attn_profile_free(&p);
}

/* Writes the profile's JSON after `edit` and loads it back: the status and message. */
static ts_status load_edited(const ts_attn_profile *p, void (*edit)(cJSON *j), const char *name) {
  cJSON *j = ts__attn_profile_to_cjson(p);
  if (!j) return ts_error(TS_ERR_OOM, "to_json");
  edit(j);
  char path[512];
  snprintf(path, sizeof path, "%s/%s.json", g_dir, name);
  ts_status s = ts__json_write_file(path, j);
  cJSON_Delete(j);
  if (s != TS_OK) return s;
  ts_attn_profile q;
  s = ts_attn_profile_load(path, &q);
  if (s == TS_OK) ts_attn_profile_free(&q);
  return s;
}

static void e_no_seconds(cJSON *j) { cJSON_DeleteItemFromObject(j, "seconds"); }
static void e_cell_string(cJSON *j) {
  cJSON *row = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "seconds"), 2), 1), 0);
  cJSON_ReplaceItemInArray(row, 1, cJSON_CreateString("x"));
}
static void e_cell_negative(cJSON *j) {
  cJSON *row = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "seconds"), 0), 0), 3);
  cJSON_ReplaceItemInArray(row, 3, cJSON_CreateNumber(-1));
}
static void e_short_row(cJSON *j) {
  cJSON *row = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "seconds"), 1), 1), 2);
  cJSON_DeleteItemFromArray(row, 0);
}
static void e_overhead(cJSON *j) {
  cJSON_ReplaceItemInArray(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "overhead_s"), 1), 2, cJSON_CreateNumber(-2));
}
static void e_no_overhead(cJSON *j) { cJSON_DeleteItemFromObject(j, "overhead_s"); }
static void e_no_cpu(cJSON *j) { cJSON_DeleteItemFromObject(cJSON_GetObjectItem(j, "provenance"), "cpu_model"); }
static void e_dtype(cJSON *j) { cJSON_ReplaceItemInObject(j, "dtype", cJSON_CreateString("f16")); }
static void e_d_string(cJSON *j) { cJSON_ReplaceItemInObject(j, "d", cJSON_CreateString("64")); }
static void e_sizes(cJSON *j) { cJSON_ReplaceItemInArray(cJSON_GetObjectItem(j, "sizes"), 1, cJSON_CreateNumber(4)); }
static void e_menu(cJSON *j) {
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(j, "menu"), 2, cJSON_CreateIntArray((const int[]){16, 0}, 2));
}
static void e_version(cJSON *j) { cJSON_ReplaceItemInObject(j, "version", cJSON_CreateNumber(99)); }
static void e_clock(cJSON *j) {
  cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "provenance"), "clock", cJSON_CreateString("sundial"));
}
static void e_prov_threads(cJSON *j) {
  cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "provenance"), "threads", cJSON_CreateString("1"));
}
static void e_format(cJSON *j) { cJSON_ReplaceItemInObject(j, "format", cJSON_CreateString("other")); }
static void e_level(cJSON *j) { cJSON_ReplaceItemInObject(j, "level", cJSON_CreateString("huge")); }

static void test_malformed(void) {
  ts_attn_profile p;
  CHECK_OK(synthetic(&p, false));
  CHECK_ERR_CONTAINS(load_edited(&p, e_no_seconds, "m1"), "'seconds'");
  CHECK_ERR_CONTAINS(load_edited(&p, e_cell_string, "m2"), "seconds[2][1][0][1]");
  CHECK_ERR_CONTAINS(load_edited(&p, e_cell_negative, "m3"), "seconds[0][0][3][3]");
  CHECK_ERR_CONTAINS(load_edited(&p, e_short_row, "m4"), "seconds[1][1][2]");
  CHECK_ERR_CONTAINS(load_edited(&p, e_no_cpu, "m5"), "cpu_model");
  CHECK_ERR_CONTAINS(load_edited(&p, e_overhead, "m14"), "overhead_s[1][2]");
  CHECK_ERR_CONTAINS(load_edited(&p, e_no_overhead, "m15"), "'overhead_s'");
  CHECK_ERR_CONTAINS(load_edited(&p, e_dtype, "m6"), "dtype");
  CHECK_ERR_CONTAINS(load_edited(&p, e_d_string, "m7"), "'d'");
  CHECK_ERR_CONTAINS(load_edited(&p, e_sizes, "m8"), "sizes[1]");
  CHECK_ERR_CONTAINS(load_edited(&p, e_menu, "m9"), "menu[2]");
  CHECK_STATUS(load_edited(&p, e_version, "m10"), TS_ERR_UNSUPPORTED);
  CHECK_ERR_CONTAINS(load_edited(&p, e_format, "m11"), "format");
  CHECK_ERR_CONTAINS(load_edited(&p, e_level, "m12"), "level");
  CHECK_ERR_CONTAINS(load_edited(&p, e_clock, "m16"), "'clock'");
  CHECK_ERR_CONTAINS(load_edited(&p, e_prov_threads, "m17"), "threads");
  CHECK_STATUS(load_edited(&p, e_no_seconds, "m13"), TS_ERR_FORMAT);
  /* the path is named, not-JSON and missing files */
  char path[512];
  snprintf(path, sizeof path, "%s/m1.json", g_dir);
  ts_attn_profile q;
  CHECK_ERR_CONTAINS(ts_attn_profile_load(path, &q), "m1.json");
  snprintf(path, sizeof path, "%s/garbage.json", g_dir);
  CHECK_OK(ts_write_file_atomic(path, "{\"format\": ", 11));
  CHECK_STATUS(ts_attn_profile_load(path, &q), TS_ERR_FORMAT);
  CHECK_OK(ts_write_file_atomic(path, "[1, 2]", 6));
  CHECK_STATUS(ts_attn_profile_load(path, &q), TS_ERR_FORMAT);
  snprintf(path, sizeof path, "%s/absent.json", g_dir);
  CHECK_STATUS(ts_attn_profile_load(path, &q), TS_ERR_NOT_FOUND);
  ts_attn_profile_free(&p);
}

static void test_provenance(void) {
  ts_attn_profile_opts o = tiny_opts();
  char path[512], why[256];
  snprintf(path, sizeof path, "%s/cached.json", g_dir);
  ts_attn_profile p;
  bool measured = false;
  /* no file: measures and saves */
  CHECK_OK(ts_attn_profile_get(&o, path, &p, &measured));
  CHECK(measured, "first get did not measure");
  CHECK(access(path, F_OK) == 0, "profile not saved at %s", path);
  /* matching file: reused */
  ts_attn_profile_free(&p);
  CHECK_OK(ts_attn_profile_get(&o, path, &p, &measured));
  CHECK(!measured, "matching cached profile was measured again");
  /* another machine's file: re-measured and overwritten */
  snprintf(p.prov.cpu_model, sizeof p.prov.cpu_model, "Some Other CPU");
  CHECK(!ts_attn_profile_matches(&p, &o, why, sizeof why) && strstr(why, "cpu_model"), "why: %s", why);
  CHECK_OK(ts_attn_profile_save(&p, path));
  ts_attn_profile_free(&p);
  CHECK_OK(ts_attn_profile_get(&o, path, &p, &measured));
  CHECK(measured && strcmp(p.prov.cpu_model, ts_cpu()->model) == 0, "stale profile not re-measured");
  ts_attn_profile q;
  CHECK_OK(ts_attn_profile_load(path, &q));
  CHECK(strcmp(q.prov.cpu_model, ts_cpu()->model) == 0, "stale file not replaced");
  ts_attn_profile_free(&q);
  /* other request fields */
  ts_attn_profile_opts o2 = o;
  o2.d = 128;
  CHECK(!ts_attn_profile_matches(&p, &o2, why, sizeof why) && strstr(why, "d 64"), "why: %s", why);
  o2 = o, o2.dtype = TS_BF16;
  CHECK(!ts_attn_profile_matches(&p, &o2, why, sizeof why) && strstr(why, "dtype"), "why: %s", why);
  o2 = o, o2.wall_clock = true;
  CHECK(!ts_attn_profile_matches(&p, &o2, why, sizeof why) && strstr(why, "clock"), "why: %s", why);
  o2 = o, o2.nmenu = 2;
  CHECK(!ts_attn_profile_matches(&p, &o2, why, sizeof why) && strstr(why, "menu"), "why: %s", why);
  o2 = o, o2.nsizes = 1;
  CHECK(!ts_attn_profile_matches(&p, &o2, why, sizeof why) && strstr(why, "size"), "why: %s", why);
  snprintf(p.prov.kernels, sizeof p.prov.kernels, "%s", ts_isa_active() == TS_ISA_SCALAR ? "avx2" : "scalar");
  CHECK(!ts_attn_profile_matches(&p, &o, why, sizeof why) && strstr(why, "kernels"), "why: %s", why);
  ts_attn_profile_free(&p);
  /* a malformed cached file is replaced */
  CHECK_OK(ts_write_file_atomic(path, "not json", 8));
  CHECK_OK(ts_attn_profile_get(&o, path, &p, &measured));
  CHECK(measured, "malformed cache not re-measured");
  ts_attn_profile_free(&p);
  /* the store (path NULL): artifact attn-profile/<level>-d<d>-<dtype>-<kernels>.json */
  CHECK_OK(ts_attn_profile_default_path(&o, path, sizeof path));
  char want[128];
  snprintf(want, sizeof want, "/attn-profile/quick-d64-f32-%s.json", ts_isa_name(ts_isa_active()));
  CHECK(strstr(path, want) != NULL, "default path %s", path);
  CHECK_OK(ts_attn_profile_get(&o, NULL, &p, &measured));
  CHECK(measured && access(path, F_OK) == 0, "store: not measured or not stored at %s", path);
  ts_attn_profile_free(&p);
  CHECK_OK(ts_attn_profile_get(&o, NULL, &p, &measured));
  CHECK(!measured, "store: the stored profile was measured again");
  cJSON *env = NULL;
  CHECK_OK(ts__json_read_file(path, &env));
  const cJSON *ep = cJSON_GetObjectItem(env, "provenance"), *ed = cJSON_GetObjectItem(env, "data");
  CHECK(env && cJSON_IsString(cJSON_GetObjectItem(env, "artifact")) &&
            !strcmp(cJSON_GetObjectItem(env, "artifact")->valuestring, "attn-profile") &&
            cJSON_GetObjectItem(env, "version")->valueint == TS_ATTN_PROFILE_VERSION && cJSON_IsObject(ep) &&
            !strcmp(cJSON_GetObjectItem(ep, "cpu_model")->valuestring, ts_cpu()->model) &&
            !strcmp(cJSON_GetObjectItem(ep, "clock")->valuestring, "thread_cpu") && cJSON_IsObject(ed) &&
            cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(ed, "provenance"), "profile")),
        "store: envelope fields");
  /* a stale stored profile (another CPU) is re-measured and replaced, silently kept otherwise */
  cJSON *dp = cJSON_GetObjectItem(cJSON_GetObjectItem(env, "data"), "provenance");
  cJSON_ReplaceItemInObject(dp, "cpu_model", cJSON_CreateString("Some Other CPU"));
  CHECK_OK(ts__json_write_file(path, env));
  cJSON_Delete(env);
  ts_attn_profile_free(&p);
  CHECK_OK(ts_attn_profile_get(&o, NULL, &p, &measured));
  CHECK(measured && strcmp(p.prov.cpu_model, ts_cpu()->model) == 0, "store: stale profile not re-measured");
  ts_attn_profile_free(&p);
  /* a corrupt stored profile is moved aside (<file>.bad) and made again */
  CHECK_OK(ts_write_file_atomic(path, "{\"artifact\": 3}", 15));
  CHECK_OK(ts_attn_profile_get(&o, NULL, &p, &measured));
  char bad[600];
  snprintf(bad, sizeof bad, "%s.bad", path);
  CHECK(measured && access(bad, F_OK) == 0 && access(path, F_OK) == 0, "store: corrupt file not moved aside");
  ts_attn_profile_free(&p);
}

/* Profiles of the backward and of a training step's attention: measured (entries positive and
 * finite), their "pass" kept through JSON, told apart from a forward request, stored under their
 * own key; a document without "pass" reads as a forward profile; a bad pass is a format error. */
static void test_pass(void) {
  ts_attn_pass ps;
  CHECK_OK(ts_attn_pass_parse("backward", &ps));
  CHECK(ps == TS_ATTN_PASS_BACKWARD && !strcmp(ts_attn_pass_name(TS_ATTN_PASS_TRAIN), "train"), "pass names");
  CHECK_ERR_CONTAINS(ts_attn_pass_parse("sideways", &ps), "forward, backward or train");
  ts_attn_profile_opts o = tiny_opts();
  o.sizes = tiny_sizes, o.nsizes = 1;
  char why[256], path[512];
  for (int k = TS_ATTN_PASS_BACKWARD; k <= TS_ATTN_PASS_TRAIN; k++) {
    o.pass = (ts_attn_pass)k;
    ts_attn_profile p, q;
    CHECK_OK(ts_attn_profile_measure(&o, &p));
    int bad = 0;
    for (size_t i = 0; p.seconds && i < (size_t)p.nmenu * p.ndens; i++) bad += !(p.seconds[i] > 0 && isfinite(p.seconds[i]));
    CHECK(p.seconds && bad == 0 && p.pass == o.pass, "%s: %d entries not positive and finite", ts_attn_pass_name(o.pass), bad);
    CHECK(ts_attn_profile_matches(&p, &o, NULL, 0), "%s profile does not match its request", ts_attn_pass_name(o.pass));
    ts_attn_profile_opts f = o;
    f.pass = TS_ATTN_PASS_FORWARD;
    CHECK(!ts_attn_profile_matches(&p, &f, why, sizeof why) && strstr(why, "pass"), "why: %s", why);
    char *text = NULL;
    CHECK_OK(ts_attn_profile_to_json(&p, &text));
    CHECK(text && strstr(text, ts_attn_pass_name(o.pass)), "the JSON names no pass");
    CHECK_OK(ts_attn_profile_from_json(text, &q));
    CHECK(profiles_equal(&p, &q), "%s JSON round trip differs", ts_attn_pass_name(o.pass));
    ts_attn_profile_free(&q);
    if (text) { /* a bad pass */
      char *at = strstr(text, "\"pass\"");
      if (at) {
        char *bad_text = malloc(strlen(text) + 16);
        size_t pre = (size_t)(at - text);
        memcpy(bad_text, text, pre);
        const char *rest = strchr(strchr(at + 7, '"') + 1, '"') + 1; /* after the value's closing quote */
        sprintf(bad_text + pre, "\"pass\": \"up\"%s", rest);
        CHECK_STATUS(ts_attn_profile_from_json(bad_text, &q), TS_ERR_FORMAT);
        CHECK(strstr(ts_last_error(), "'pass'") != NULL, "error: %s", ts_last_error());
        free(bad_text);
      }
    }
    free(text);
    CHECK_OK(ts_attn_profile_default_path(&o, path, sizeof path));
    CHECK(strstr(path, ts_attn_pass_name(o.pass)) != NULL, "default path %s names no pass", path);
    ts_attn_profile_free(&p);
  }
  /* a forward profile's JSON has no "pass" and reads back as forward */
  o.pass = TS_ATTN_PASS_FORWARD;
  ts_attn_profile p, q;
  CHECK_OK(ts_attn_profile_measure(&o, &p));
  char *text = NULL;
  CHECK_OK(ts_attn_profile_to_json(&p, &text));
  CHECK(text && !strstr(text, "\"pass\""), "a forward profile wrote a pass");
  CHECK_OK(ts_attn_profile_from_json(text, &q));
  CHECK(q.pass == TS_ATTN_PASS_FORWARD, "read as %s", ts_attn_pass_name(q.pass));
  CHECK_OK(ts_attn_profile_default_path(&o, path, sizeof path));
  CHECK(!strstr(path, "forward"), "a forward path names its pass: %s", path);
  free(text);
  ts_attn_profile_free(&p);
  ts_attn_profile_free(&q);
}

static void test_error_stats(void) {
  double meas[10], pr[10];
  for (int i = 0; i < 10; i++) meas[i] = 1e-5 * (i + 1), pr[i] = 2 * meas[i];
  ts_attn_model_error e;
  CHECK_OK(ts_attn_model_error_compute(meas, pr, 10, true, &e));
  CHECK(fabs(e.scale - 0.5) < 1e-12 && e.median_rel < 1e-12 && e.p90_rel < 1e-12 && fabs(e.pearson - 1) < 1e-12,
        "fitted: scale %g median %g pearson %g", e.scale, e.median_rel, e.pearson);
  CHECK_OK(ts_attn_model_error_compute(meas, pr, 10, false, &e));
  CHECK(fabs(e.median_rel - 1) < 1e-12 && fabs(e.max_rel - 1) < 1e-12 && fabs(e.sum_predicted - 2 * e.sum_measured) < 1e-15,
        "unfitted: median %g", e.median_rel);
  /* relative errors 0, 0.1, ..., 0.9: median 0.45, p90 0.81 (interpolated order statistics) */
  for (int i = 0; i < 10; i++) meas[i] = 1.0, pr[i] = 1.0 + 0.1 * i;
  CHECK_OK(ts_attn_model_error_compute(meas, pr, 10, false, &e));
  CHECK(fabs(e.median_rel - 0.45) < 1e-12 && fabs(e.p90_rel - 0.81) < 1e-12 && e.pearson == 0,
        "median %g p90 %g pearson %g", e.median_rel, e.p90_rel, e.pearson);
  pr[3] = 0;
  CHECK_ERR_CONTAINS(ts_attn_model_error_compute(meas, pr, 10, false, &e), "entry 3");
  CHECK_STATUS(ts_attn_model_error_compute(meas, pr, 0, false, &e), TS_ERR_INVALID_ARG);
}

static void test_blocks_measure(void) {
  ts_bitmap mask = {0};
  CHECK_OK(ts_bitmap_alloc(&mask, 40, 40));
  for (int i = 0; i < 40; i++)
    for (int j = 0; j < 40; j++)
      if (abs(i - j) <= 5) ts_bitmap_set(&mask, i, j, true);
  ts_block bl[3] = {{0, 0, 12, 12, 0}, {12, 8, 20, 17, 0}, {33, 30, 7, 10, 0}};
  ts_attn_tile tiles[3] = {{8, 16}, {16, 16}, {16, 32}};
  double sec[3];
  for (int i = 0; i < 3; i++) sec[i] = NAN;
  ts_attn_measure_opts o = ts_attn_measure_opts_default();
  o.repeats = 1, o.min_time_s = 0, o.progress = false;
  CHECK_OK(ts_attn_blocks_measure(&o, &mask, bl, tiles, 3, sec));
  for (int i = 0; i < 3; i++) CHECK(sec[i] > 0 && isfinite(sec[i]), "block %d: %g", i, sec[i]);
  o.wall_clock = true;
  for (int i = 0; i < 3; i++) sec[i] = NAN;
  CHECK_OK(ts_attn_blocks_measure(&o, &mask, bl, tiles, 3, sec));
  for (int i = 0; i < 3; i++) CHECK(sec[i] > 0 && isfinite(sec[i]), "wall clock block %d: %g", i, sec[i]);
  o.wall_clock = false;
  ts_block out[1] = {{35, 30, 7, 10, 0}};
  CHECK_ERR_CONTAINS(ts_attn_blocks_measure(&o, &mask, out, tiles, 1, sec), "block 0");
  ts_attn_tile bad[1] = {{0, 16}};
  CHECK_ERR_CONTAINS(ts_attn_blocks_measure(&o, &mask, bl, bad, 1, sec), "block 0");
  ts_bitmap_free(&mask);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/ts_test_attn_profile_XXXXXX");
  if (!mkdtemp(g_dir)) {
    fprintf(stderr, "cannot create a temporary directory\n");
    return 1;
  }
  char cache[300];
  snprintf(cache, sizeof cache, "%s/cache", g_dir);
  setenv("TESSERA_CACHE", cache, 1);
  test_levels();
  test_options();
  test_measure_and_roundtrip();
  test_interpolation();
  test_choose_and_residue();
  test_malformed();
  test_provenance();
  test_pass();
  test_error_stats();
  test_blocks_measure();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
  return tst_finish();
}
