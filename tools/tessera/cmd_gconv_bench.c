/* tessera gconv bench: for every layer, the plan (cached), our executor on the plan's partitions
 * and on the partitions planned without reordering (the `none` candidate after its ILP), and every
 * baseline, timed in one process on the same random weights and input (fixed seeds; median of
 * repeats after warm-up), each output checked against the dense masked reference (double) with
 * the bound (L + 2) 2^-24 sum|w||x| per output, L = cin * k * k. PyTorch's figures come from
 * --torch FILE (bench/peers/gconv_torch.py measures them on the same layer table).
 *
 * Totals are sums over the layers; `torch` is per layer the faster of torch's dense-masked and
 * grouped-with-union convolutions, `best_baseline` per layer the fastest of the other baselines
 * (both stricter than the best single method's total, which is reported too). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "cmd_gconv.h"
#include "io/json_internal.h"
#include "tessera/measure.h"
#include "tessera/hwinfo.h"

enum {
  M_OURS = 0,
  M_NOREORDER,
  M_BASE0, /* ts_gconv_base_kind order */
  M_TORCH_DENSE = M_BASE0 + TS_GCONV_BASE_COUNT,
  M_TORCH_GROUPED,
  M_TORCH,    /* per layer min of the two torch forms */
  M_BEST_BASE, /* per layer min of the baselines (not torch) */
  NM
};

static const char *method_name(int m) {
  static const char *const n[] = {"ours", "ours_noreorder", "torch_dense", "torch_grouped", "torch", "best_baseline"};
  return m < M_BASE0 ? n[m] : m < M_TORCH_DENSE ? ts_gconv_base_name((ts_gconv_base_kind)(m - M_BASE0)) : n[m - TS_GCONV_BASE_COUNT];
}

static const char *method_short(int m) {
  static const char *const s[NM] = {"ours", "noreord", "dense", "deploy", "dnn_grp", "dnn_dns", "spmm",
                                    "t_dense", "t_grp", "torch", "best_bl"};
  return s[m];
}

typedef struct lrow {
  double ms[NM], err[NM];
  bool ok[NM];
  char why[NM][160];
  ts_reorder_method method;
  int32_t nparts, none_nparts;
  double plan_ms, pred_ms, pred_none_ms, flops, mean_union;
  bool cached, none_won;
} lrow;

typedef struct report {
  gcli_layer *L;
  int n;
  lrow *rows;
  double total[NM], total_learned[NM];
  char torch_version[64];
  int torch_threads;
  double load0, load1, peak;
  ts_machine_profile mp;
  bool have_mp;
} report;

/* ---- one layer ---------------------------------------------------------------------------------- */

typedef struct runner {
  ts_gconv_exec *e;
  ts_gconv_base *b;
  const float *x;
  float *y;
  ts_status s;
} runner;

static ts_status run_once(void *arg) {
  runner *r = arg;
  return r->e ? ts_gconv_execute(r->e, r->x, r->y) : ts_gconv_base_run(r->b, r->x, r->y);
}

typedef struct data {
  const ts_gconv_layer *l;
  float *w, *x, *y, *ref;
  double *bound;
  size_t ny;
} data;

/* Poison, one call, compare; then time. */
static ts_status measure(const gcli_args *a, const data *d, ts_gconv_exec *e, ts_gconv_base *b, lrow *r,
                         int m) {
  runner R = {e, b, d->x, d->y, TS_OK};
  for (size_t i = 0; i < d->ny; i++) d->y[i] = NAN;
  TS_TRY(run_once(&R));
  if (d->ref) {
    double worst = 0;
    bool ok = true;
    for (size_t i = 0; i < d->ny; i++) {
      const double err = fabs((double)d->y[i] - d->ref[i]);
      ok &= err <= d->bound[i];
      if (!(err <= worst)) worst = err; /* NaN propagates */
    }
    r->err[m] = worst, r->ok[m] = ok;
  }
  ts_measure_opts o = ts_measure_opts_default();
  o.rounds = (int)a->repeats, o.min_time_s = a->min_time;
  ts_measure_result mr;
  TS_TRY(ts_measure_one(run_once, &R, &o, &mr));
  TS_TRY(mr.status);
  r->ms[m] = mr.s.median * 1e3;
  return TS_OK;
}

