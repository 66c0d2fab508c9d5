/* Sparse attention on the GPU, per mask: dense flash (fixed 64 x 64 tiles, all computed and
 * masked), fixed-tile block skip at 64 x 64 and at its best tile, and the variable-tile schedule
 * (blocks from tessera/reorder.h's extractor, tile per block by the default chooser, residue
 * segments), all through include/tessera/attn_cuda.h.
 *
 *   bench_attn_cuda [--mask SPEC] [--plan FILE] [--batch B] [--heads H] [--d D] [--dtype f32|bf16]
 *                   [--reps R] [--peak-gflops G]
 *
 * --plan FILE: a `tessera attn plan --out FILE` plan for the same mask (schedule + permutation,
 * attn_sched.h): the variable-tile run then uses its schedule on the permuted mask (and
 * fixed_best_reordered is measured there too); without it the schedule comes from the block
 * extractor and the default tile chooser on the original order.
 * Prints one JSON object with the fields of `tessera attn bench --json` that apply: n, nnz,
 * density, tiles_empty / tiles_mixed / tiles_full (64 x 64 tiles of the original mask), ms per
 * variant (dense_flash, fixed_64, fixed_best, fixed_best_reordered, variable, gather: wall time of R
 * back-to-back launches after 3 warm-ups, divided by R), speedup_vs_* (t_baseline / t_variable),
 * work_ratio per variant, max_abs_err (variable) and max_abs_err_all (each variant, head 0 against
 * ts_attn_reference on its mask order), gflops_effective = 4 d nnz B H / t_variable and pct_peak
 * of --peak-gflops (default 60000: an H200's fp32 CUDA-core peak, about 60 TFLOP/s). gather: the
 * GPU's own tile assignment (ts_attn_cuda_plan_create_gather on the variable run's token order,
 * costs from ts_attn_cuda_costs_get: the cache's for this device, d and dtype, else measured now
 * and saved; printed as gpu_costs with their source), with
 * speedup_gather_vs_*, gflops_effective_gather and pct_peak_gather. Exits 0
 * with {"skipped": "no CUDA device ..."} when there is no device. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/attn_cuda_internal.h"
#include "tessera/attn.h"
#include "tessera/attn_cuda.h"
#include "tessera/attn_sched.h"
#include "tessera/reorder.h"
#include "tessera/sparse.h"

typedef struct ctx {
  int64_t B, H, n, d, reps;
  int bf16;
  void *dq, *dk, *dv;
  float *dO;
  const float *ref; /* head 0 reference [n][d] */
  float *o;         /* head 0 result */
} ctx;

static int fail(const char *what) {
  fprintf(stderr, "bench_attn_cuda: %s failed: %s\n", what, ts_last_error());
  return 1;
}

static ts_status exec(ctx *c, ts_attn_cuda_plan *p) {
  return c->bf16 ? ts_attn_cuda_execute_bf16(p, c->dq, c->dk, c->dv, c->dO, c->B, c->H, c->n, c->d, NULL)
                 : ts_attn_cuda_execute(p, c->dq, c->dk, c->dv, c->dO, c->B, c->H, c->n, c->d, NULL);
}

/* ms per call and max |err| on head 0. */
static ts_status time_plan(ctx *c, ts_attn_cuda_plan *p, double *ms, double *err) {
  for (int w = 0; w < 3; w++) TS_TRY(exec(c, p));
  TS_TRY(ts_attn_cuda_synchronize());
  double t0 = ts_now();
  for (int64_t r = 0; r < c->reps; r++) TS_TRY(exec(c, p));
  TS_TRY(ts_attn_cuda_synchronize());
  *ms = (ts_now() - t0) * 1e3 / (double)c->reps;
  TS_TRY(ts_attn_cuda_to_host(c->o, c->dO, (size_t)(c->n * c->d) * sizeof(float)));
  double e = 0;
  for (int64_t i = 0; i < c->n * c->d; i++) {
    double x = fabs((double)c->o[i] - (double)c->ref[i]);
    if (!(x <= e)) e = x; /* NaN propagates */
  }
  *err = e;
  return TS_OK;
}

