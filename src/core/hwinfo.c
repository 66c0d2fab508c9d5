/* Machine profile measurement: peak fp32 FMA rate (1 thread and all threads), sustained read
 * bandwidth, cache sizes, ISA and provenance. JSON, the artifact store and ts_hwinfo_get live in
 * hwinfo_json.c, ISA loops in hwinfo_<isa>.c. The peak and bandwidth loops measure rates (best of
 * runs, each timed from a common start inside the team), not a median of repeats: they stay here. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hwinfo_impl.h"
#include "tessera/hwinfo.h"
#include "tessera/measure.h"

typedef double (*fma_fn)(int64_t iters);
typedef float (*read_fn)(const float *p, size_t n);

/* Results land here so no loop's work is dead (written from one thread at a time). */
static volatile double g_sink;

ts_hwinfo_opts ts_hwinfo_opts_default(void) {
  ts_hwinfo_opts o = {.duration_s = 0.2, .runs = 3, .bw_bytes = 0, .progress = true};
  return o;
}

/* ---- cache sizes ------------------------------------------------------------------------ */

static bool read_line(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(buf, (int)cap, f) != NULL;
  fclose(f);
  if (ok) buf[strcspn(buf, "\r\n")] = 0;
  return ok;
}

/* sysfs sizes read "32K", "1024K", "32M" or a plain byte count. */
static int64_t parse_size(const char *s) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (end == s || v < 0) return 0;
  switch (*end) {
    case 'K': case 'k': return (int64_t)v << 10;
    case 'M': case 'm': return (int64_t)v << 20;
    case 'G': case 'g': return (int64_t)v << 30;
    case 0: return (int64_t)v;
    default: return 0;
  }
}

static int64_t g_cache_sz[4];
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

