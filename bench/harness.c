/* Benchmark harness: ts_bench_run over the core's timing engine (tessera/measure.h), the options
 * every program takes, and reports as % of the machine profile's peak. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ts_bench_opts ts_bench_opts_default(void) {
  ts_bench_opts o = {.warmup = 2, .repeats = 10, .min_time_s = 0.2, .flush_cache = false};
  return o;
}

/* fn is void: the engine's candidates return a status */
typedef struct bench_call {
  void (*fn)(void *arg);
  void *arg;
} bench_call;

static ts_status call_void(void *a) {
  const bench_call *c = a;
  c->fn(c->arg);
  return TS_OK;
}

ts_status ts_bench_run(const ts_bench_opts *o, void (*fn)(void *arg), void *arg, ts_bench_result *r) {
  const ts_bench_opts d = ts_bench_opts_default();
  if (!o) o = &d;
  if (!fn || !r) return ts_error(TS_ERR_INVALID_ARG, "ts_bench_run: fn and result must not be NULL");
  /* one candidate of the engine: at least `repeats` timed calls, more until min_time_s, at most
   * max(repeats, TS_BENCH_MAX_EXTRA) */
  ts_measure_opts mo = ts_measure_opts_default();
  mo.warmup = o->warmup, mo.rounds = o->repeats, mo.min_time_s = o->min_time_s;
  mo.max_rounds = o->repeats > TS_BENCH_MAX_EXTRA ? o->repeats : TS_BENCH_MAX_EXTRA;
  mo.flush_cache = o->flush_cache, mo.before = o->before, mo.before_arg = o->before_arg;
  bench_call c = {fn, arg};
  ts_measure_result mr;
  TS_TRY(ts_measure_one(call_void, &c, &mo, &mr));
  r->repeats = mr.s.n;
  r->min_s = mr.s.min, r->q1_s = mr.s.q1, r->median_s = mr.s.median, r->q3_s = mr.s.q3;
  r->max_s = mr.s.max, r->mean_s = mr.s.mean;
  return TS_OK;
}

/* ---- reports ------------------------------------------------------------------------------- */

ts_status ts_bench_profile(ts_machine_profile *p) {
  ts_context *ctx;
  TS_TRY(ts_context_create(&ctx, 0));
  ts_status s = ts_hwinfo_get(ctx, p);
  ts_context_destroy(ctx);
  return s;
}

double ts_bench_pct_peak_flops(const ts_machine_profile *p, double gflops) {
  if (!p || !(p->peak_gflops_fp32 > 0)) return NAN;
  return 100.0 * gflops / p->peak_gflops_fp32;
}

double ts_bench_pct_peak_bw(const ts_machine_profile *p, double gbs) {
  if (!p || !(p->bandwidth_gbs > 0)) return NAN;
  return 100.0 * gbs / p->bandwidth_gbs;
}

#define NAME_W 32

void ts_bench_print_header(FILE *f) {
  fprintf(f, "%-*s %10s %21s %9s %7s %9s %7s\n", NAME_W, "benchmark", "median ms", "(min .. max ms)", "GFLOP/s",
          "%peak", "GB/s", "%bw");
}

static void print_rate(FILE *f, double amount, double seconds, double pct) {
  if (!(amount > 0)) {
    fprintf(f, " %9s %7s", "", "");
    return;
  }
  double rate = amount / seconds * 1e-9;
  if (isfinite(pct)) fprintf(f, " %9.2f %6.1f%%", rate, pct);
  else fprintf(f, " %9.2f %7s", rate, "-");
}

void ts_bench_print_row(FILE *f, const char *name, const ts_bench_result *r, double flops, double bytes,
                        const ts_machine_profile *p) {
  double med = r->median_s > 0 ? r->median_s : 1e-12;
  fprintf(f, "%-*s %10.3f  (%8.3f .. %8.3f)", NAME_W, name, 1e3 * r->median_s, 1e3 * r->min_s, 1e3 * r->max_s);
  /* blank GFLOP/s columns keep GB/s aligned; a missing last column leaves no trailing blanks */
  if (flops > 0 || bytes > 0) print_rate(f, flops, med, ts_bench_pct_peak_flops(p, flops / med * 1e-9));
  if (bytes > 0) print_rate(f, bytes, med, ts_bench_pct_peak_bw(p, bytes / med * 1e-9));
  fputc('\n', f);
}

static bool add_num_or_null(cJSON *j, const char *key, double v) {
  return isfinite(v) ? cJSON_AddNumberToObject(j, key, v) != NULL : cJSON_AddNullToObject(j, key) != NULL;
}

cJSON *ts_bench_result_json(const ts_bench_result *r, double flops, double bytes, const ts_machine_profile *p) {
  if (!r) return NULL;
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  double med = r->median_s > 0 ? r->median_s : 1e-12;
  double gflops = flops > 0 ? flops / med * 1e-9 : NAN, gbs = bytes > 0 ? bytes / med * 1e-9 : NAN;
  bool ok = add_num_or_null(j, "median_ms", 1e3 * r->median_s) && add_num_or_null(j, "min_ms", 1e3 * r->min_s) &&
            add_num_or_null(j, "q1_ms", 1e3 * r->q1_s) && add_num_or_null(j, "q3_ms", 1e3 * r->q3_s) &&
            add_num_or_null(j, "max_ms", 1e3 * r->max_s) && add_num_or_null(j, "mean_ms", 1e3 * r->mean_s) &&
            add_num_or_null(j, "repeats", r->repeats) && add_num_or_null(j, "gflops", gflops) &&
            add_num_or_null(j, "pct_peak", flops > 0 ? ts_bench_pct_peak_flops(p, gflops) : NAN) &&
            add_num_or_null(j, "gbs", gbs) &&
            add_num_or_null(j, "pct_bandwidth", bytes > 0 ? ts_bench_pct_peak_bw(p, gbs) : NAN);
  if (!ok) {
    cJSON_Delete(j);
    return NULL;
  }
  return j;
}

static bool parse_range(const char *v, long lo, long hi, int *out) {
  char *end;
  long x = strtol(v, &end, 10);
  if (end == v || *end || x < lo || x > hi) return false;
  *out = (int)x;
  return true;
}

int ts_bench_parse_ints(const char *s, int *v, int cap, long lo, long hi) {
  int n = 0;
  for (;;) {
    char *end;
    const long x = strtol(s, &end, 10);
    if (end == s || x < lo || x > hi || n >= cap || (*end && *end != ',')) return -1;
    v[n++] = (int)x;
    if (!*end) return n;
    s = end + 1;
  }
}

int ts_bench_common_arg(int argc, char **argv, int *i, int *threads, ts_bench_opts *o, bool *json, const char **why) {
  const char *a = argv[*i];
  if (!strcmp(a, "--json")) {
    *json = true;
    return 1;
  }
  bool is_threads = !strcmp(a, "--threads"), is_repeats = !strcmp(a, "--repeats");
  if (!is_threads && !is_repeats) return 0;
  if (*i + 1 >= argc) {
    *why = is_threads ? "--threads needs a value" : "--repeats needs a value";
    return -1;
  }
  const char *v = argv[++*i];
  if (is_threads && !parse_range(v, 1, 4096, threads)) {
    *why = "--threads wants 1..4096";
    return -1;
  }
  if (is_repeats && !parse_range(v, 1, 100000, &o->repeats)) {
    *why = "--repeats wants 1..100000";
    return -1;
  }
  return 1;
}

void ts_bench_print_json(const cJSON *j) {
  char *s = cJSON_Print(j);
  if (s) puts(s);
  free(s);
}