static ts_status variable_schedule(const ts_csr *csr, const ts_bitmap *m, int64_t d, ts_attn_schedule *s) {
  ts_blocks_opts bo;
  ts_blocks_opts_default(&bo);
  ts_blocks b;
  TS_TRY(ts_blocks_extract(csr, &bo, &b));
  ts_attn_tile *tiles = malloc((size_t)(b.nblocks ? b.nblocks : 1) * sizeof *tiles);
  const ts_attn_tile *menu;
  int nmenu = ts_attn_default_menu(&menu), dd = (int)d;
  ts_status st = tiles ? TS_OK : ts_error(TS_ERR_OOM, "bench: tiles");
  if (st == TS_OK) st = ts_attn_choose_tiles(b.blocks, b.nblocks, menu, nmenu, NULL, &dd, tiles);
  if (st == TS_OK) st = ts_attn_schedule_from_blocks(s, m->rows, b.blocks, tiles, b.nblocks, m, NULL);
  free(tiles);
  ts_blocks_free(&b);
  return st;
}

/* Times one variant: adds ms under `name`, its error to errs and work ratio to wr. */
static ts_status run_variant(ctx *c, ts_attn_cuda_plan *p, const char *name, cJSON *j, cJSON *errs, cJSON *wr, double *t) {
  double e;
  ts_status st = time_plan(c, p, t, &e);
  if (st == TS_OK) {
    ts_attn_stats s;
    ts_attn_cuda_plan_stats(p, &s);
    cJSON_AddNumberToObject(j, name, *t);
    cJSON_AddNumberToObject(errs, name, e);
    cJSON_AddNumberToObject(wr, name, s.work_ratio);
  }
  ts_attn_cuda_plan_destroy(p);
  return st;
}

/* Every block-skip tile of the GPU's fixed menu on mask m, under j[label]; t_best and its name.
 * t64 non-NULL: the original order (also gives fixed_64), else the reordered one. */
static ts_status fixed_sweep(ctx *c, const ts_bitmap *m, cJSON *j, cJSON *errs, cJSON *wr, const char *label, double *t64,
                             double *t_best, char best[32]) {
  static const int32_t tiles[][2] = {{64, 64}, {32, 32}, {128, 128}, {64, 128}, {128, 64}, {32, 64}, {64, 32}};
  cJSON *all = cJSON_CreateObject(), *all_err = cJSON_CreateObject(), *all_wr = cJSON_CreateObject();
  cJSON_AddItemToObject(j, label, all);
  for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
    ts_attn_cuda_plan *p;
    char name[32];
    double tt;
    snprintf(name, sizeof name, "%dx%d", tiles[t][0], tiles[t][1]);
    TS_TRY(ts_attn_cuda_plan_create_fixed(&p, m, c->d, tiles[t][0], tiles[t][1], false));
    TS_TRY(run_variant(c, p, name, all, all_err, all_wr, &tt));
    if (t == 0 && t64) *t64 = tt;
    if (t == 0 || tt < *t_best) *t_best = tt, snprintf(best, 32, "%s", name);
  }
  /* top-level work ratios as `tessera attn bench` names them */
  cJSON *w64 = cJSON_GetObjectItem(all_wr, "64x64"), *wb = cJSON_GetObjectItem(all_wr, best);
  if (t64 && w64) cJSON_AddNumberToObject(wr, "fixed_64", w64->valuedouble);
  if (wb) cJSON_AddNumberToObject(wr, t64 ? "fixed_best" : "fixed_best_reordered", wb->valuedouble);
  cJSON_AddItemToObject(all, "max_abs_err", all_err);
  cJSON_AddItemToObject(all, "work_ratio", all_wr);
  return TS_OK;
}

