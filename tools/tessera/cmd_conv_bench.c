/* tessera conv bench: every tessera algorithm and the baselines on each distinct convolution
 * shape of a model (one ts_conv_trial per shape: same data, round-robin rounds, medians), the
 * per-layer selection made from those measurements (they replace the profile's entries), network
 * totals, speedups against oneDNN's best and PyTorch, and the end-to-end forward with the choice.
 *
 * Totals are sums over every convolution layer of its shape's median. A single algorithm's total
 * is the network as `--algo A` runs it: A where it applies (and was measured), the selection's
 * choice elsewhere ("layers_covered" says where A ran); oneDNN's Winograd falls back to oneDNN's
 * auto where oneDNN has no Winograd implementation. "oneDNN's best" is the fastest of its three
 * network totals; the stricter per-layer minimum over oneDNN's algorithms is reported too. */
#include <dnnl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "cmd_conv.h"
#include "core/artifact_internal.h"
#include "tessera/measure.h"
#include "tessera/hwinfo.h"
#include "tessera/io.h"

enum { NA = TS_CONV_ALGO_COUNT, NB = TS_CONV_BASE_COUNT, COL_TORCH = NA + NB, NCOL = NA + NB + 1 };

typedef struct shape {
  ts_conv_desc d;
  char key[96];
  int first, count; /* first layer with this shape, layers with it */
  double ms[NCOL], diff[NCOL];
  bool pruned[NCOL];
  char impl[NB][96];
  char why[NCOL][200]; /* why a column did not run */
} shape;

typedef struct report {
  conv_model m;
  shape *sh;
  int nsh, *layer_shape; /* layer -> shape */
  ts_conv_algo *chosen;  /* per layer, from the net */
  const char **why;
  double total[NCOL], total_auto, total_chosen, onednn_best, onednn_layer_best;
  int covered[NCOL], onednn_best_col;
  double e2e_ms, e2e_min_ms, e2e_conv_ms;
  /* The target "Winograd's 3x3 layers show effective GFLOP/s above the direct algorithm's measured
   * best": over the shapes the selection gave a Winograd variant, the lowest effective GFLOP/s,
   * and the highest GFLOP/s the direct algorithm reached on any shape of the network. */
  int wino_shapes;
  double wino_min_gflops, direct_best_gflops;
  char torch_version[64];
  double peak, load0, load1;
  ts_machine_profile mp;
  bool have_mp;
} report;

static const char *col_name(int c) {
  return c < NA ? ts_conv_algo_name((ts_conv_algo)c) : c < NA + NB ? ts_conv_baseline_name((ts_conv_baseline_kind)(c - NA)) : "torch";
}

static const char *col_short(int c) {
  static const char *const s[NCOL] = {"ref", "direct", "im2col", "kn2row", "implicit", "wino_f2", "wino_f4", "fft",
                                      "dw", "dnn_dir", "dnn_wino", "dnn_auto", "oblas", "torch"};
  return s[c];
}

/* The per-layer selection's time on a shape: the fastest measured tessera algorithm. */
static double auto_ms(const shape *s) {
  double best = NAN;
  for (int c = 0; c < NA; c++)
    if (!isnan(s->ms[c]) && (isnan(best) || s->ms[c] < best)) best = s->ms[c];
  return best;
}

/* ---- measurement ---------------------------------------------------------------------------- */

static ts_status group_shapes(report *R) {
  const conv_model *m = &R->m;
  R->sh = calloc((size_t)m->nlayers, sizeof *R->sh);
  R->layer_shape = calloc((size_t)m->nlayers, sizeof(int));
  R->chosen = calloc((size_t)m->nlayers, sizeof *R->chosen);
  R->why = calloc((size_t)m->nlayers, sizeof *R->why);
  if (!R->sh || !R->layer_shape || !R->chosen || !R->why) return ts_error(TS_ERR_OOM, "conv bench: out of memory");
  for (int i = 0; i < m->nlayers; i++) {
    char key[96];
    ts_conv_desc_key(&m->layers[i].desc, key, sizeof key);
    int s = 0;
    while (s < R->nsh && strcmp(R->sh[s].key, key)) s++;
    if (s == R->nsh) {
      shape *n = &R->sh[R->nsh++];
      n->d = m->layers[i].desc, n->first = i;
      snprintf(n->key, sizeof n->key, "%s", key);
      for (int c = 0; c < NCOL; c++) n->ms[c] = n->diff[c] = NAN;
    }
    R->sh[s].count++;
    R->layer_shape[i] = s;
  }
  return TS_OK;
}

