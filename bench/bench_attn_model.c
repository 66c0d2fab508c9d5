/* Accuracy of the profiled attention cost model (tessera/attn_profile.h) on real block sets: for
 * each case a mask is generated, reordered (ts_reorder), cut into dense blocks (ts_blocks_extract),
 * each block gets its tile from ts_attn_choose_tiles with the profiled cost, and every block is
 * then timed alone with that tile (the profiler's single-segment method, 1 thread). Reported: the
 * model's median and 90th-percentile absolute relative error, max error, Pearson correlation of
 * predicted vs measured seconds (and of their logs), and the totals; beside it the analytic
 * ts_attn_cost_default, whose arbitrary unit is first fitted by the median ratio (so only its
 * shape is judged). --all-tiles also times every block with every menu tile and reports how often
 * each model's pick is the measured best and the total time of the picks over the best (regret).
 * Last, the whole schedule (ts_attn_schedule_from_blocks) is timed on one thread and compared with
 * the model's sum of block work, residue work and per-panel overhead (fp32).
 *
 *   bench_attn_model [--level quick|standard|full] [--d D] [--bf16] [--repeats N] [--all-tiles] [--wall]
 *                    [--cases SPEC|METHOD|EXTRACT;...] [--json] [--out FILE] [--blocks-csv FILE]
 *
 * Default cases: window2d:h=64,w=64,k=13 with hilbert and ic, swin:h=64,w=64,win=8 with hilbert,
 * swin:h=64,w=64,win=8,shift=1 with ic; blocks by greedy extraction (rho 0.6). The profile comes
 * from ts_attn_profile_get (cache: $TESSERA_CACHE), measured first when missing or stale. Times are
 * thread CPU time like the profile's (--wall: wall clock for the profile and every figure). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "harness_attn.h"
#include "io/json_internal.h"
#include "tessera/attn_profile.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

#define DEFAULT_CASES                                                                                        \
  "window2d:h=64,w=64,k=13|hilbert|greedy;window2d:h=64,w=64,k=13|ic|greedy;swin:h=64,w=64,win=8|hilbert|" \
  "greedy;swin:h=64,w=64,win=8,shift=1|ic|greedy"

typedef struct cfg {
  ts_attn_profile_opts po;
  ts_attn_measure_opts mo;
  ts_attn_cost_model *model;
  bool all_tiles, json;
  cJSON *rows;
  FILE *csv; /* --blocks-csv: one line per block */
} cfg;

static void add_error(cJSON *o, const char *key, const ts_attn_model_error *e) {
  cJSON *x = cJSON_AddObjectToObject(o, key);
  cJSON_AddNumberToObject(x, "median_rel", e->median_rel);
  cJSON_AddNumberToObject(x, "p90_rel", e->p90_rel);
  cJSON_AddNumberToObject(x, "mean_rel", e->mean_rel);
  cJSON_AddNumberToObject(x, "max_rel", e->max_rel);
  cJSON_AddNumberToObject(x, "pearson", e->pearson);
  cJSON_AddNumberToObject(x, "pearson_log", e->pearson_log);
  cJSON_AddNumberToObject(x, "scale", e->scale);
  cJSON_AddNumberToObject(x, "sum_measured_ms", 1e3 * e->sum_measured);
  cJSON_AddNumberToObject(x, "sum_predicted_ms", 1e3 * e->sum_predicted);
}

