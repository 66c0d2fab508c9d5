/* The timing engine (tessera/measure.h): clocks, statistics, interleaved rounds of candidates with
 * paired ratios, and the cache flush used between timed calls. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera/hwinfo.h"
#include "tessera/measure.h"

/* ---- clocks and statistics ------------------------------------------------------------- */

double ts_clock_now(ts_clock c) {
  struct timespec ts;
  if (c != TS_CLOCK_THREAD_CPU || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return ts_now();
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *ts_clock_name(ts_clock c) { return c == TS_CLOCK_THREAD_CPU ? "thread_cpu" : "wall"; }

int ts_cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
  return (x > y) - (x < y);
}

int ts_cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
  return (x > y) - (x < y);
}

double ts_quantile(double *v, int n, double q) {
  if (n < 1 || !v) return NAN;
  qsort(v, (size_t)n, sizeof *v, ts_cmp_double);
  q = q < 0 ? 0 : q > 1 ? 1 : q;
  const double pos = q * (double)(n - 1);
  const int i = (int)pos;
  const double f = pos - (double)i;
  return i + 1 < n ? v[i] + f * (v[i + 1] - v[i]) : v[i];
}

double ts_median(double *v, int n) { return ts_quantile(v, n, 0.5); }

void ts_summarize(double *v, int n, ts_summary *out) {
  memset(out, 0, sizeof *out);
  if (n < 1 || !v) {
    out->min = out->q1 = out->median = out->q3 = out->max = out->mean = NAN;
    return;
  }
  double sum = 0;
  for (int i = 0; i < n; i++) sum += v[i];
  out->n = n;
  out->median = ts_quantile(v, n, 0.5); /* sorts */
  out->q1 = ts_quantile(v, n, 0.25), out->q3 = ts_quantile(v, n, 0.75);
  out->min = v[0], out->max = v[n - 1], out->mean = sum / n;
}

void ts_ratio_ci(double *r, int n, double *median, double *lo, double *hi) {
  *median = *lo = *hi = NAN;
  if (n < 1 || !r) return;
  *median = ts_median(r, n); /* sorted now */
  if (n < 6) {
    *lo = r[0], *hi = r[n - 1];
    return;
  }
  /* the largest k with P(B < k) <= 0.025, B ~ Binomial(n, 1/2): [r_(k), r_(n+1-k)] covers the median
   * with probability >= 95% */
  double p = ldexp(1.0, -n), cum = 0; /* P(B = 0) */
  int k = 0;
  for (int j = 0; j < n; j++) {
    if (cum + p > 0.025) break;
    cum += p;
    k = j + 1;
    p = p * (double)(n - j) / (double)(j + 1);
  }
  if (k < 1) k = 1;
  *lo = r[k - 1], *hi = r[n - k];
}

/* ---- the engine ------------------------------------------------------------------------- */

ts_measure_opts ts_measure_opts_default(void) {
  ts_measure_opts o;
  memset(&o, 0, sizeof o);
  o.clock = TS_CLOCK_WALL;
  o.warmup = 2;
  o.rounds = 10;
  o.max_rounds = 1000;
  o.min_time_s = 0.2;
  return o;
}

enum { LIVE = 0, FAILED = 1, PRUNED = 2 };

/* One sample of candidate i: seconds per call. */
static ts_status sample(ts_measure_fn fn, void *arg, const ts_measure_opts *o, double *dt) {
  const double t0 = ts_clock_now(o->clock);
  ts_status s = fn(arg);
  double t = ts_clock_now(o->clock) - t0;
  long calls = 1;
  while (s == TS_OK && o->min_sample_s > 0 && t < o->min_sample_s && calls < (1L << 30)) {
    s = fn(arg);
    calls++;
    t = ts_clock_now(o->clock) - t0;
  }
  *dt = t / (double)calls;
  return s;
}