static ts_status measure_shape(shape *s, ts_context *ctx, const conv_args *a, const ts_conv_time_opts *to,
                               ts_conv_profile *prof) {
  ts_conv_trial *t = NULL;
  TS_TRY(ts_conv_trial_create(&t, ctx, &s->d, 0, to));
  for (int b = 0; !a->no_baselines && b < NB; b++) ts_conv_trial_add_baseline(t, (ts_conv_baseline_kind)b);
  ts_status st = ts_conv_trial_run(t);
  for (int i = 0; st == TS_OK && i < ts_conv_trial_count(t); i++) {
    ts_conv_trial_info in;
    ts_conv_trial_info_at(t, i, &in);
    const int c = in.baseline ? NA + (int)in.base : (int)in.algo;
    s->ms[c] = in.ran ? in.ms : NAN, s->pruned[c] = in.pruned, s->diff[c] = in.rel_diff;
    snprintf(s->why[c], sizeof s->why[c], "%s", in.why);
    if (in.baseline) snprintf(s->impl[in.base], sizeof s->impl[in.base], "%s", in.impl);
  }
  if (st == TS_OK) {
    ts_conv_profile_entry e;
    ts_conv_trial_entry(t, &e);
    st = ts_conv_profile_put(prof, &s->d, &e);
  }
  ts_conv_trial_destroy(t);
  return st;
}

/* --torch FILE: {"torch": version, "threads": n, "layers": [{"key": ..., "ms": ...}, ...]}. */
static ts_status read_torch(report *R, const char *path, int threads) {
  bench_torch t;
  ts_status s = bench_torch_open(&t, CONV_CMD, path, threads);
  snprintf(R->torch_version, sizeof R->torch_version, "%s", t.version);
  const cJSON *it, *list = s == TS_OK ? t.layers : NULL;
  cJSON_ArrayForEach(it, list) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(it, "key"), *ms = cJSON_GetObjectItemCaseSensitive(it, "ms");
    if (!cJSON_IsString(k) || !cJSON_IsNumber(ms) || !(ms->valuedouble > 0)) {
      s = ts_error(TS_ERR_FORMAT, "%s: every layer needs a \"key\" string and a positive \"ms\"", path);
      break;
    }
    for (int i = 0; i < R->nsh; i++)
      if (!strcmp(R->sh[i].key, k->valuestring)) R->sh[i].ms[COL_TORCH] = ms->valuedouble;
  }
  for (int i = 0; s == TS_OK && i < R->nsh; i++)
    if (isnan(R->sh[i].ms[COL_TORCH])) snprintf(R->sh[i].why[COL_TORCH], sizeof R->sh[i].why[0], "not in %s", path);
  bench_torch_close(&t);
  return s;
}

static void totals(report *R) {
  const conv_model *m = &R->m;
  R->total_auto = R->total_chosen = R->onednn_layer_best = 0;
  for (int c = 0; c < NCOL; c++) R->total[c] = 0, R->covered[c] = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const shape *s = &R->sh[R->layer_shape[i]];
    const double am = auto_ms(s);
    R->total_auto += am;
    R->total_chosen += s->ms[R->chosen[i]];
    double lb = NAN;
    for (int c = 0; c < NCOL; c++) {
      double v = s->ms[c];
      if (!isnan(v)) R->covered[c]++;
      else if (c < NA) v = am;
      else if (c == NA + TS_CONV_BASE_ONEDNN_WINOGRAD) v = s->ms[NA + TS_CONV_BASE_ONEDNN_AUTO];
      R->total[c] += v; /* NAN when a layer has no figure and no fallback */
      if (c >= NA && c < NA + TS_CONV_BASE_OPENBLAS && !isnan(s->ms[c]) && (isnan(lb) || s->ms[c] < lb)) lb = s->ms[c];
    }
    R->onednn_layer_best += lb;
  }
  R->onednn_best = NAN, R->onednn_best_col = -1;
  for (int c = NA; c < NA + TS_CONV_BASE_OPENBLAS; c++)
    if (!isnan(R->total[c]) && (isnan(R->onednn_best) || R->total[c] < R->onednn_best))
      R->onednn_best = R->total[c], R->onednn_best_col = c;
}