/* read once per process: kernels ask for them on their hot paths (ts_hwinfo_cache_scaled) */
static void cache_sizes_read(void) {
  int64_t *sz = g_cache_sz;
  for (int i = 0; i < 16; i++) {
    char path[128], level[16], type[32], size[32];
    const char *base = "/sys/devices/system/cpu/cpu0/cache/index";
    snprintf(path, sizeof path, "%s%d/level", base, i);
    if (!read_line(path, level, sizeof level)) continue;
    snprintf(path, sizeof path, "%s%d/type", base, i);
    if (!read_line(path, type, sizeof type) || strcmp(type, "Instruction") == 0) continue;
    snprintf(path, sizeof path, "%s%d/size", base, i);
    if (!read_line(path, size, sizeof size)) continue;
    int lv = atoi(level);
    if (lv >= 1 && lv <= 3 && sz[lv] == 0) sz[lv] = parse_size(size);
  }
#ifdef _SC_LEVEL1_DCACHE_SIZE
  const int names[4] = {0, _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
  for (int lv = 1; lv <= 3; lv++)
    if (sz[lv] == 0) {
      long v = sysconf(names[lv]);
      sz[lv] = v > 0 ? v : 0;
    }
#endif
}

void ts_hwinfo_cache_sizes(int64_t *l1d, int64_t *l2, int64_t *l3) {
  pthread_once(&g_cache_once, cache_sizes_read);
  if (l1d) *l1d = g_cache_sz[1];
  if (l2) *l2 = g_cache_sz[2];
  if (l3) *l3 = g_cache_sz[3];
}

int64_t ts_hwinfo_cache_scaled(int level, int64_t ref_size, int64_t ref_value, int64_t lo, int64_t hi) {
  pthread_once(&g_cache_once, cache_sizes_read);
  const int64_t have = level >= 1 && level <= 3 ? g_cache_sz[level] : 0;
  if (have <= 0 || ref_size <= 0) return ref_value;
  const double v = (double)ref_value * ((double)have / (double)ref_size);
  return v < (double)lo ? lo : v > (double)hi ? hi : (int64_t)v;
}

/* ---- FMA peak ---------------------------------------------------------------------------- */

static bool fma_for(ts_isa isa, fma_fn *fn, double *flops, const char **name) {
  const ts_cpu_features *f = ts_cpu();
  switch (isa) {
    case TS_ISA_AVX512:
      if (!(f->avx512f && f->os_avx512)) return false;
      *fn = ts__fma_loop_avx512, *flops = TS__FMA_FLOPS_AVX512, *name = "avx512";
      return true;
    case TS_ISA_AVX2:
      if (!(f->avx2 && f->fma && f->os_avx)) return false;
      *fn = ts__fma_loop_avx2, *flops = TS__FMA_FLOPS_AVX2, *name = "avx2";
      return true;
    default:
      *fn = ts__fma_loop_sse2, *flops = TS__FMA_FLOPS_SSE2, *name = "sse2";
      return true;
  }
}

/* Iterations for one run of ~duration_s on one thread: time growing batches until one is long
 * enough to trust (>= 10 ms or a quarter of the run), then scale. */
static int64_t fma_calibrate(fma_fn fn, double duration_s) {
  g_sink = fn(1000); /* wake the wide units up before timing anything */
  double want = duration_s / 4 < 0.01 ? duration_s / 4 : 0.01;
  for (int64_t k = 4096;; k *= 4) {
    double t0 = ts_now();
    g_sink = fn(k);
    double t = ts_now() - t0;
    if (t >= want || k >= ((int64_t)1 << 40)) {
      double it = (double)k * duration_s / (t > 1e-9 ? t : 1e-9);
      return it < 1 ? 1 : it > 1e15 ? (int64_t)1e15 : (int64_t)it;
    }
  }
}

/* GFLOP/s of one run: every thread runs its own `iters` iterations; the wall time from a common
 * start to the last thread's end counts. */
static double fma_run(fma_fn fn, double flops_per_iter, int64_t iters, int nthreads) {
  if (nthreads <= 1) {
    double t0 = ts_now();
    g_sink = fn(iters);
    double t = ts_now() - t0;
    return flops_per_iter * (double)iters / (t > 1e-9 ? t : 1e-9) * 1e-9;
  }
  double t0 = 0, t1 = 0, chk = 0;
  int got = 1;
#pragma omp parallel num_threads(nthreads) reduction(+ : chk)
  {
#pragma omp barrier
#pragma omp master
    {
      got = omp_get_num_threads();
      t0 = ts_now();
    }
    chk += fn(iters);
#pragma omp barrier
#pragma omp master
    t1 = ts_now();
  }
  g_sink = chk;
  double t = t1 - t0;
  return flops_per_iter * (double)iters * got / (t > 1e-9 ? t : 1e-9) * 1e-9;
}

ts_status ts_hwinfo_peak_gflops(ts_isa isa, int nthreads, double duration_s, int runs, double *gflops) {
  if (!gflops || nthreads < 1 || nthreads > 4096 || !(duration_s > 0 && duration_s <= 60) || runs < 1 || runs > 1000)
    return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_peak_gflops: bad arguments (threads %d, duration %g s, runs %d)",
                    nthreads, duration_s, runs);
  fma_fn fn;
  double fpi;
  const char *name;
  if (!fma_for(isa, &fn, &fpi, &name))
    return ts_error(TS_ERR_UNSUPPORTED, "this CPU has no %s FMA", ts_isa_name(isa));
  int64_t iters = fma_calibrate(fn, duration_s);
  double best = 0;
  for (int r = 0; r < runs; r++) {
    double g = fma_run(fn, fpi, iters, nthreads);
    if (g > best) best = g;
  }
  *gflops = best;
  return TS_OK;
}

/* ---- read bandwidth ---------------------------------------------------------------------- */

static read_fn read_for_active(void) {
  switch (ts_isa_active()) {
    case TS_ISA_AVX512: return ts__read_sum_avx512;
    case TS_ISA_AVX2: return ts__read_sum_avx2;
    default: return ts__read_sum_sse2;
  }
}