static ts_status time_parts(const gcli_args *a, ts_context *ctx, const data *d, const gcli_layer *ly,
                            const ts_gconv_part *parts, int32_t np, lrow *r, int m) {
  ts_gconv_exec *e = NULL;
  ts_status s = ts_gconv_exec_create(&e, ctx, d->l, &ly->conn, parts, np, d->w);
  if (s == TS_OK) s = measure(a, d, e, NULL, r, m);
  ts_gconv_exec_destroy(e);
  return s;
}

/* Reference and per-output bound (needs the reference of |w|, |x| too). */
static ts_status reference(const gcli_layer *ly, data *d) {
  const ts_gconv_layer *l = d->l;
  const size_t nw = (size_t)l->cout * l->cin * l->ksize * l->ksize, nx = (size_t)l->n * l->cin * l->h * l->w;
  float *aw = ts_malloc(nw * sizeof(float)), *ax = ts_malloc(nx * sizeof(float)), *ay = ts_malloc(d->ny * sizeof(float));
  ts_status s = aw && ax && ay ? TS_OK : ts_error(TS_ERR_OOM, "gconv bench: out of memory for the reference");
  for (size_t i = 0; s == TS_OK && i < nw; i++) aw[i] = fabsf(d->w[i]);
  for (size_t i = 0; s == TS_OK && i < nx; i++) ax[i] = fabsf(d->x[i]);
  if (s == TS_OK) s = ts_gconv_reference(l, &ly->conn, d->w, d->x, d->ref);
  if (s == TS_OK) s = ts_gconv_reference(l, &ly->conn, aw, ax, ay);
  const double L = (double)l->cin * l->ksize * l->ksize;
  for (size_t i = 0; s == TS_OK && i < d->ny; i++) d->bound[i] = (L + 2) * ldexp(1, -24) * ay[i] * 1.0001 + 1e-30;
  ts_free(aw), ts_free(ax), ts_free(ay);
  return s;
}