static void winograd_check(report *R) {
  R->wino_shapes = 0, R->wino_min_gflops = NAN, R->direct_best_gflops = NAN;
  for (int k = 0; k < R->nsh; k++) {
    const shape *s = &R->sh[k];
    const double f = ts_conv_flops(&s->d) * 1e-6; /* GFLOP/s = MFLOP / ms */
    const double dg = f / s->ms[TS_CONV_DIRECT];
    if (!isnan(dg) && (isnan(R->direct_best_gflops) || dg > R->direct_best_gflops)) R->direct_best_gflops = dg;
    const ts_conv_algo ch = R->chosen[s->first];
    if (ch != TS_CONV_WINOGRAD_F2 && ch != TS_CONV_WINOGRAD_F4) continue;
    R->wino_shapes++;
    if (isnan(R->wino_min_gflops) || f / s->ms[ch] < R->wino_min_gflops) R->wino_min_gflops = f / s->ms[ch];
  }
}

static ts_status end_to_end(report *R, ts_cnn_net *net, int repeats) {
  const size_t ni = ts_cnn_net_input_numel(net), no = ts_cnn_net_output_numel(net);
  float *x = ts_malloc(ni * sizeof(float)), *y = ts_malloc(no * sizeof(float));
  double *tt = malloc((size_t)repeats * sizeof(double)), *tc = malloc((size_t)repeats * sizeof(double));
  ts_status s = x && y && tt && tc ? TS_OK : ts_error(TS_ERR_OOM, "conv bench: out of memory for the images");
  ts_rng r;
  ts_rng_seed(&r, 3);
  for (size_t i = 0; s == TS_OK && i < ni; i++) x[i] = (float)ts_rng_uniform(&r);
  if (s == TS_OK) s = ts_cnn_net_forward(net, x, y);
  for (int k = 0; s == TS_OK && k < repeats; k++) {
    s = ts_cnn_net_forward(net, x, y);
    ts_cnn_timing t;
    ts_cnn_net_last_timing(net, &t);
    tt[k] = t.total_s * 1e3, tc[k] = t.conv_s * 1e3;
  }
  if (s == TS_OK) {
    qsort(tt, (size_t)repeats, sizeof *tt, ts_cmp_double), qsort(tc, (size_t)repeats, sizeof *tc, ts_cmp_double);
    R->e2e_ms = tt[repeats / 2], R->e2e_min_ms = tt[0], R->e2e_conv_ms = tc[repeats / 2];
  }
  ts_free(x), ts_free(y), free(tt), free(tc);
  return s;
}

/* ---- report --------------------------------------------------------------------------------- */

static bool col_shown(const report *R, int c) { return c != TS_CONV_REFERENCE && R->covered[c] > 0; }

static void cell(double v, bool pruned) {
  if (isnan(v)) printf(" %9s", "-");
  else printf(" %8.3f%c", v, pruned ? '~' : ' ');
}

