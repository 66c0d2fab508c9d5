/* Benchmark harness shared by the CLI and every bench/bench_*.c program: a thin layer over the
 * core's timing engine (tessera/measure.h: warm-up, timed repeats, quartiles, cache flushing
 * between repeats; programs that compare candidates call ts_measure_run directly), the options
 * every program takes, and reports in hardware units as % of the machine profile's peak
 * (`tessera hwinfo`). Never used by tests for assertions on time. */
#ifndef TS_BENCH_HARNESS_H
#define TS_BENCH_HARNESS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "tessera/core.h"
#include "tessera/hwinfo.h"
#include "tessera/measure.h"

typedef struct ts_bench_opts {
  int warmup;        /* untimed calls first (default 2) */
  int repeats;       /* timed calls (default 10) */
  double min_time_s; /* keep repeating until the timed calls add up to this (default 0.2 s), at
                        most TS_BENCH_MAX_EXTRA timed calls in all unless `repeats` asks for more */
  bool flush_cache;  /* ts_flush_cache() before every timed call, outside the timing */
  void (*before)(void *arg); /* when set, before(before_arg) before every timed call (after any
                                flush), outside the timing: e.g. pushing the data out of L2 only */
  void *before_arg;
} ts_bench_opts;

#define TS_BENCH_MAX_EXTRA 1000

typedef struct ts_bench_result {
  double min_s, q1_s, median_s, q3_s, max_s, mean_s; /* seconds per call (q1, q3: quartiles) */
  int repeats;                           /* timed calls made */
} ts_bench_result;

ts_bench_opts ts_bench_opts_default(void);

/* The options every benchmark program takes: --threads N (1..4096), --repeats R (1..100000),
 * --json. Consumes argv[*i] (and its value, advancing *i) when it is one of them: returns 1 when
 * consumed, 0 when it is not a common option, -1 when its value is missing or out of range (the
 * reason is written to *why). */
int ts_bench_common_arg(int argc, char **argv, int *i, int *threads, ts_bench_opts *o, bool *json, const char **why);

/* A comma-separated list of integers in [lo, hi] ("128,512,2048") into v[0..cap): their count, or -1
 * when an item is not such an integer or there are more than cap. */
int ts_bench_parse_ints(const char *s, int *v, int cap, long lo, long hi);

/* Calls fn(arg) o->warmup times, then times it (ts_measure_one on the wall clock, one clock pair
 * per call) at least o->repeats times and until min_time_s is reached. fn should take >= ~10 us
 * (loop inside it otherwise): the clock's overhead is not subtracted. o NULL: defaults. */
ts_status ts_bench_run(const ts_bench_opts *o, void (*fn)(void *arg), void *arg, ts_bench_result *r);

/* The machine profile benchmarks report against: ts_hwinfo_get with the default thread count. */
ts_status ts_bench_profile(ts_machine_profile *p);

/* 100 * rate / the profile's all-thread peak fp32 GFLOP/s or read GB/s; NAN without a profile. */
double ts_bench_pct_peak_flops(const ts_machine_profile *p, double gflops);
double ts_bench_pct_peak_bw(const ts_machine_profile *p, double gbs);

/* An aligned table: name, median ms (min..max), GFLOP/s and % of peak (when flops > 0), GB/s and
 * % of bandwidth (when bytes > 0). flops and bytes are per call. */
void ts_bench_print_header(FILE *f);
void ts_bench_print_row(FILE *f, const char *name, const ts_bench_result *r, double flops, double bytes,
                        const ts_machine_profile *p);

/* Prints j as indented JSON and a newline on stdout (nothing when printing it fails); j stays the
 * caller's. */
void ts_bench_print_json(const cJSON *j);
/* {median_ms, min_ms, q1_ms, q3_ms, max_ms, mean_ms, repeats, gflops, pct_peak, gbs, pct_bandwidth}; the rates
 * are null when flops/bytes are 0, the percentages null without a profile. NULL on OOM. */
cJSON *ts_bench_result_json(const ts_bench_result *r, double flops, double bytes, const ts_machine_profile *p);

#endif
