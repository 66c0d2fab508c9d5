/* tessera measure: the one timing engine, statistics, provenance records and key hashing that every
 * room, the CLI and the benchmarks use (ARCHITECTURE.md, "Measure and artifacts").
 *
 * Timing: candidates are timed in interleaved rounds (round-robin: one call of each per round), so
 * a slow spell of a shared machine falls on all of them alike; each gets a summary (min, quartiles,
 * median, max, mean) and a paired ratio against a baseline candidate (the median of the per-round
 * ratios, with a distribution-free 95% confidence interval from order statistics). Warm-up rounds
 * come first, untimed; an optional hook runs before every timed call, outside the timing (a cache
 * flush); other processes' CPU time over the timed rounds is recorded (a figure taken beside a busy
 * neighbour reads low). Never used by tests for assertions on time.
 *
 * Thread safety: every function here may be called from several threads at once (ts_measure_run
 * on distinct results). */
#ifndef TESSERA_MEASURE_H
#define TESSERA_MEASURE_H

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- clocks and statistics ------------------------------------------------------------- */

typedef enum ts_clock {
  TS_CLOCK_WALL = 0,       /* monotonic wall clock (ts_now) */
  TS_CLOCK_THREAD_CPU = 1  /* the calling thread's CPU time: a preempted call still reads its own run
                              time on a shared machine; for code that runs on the calling thread */
} ts_clock;

/* Seconds on clock c (the wall clock where the thread clock is unavailable). */
double ts_clock_now(ts_clock c);
/* "wall" / "thread_cpu". */
const char *ts_clock_name(ts_clock c);

/* qsort comparators of doubles and of floats, ascending (NaN last). */
int ts_cmp_double(const void *a, const void *b);
int ts_cmp_float(const void *a, const void *b);
/* Sorts v[0..n) in place and returns its median (NaN for n < 1). */
double ts_median(double *v, int n);
/* Sorts v[0..n) and returns the q-quantile, 0 <= q <= 1, linear between order statistics. */
double ts_quantile(double *v, int n, double q);

typedef struct ts_summary {
  int n;                                 /* samples */
  double min, q1, median, q3, max, mean; /* of the samples (seconds for timings) */
} ts_summary;
/* Summarizes v[0..n) (sorting it); all NaN and n = 0 for n < 1. */
void ts_summarize(double *v, int n, ts_summary *out);

/* Median of the paired ratios r[0..n) (sorting r) with its distribution-free confidence interval
 * at ~95%: the order statistics k and n+1-k where P(Binomial(n, 1/2) < k) <= 2.5%; fewer than 6
 * pairs give [min, max]. */
void ts_ratio_ci(double *r, int n, double *median, double *lo, double *hi);

/* ---- the timing engine ------------------------------------------------------------------ */

/* A timed candidate: one call of the work. A non-OK status drops the candidate from the rounds
 * (the others go on) and is reported in its result. */
typedef ts_status (*ts_measure_fn)(void *arg);

typedef struct ts_measure_opts {
  ts_clock clock;     /* default wall */
  int warmup;         /* untimed rounds first (default 2) */
  int rounds;         /* timed rounds at least (default 10) */
  int max_rounds;     /* at most (default 1000; raised to `rounds` when below it) */
  double min_time_s;  /* timed rounds go on until every candidate's timed calls add up to this
                         (default 0.2 s), within max_rounds */
  double min_sample_s;/* > 0: one sample repeats the call until it lasts this long and records the
                         mean per call (for calls too short for the clock); default 0: one call */
  double prune;       /* > 0: after warm-up, candidates whose fastest warm-up call was slower than
                         prune x the fastest candidate's are dropped (result.pruned); default 0 */
  const bool *prunable; /* NULL: all may be pruned; else prunable[i] */
  int baseline;       /* the candidate paired ratios are taken against (default 0) */
  bool alternate;     /* odd rounds run the candidates in reverse order, so a cost of going first or
                         second (a cache the previous call left warm) falls on each alike */
  bool flush_cache;   /* ts_flush_cache() before every timed call, outside the timing */
  void (*before)(void *arg); /* when set, before(before_arg) before every timed call (after any
                                flush), outside the timing */
  void *before_arg;
} ts_measure_opts;

/* The defaults above. */
ts_measure_opts ts_measure_opts_default(void);