static void print_text(const report *R, const conv_args *a, int threads) {
  const conv_model *m = &R->m;
  double gf = 0;
  for (int i = 0; i < m->nlayers; i++) gf += m->layers[i].flops;
  printf("%s batch %ld: %d convolution layers (%d distinct shapes), %.2f GFLOP; %d threads, kernels %s, oneDNN %d.%d\n",
         a->model, a->batch, m->nlayers, R->nsh, gf * 1e-9, threads, ts_isa_name(ts_isa_active()), dnnl_version()->major,
         dnnl_version()->minor);
  if (R->have_mp)
    printf("peak %.1f GFLOP/s (%s, measured %s); load average %.2f at start, %.2f at end\n", R->peak, R->mp.cpu_model,
           R->mp.date, R->load0, R->load1);
  printf("median ms per call ('~': its fastest warm-up call, pruned as > 3x the fastest; '-': does not apply);\n"
         "eff GF/s = 2*N*K*P*Q*(C/g)*R*S / time for every algorithm: Winograd and FFT do fewer multiplications,\n"
         "so their effective rate can pass 100%% of the FMA peak\n");
  printf("%-34s %-20s", "layer (x count)", "C>K HxW RxS/stride");
  for (int c = 0; c < NCOL; c++)
    if (col_shown(R, c)) printf(" %9s", col_short(c));
  printf(" %-11s %8s %6s\n", "chosen", "eff GF/s", "%peak");
  for (int k = 0; k < R->nsh; k++) {
    const shape *s = &R->sh[k];
    const ts_conv_desc *d = &s->d;
    char name[64], geo[48];
    snprintf(name, sizeof name, "%.28s x%d", m->layers[s->first].name, s->count);
    snprintf(geo, sizeof geo, "%d>%d %dx%d %dx%d/%d", d->c, d->k, d->h, d->w, d->r, d->s, d->stride_h);
    printf("%-34s %-20s", name, geo);
    for (int c = 0; c < NCOL; c++)
      if (col_shown(R, c)) cell(s->ms[c], s->pruned[c]);
    const ts_conv_algo ch = R->chosen[s->first];
    const double gfs = ts_conv_flops(d) / (s->ms[ch] * 1e-3) * 1e-9;
    printf(" %-11s %8.1f %5.1f%%\n", ts_conv_algo_name(ch), gfs, R->peak > 0 ? 100 * gfs / R->peak : NAN);
  }
  printf("%-34s %-20s", "total (ms)", "");
  for (int c = 0; c < NCOL; c++)
    if (col_shown(R, c)) cell(R->total[c], false);
  printf(" %-11s %8.1f %5.1f%%\n", "chosen", gf / (R->total_chosen * 1e-3) * 1e-9,
         R->peak > 0 ? 100 * gf / (R->total_chosen * 1e-3) * 1e-9 / R->peak : NAN);
  printf("\nconvolution time, whole network: auto (per-layer selection) %.2f ms", R->total_auto);
  if (R->total_chosen != R->total_auto) printf(", as configured %.2f ms", R->total_chosen);
  printf("\n  oneDNN: direct %.2f, winograd %.2f (auto where unimplemented), auto %.2f ms; best %s %.2f ms -> "
         "speedup %.2fx (per-layer minimum over oneDNN %.2f ms -> %.2fx)\n",
         R->total[NA], R->total[NA + 1], R->total[NA + 2], R->onednn_best_col >= 0 ? col_name(R->onednn_best_col) : "-",
         R->onednn_best, bench_ratio(R->onednn_best, R->total_auto), R->onednn_layer_best,
         bench_ratio(R->onednn_layer_best, R->total_auto));
  printf("  OpenBLAS im2col + sgemm %.2f ms -> %.2fx;  PyTorch %s %.2f ms -> %.2fx\n", R->total[NA + TS_CONV_BASE_OPENBLAS],
         bench_ratio(R->total[NA + TS_CONV_BASE_OPENBLAS], R->total_auto), R->torch_version[0] ? R->torch_version : "(no --torch)",
         R->total[COL_TORCH], bench_ratio(R->total[COL_TORCH], R->total_auto));
  if (R->wino_shapes)
    printf("  Winograd on the %d shapes it was chosen for: at least %.1f effective GFLOP/s; direct's best on any\n"
           "  shape %.1f GFLOP/s -> %s\n",
           R->wino_shapes, R->wino_min_gflops, R->direct_best_gflops,
           R->wino_min_gflops > R->direct_best_gflops ? "above" : "NOT above");
  if (R->e2e_ms > 0)
    printf("end to end forward (as configured): %.2f ms median (min %.2f), of which convolutions %.2f ms\n", R->e2e_ms,
           R->e2e_min_ms, R->e2e_conv_ms);
  printf("\nselection (why):\n");
  for (int k = 0; k < R->nsh; k++) {
    const shape *s = &R->sh[k];
    printf("  %-34s %-11s %s\n", m->layers[s->first].name, ts_conv_algo_name(R->chosen[s->first]), R->why[s->first]);
  }
}