static ts_status run_layer(const gcli_args *a, ts_context *ctx, const gcli_cost *c, const gcli_layer *ly, int index,
                           lrow *r) {
  for (int m = 0; m < NM; m++) r->ms[m] = r->err[m] = NAN, r->ok[m] = true;
  const ts_gconv_layer *l = &ly->l;
  int ho, wo;
  ts_gconv_layer_out(l, &ho, &wo);
  data d = {l, NULL, NULL, NULL, NULL, NULL, (size_t)l->n * l->cout * ho * wo};
  const size_t nw = (size_t)l->cout * l->cin * l->ksize * l->ksize, nx = (size_t)l->n * l->cin * l->h * l->w;
  d.w = ts_malloc(nw * sizeof(float)), d.x = ts_malloc(nx * sizeof(float)), d.y = ts_malloc(d.ny * sizeof(float));
  if (!a->no_check) d.ref = ts_malloc(d.ny * sizeof(float)), d.bound = ts_malloc(d.ny * sizeof(double));
  ts_status s = d.w && d.x && d.y && (a->no_check || (d.ref && d.bound)) ? TS_OK : ts_error(TS_ERR_OOM, "gconv bench: out of memory");
  ts_rng g;
  ts_rng_seed(&g, 1000 + (uint64_t)index);
  for (size_t i = 0; s == TS_OK && i < nw; i++) d.w[i] = (float)ts_rng_uniform(&g) * 2 - 1;
  for (size_t i = 0; s == TS_OK && i < nx; i++) d.x[i] = (float)ts_rng_uniform(&g) * 2 - 1;
  if (s == TS_OK && ly->w) memcpy(d.w, ly->w, nw * sizeof(float)); /* --weights */
  if (s == TS_OK && d.ref) s = reference(ly, &d);
  r->flops = ts_gconv_layer_flops(l, ly->conn.nnz);
  ts_gconv_plan p;
  memset(&p, 0, sizeof p);
  const double t0 = ts_now();
  if (s == TS_OK) s = gcli_plan(a, ly, c, &p, &r->cached);
  r->plan_ms = r->cached ? p.plan_ms : (ts_now() - t0) * 1e3;
  if (s == TS_OK) {
    r->method = p.method, r->nparts = p.nparts, r->pred_ms = p.pred_ms, r->none_nparts = p.none_nparts;
    r->none_won = p.method == TS_REORDER_NONE;
    int64_t u = 0;
    for (int32_t i = 0; i < p.nparts; i++) u += p.parts[i].nunion;
    r->mean_union = (double)u / p.nparts;
    r->pred_none_ms = p.best_none >= 0 ? p.cand[p.best_none].pred_ms : NAN;
    s = time_parts(a, ctx, &d, ly, p.parts, p.nparts, r, M_OURS);
  }
  if (s == TS_OK && p.none_nparts) s = time_parts(a, ctx, &d, ly, p.none_parts, p.none_nparts, r, M_NOREORDER);
  else if (s == TS_OK && r->none_won)
    r->ms[M_NOREORDER] = r->ms[M_OURS], r->err[M_NOREORDER] = r->err[M_OURS], r->ok[M_NOREORDER] = r->ok[M_OURS];
  for (int k = 0; s == TS_OK && k < TS_GCONV_BASE_COUNT; k++) {
    ts_gconv_base *b = NULL;
    ts_status bs = ts_gconv_base_create(&b, ctx, (ts_gconv_base_kind)k, l, &ly->conn, d.w, ly->groups);
    if (bs == TS_OK) bs = measure(a, &d, NULL, b, r, M_BASE0 + k);
    if (bs != TS_OK) snprintf(r->why[M_BASE0 + k], sizeof r->why[0], "%s", ts_last_error()), r->ms[M_BASE0 + k] = NAN;
    if (bs == TS_ERR_OOM) s = bs;
    ts_gconv_base_destroy(b);
  }
  ts_gconv_plan_free(&p);
  ts_free(d.w), ts_free(d.x), ts_free(d.y), ts_free(d.ref), ts_free(d.bound);
  return s;
}

/* ---- torch and totals ---------------------------------------------------------------------------- */

static ts_status read_torch(report *R, const char *path, int threads, int batch) {
  bench_torch t;
  ts_status s = bench_torch_open(&t, GCLI_CMD, path, threads);
  const cJSON *bt = cJSON_GetObjectItemCaseSensitive(t.root, "batch"), *it;
  snprintf(R->torch_version, sizeof R->torch_version, "%s", t.version);
  R->torch_threads = t.threads;
  if (s == TS_OK && cJSON_IsNumber(bt) && bt->valueint != batch)
    s = ts_error(TS_ERR_INVALID_ARG, "%s was measured at batch %d, this run is batch %d", path, bt->valueint, batch);
  const cJSON *list = s == TS_OK ? t.layers : NULL;
  cJSON_ArrayForEach(it, list) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
    if (!cJSON_IsString(nm)) {
      s = ts_error(TS_ERR_FORMAT, "%s: every layer needs a \"name\"", path);
      break;
    }
    for (int i = 0; i < R->n; i++) {
      if (strcmp(R->L[i].name, nm->valuestring) != 0) continue;
      double cin, cout, h;
      if (ts__json_get_number(it, "cin", &cin) != TS_OK || ts__json_get_number(it, "cout", &cout) != TS_OK ||
          ts__json_get_number(it, "h", &h) != TS_OK || cin != R->L[i].l.cin || cout != R->L[i].l.cout || h != R->L[i].l.h) {
        s = ts_error(TS_ERR_FORMAT, "%s: layer %s has another shape than this run's", path, nm->valuestring);
        break;
      }
      const char *keys[2][2] = {{"dense_ms", "dense_ok"}, {"grouped_ms", "grouped_ok"}};
      for (int q = 0; q < 2; q++) {
        double ms;
        bool ok = true;
        lrow *r = &R->rows[i];
        if (ts__json_get_number(it, keys[q][0], &ms) == TS_OK && ms > 0) r->ms[M_TORCH_DENSE + q] = ms;
        else snprintf(r->why[M_TORCH_DENSE + q], sizeof r->why[0], "no %s in %s", keys[q][0], path);
        if (ts__json_get_bool(it, keys[q][1], &ok) == TS_OK) r->ok[M_TORCH_DENSE + q] = ok;
      }
    }
  }
  bench_torch_close(&t);
  return s;
}