/* --all-tiles: picks of each model against the measured best tile per block. */
static ts_status tile_regret(cfg *c, const ts_bitmap *mask, const ts_blocks *bx, cJSON *row) {
  const ts_attn_tile *menu;
  int nm = ts_attn_cost_model_menu(c->model, &menu);
  int64_t nb = bx->nblocks;
  double *t = malloc((size_t)(nm * nb) * sizeof *t);
  ts_attn_tile *tl = malloc((size_t)nb * sizeof *tl);
  if (!t || !tl) return free(t), free(tl), ts_error(TS_ERR_OOM, "regret arrays");
  ts_status s = TS_OK;
  for (int k = 0; k < nm && s == TS_OK; k++) {
    for (int64_t b = 0; b < nb; b++) tl[b] = menu[k];
    s = ts_attn_blocks_measure(&c->mo, mask, bx->blocks, tl, nb, t + (size_t)k * nb);
  }
  double best_sum = 0, pick_sum[2] = {0, 0};
  int64_t hits[2] = {0, 0};
  int d = (int)c->mo.d;
  for (int64_t b = 0; b < nb && s == TS_OK; b++) {
    int best = 0, pick[2] = {0, 0};
    double cost[2] = {1e301, 1e301};
    for (int k = 0; k < nm; k++) {
      if (t[(size_t)k * nb + b] < t[(size_t)best * nb + b]) best = k;
      double v[2] = {ts_attn_cost_profiled(&bx->blocks[b], menu[k], c->model),
                     ts_attn_cost_default(&bx->blocks[b], menu[k], &d)};
      for (int m = 0; m < 2; m++)
        if (v[m] < cost[m]) cost[m] = v[m], pick[m] = k;
    }
    best_sum += t[(size_t)best * nb + b];
    for (int m = 0; m < 2; m++) pick_sum[m] += t[(size_t)pick[m] * nb + b], hits[m] += pick[m] == best;
  }
  if (s == TS_OK) {
    const char *names[2] = {"profiled", "analytic"};
    for (int m = 0; m < 2; m++) {
      cJSON *x = cJSON_AddObjectToObject(row, m ? "regret_analytic" : "regret_profiled");
      cJSON_AddNumberToObject(x, "best_pick_fraction", (double)hits[m] / (double)nb);
      cJSON_AddNumberToObject(x, "time_over_best", pick_sum[m] / best_sum);
      if (!c->json)
        printf("    %-9s picks: measured-best tile for %5.1f%% of blocks, total time %.3f x the best picks\n", names[m],
               100.0 * (double)hits[m] / (double)nb, pick_sum[m] / best_sum);
    }
  }
  free(t), free(tl);
  return s;
}

typedef struct exec_job {
  ts_context *ctx;
  ts_attn_plan *plan;
  const float *q, *k, *v;
  float *o;
  int64_t n, d;
} exec_job;


static ts_status exec_once(void *arg) {
  const exec_job *j = arg;
  return ts_attn_execute(j->ctx, j->plan, j->q, j->k, j->v, j->o, 1, 1, j->n, j->d);
}

/* Median seconds of the one-thread execute, by the same clock as the profile: 2 warm-ups, then at
 * least 7 calls and 0.2 s (at most 200 calls). */
static ts_status time_exec(const exec_job *j, bool wall, double *median) {
  ts_measure_opts o = ts_measure_opts_default();
  o.clock = wall ? TS_CLOCK_WALL : TS_CLOCK_THREAD_CPU;
  o.warmup = 2, o.rounds = 7, o.max_rounds = 200, o.min_time_s = 0.2;
  ts_measure_result r;
  TS_TRY(ts_measure_one(exec_once, (void *)j, &o, &r));
  *median = r.s.median;
  return TS_OK;
}

/* The whole schedule (ts_attn_schedule_from_blocks with the chosen tiles, default options) on one
 * thread, measured, against the model's sum: block work (ts_attn_cost_profiled) + residue work
 * (ts_attn_cost_model_residue per panel_rows strip with the residue tile) + one empty-panel
 * overhead (panel_rows x panel_rows) per strip. fp32 only. */