static cJSON *json_report(const report *R, const conv_args *a, int threads) {
  const conv_model *m = &R->m;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "model", a->model);
  cJSON_AddNumberToObject(j, "batch", (double)a->batch);
  cJSON_AddNumberToObject(j, "threads", threads);
  cJSON_AddStringToObject(j, "kernels", ts_isa_name(ts_isa_active()));
  if (R->have_mp) cJSON_AddItemToObject(j, "machine", ts__hwinfo_to_cjson(&R->mp));
  bench_json_num(j, "peak_gflops", R->peak);
  cJSON_AddNumberToObject(j, "loadavg_start", R->load0);
  cJSON_AddNumberToObject(j, "loadavg_end", R->load1);
  cJSON_AddStringToObject(j, "gflops_are", "effective: 2*N*K*P*Q*(C/g)*R*S / time (Winograd, FFT can pass the peak)");
  if (R->torch_version[0]) cJSON_AddStringToObject(j, "torch_version", R->torch_version);
  cJSON *layers = cJSON_AddArrayToObject(j, "layers");
  for (int i = 0; i < m->nlayers; i++) {
    const shape *s = &R->sh[R->layer_shape[i]];
    cJSON *l = cJSON_CreateObject(), *ms = cJSON_CreateObject(), *nr = cJSON_CreateObject();
    cJSON_AddStringToObject(l, "name", m->layers[i].name);
    cJSON_AddStringToObject(l, "key", s->key);
    cJSON_AddBoolToObject(l, "relu", m->layers[i].desc.relu);
    cJSON_AddNumberToObject(l, "gflop", m->layers[i].flops * 1e-9);
    cJSON_AddStringToObject(l, "chosen", ts_conv_algo_name(R->chosen[i]));
    cJSON_AddStringToObject(l, "why", R->why[i]);
    const double t = s->ms[R->chosen[i]], gfs = m->layers[i].flops / (t * 1e-3) * 1e-9;
    bench_json_num(l, "chosen_ms", t);
    bench_json_num(l, "gflops", gfs);
    bench_json_num(l, "pct_peak", R->peak > 0 ? 100 * gfs / R->peak : NAN);
    for (int c = 1; c < NCOL; c++) {
      if (!isnan(s->ms[c])) cJSON_AddNumberToObject(ms, col_name(c), s->ms[c]);
      else if (s->why[c][0]) cJSON_AddStringToObject(nr, col_name(c), s->why[c]);
    }
    cJSON_AddItemToObject(l, "ms", ms);
    cJSON_AddItemToObject(l, "not_run", nr);
    if (i == s->first) {
      cJSON *pr = cJSON_AddArrayToObject(l, "pruned"), *df = cJSON_AddObjectToObject(l, "rel_diff");
      cJSON *im = cJSON_AddObjectToObject(l, "impl");
      for (int c = 1; c < NCOL; c++) {
        if (s->pruned[c]) cJSON_AddItemToArray(pr, cJSON_CreateString(col_name(c)));
        if (!isnan(s->diff[c])) cJSON_AddNumberToObject(df, col_name(c), s->diff[c]);
        if (c >= NA && c < NA + NB && s->impl[c - NA][0]) cJSON_AddStringToObject(im, col_name(c), s->impl[c - NA]);
      }
    }
    cJSON_AddItemToArray(layers, l);
  }
  cJSON *tot = cJSON_AddObjectToObject(j, "total_ms"), *cov = cJSON_AddObjectToObject(j, "layers_covered");
  bench_json_num(tot, "auto", R->total_auto);
  bench_json_num(tot, "chosen", R->total_chosen);
  for (int c = 1; c < NCOL; c++) {
    bench_json_num(tot, col_name(c), R->total[c]);
    cJSON_AddNumberToObject(cov, col_name(c), R->covered[c]);
  }
  bench_json_num(tot, "onednn", R->onednn_best);
  bench_json_num(tot, "onednn_per_layer_min", R->onednn_layer_best);
  cJSON_AddStringToObject(j, "onednn_best", R->onednn_best_col >= 0 ? col_name(R->onednn_best_col) : "");
  bench_json_num(j, "speedup_vs_onednn", bench_ratio(R->onednn_best, R->total_auto));
  bench_json_num(j, "speedup_vs_onednn_per_layer_min", bench_ratio(R->onednn_layer_best, R->total_auto));
  bench_json_num(j, "speedup_vs_torch", bench_ratio(R->total[COL_TORCH], R->total_auto));
  bench_json_num(j, "speedup_vs_openblas", bench_ratio(R->total[NA + TS_CONV_BASE_OPENBLAS], R->total_auto));
  cJSON *wc = cJSON_AddObjectToObject(j, "winograd_vs_direct");
  cJSON_AddNumberToObject(wc, "shapes", R->wino_shapes);
  bench_json_num(wc, "winograd_min_gflops", R->wino_min_gflops);
  bench_json_num(wc, "direct_best_gflops", R->direct_best_gflops);
  if (R->wino_shapes) cJSON_AddBoolToObject(wc, "min_above_direct_best", R->wino_min_gflops > R->direct_best_gflops);
  cJSON *e = cJSON_AddObjectToObject(j, "e2e");
  bench_json_num(e, "forward_ms", R->e2e_ms > 0 ? R->e2e_ms : NAN);
  bench_json_num(e, "min_ms", R->e2e_ms > 0 ? R->e2e_min_ms : NAN);
  bench_json_num(e, "conv_ms", R->e2e_ms > 0 ? R->e2e_conv_ms : NAN);
  cJSON_AddNumberToObject(e, "repeats", (double)a->e2e_repeats);
  return j;
}