static double nanmin(double a, double b) { return isnan(a) ? b : isnan(b) ? a : a < b ? a : b; }

static void totals(report *R) {
  for (int m = 0; m < NM; m++) R->total[m] = R->total_learned[m] = 0;
  for (int i = 0; i < R->n; i++) {
    lrow *r = &R->rows[i];
    r->ms[M_TORCH] = nanmin(r->ms[M_TORCH_DENSE], r->ms[M_TORCH_GROUPED]);
    r->ms[M_BEST_BASE] = NAN;
    for (int k = M_BASE0; k < M_TORCH_DENSE; k++) r->ms[M_BEST_BASE] = nanmin(r->ms[M_BEST_BASE], r->ms[k]);
    for (int m = 0; m < NM; m++) {
      R->total[m] += r->ms[m];
      if (R->L[i].learned) R->total_learned[m] += r->ms[m];
    }
  }
}

/* The baseline with the smallest total (NAN totals never win). */
static int best_single(const double *t) {
  int b = -1;
  for (int m = M_BASE0; m < M_TORCH_DENSE; m++)
    if (!isnan(t[m]) && (b < 0 || t[m] < t[b])) b = m;
  return b;
}

/* ---- output ------------------------------------------------------------------------------------ */

/* How many layers each reorder method won (the plan's winning candidate). */
static void reorder_wins(const report *R, int wins[TS_REORDER_METHOD_COUNT]) {
  memset(wins, 0, sizeof(int) * TS_REORDER_METHOD_COUNT);
  for (int i = 0; i < R->n; i++)
    if (R->rows[i].method >= 0 && R->rows[i].method < TS_REORDER_METHOD_COUNT) wins[R->rows[i].method]++;
}

static bool shown(int m) { return m != M_BEST_BASE; }

static void cell(double v) {
  if (isnan(v)) printf(" %8s", "-");
  else printf(" %8.3f", v);
}

static void print_totals(const char *label, const double *t) {
  const int b = best_single(t);
  printf("%s: ours %.3f ms, without reordering %.3f ms (reordering %.2fx)\n", label, t[M_OURS], t[M_NOREORDER],
         bench_ratio(t[M_NOREORDER], t[M_OURS]));
  printf("  vs PyTorch (faster form per layer) %.3f ms -> %.2fx  [dense-masked %.3f, grouped %.3f]\n", t[M_TORCH],
         bench_ratio(t[M_TORCH], t[M_OURS]), t[M_TORCH_DENSE], t[M_TORCH_GROUPED]);
  printf("  vs best other baseline per layer %.3f ms -> %.2fx;  best single baseline %s %.3f ms -> %.2fx\n",
         t[M_BEST_BASE], bench_ratio(t[M_BEST_BASE], t[M_OURS]), b >= 0 ? method_name(b) : "-", b >= 0 ? t[b] : NAN,
         b >= 0 ? bench_ratio(t[b], t[M_OURS]) : NAN);
  printf("  deploy (gather + grouped) %.3f ms -> %.2fx\n", t[M_BASE0 + TS_GCONV_BASE_DEPLOY],
         bench_ratio(t[M_BASE0 + TS_GCONV_BASE_DEPLOY], t[M_OURS]));
}