static size_t default_bw_bytes(void) {
  int64_t l3;
  ts_hwinfo_cache_sizes(NULL, NULL, &l3);
  int64_t b = 8 * l3, lo = (int64_t)128 << 20, hi = (int64_t)2 << 30;
  return (size_t)(b < lo ? lo : b > hi ? hi : b);
}

/* n floats, a multiple of `quantum` floats, first touched by the threads that will read them (the
 * all-thread slices) so pages sit on their NUMA nodes. Halves the size when memory is short. In
 * transparent huge pages where the system allows them (ts_malloc_huge, as the LLM runtime's weights):
 * on a Zen 4 VM the same loop read 1.4-1.6x (1 thread) and 1.2-2.1x (2 threads) faster from 2 MiB
 * pages than from 4 KiB ones, so a 4 KiB buffer understated what the memory gives (profile version
 * 2; docs/notes/BENCHMARKS.md, issue 7). */
static float *bw_alloc(size_t bytes, int nthreads, size_t *n_out) {
  size_t quantum = (size_t)nthreads * 1024; /* every slice a multiple of 4 KiB */
  for (size_t b = bytes;; b /= 2) {
    size_t n = b / sizeof(float) / quantum * quantum;
    if (n == 0) n = quantum;
    float *p = ts_malloc_huge(n * sizeof(float));
    if (p) {
      size_t chunk = n / (size_t)nthreads;
#pragma omp parallel for num_threads(nthreads) schedule(static, 1)
      for (int t = 0; t < nthreads; t++)
        for (size_t i = 0; i < chunk; i++) p[(size_t)t * chunk + i] = 1.0f;
      *n_out = n;
      return p;
    }
    if (b < ((size_t)64 << 20)) return NULL;
  }
}

/* GB/s of one pass over p[0..n), split into contiguous slices, one per thread; the wall time from
 * a common start to the last thread's end counts. */
static double read_pass(read_fn fn, const float *p, size_t n, int nthreads) {
  if (nthreads <= 1) {
    double t0 = ts_now();
    g_sink = fn(p, n);
    double t = ts_now() - t0;
    return (double)n * sizeof(float) / (t > 1e-9 ? t : 1e-9) * 1e-9;
  }
  double t0 = 0, t1 = 0, chk = 0;
  size_t bytes = 0;
#pragma omp parallel num_threads(nthreads) reduction(+ : chk)
  {
    /* a team smaller than asked for (OMP_THREAD_LIMIT) reads less; the rate counts what it read */
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    size_t c = n / (size_t)nt / TS__READ_BLOCK * TS__READ_BLOCK;
#pragma omp barrier
#pragma omp master
    {
      bytes = c * (size_t)nt * sizeof(float);
      t0 = ts_now();
    }
    chk += fn(p + (size_t)t * c, c);
#pragma omp barrier
#pragma omp master
    t1 = ts_now();
  }
  g_sink = chk;
  double t = t1 - t0;
  return (double)bytes / (t > 1e-9 ? t : 1e-9) * 1e-9;
}

/* Best GB/s over passes: at least `runs`, more until duration_s has passed (at most 200). */
static double read_best(read_fn fn, const float *p, size_t n, int nthreads, double duration_s, int runs) {
  double best = 0, start = ts_now();
  for (int pass = 0; pass < 200; pass++) {
    if (pass >= runs && ts_now() - start >= duration_s) break;
    double g = read_pass(fn, p, n, nthreads);
    if (g > best) best = g;
  }
  return best;
}

ts_status ts_hwinfo_read_gbs(int nthreads, size_t bytes, double duration_s, int runs, double *gbs) {
  if (!gbs || nthreads < 1 || nthreads > 4096 || !(duration_s >= 0 && duration_s <= 60) || runs < 1 || runs > 1000)
    return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_read_gbs: bad arguments (threads %d, duration %g s, runs %d)",
                    nthreads, duration_s, runs);
  size_t n;
  if (!bytes) bytes = default_bw_bytes();
  float *p = bw_alloc(bytes, nthreads, &n);
  if (!p) return ts_error(TS_ERR_OOM, "cannot allocate the %zu-byte bandwidth buffer", bytes);
  read_fn fn = read_for_active();
  g_sink = fn(p, n); /* warm the TLB and page tables */
  *gbs = read_best(fn, p, n, nthreads, duration_s, runs);
  ts_free(p);
  return TS_OK;
}