static void report_free(report *R) {
  conv_model_free(&R->m);
  free(R->sh), free(R->layer_shape), free(R->chosen), free(R->why);
}

int conv_bench(const conv_args *a, ts_context *ctx) {
  report R;
  memset(&R, 0, sizeof R);
  const int threads = ts_context_threads(ctx);
  ts_status s = conv_model_load(a, true, &R.m);
  if (s == TS_OK) s = group_shapes(&R);
  ts_conv_profile *prof = NULL;
  if (s == TS_OK) s = ts_conv_profile_open(&prof, ctx, NULL, NULL);
  if (s == TS_OK && ts_hwinfo_get(ctx, &R.mp) == TS_OK) {
    R.have_mp = true;
    R.peak = threads == R.mp.threads ? R.mp.peak_gflops_fp32 : R.mp.peak_gflops_fp32_1t * threads;
  }
  R.load0 = ts_hwinfo_load_now();
  ts_cnn_plan_opts po = conv_plan_opts(a);
  if (s == TS_OK) {
    ts_progress pg;
    ts_progress_begin(&pg, "conv bench", R.nsh);
    for (int k = 0; s == TS_OK && k < R.nsh; k++) {
      s = measure_shape(&R.sh[k], ctx, a, &po.time, prof);
      ts_progress_update(&pg, k + 1);
    }
    ts_progress_end(&pg);
  }
  if (s == TS_OK && ts_conv_profile_save(prof) != TS_OK)
    fprintf(stderr, "tessera conv: could not save the profile: %s\n", ts_last_error());
  if (s == TS_OK && a->torch) s = read_torch(&R, a->torch, threads);
  ts_cnn_net *net = NULL;
  po.profile = prof, po.measure_missing = false;
  if (s == TS_OK) s = ts_cnn_net_create(&net, ctx, R.m.g, &po);
  for (int i = 0; s == TS_OK && i < R.m.nlayers; i++) {
    ts_cnn_conv_info ci;
    s = ts_cnn_net_conv_info(net, i, &ci);
    R.chosen[i] = ci.algo, R.why[i] = ci.why;
  }
  if (s == TS_OK && !a->no_e2e) s = end_to_end(&R, net, (int)a->e2e_repeats);
  R.load1 = ts_hwinfo_load_now();
  int rc = CLI_OK;
  if (s != TS_OK) {
    rc = cli_fail(CONV_CMD, s);
  } else {
    totals(&R);
    winograd_check(&R);
    if (a->co.json) cli_print_json(json_report(&R, a, threads));
    else print_text(&R, a, threads);
  }
  ts_cnn_net_destroy(net);
  ts_conv_profile_destroy(prof);
  report_free(&R);
  return rc;
}