static void print_text(const report *R, const gcli_args *a, int threads) {
  double fl = 0;
  for (int i = 0; i < R->n; i++) fl += R->rows[i].flops;
  printf("%s: %d layers, batch %ld, connectivity %s", a->model ? a->model : R->L[0].spec, R->n, a->batch,
         a->model ? ts_gconv_connectivity_name(a->conn_opts.mode) : "(file/spec)");
  if (a->model) printf(", condense %d", a->conn_opts.condense);
  printf("; %.3f useful GFLOP; %d threads, kernels %s\n", fl * 1e-9, threads, ts_isa_name(ts_gconv_kernel_isa()));
  if (R->have_mp) printf("peak %.1f GFLOP/s (%s); ", R->peak, R->mp.cpu_model);
  printf("load average %.2f at start, %.2f at end; torch: %s\n", R->load0, R->load1,
         R->torch_version[0] ? R->torch_version : "(no --torch)");
  printf("median ms per call; reorder = the winning candidate; err = max |out - ref| of ours ('!' beyond the bound)\n");
  printf("%-22s %-18s %5s", "layer", "cin>cout hw k", "dens%");
  for (int m = 0; m < NM; m++)
    if (shown(m)) printf(" %8s", method_short(m));
  printf(" %-5s %5s %5s %8s %8s %6s\n", "reord", "parts", "union", "plan ms", "err", "%peak");
  for (int i = 0; i < R->n; i++) {
    const gcli_layer *ly = &R->L[i];
    const lrow *r = &R->rows[i];
    char geo[40];
    snprintf(geo, sizeof geo, "%d>%d %d k%d", ly->l.cin, ly->l.cout, ly->l.h, ly->l.ksize);
    printf("%-22.22s %-18s %5.1f", ly->name, geo, 100.0 * (double)ly->conn.nnz / ((double)ly->l.cin * ly->l.cout));
    for (int m = 0; m < NM; m++)
      if (shown(m)) cell(r->ms[m]);
    bool bad = false;
    for (int m = 0; m < NM; m++) bad |= !r->ok[m];
    const double gf = r->flops / (r->ms[M_OURS] * 1e-3) * 1e-9;
    printf(" %-5s %5d %5.0f %8.1f %7.1e%c %5.1f%%\n", ts_reorder_method_name(r->method), r->nparts, r->mean_union, r->plan_ms,
           r->err[M_OURS], bad ? '!' : ' ', R->peak > 0 ? 100 * gf / R->peak : NAN);
  }
  printf("%-22s %-18s %5s", "total", "", "");
  for (int m = 0; m < NM; m++)
    if (shown(m)) cell(R->total[m]);
  printf("\n\n");
  int wins[TS_REORDER_METHOD_COUNT];
  reorder_wins(R, wins);
  printf("reorder method chosen per layer:");
  for (int m = 0; m < TS_REORDER_METHOD_COUNT; m++)
    if (wins[m]) printf(" %s %d", ts_reorder_method_name((ts_reorder_method)m), wins[m]);
  printf(" (of %d layers)\n", R->n);
  print_totals("all group-convolution layers", R->total);
  int nl = 0;
  for (int i = 0; i < R->n; i++) nl += R->L[i].learned;
  if (nl && nl < R->n) print_totals("learned-connectivity layers only", R->total_learned);
  for (int i = 0; i < R->n; i++)
    for (int m = 0; m < NM; m++)
      if (!R->rows[i].ok[m]) printf("  %s: %s exceeds the error bound (max err %.3g)\n", R->L[i].name, method_name(m), R->rows[i].err[m]);
  for (int i = 0; i < R->n; i++)
    for (int m = M_BASE0; m < M_TORCH_DENSE; m++)
      if (R->rows[i].why[m][0]) printf("  %s: %s did not run: %s\n", R->L[i].name, method_name(m), R->rows[i].why[m]);
}