ts_status ts_measure_run(int n, const ts_measure_fn *fn, void *const *arg, const ts_measure_opts *opts,
                         ts_measure_result *res, ts_measure_info *info) {
  ts_measure_opts o = opts ? *opts : ts_measure_opts_default();
  if (n < 1 || n > 1000000 || !fn || !res)
    return ts_error(TS_ERR_INVALID_ARG, "ts_measure_run: %d candidates, fn %s, res %s", n, fn ? "set" : "NULL",
                    res ? "set" : "NULL");
  for (int i = 0; i < n; i++)
    if (!fn[i]) return ts_error(TS_ERR_INVALID_ARG, "ts_measure_run: candidate %d has no function", i);
  if (o.warmup < 0 || o.warmup > 1000000 || o.rounds < 1 || o.rounds > 1000000)
    return ts_error(TS_ERR_INVALID_ARG, "ts_measure_run: warmup %d (0..1000000), rounds %d (1..1000000)", o.warmup,
                    o.rounds);
  if (!(o.min_time_s >= 0 && o.min_time_s <= 3600) || !(o.min_sample_s >= 0 && o.min_sample_s <= 60) ||
      !(o.prune >= 0))
    return ts_error(TS_ERR_INVALID_ARG, "ts_measure_run: min_time_s %g (0..3600), min_sample_s %g (0..60), prune %g",
                    o.min_time_s, o.min_sample_s, o.prune);
  if (o.max_rounds < o.rounds) o.max_rounds = o.rounds;
  if (o.max_rounds > 1000000) o.max_rounds = 1000000;
  if (o.baseline < 0 || o.baseline >= n) o.baseline = 0;

  const size_t cap = (size_t)o.max_rounds;
  double *t = malloc((size_t)n * cap * sizeof *t), *sum = calloc((size_t)n, sizeof *sum);
  int *cnt = calloc((size_t)n, sizeof *cnt);
  char *state = calloc((size_t)n, 1);
  double *pair = malloc(cap * sizeof *pair);
  if (!t || !sum || !cnt || !state || !pair) {
    free(t), free(sum), free(cnt), free(state), free(pair);
    return ts_error(TS_ERR_OOM, "ts_measure_run: no memory for %d x %d timings", n, o.max_rounds);
  }
  memset(res, 0, (size_t)n * sizeof *res);
  for (int i = 0; i < n; i++)
    res[i].best_warmup_s = res[i].ratio = res[i].ratio_lo = res[i].ratio_hi = res[i].ratio_q1 = res[i].ratio_q3 = NAN;
  const double w0 = ts_now();
  ts_status last_err = TS_OK;
  char last_msg[512] = "";
#define FAIL(i, s)                                                     \
  do {                                                                 \
    state[i] = FAILED, res[i].status = last_err = (s);                 \
    snprintf(last_msg, sizeof last_msg, "%s", ts_last_error());        \
  } while (0)

  /* warm-up rounds: the fastest call of each judges pruning (one spike of load prunes nothing) */
  for (int w = 0; w < o.warmup; w++)
    for (int i = 0; i < n; i++) {
      if (state[i] != LIVE) continue;
      const double t0 = ts_clock_now(o.clock);
      const ts_status s = fn[i](arg ? arg[i] : NULL);
      const double dt = ts_clock_now(o.clock) - t0;
      if (s != TS_OK) FAIL(i, s);
      else if (!(dt >= res[i].best_warmup_s)) res[i].best_warmup_s = dt;
    }
  if (o.warmup > 0 && o.prune > 0) {
    double best = INFINITY;
    for (int i = 0; i < n; i++)
      if (state[i] == LIVE && res[i].best_warmup_s < best) best = res[i].best_warmup_s;
    for (int i = 0; i < n; i++)
      if (state[i] == LIVE && (!o.prunable || o.prunable[i]) && res[i].best_warmup_s > o.prune * best)
        state[i] = PRUNED, res[i].pruned = true;
  }

  /* /proc/stat twice per run: only when the caller asks (profilers run thousands of short runs) */
  ts_cpu_mark m0 = {0, -1, -1};
  if (info) m0 = ts_cpu_mark_now();
  int rounds = 0;
  while (rounds < o.max_rounds) {
    int live = 0;
    for (int j = 0; j < n; j++) {
      const int i = o.alternate && rounds % 2 ? n - 1 - j : j;
      if (state[i] != LIVE) continue;
      if (o.flush_cache) ts_flush_cache();
      if (o.before) o.before(o.before_arg);
      double dt;
      const ts_status s = sample(fn[i], arg ? arg[i] : NULL, &o, &dt);
      if (s != TS_OK) {
        FAIL(i, s);
        continue;
      }
      t[(size_t)i * cap + (size_t)cnt[i]++] = dt, sum[i] += dt, live++;
    }
    if (!live) break;
    rounds++;
    double least = INFINITY;
    for (int i = 0; i < n; i++)
      if (state[i] == LIVE && sum[i] < least) least = sum[i];
    if (rounds >= o.rounds && least >= o.min_time_s) break;
  }
  ts_cpu_mark m1 = m0;
  if (info) m1 = ts_cpu_mark_now();
#undef FAIL

  const int b = o.baseline;
  int timed = 0;
  for (int i = 0; i < n; i++) {
    double *ti = t + (size_t)i * cap, *tb = t + (size_t)b * cap;
    const int np = cnt[i] < cnt[b] ? cnt[i] : cnt[b];
    if (np > 0) { /* paired ratios first: summarizing sorts the samples */
      for (int k = 0; k < np; k++) pair[k] = ti[k] / (tb[k] > 1e-12 ? tb[k] : 1e-12);
      ts_ratio_ci(pair, np, &res[i].ratio, &res[i].ratio_lo, &res[i].ratio_hi); /* sorts */
      res[i].ratio_q1 = ts_quantile(pair, np, 0.25), res[i].ratio_q3 = ts_quantile(pair, np, 0.75);
    }
    if (i == b) continue;
    ts_summarize(ti, cnt[i], &res[i].s);
    timed += cnt[i] > 0 || res[i].pruned;
  }
  ts_summarize(t + (size_t)b * cap, cnt[b], &res[b].s);
  timed += cnt[b] > 0 || res[b].pruned;
  if (info) {
    info->rounds = rounds;
    info->wall_s = ts_now() - w0;
    info->other_cpus = ts_cpu_others(m0, m1);
  }
  free(t), free(sum), free(cnt), free(state), free(pair);
  if (!timed) return ts_error(last_err != TS_OK ? last_err : TS_ERR_INTERNAL, "%s", last_msg);
  return TS_OK;
}