typedef struct ts_measure_result {
  ts_status status;    /* TS_OK, or the error that dropped the candidate */
  bool pruned;         /* dropped after warm-up by opts.prune */
  ts_summary s;        /* seconds per call over the timed rounds (s.n = 0 when dropped) */
  double best_warmup_s;/* the fastest warm-up call (what pruning judged) */
  double ratio, ratio_lo, ratio_hi; /* paired: median over rounds of t_i / t_baseline, 95% CI; NaN
                                       when either was dropped */
  double ratio_q1, ratio_q3;        /* quartiles of the per-round ratios */
} ts_measure_result;

typedef struct ts_measure_info {
  int rounds;          /* timed rounds made */
  double wall_s;       /* wall time of the whole measurement */
  double other_cpus;   /* CPUs' worth of time other processes took during the timed rounds
                          (ts_cpu_others), -1 when unknown or the rounds took under 0.5 s */
} ts_measure_info;

/* Times n candidates (fn[i](arg[i]); arg may be NULL) in interleaved rounds: warm-up rounds, then
 * timed rounds until every live candidate has `rounds` samples and min_time_s of timed calls, or
 * max_rounds. res[0..n) gets each candidate's result, info (may be NULL) the run's. Returns TS_OK
 * when at least one candidate was timed; otherwise the last candidate's error. o NULL: defaults. */
ts_status ts_measure_run(int n, const ts_measure_fn *fn, void *const *arg, const ts_measure_opts *o,
                         ts_measure_result *res, ts_measure_info *info);

/* One candidate: ts_measure_run(1, ...). */
ts_status ts_measure_one(ts_measure_fn fn, void *arg, const ts_measure_opts *o, ts_measure_result *res);

/* Evicts the caches: every thread (default thread count) writes one word per cache line of its
 * slice of a buffer twice the last-level cache (allocated once, kept for the process). */
void ts_flush_cache(void);

/* ---- provenance ------------------------------------------------------------------------- */

/* Where and when a measurement, profile or plan was made. */
typedef struct ts_provenance {
  char cpu_model[64];       /* ts_cpu()->model */
  char kernels[24];         /* the kernel level it was made with (ts_isa_name) */
  int threads;              /* threads it was measured or planned for (0: not applicable) */
  char date[32];            /* UTC, ISO 8601 */
  char tessera_version[32]; /* ts_version() */
  char clock[16];           /* ts_clock_name of its timings, "" when none */
  char profile[17];         /* key of the machine profile it was made with, "" when none */
} ts_provenance;

/* This machine now: cpu model, kernels = ts_isa_name(isa), threads, the date, this version. */
void ts_provenance_here(ts_provenance *p, ts_isa isa, int threads);

/* What a match compares: cpu model and kernels always; these add the others. */
enum {
  TS_PROV_THREADS = 1, /* the thread counts are equal */
  TS_PROV_VERSION = 2, /* the tessera versions are equal */
  TS_PROV_PROFILE = 4  /* the machine profile keys are equal */
};

/* True when `made` was made on a machine like `here` under `flags`; otherwise false and why[0..cap)
 * (may be NULL) says what differs ("cpu_model 'X' != this machine's 'Y'"). */
bool ts_provenance_matches(const ts_provenance *made, const ts_provenance *here, unsigned flags, char *why,
                           size_t cap);

/* As a JSON object {"cpu_model", "kernels", "threads", "date", "tessera_version", "clock",
 * "profile"} in a malloc'd string (free()), and back: from_json accepts any subset of those fields
 * (the rest empty) and rejects a field of the wrong type or length with TS_ERR_FORMAT. */
ts_status ts_provenance_to_json(const ts_provenance *p, char **json);
ts_status ts_provenance_from_json(const char *json, ts_provenance *p);

/* ---- keys ------------------------------------------------------------------------------- */

/* The one hash for cache keys: FNV-1a over 8-byte words (each word multiplied in, its high half
 * folded down) and bytes for the tail; seeded with a salt that names the kind and its version. */
typedef struct ts_hash {
  uint64_t h;
} ts_hash;
void ts_hash_init(ts_hash *h, const char *salt);
void ts_hash_bytes(ts_hash *h, const void *data, size_t len);
void ts_hash_i64(ts_hash *h, int64_t v);
void ts_hash_f64(ts_hash *h, double v);
void ts_hash_str(ts_hash *h, const char *s); /* NULL hashes as "" */
/* The 64-bit value as 16 lowercase hex digits and a NUL. */
void ts_hash_hex(const ts_hash *h, char out[17]);

#ifdef __cplusplus
}
#endif
#endif