static cJSON *totals_json(const double *t) {
  cJSON *o = cJSON_CreateObject();
  for (int m = 0; m < NM; m++) bench_json_num(o, method_name(m), t[m]);
  return o;
}

static void speedups_json(cJSON *j, const double *t) {
  const int b = best_single(t);
  bench_json_num(j, "speedup_vs_torch", bench_ratio(t[M_TORCH], t[M_OURS]));
  bench_json_num(j, "speedup_vs_best_baseline", bench_ratio(t[M_BEST_BASE], t[M_OURS]));
  bench_json_num(j, "speedup_vs_best_single_baseline", b >= 0 ? bench_ratio(t[b], t[M_OURS]) : NAN);
  cJSON_AddStringToObject(j, "best_single_baseline", b >= 0 ? method_name(b) : "");
  bench_json_num(j, "speedup_vs_deploy", bench_ratio(t[M_BASE0 + TS_GCONV_BASE_DEPLOY], t[M_OURS]));
  bench_json_num(j, "speedup_reorder", bench_ratio(t[M_NOREORDER], t[M_OURS]));
}

static cJSON *report_json(const report *R, const gcli_args *a, const gcli_cost *c, int threads) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "model", a->model ? a->model : R->L[0].spec);
  cJSON_AddStringToObject(j, "connectivity", a->model ? ts_gconv_connectivity_name(a->conn_opts.mode) : "file");
  cJSON_AddNumberToObject(j, "condense", a->conn_opts.condense);
  cJSON_AddNumberToObject(j, "batch", (double)a->batch);
  cJSON_AddNumberToObject(j, "threads", threads);
  cJSON_AddStringToObject(j, "kernels", ts_isa_name(ts_gconv_kernel_isa()));
  bench_json_num(j, "peak_gflops", R->have_mp ? R->peak : NAN);
  cJSON_AddNumberToObject(j, "load_start", R->load0);
  cJSON_AddNumberToObject(j, "load_end", R->load1);
  cJSON_AddStringToObject(j, "torch_version", R->torch_version);
  gcli_cost_json(j, a, c);
  cJSON *arr = cJSON_AddArrayToObject(j, "layers");
  for (int i = 0; i < R->n; i++) {
    const gcli_layer *ly = &R->L[i];
    const lrow *r = &R->rows[i];
    cJSON *o = cJSON_CreateObject(), *ms = cJSON_CreateObject(), *err = cJSON_CreateObject(), *why = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "name", ly->name);
    cJSON_AddStringToObject(o, "spec", ly->spec);
    const int f[] = {ly->l.n, ly->l.cin, ly->l.cout, ly->l.h, ly->l.w, ly->l.ksize, ly->l.stride, ly->groups};
    const char *k[] = {"n", "cin", "cout", "h", "w", "ksize", "stride", "groups"};
    for (int q = 0; q < 8; q++) cJSON_AddNumberToObject(o, k[q], f[q]);
    cJSON_AddBoolToObject(o, "learned", ly->learned);
    cJSON_AddNumberToObject(o, "nnz", (double)ly->conn.nnz);
    cJSON_AddNumberToObject(o, "flops", r->flops);
    cJSON_AddStringToObject(o, "reorder", ts_reorder_method_name(r->method));
    cJSON_AddNumberToObject(o, "nparts", r->nparts);
    cJSON_AddNumberToObject(o, "mean_union", r->mean_union);
    cJSON_AddNumberToObject(o, "plan_ms", r->plan_ms);
    cJSON_AddBoolToObject(o, "plan_cached", r->cached);
    bench_json_num(o, "pred_ms", r->pred_ms);
    bench_json_num(o, "pred_none_ms", r->pred_none_ms);
    for (int m = 0; m < NM; m++) {
      bench_json_num(ms, method_name(m), r->ms[m]);
      if (!isnan(r->err[m])) cJSON_AddNumberToObject(err, method_name(m), r->err[m]);
      if (r->why[m][0]) cJSON_AddStringToObject(why, method_name(m), r->why[m]);
    }
    cJSON_AddItemToObject(o, "ms", ms);
    cJSON_AddItemToObject(o, "max_err", err);
    bool ok = true;
    for (int m = 0; m < NM; m++) ok &= r->ok[m];
    cJSON_AddBoolToObject(o, "within_tolerance", ok);
    if (why->child) cJSON_AddItemToObject(o, "not_run", why);
    else cJSON_Delete(why);
    bench_json_num(o, "gflops", r->flops / (r->ms[M_OURS] * 1e-3) * 1e-9);
  }
  int wins[TS_REORDER_METHOD_COUNT];
  reorder_wins(R, wins);
  cJSON *rw = cJSON_AddObjectToObject(j, "reorder_wins");
  for (int m = 0; m < TS_REORDER_METHOD_COUNT; m++)
    if (wins[m]) cJSON_AddNumberToObject(rw, ts_reorder_method_name((ts_reorder_method)m), wins[m]);
  cJSON_AddItemToObject(j, "total_ms", totals_json(R->total));
  speedups_json(j, R->total);
  cJSON *lj = cJSON_CreateObject();
  cJSON_AddItemToObject(lj, "total_ms", totals_json(R->total_learned));
  speedups_json(lj, R->total_learned);
  cJSON_AddItemToObject(j, "learned_only", lj);
  return j;
}