ts_status ts_measure_one(ts_measure_fn fn, void *arg, const ts_measure_opts *o, ts_measure_result *res) {
  void *args[1] = {arg};
  return ts_measure_run(1, &fn, args, o, res, NULL);
}

/* ---- cache flushing ------------------------------------------------------------------------ */

static float *g_flush;
static size_t g_flush_n;
static pthread_once_t g_flush_once = PTHREAD_ONCE_INIT;

static void flush_alloc(void) {
  int64_t l2, l3;
  ts_hwinfo_cache_sizes(NULL, &l2, &l3);
  const int64_t bytes = 2 * (l3 > 0 ? l3 : l2 > 0 ? 8 * l2 : ((int64_t)32 << 20));
  g_flush_n = (size_t)bytes / sizeof(float);
  g_flush = ts_calloc(g_flush_n, sizeof(float));
  if (!g_flush) {
    g_flush_n = 0;
    fprintf(stderr, "tessera: cannot allocate the %lld-byte cache flush buffer; caches stay warm\n", (long long)bytes);
  }
}

void ts_flush_cache(void) {
  pthread_once(&g_flush_once, flush_alloc);
  if (!g_flush) return;
  float *buf = g_flush;
  const size_t n = g_flush_n;
  /* every thread writes one float per 64-byte line of its slice: its private caches and the
   * shared L3 end up holding this buffer instead of the measured data */
#pragma omp parallel num_threads(ts_default_threads())
  {
    const int th = omp_get_thread_num(), nt = omp_get_num_threads();
    const size_t lo = n * (size_t)th / (size_t)nt, hi = n * (size_t)(th + 1) / (size_t)nt;
    for (size_t i = lo; i < hi; i += 16) buf[i] += 1.0f;
  }
}