/* ---- thread-to-thread line transfer ----------------------------------------------------- */

/* Threads 0 and 1 take turns on one counter: thread t waits for an even (t = 0) or odd value, then
 * adds one; n round trips are 2n one-way handoffs of the line. A waiter gives up after 20 ms on
 * one handoff (its partner descheduled), or when the whole run has taken 100 ms, and raises `stop`
 * so the other does too. */
static double xfer_once(int n, bool *stalled) {
  /* on this call's stack (shared by the team), each on its own line: concurrent callers stay apart */
  _Alignas(64) atomic_int turn;
  _Alignas(64) atomic_int stop;
  atomic_init(&turn, 0);
  atomic_init(&stop, 0);
  double t0 = 0, t1 = 0;
  const double deadline = ts_now() + 0.1;
  int team = 0;
#pragma omp parallel num_threads(2)
  {
    const int id = omp_get_thread_num();
#pragma omp single
    team = omp_get_num_threads();
    if (team == 2) {
      if (id == 0) t0 = ts_now();
      for (int i = 0; i < n && !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        const int want = 2 * i + id;
        double since = 0;
        for (unsigned spin = 1; atomic_load_explicit(&turn, memory_order_acquire) != want; spin++) {
          if (atomic_load_explicit(&stop, memory_order_relaxed)) break;
          if ((spin & 4095) == 0) {
            const double t = ts_now();
            if (since == 0) since = t;
            else if (t - since > 0.02 || t > deadline) atomic_store(&stop, 1);
          }
        }
        atomic_store_explicit(&turn, want + 1, memory_order_release);
      }
#pragma omp barrier
      if (id == 0) t1 = ts_now();
    }
  }
  *stalled = team == 2 && atomic_load(&stop);
  return team == 2 && !*stalled ? (t1 - t0) / (2.0 * n) * 1e9 : -1;
}

int ts_hwinfo_xfer_shared(double ns) { return ns <= 0 ? 0 : ns < 60 ? 1 : ns > 100 ? -1 : 0; }

ts_status ts_hwinfo_xfer_ns(double *ns) {
  if (!ns) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_xfer_ns: NULL argument");
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return ts_error(TS_ERR_UNSUPPORTED, "thread-to-thread transfer: one CPU online");
  double best = -1;
  int stalls = 0;
#pragma omp parallel num_threads(2)
  { /* the team exists before the first timed run (a new thread can start late) */
  }
  for (int r = 0; r < 5; r++) {
    bool stalled = false;
    const double t = xfer_once(2000, &stalled);
    if (stalled && ++stalls < 3) { /* a partner descheduled once: run again */
      r--;
      continue;
    }
    if (stalled)
      return ts_error(TS_ERR_TIMEOUT, "thread-to-thread transfer: a thread waited over 20 ms for its partner (or the run "
                                      "over 100 ms), three times");
    if (t < 0) return ts_error(TS_ERR_UNSUPPORTED, "thread-to-thread transfer: no team of two threads");
    if (best < 0 || t < best) best = t;
  }
  *ns = best;
  return TS_OK;
}

/* ---- the profile ------------------------------------------------------------------------- */