int gcli_bench(const gcli_args *a) {
  report R;
  memset(&R, 0, sizeof R);
  int r = gcli_layers(a, &R.L, &R.n);
  if (r != CLI_OK) return r;
  gcli_cost c;
  if ((r = gcli_cost_setup(a, &c)) != CLI_OK) return gcli_layers_free(R.L, R.n), r;
  ts_context *ctx = NULL;
  ts_status s = ts_context_create(&ctx, a->co.threads);
  const int threads = ts_context_threads(ctx);
  R.rows = calloc((size_t)R.n, sizeof *R.rows);
  if (s == TS_OK && !R.rows) s = ts_error(TS_ERR_OOM, "gconv bench: out of memory");
  R.have_mp = s == TS_OK && ts_hwinfo_get(ctx, &R.mp) == TS_OK; /* the profile for this run's threads */
  R.peak = R.have_mp ? R.mp.peak_gflops_fp32 : NAN;
  R.load0 = ts_hwinfo_load_now();
  ts_progress pr;
  ts_progress_begin(&pr, "gconv bench", R.n);
  for (int i = 0; s == TS_OK && i < R.n; i++) {
    s = run_layer(a, ctx, &c, &R.L[i], (int)a->first + i, &R.rows[i]);
    ts_progress_update(&pr, i + 1);
  }
  ts_progress_end(&pr);
  R.load1 = ts_hwinfo_load_now();
  if (s == TS_OK && a->torch) s = read_torch(&R, a->torch, threads, (int)a->batch);
  if (s == TS_OK) {
    totals(&R);
    if (a->json_out) {
      cJSON *j = report_json(&R, a, &c, threads);
      s = ts__json_write_file(a->json_out, j);
      cJSON_Delete(j);
    }
    if (s == TS_OK && a->co.json) cli_print_json(report_json(&R, a, &c, threads));
    else if (s == TS_OK) print_text(&R, a, threads);
  }
  bool all_ok = true;
  for (int i = 0; s == TS_OK && i < R.n; i++)
    for (int m = 0; m < NM; m++) all_ok &= R.rows[i].ok[m];
  ts_context_destroy(ctx);
  ts_gconv_cost_destroy(c.m);
  free(R.rows);
  gcli_layers_free(R.L, R.n);
  if (s != TS_OK) return cli_fail(GCLI_CMD, s);
  if (!all_ok) {
    fprintf(stderr, "tessera gconv: an output exceeds the error bound (see the report)\n");
    return CLI_FAIL;
  }
  return CLI_OK;
}