static ts_status schedule_check(cfg *c, const ts_bitmap *mask, const ts_blocks *bx, const ts_attn_tile *tiles,
                                cJSON *row) {
  int64_t n = mask->rows, d = c->mo.d;
  ts_attn_blocks_opts ao = ts_attn_blocks_opts_default();
  ts_attn_schedule s;
  memset(&s, 0, sizeof s);
  ts_attn_plan *plan = NULL;
  ts_context *ctx = NULL;
  float *q = ts_malloc((size_t)(4 * n * d) * sizeof(float));
  ts_status st = q ? TS_OK : ts_error(TS_ERR_OOM, "schedule check buffers");
  if (st == TS_OK) {
    ts_rng r;
    ts_rng_seed(&r, 7);
    for (int64_t i = 0; i < 3 * n * d; i++) q[i] = (float)(2 * ts_rng_uniform(&r) - 1);
    st = ts_context_create(&ctx, 1);
  }
  if (st == TS_OK) st = ts_attn_schedule_from_blocks(&s, n, bx->blocks, tiles, bx->nblocks, mask, &ao);
  if (st == TS_OK) st = ts_attn_plan_create(&plan, ctx, &s, mask, d);
  double med = 0;
  if (st == TS_OK) {
    exec_job j = {ctx, plan, q, q + n * d, q + 2 * n * d, q + 3 * n * d, n, d};
    st = time_exec(&j, c->mo.wall_clock, &med);
  }
  double pred = 0, res = 0, ovh = 0;
  for (int64_t b = 0; st == TS_OK && b < bx->nblocks; b++) pred += ts_attn_cost_profiled(&bx->blocks[b], tiles[b], c->model);
  for (int64_t r0 = 0; st == TS_OK && r0 < n; r0 += ao.panel_rows) {
    int64_t nr = n - r0 < ao.panel_rows ? n - r0 : ao.panel_rows;
    double sec = 0, o = 0;
    st = ts_attn_cost_model_residue(c->model, &bx->residue, r0, nr, 0, n, ao.residue, &sec, NULL);
    if (st == TS_OK) st = ts_attn_cost_model_overhead(c->model, nr, nr, &o);
    res += sec, ovh += o;
  }
  if (st == TS_OK) {
    double total = pred + res + ovh;
    cJSON *x = cJSON_AddObjectToObject(row, "schedule");
    cJSON_AddNumberToObject(x, "measured_ms", 1e3 * med);
    cJSON_AddNumberToObject(x, "predicted_ms", 1e3 * total);
    cJSON_AddNumberToObject(x, "predicted_blocks_ms", 1e3 * pred);
    cJSON_AddNumberToObject(x, "predicted_residue_ms", 1e3 * res);
    cJSON_AddNumberToObject(x, "predicted_overhead_ms", 1e3 * ovh);
    cJSON_AddNumberToObject(x, "rel_error", fabs(total - med) / med);
    if (!c->json)
      printf("    whole schedule, 1 thread: measured %.3f ms, predicted %.3f ms (blocks %.3f + residue %.3f + panels %.3f), "
             "error %.1f%%\n", 1e3 * med, 1e3 * total, 1e3 * pred, 1e3 * res, 1e3 * ovh,
             100 * fabs(total - med) / med);
  }
  ts_attn_plan_destroy(plan);
  ts_attn_schedule_free(&s);
  ts_context_destroy(ctx);
  ts_free(q);
  return st;
}