static void provenance(ts_machine_profile *out, int nthreads) {
  ts_provenance pv; /* cpu model, kernel level, threads and date as every artifact records them */
  ts_provenance_here(&pv, ts_isa_active(), nthreads);
  memset(out, 0, sizeof *out);
  out->version = TS_HWINFO_VERSION;
  out->load_avg = ts_hwinfo_load_now();
  out->cpus_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(out->cpu_model, sizeof out->cpu_model, "%s", pv.cpu_model);
  snprintf(out->vendor, sizeof out->vendor, "%s", ts_cpu()->vendor);
  const char *names[64];
  int k = ts_cpu_isa_list(names, 64);
  size_t used = 0;
  for (int i = 0; i < k; i++) {
    int w = snprintf(out->isa + used, sizeof out->isa - used, "%s%s", i ? " " : "", names[i]);
    if (w < 0 || (size_t)w >= sizeof out->isa - used) break;
    used += (size_t)w;
  }
  snprintf(out->kernels, sizeof out->kernels, "%s", ts_isa_name(ts_isa_active())); /* = pv.kernels */
  out->threads = pv.threads;
  ts_hwinfo_cache_sizes(&out->l1d_bytes, &out->l2_bytes, &out->l3_bytes);
  snprintf(out->date, sizeof out->date, "%s", pv.date);
  if (gethostname(out->host, sizeof out->host) != 0) snprintf(out->host, sizeof out->host, "unknown");
  out->host[sizeof out->host - 1] = 0;
}

ts_status ts_hwinfo_measure_opts(const ts_context *ctx, const ts_hwinfo_opts *opts, ts_machine_profile *res) {
  ts_hwinfo_opts o = opts ? *opts : ts_hwinfo_opts_default();
  ts_machine_profile m, *out = &m; /* *res changes only on success */
  if (!res) return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_measure: out is NULL");
  if (!(o.duration_s > 0 && o.duration_s <= 60) || o.runs < 1 || o.runs > 1000)
    return ts_error(TS_ERR_INVALID_ARG, "ts_hwinfo_measure: duration %g s must be in (0, 60], runs %d in [1, 1000]",
                    o.duration_s, o.runs);
  int nthreads = ts_context_threads(ctx);
  provenance(out, nthreads);
  const ts_cpu_mark mark0 = ts_cpu_mark_now();

  /* The FMA loops this level allows; with AVX-512 also AVX2, since cores that split 512-bit
   * operations into two halves (Zen 4) may reach the same or a higher rate with 256-bit ones. */
  ts_isa active = ts_isa_active();
  ts_isa cand[2] = {active, TS_ISA_AVX2};
  int ncand = active == TS_ISA_AVX512 ? 2 : 1;
  fma_fn fn[2];
  double fpi[2];
  const char *name[2];
  for (int k = 0; k < ncand; k++)
    if (!fma_for(cand[k], &fn[k], &fpi[k], &name[k]))
      return ts_error(TS_ERR_INTERNAL, "active ISA level %s has no FMA loop", ts_isa_name(cand[k]));

  ts_progress pr;
  int64_t steps = (int64_t)ncand * o.runs * (nthreads > 1 ? 2 : 1) + 3, done = 0;
  if (o.progress) ts_progress_begin(&pr, "measuring machine", steps);
  int64_t iters[2];
  for (int k = 0; k < ncand; k++) iters[k] = fma_calibrate(fn[k], o.duration_s);
  /* Runs alternate between the loops so a burst of load on the machine hits both alike. */
  double best1[2] = {0, 0}, bestn[2] = {0, 0};
  for (int r = 0; r < o.runs; r++)
    for (int k = 0; k < ncand; k++) {
      double g = fma_run(fn[k], fpi[k], iters[k], 1);
      if (g > best1[k]) best1[k] = g;
      if (o.progress) ts_progress_update(&pr, ++done);
    }
  if (nthreads > 1)
    for (int r = 0; r < o.runs; r++)
      for (int k = 0; k < ncand; k++) {
        double g = fma_run(fn[k], fpi[k], iters[k], nthreads);
        if (g > bestn[k]) bestn[k] = g;
        if (o.progress) ts_progress_update(&pr, ++done);
      }
  int w1 = ncand > 1 && best1[1] > best1[0], wn = ncand > 1 && bestn[1] > bestn[0];
  out->peak_gflops_fp32_1t = best1[w1];
  if (nthreads > 1 && bestn[wn] < best1[w1] && o.progress && !pr.quiet)
    fprintf(stderr, "%snote: %d threads reached %.1f GFLOP/s, below one thread's %.1f: the CPUs are busy with other "
            "work; reporting the one-thread figure as the all-thread peak\n", pr.tty ? "\n" : "", nthreads, bestn[wn],
            best1[w1]);
  if (nthreads > 1 && bestn[wn] >= best1[w1]) {
    out->peak_gflops_fp32 = bestn[wn];
    snprintf(out->peak_isa, sizeof out->peak_isa, "%s", name[wn]);
  } else {
    out->peak_gflops_fp32 = best1[w1];
    snprintf(out->peak_isa, sizeof out->peak_isa, "%s", name[w1]);
  }

  size_t n;
  size_t bytes = o.bw_bytes ? o.bw_bytes : default_bw_bytes();
  float *buf = bw_alloc(bytes, nthreads, &n);
  if (!buf) {
    if (o.progress) ts_progress_end(&pr);
    return ts_error(TS_ERR_OOM, "cannot allocate the %zu-byte bandwidth buffer", bytes);
  }
  read_fn rf = read_for_active();
  g_sink = rf(buf, n);
  if (o.progress) ts_progress_update(&pr, ++done);
  out->bandwidth_gbs_1t = read_best(rf, buf, n, 1, o.duration_s, o.runs);
  if (o.progress) ts_progress_update(&pr, ++done);
  double bn = nthreads > 1 ? read_best(rf, buf, n, nthreads, o.duration_s, o.runs) : 0;
  out->bandwidth_gbs = bn > out->bandwidth_gbs_1t ? bn : out->bandwidth_gbs_1t;
  ts_free(buf);
  out->xfer_ns = 0; /* the threads' placement the all-thread figure was read in (it moves on a VM) */
  if (nthreads > 1 && ts_hwinfo_xfer_ns(&out->xfer_ns) != TS_OK) {
    out->xfer_ns = 0;
    ts_error_clear();
  }
  out->other_cpus = ts_cpu_others(mark0, ts_cpu_mark_now());
  if (o.progress) {
    ts_progress_update(&pr, ++done);
    ts_progress_end(&pr);
  }
  *res = m;
  return TS_OK;
}