int main(int argc, char **argv) {
  const char *spec = "window2d:h=64,w=64,k=13", *plan_path = NULL;
  ctx c = {.B = 1, .H = 12, .d = 64, .reps = 20};
  double peak = 60000.0;
  for (int i = 1; i < argc; i += 2) { /* every option takes a value */
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "bench_attn_cuda: %s needs a value (see the header of bench/cuda/bench_attn_cuda.c)\n", a);
      return 2;
    }
    if (!strcmp(a, "--mask")) spec = v;
    else if (!strcmp(a, "--plan")) plan_path = v;
    else if (!strcmp(a, "--batch")) c.B = atoll(v);
    else if (!strcmp(a, "--heads")) c.H = atoll(v);
    else if (!strcmp(a, "--d")) c.d = atoll(v);
    else if (!strcmp(a, "--reps")) c.reps = atoll(v);
    else if (!strcmp(a, "--peak-gflops")) peak = atof(v);
    else if (!strcmp(a, "--dtype") && (!strcmp(v, "f32") || !strcmp(v, "bf16"))) c.bf16 = !strcmp(v, "bf16");
    else {
      fprintf(stderr, "bench_attn_cuda: unknown option or value: %s %s\n", a, v);
      return 2;
    }
  }
  if (c.B < 1 || c.H < 1 || c.d < 1 || c.reps < 1 || !(peak > 0)) {
    fprintf(stderr, "bench_attn_cuda: batch, heads, d, reps and peak must be positive\n");
    return 2;
  }
  if (!ts_attn_cuda_available()) {
    char why[256];
    ts_attn_cuda_device_name(why, sizeof why);
    printf("{\"pattern\": \"%s\", \"skipped\": \"%s\"}\n", spec, why);
    return 0;
  }
  ts_csr csr, pcsr = {0};
  ts_bitmap m, pm = {0};
  if (ts_pattern_generate(spec, &csr, NULL) != TS_OK || ts_csr_to_bitmap(&csr, &m) != TS_OK) return fail("mask");
  c.n = m.rows;
  int32_t *perm = NULL;
  ts_attn_schedule s;
  if (plan_path) {
    if (ts_attn_plan_load(plan_path, NULL, NULL, &perm, &s) != TS_OK) return fail("plan file");
    if (s.n != c.n) {
      fprintf(stderr, "bench_attn_cuda: plan is for n = %lld, the mask has n = %lld\n", (long long)s.n, (long long)c.n);
      return 1;
    }
    if (ts_csr_permute(&csr, perm, perm, &pcsr) != TS_OK || ts_csr_to_bitmap(&pcsr, &pm) != TS_OK) return fail("permuted mask");
  } else {
    if (variable_schedule(&csr, &m, c.d, &s) != TS_OK) return fail("variable schedule");
  }
  const ts_bitmap *vm = plan_path ? &pm : &m; /* the variable run's mask order */

  size_t cnt = (size_t)(c.B * c.H * c.n * c.d), esz = c.bf16 ? 2 : 4, hd = (size_t)(c.n * c.d);
  float *hq = malloc(cnt * 4), *hk = malloc(cnt * 4), *hv = malloc(cnt * 4), *ref = malloc(hd * 4), *vref = malloc(hd * 4);
  uint16_t *hb = malloc(cnt * 2);
  c.o = malloc(hd * 4);
  if (!hq || !hk || !hv || !ref || !vref || !hb || !c.o) return fail("host buffers");
  ts_rng r;
  ts_rng_seed(&r, 42);
  for (size_t i = 0; i < cnt; i++) hq[i] = (float)ts_rng_uniform(&r) * 2 - 1;
  for (size_t i = 0; i < cnt; i++) hk[i] = (float)ts_rng_uniform(&r) * 2 - 1;
  for (size_t i = 0; i < cnt; i++) hv[i] = (float)ts_rng_uniform(&r) * 2 - 1;
  if (c.bf16) /* the references see the same bf16-rounded values the kernels read */
    for (size_t i = 0; i < cnt; i++) {
      hq[i] = ts_bf16_to_f32(ts_f32_to_bf16(hq[i]));
      hk[i] = ts_bf16_to_f32(ts_f32_to_bf16(hk[i]));
      hv[i] = ts_bf16_to_f32(ts_f32_to_bf16(hv[i]));
    }
  /* head 0 references; the permuted problem reads the same arrays as tokens in the new order */
  if (ts_attn_reference(&m, hq, hk, hv, ref, 1, 1, c.n, c.d) != TS_OK) return fail("reference");
  if (plan_path && ts_attn_reference(vm, hq, hk, hv, vref, 1, 1, c.n, c.d) != TS_OK) return fail("reference");
  if (ts_attn_cuda_malloc(&c.dq, cnt * esz) || ts_attn_cuda_malloc(&c.dk, cnt * esz) || ts_attn_cuda_malloc(&c.dv, cnt * esz) ||
      ts_attn_cuda_malloc((void **)&c.dO, cnt * 4))
    return fail("device buffers");
  float *src[3] = {hq, hk, hv};
  void *dst[3] = {c.dq, c.dk, c.dv};
  for (int t = 0; t < 3; t++) {
    const void *from = src[t];
    if (c.bf16) {
      ts_f32_to_bf16_array(src[t], hb, cnt);
      from = hb;
    }
    if (ts_attn_cuda_to_device(dst[t], from, cnt * esz) != TS_OK) return fail("copy to the device");
  }

  cJSON *j = cJSON_CreateObject(), *errs = cJSON_CreateObject(), *wr = cJSON_CreateObject();
  char dev[256];
  ts_attn_cuda_device_name(dev, sizeof dev);
  int64_t nnz = ts_bitmap_count(&m);
  cJSON_AddStringToObject(j, "pattern", spec);
  cJSON_AddStringToObject(j, "device", dev);
  cJSON_AddNumberToObject(j, "n", (double)c.n);
  cJSON_AddNumberToObject(j, "nnz", (double)nnz);
  cJSON_AddNumberToObject(j, "density", (double)nnz / ((double)c.n * (double)c.n));
  cJSON_AddNumberToObject(j, "heads", (double)c.H);
  cJSON_AddNumberToObject(j, "head_dim", (double)c.d);
  cJSON_AddNumberToObject(j, "batch", (double)c.B);
  cJSON_AddStringToObject(j, "dtype", c.bf16 ? "bf16" : "f32");
  cJSON_AddNumberToObject(j, "repeats", (double)c.reps);
  cJSON_AddStringToObject(j, "schedule", plan_path ? plan_path : "blocks_extract + default tile chooser");

  c.ref = ref;
  ts_attn_cuda_plan *p;
  ts_attn_stats st;
  double t_dense = 0, t64 = 0, t_best = 0, t_best_re = 0, t_var = 0;
  char best[32] = "", best_re[32] = "";
  if (ts_attn_cuda_plan_create_fixed(&p, &m, c.d, 64, 64, false)) return fail("fixed 64x64 plan");
  ts_attn_cuda_plan_stats(p, &st);
  ts_attn_cuda_plan_destroy(p);
  cJSON_AddNumberToObject(j, "tiles_empty", (double)st.tiles_skipped);
  cJSON_AddNumberToObject(j, "tiles_mixed", (double)st.tiles_masked);
  cJSON_AddNumberToObject(j, "tiles_full", (double)st.tiles_full);
  if (ts_attn_cuda_plan_create_fixed(&p, &m, c.d, 64, 64, true) || run_variant(&c, p, "dense_flash", j, errs, wr, &t_dense))
    return fail("dense_flash");
  if (fixed_sweep(&c, &m, j, errs, wr, "fixed_all", &t64, &t_best, best)) return fail("fixed");
  cJSON_AddNumberToObject(j, "fixed_64", t64);
  cJSON_AddNumberToObject(j, "fixed_best", t_best);
  cJSON_AddStringToObject(j, "fixed_best_tile", best);
  if (plan_path) {
    c.ref = vref;
    if (fixed_sweep(&c, vm, j, errs, wr, "fixed_all_reordered", NULL, &t_best_re, best_re)) return fail("fixed reordered");
    cJSON_AddNumberToObject(j, "fixed_best_reordered", t_best_re);
    cJSON_AddStringToObject(j, "fixed_best_reordered_tile", best_re);
  }
  double t0 = ts_now();
  if (ts_attn_cuda_plan_create(&p, &s, vm, c.d)) return fail("variable plan");
  double plan_ms = (ts_now() - t0) * 1e3;
  ts_attn_cuda_plan_stats(p, &st);
  c.ref = plan_path ? vref : ref;
  if (run_variant(&c, p, "variable", j, errs, wr, &t_var)) return fail("variable");
  cJSON_AddNumberToObject(j, "speedup_vs_fixed_best", t_best / t_var);
  cJSON_AddNumberToObject(j, "speedup_vs_fixed_64", t64 / t_var);
  if (plan_path) cJSON_AddNumberToObject(j, "speedup_vs_fixed_best_reordered", t_best_re / t_var);
  cJSON_AddNumberToObject(j, "speedup_vs_dense_flash", t_dense / t_var);
  cJSON_AddItemToObject(j, "work_ratio", wr);
  cJSON_AddNumberToObject(j, "plan_ms", plan_ms);
  cJSON_AddNumberToObject(j, "panels", (double)st.panels);
  cJSON_AddNumberToObject(j, "segments", (double)st.segments);
  cJSON_AddNumberToObject(j, "variable_tiles_full", (double)st.tiles_full);
  cJSON_AddNumberToObject(j, "variable_tiles_masked", (double)st.tiles_masked);
  cJSON_AddNumberToObject(j, "variable_tiles_skipped", (double)st.tiles_skipped);
  /* the GPU's own tile assignment: a gather plan on the same token order, from this device's costs */
  ts_attn_cuda_costs costs;
  bool costs_cached = false;
  if (ts_attn_cuda_costs_get(&costs, c.d, c.bf16, &costs_cached) != TS_OK) return fail("cuda profile");
  t0 = ts_now();
  if (ts_attn_cuda_plan_create_gather(&p, vm, c.d, &costs)) return fail("gather plan");
  double gather_plan_ms = (ts_now() - t0) * 1e3, t_gather = 0;
  ts_attn_stats gst;
  ts_attn_cuda_plan_stats(p, &gst);
  if (run_variant(&c, p, "gather", j, errs, wr, &t_gather)) return fail("gather");
  cJSON_AddNumberToObject(j, "speedup_gather_vs_fixed_best", t_best / t_gather);
  cJSON_AddNumberToObject(j, "speedup_gather_vs_fixed_64", t64 / t_gather);
  if (plan_path) cJSON_AddNumberToObject(j, "speedup_gather_vs_fixed_best_reordered", t_best_re / t_gather);
  cJSON_AddNumberToObject(j, "speedup_gather_vs_dense_flash", t_dense / t_gather);
  cJSON_AddNumberToObject(j, "speedup_gather_vs_variable", t_var / t_gather);
  cJSON_AddNumberToObject(j, "gather_plan_ms", gather_plan_ms);
  cJSON_AddNumberToObject(j, "gather_units", (double)gst.panels);
  cJSON_AddNumberToObject(j, "gather_chunks_full", (double)gst.tiles_full);
  cJSON_AddNumberToObject(j, "gather_chunks_masked", (double)gst.tiles_masked);
  cJSON *cj = ts__cuda_costs_to_json(&costs); /* the costs file's document, provenance included */
  if (!cj) return fail("costs JSON");
  cJSON_AddStringToObject(cj, "source", costs_cached ? "cached" : "measured");
  cJSON_AddItemToObject(j, "gpu_costs", cj);
  cJSON *ev = cJSON_GetObjectItem(errs, "variable");
  cJSON_AddNumberToObject(j, "max_abs_err", ev ? ev->valuedouble : NAN);
  cJSON_AddItemToObject(j, "max_abs_err_all", errs);
  cJSON_AddStringToObject(j, "err_subset", "batch 0, head 0");
  double gf = 4.0 * (double)c.d * (double)nnz * (double)(c.B * c.H) / (t_var * 1e-3) / 1e9;
  cJSON_AddNumberToObject(j, "gflops_effective", gf);
  cJSON_AddNumberToObject(j, "peak_gflops", peak);
  cJSON_AddNumberToObject(j, "pct_peak", 100.0 * gf / peak);
  const double gfg = 4.0 * (double)c.d * (double)nnz * (double)(c.B * c.H) / (t_gather * 1e-3) / 1e9;
  cJSON_AddNumberToObject(j, "gflops_effective_gather", gfg);
  cJSON_AddNumberToObject(j, "pct_peak_gather", 100.0 * gfg / peak);
  char *out = cJSON_PrintUnformatted(j);
  if (out) printf("%s\n", out);
  free(out);
  cJSON_Delete(j);
  ts_attn_cuda_free(c.dq), ts_attn_cuda_free(c.dk), ts_attn_cuda_free(c.dv), ts_attn_cuda_free(c.dO);
  free(hq), free(hk), free(hv), free(hb), free(ref), free(vref), free(c.o);
  ts_attn_schedule_free(&s);
  ts_free(perm);
  ts_csr_free(&csr);
  ts_csr_free(&pcsr);
  ts_bitmap_free(&m);
  if (plan_path) ts_bitmap_free(&pm);
  return 0;
}