static ts_status run_case(cfg *c, const char *spec, const char *method_name, const char *extract_name) {
  ts_reorder_method method;
  ts_extract_method em;
  TS_TRY(ts_reorder_method_parse(method_name, &method));
  TS_TRY(ts_extract_method_parse(extract_name, &em));
  ts_csr pc = {0};
  ts_bitmap mask = {0};
  ts_blocks bx;
  memset(&bx, 0, sizeof bx);
  ts_status s = ts_bench_attn_mask(spec, method, &pc, &mask, NULL);
  ts_blocks_opts bo;
  ts_blocks_opts_default(&bo);
  bo.method = em;
  if (s == TS_OK) s = ts_blocks_extract(&pc, &bo, &bx);
  if (s == TS_OK && bx.nblocks < 2) s = ts_error(TS_ERR_INVALID_ARG, "%s: only %lld blocks", spec, (long long)bx.nblocks);
  int64_t nb = bx.nblocks;
  ts_attn_tile *tiles = s == TS_OK ? malloc((size_t)nb * sizeof *tiles) : NULL;
  double *meas = s == TS_OK ? malloc((size_t)nb * sizeof *meas) : NULL, *pp = s == TS_OK ? malloc((size_t)nb * sizeof *pp) : NULL,
         *pa = s == TS_OK ? malloc((size_t)nb * sizeof *pa) : NULL;
  if (s == TS_OK && (!tiles || !meas || !pp || !pa)) s = ts_error(TS_ERR_OOM, "case arrays");
  const ts_attn_tile *menu;
  int nm = ts_attn_cost_model_menu(c->model, &menu);
  if (s == TS_OK) s = ts_attn_choose_tiles(bx.blocks, nb, menu, nm, ts_attn_cost_profiled, c->model, tiles);
  if (s == TS_OK) s = ts_attn_blocks_measure(&c->mo, &mask, bx.blocks, tiles, nb, meas);
  ts_attn_model_error ep, ea;
  int d = (int)c->mo.d;
  for (int64_t b = 0; s == TS_OK && b < nb; b++) {
    if (ts_attn_cost_model_predict(c->model, bx.blocks[b].rows, bx.blocks[b].cols, bx.blocks[b].nnz, tiles[b], &pp[b]) != TS_OK)
      pp[b] = 1e300;
    pa[b] = ts_attn_cost_default(&bx.blocks[b], tiles[b], &d);
  }
  if (s == TS_OK) s = ts_attn_model_error_compute(meas, pp, nb, false, &ep);
  if (s == TS_OK) s = ts_attn_model_error_compute(meas, pa, nb, true, &ea);
  if (s == TS_OK) {
    int64_t rmin = INT64_MAX, rmax = 0, cmin = INT64_MAX, cmax = 0;
    for (int64_t b = 0; b < nb; b++) {
      const ts_block *B = &bx.blocks[b];
      rmin = B->rows < rmin ? B->rows : rmin, rmax = B->rows > rmax ? B->rows : rmax;
      cmin = B->cols < cmin ? B->cols : cmin, cmax = B->cols > cmax ? B->cols : cmax;
    }
    cJSON *row = cJSON_CreateObject();
    cJSON_AddStringToObject(row, "mask", spec);
    cJSON_AddStringToObject(row, "reorder", method_name);
    cJSON_AddStringToObject(row, "extract", extract_name);
    cJSON_AddNumberToObject(row, "blocks", (double)nb);
    cJSON_AddNumberToObject(row, "block_coverage", bx.nnz ? (double)bx.block_nnz / (double)bx.nnz : 1.0);
    cJSON_AddStringToObject(row, "rows_range", "");
    char rr[64];
    snprintf(rr, sizeof rr, "%lld-%lld x %lld-%lld", (long long)rmin, (long long)rmax, (long long)cmin, (long long)cmax);
    cJSON_ReplaceItemInObject(row, "rows_range", cJSON_CreateString(rr));
    add_error(row, "profiled", &ep);
    add_error(row, "analytic_fitted", &ea);
    if (!c->json) {
      printf("%-34s %-8s %6lld  %-20s %7.1f%% %7.1f%% %7.1f%% %7.3f %7.3f %8.3f %8.3f | %7.1f%% %7.1f%% %7.3f\n", spec,
             method_name, (long long)nb, rr, 100 * ep.median_rel, 100 * ep.p90_rel, 100 * ep.max_rel, ep.pearson,
             ep.pearson_log, 1e3 * ep.sum_measured, 1e3 * ep.sum_predicted, 100 * ea.median_rel, 100 * ea.p90_rel,
             ea.pearson);
      fflush(stdout);
    }
    for (int64_t b = 0; c->csv && b < nb; b++) {
      const ts_block *B = &bx.blocks[b];
      fprintf(c->csv, "\"%s\",%s,%d,%d,%d,%d,%lld,%d,%d,%.9g,%.9g,%.9g\n", spec, method_name, B->row0, B->col0, B->rows,
              B->cols, (long long)B->nnz, tiles[b].br, tiles[b].bc, meas[b], pp[b], pa[b] * ea.scale);
    }
    if (c->mo.dtype == TS_F32) s = schedule_check(c, &mask, &bx, tiles, row);
    if (s == TS_OK && c->all_tiles) s = tile_regret(c, &mask, &bx, row);
    cJSON_AddItemToArray(c->rows, row);
  }
  free(tiles), free(meas), free(pp), free(pa);
  ts_blocks_free(&bx);
  ts_bitmap_free(&mask);
  ts_csr_free(&pc);
  return s;
}