ts_status ts_hwinfo_measure(const ts_context *ctx, ts_machine_profile *out) {
  return ts_hwinfo_measure_opts(ctx, NULL, out);
}

double ts_hwinfo_load_now(void) {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

bool ts_hwinfo_busy(const ts_machine_profile *p) {
  if (!p || p->cpus_online <= 0) return false;
  if (p->other_cpus >= 0) return p->other_cpus > 0.25 * p->cpus_online;
  return p->load_avg > 0.5 * p->cpus_online;
}

bool ts_hwinfo_should_refresh(const ts_machine_profile *p, double load_now, int cpus_now) {
  if (!p || (p->load_avg < 0 && p->other_cpus < 0) || load_now < 0 || cpus_now <= 0) return false;
  return ts_hwinfo_busy(p) && load_now < 0.25 * cpus_now;
}

static void keep_max(double *dst, double other) {
  if (other > *dst) *dst = other;
}

void ts_hwinfo_merge_max(ts_machine_profile *dst, const ts_machine_profile *other) {
  if (!dst || !other) return;
  if (other->peak_gflops_fp32 > dst->peak_gflops_fp32)
    snprintf(dst->peak_isa, sizeof dst->peak_isa, "%s", other->peak_isa);
  keep_max(&dst->peak_gflops_fp32_1t, other->peak_gflops_fp32_1t);
  keep_max(&dst->peak_gflops_fp32, other->peak_gflops_fp32);
  keep_max(&dst->bandwidth_gbs_1t, other->bandwidth_gbs_1t);
  if (other->bandwidth_gbs > dst->bandwidth_gbs) dst->xfer_ns = other->xfer_ns; /* the kept figure's placement */
  keep_max(&dst->bandwidth_gbs, other->bandwidth_gbs);
}