int main(int argc, char **argv) {
  cfg c = {.po = ts_attn_profile_opts_default(), .mo = ts_attn_measure_opts_default()};
  const char *cases = DEFAULT_CASES, *out = NULL;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--level") && a + 1 < argc) {
      if (ts_attn_profile_level_parse(argv[++a], &c.po.level) != TS_OK) {
        fprintf(stderr, "%s\n", ts_last_error());
        return 2;
      }
    } else if (!strcmp(argv[a], "--d") && a + 1 < argc) c.po.d = c.mo.d = atoll(argv[++a]);
    else if (!strcmp(argv[a], "--bf16")) c.po.dtype = c.mo.dtype = TS_BF16;
    else if (!strcmp(argv[a], "--repeats") && a + 1 < argc) c.mo.repeats = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--cases") && a + 1 < argc) cases = argv[++a];
    else if (!strcmp(argv[a], "--all-tiles")) c.all_tiles = true;
    else if (!strcmp(argv[a], "--wall")) c.po.wall_clock = c.mo.wall_clock = true;
    else if (!strcmp(argv[a], "--json")) c.json = true;
    else if (!strcmp(argv[a], "--out") && a + 1 < argc) out = argv[++a];
    else if (!strcmp(argv[a], "--blocks-csv") && a + 1 < argc) {
      if (!(c.csv = fopen(argv[++a], "w"))) {
        fprintf(stderr, "cannot open %s\n", argv[a]);
        return 1;
      }
      fprintf(c.csv, "mask,reorder,row0,col0,rows,cols,nnz,br,bc,measured_s,profiled_s,analytic_fitted_s\n");
    }
    else {
      fprintf(stderr, "usage: %s [--level quick|standard|full] [--d D] [--bf16] [--repeats N] [--all-tiles] [--wall] "
                      "[--cases SPEC|METHOD|EXTRACT;...] [--json] [--out FILE] [--blocks-csv FILE]\n", argv[0]);
      return 2;
    }
  }
  ts_attn_profile prof;
  bool measured;
  if (ts_attn_profile_get(&c.po, NULL, &prof, &measured) != TS_OK || ts_attn_cost_model_create(&c.model, &prof) != TS_OK) {
    fprintf(stderr, "attn profile: %s\n", ts_last_error());
    return 1;
  }
  c.mo.progress = c.po.progress = false;
  c.rows = cJSON_CreateArray();
  if (!c.json) {
    printf("profile: %s level, d=%lld %s, %d sizes x %d densities x %d tiles, %s, kernels %s, %s (%s, %.1f s)\n",
           prof.level, (long long)prof.d, ts_dtype_name(prof.dtype), prof.nsizes, prof.ndens, prof.nmenu, prof.prov.cpu_model,
           prof.prov.kernels, prof.prov.date, measured ? "measured now" : "cached", prof.measure_s);
    printf("blocks timed alone, 1 thread, %s, median of >= %d calls; error = |pred - meas| / meas\n", prof.prov.clock,
           c.mo.repeats);
    printf("%-34s %-8s %6s  %-20s %8s %8s %8s %7s %7s %8s %8s | %-24s\n", "mask", "reorder", "blocks", "rows x cols",
           "med err", "p90 err", "max err", "pearson", "r(log)", "meas ms", "pred ms", "analytic (fitted): med p90 r");
  }
  char *list = strdup(cases), *save = NULL;
  int rc = 0;
  for (char *tok = strtok_r(list, ";", &save); tok && !rc; tok = strtok_r(NULL, ";", &save)) {
    char *m = strchr(tok, '|'), *e = m ? strchr(m + 1, '|') : NULL;
    if (!m || !e) {
      fprintf(stderr, "case '%s': expected SPEC|METHOD|EXTRACT\n", tok);
      rc = 2;
      break;
    }
    *m = 0, *e = 0;
    if (run_case(&c, tok, m + 1, e + 1) != TS_OK) {
      fprintf(stderr, "case %s: %s\n", tok, ts_last_error());
      rc = 1;
    }
  }
  free(list);
  if (c.csv) fclose(c.csv);
  cJSON *root = cJSON_CreateObject();
  cJSON *pj = cJSON_AddObjectToObject(root, "profile");
  cJSON_AddStringToObject(pj, "level", prof.level);
  cJSON_AddStringToObject(pj, "cpu_model", prof.prov.cpu_model);
  cJSON_AddStringToObject(pj, "kernels", prof.prov.kernels);
  cJSON_AddStringToObject(pj, "date", prof.prov.date);
  cJSON_AddNumberToObject(pj, "d", (double)prof.d);
  cJSON_AddStringToObject(pj, "dtype", ts_dtype_name(prof.dtype));
  cJSON_AddNumberToObject(pj, "measure_s", prof.measure_s);
  cJSON_AddStringToObject(pj, "clock", prof.prov.clock);
  cJSON_AddItemToObject(root, "cases", c.rows);
  if (c.json) {
    ts_bench_print_json(root);
  }
  if (out && ts__json_write_file(out, root) != TS_OK) {
    fprintf(stderr, "%s\n", ts_last_error());
    rc = 1;
  }
  cJSON_Delete(root);
  ts_attn_cost_model_destroy(c.model);
  ts_attn_profile_free(&prof);
  return rc;
}
