/* tessera machine profile ("wisdom"): measured peak fp32 FMA rate, sustained read bandwidth,
 * cache sizes and ISA, with provenance. Every benchmark reports its figures as % of this profile,
 * and planners and kernels size their blocks by its caches; `tessera hwinfo` measures it and keeps
 * it in the artifact store (tessera/artifact.h: kind "machine", key "t<threads>", the file
 * <cache>/machine/t<N>.json). */
#ifndef TESSERA_HWINFO_H
#define TESSERA_HWINFO_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Format version of the profile (its "version" field and its artifact kind's version);
 * ts_hwinfo_load rejects newer files, and ts_hwinfo_get re-measures when a stored profile is older.
 * 2: the read bandwidth is measured on transparent huge pages where the system allows them (1:
 * 4 KiB pages). */
#define TS_HWINFO_VERSION 2

typedef struct ts_machine_profile {
  char cpu_model[64];          /* cpuid brand string */
  char vendor[16];             /* "AuthenticAMD", "GenuineIntel" */
  char isa[256];               /* space-separated extension names (ts_cpu_isa_list) */
  char kernels[16];            /* ts_isa_name(ts_isa_active()) at measurement time */
  char peak_isa[16];           /* which FMA loop gave the peak: "avx512", "avx2", "sse2" */
  int threads;                 /* threads used for the all-thread figures */
  double peak_gflops_fp32_1t;  /* one thread; flops = 2 * FMAs */
  double peak_gflops_fp32;     /* all threads */
  double bandwidth_gbs;        /* sustained read, all threads, 1e9 bytes/s */
  double bandwidth_gbs_1t;     /* sustained read, one thread */
  int64_t l1d_bytes, l2_bytes, l3_bytes; /* per cpu0's view; 0 when unknown */
  char date[32];               /* ISO 8601 UTC, "2024-05-01T12:34:56Z" */
  char host[64];
  int version;                 /* TS_HWINFO_VERSION */
  double load_avg;             /* 1-minute load average when measured (getloadavg); < 0 unknown */
  int cpus_online;             /* online CPUs when measured (0 unknown) */
  double xfer_ns;              /* ts_hwinfo_xfer_ns right after the all-thread read test (where the
                                  threads sat for bandwidth_gbs); 0 unknown or one thread */
  double other_cpus;           /* CPUs' worth of time that other processes (and the hypervisor's
                                  steal) took while the profile was measured: all CPUs' busy time
                                  from /proc/stat minus this process's own, over the wall time;
                                  < 0 unknown */
} ts_machine_profile;

/* Measurement knobs; ts_hwinfo_opts_default gives the full measurement (about 2-4 s). Tests use a
 * short duration and a small bandwidth buffer (the figures are then rougher, never wrong in kind). */
typedef struct ts_hwinfo_opts {
  double duration_s; /* length of one timed run (default 0.2 s) */
  int runs;          /* best of this many runs per figure (default 3) */
  size_t bw_bytes;   /* bandwidth buffer; 0 = 8 x L3, clamped to [128 MiB, 2 GiB] */
  bool progress;     /* show ts_progress on stderr (default true; TESSERA_QUIET=1 silences it) */
} ts_hwinfo_opts;
ts_hwinfo_opts ts_hwinfo_opts_default(void);

/* Measures this machine with ctx's thread count (NULL ctx: default threads). The peak uses the
 * best FMA loop the active ISA level allows (AVX-512 and AVX2 both tried when AVX-512 is active,
 * the higher wins; SSE2 mul+add at the scalar level). An all-thread figure is never reported below
 * the one-thread figure: n threads can always do what one does, a lower reading is interference. */
ts_status ts_hwinfo_measure(const ts_context *ctx, ts_machine_profile *out);
ts_status ts_hwinfo_measure_opts(const ts_context *ctx, const ts_hwinfo_opts *opts, ts_machine_profile *out);

/* The stored profile for `threads` threads (<= 0: the default thread count): the artifact
 * ("machine", "t<N>"), <cache>/machine/t<N>.json; each thread count has its own, so a run with
 * another count neither re-measures nor replaces the default one. */
ts_status ts_hwinfo_path_threads(int threads, char *buf, size_t cap);
/* ts_hwinfo_path_threads(0): the default thread count's profile. */
ts_status ts_hwinfo_default_path(char *buf, size_t cap);
/* Writes the profile atomically. path NULL or the store's path for p->threads: into the artifact
 * store (the envelope of docs/FORMATS.md, "Artifacts", with the profile as its data); any other
 * path: the bare profile object (an export, as `tessera hwinfo --json` prints it). */
ts_status ts_hwinfo_save(const ts_machine_profile *p, const char *path);
/* Reads a profile: a "machine" artifact envelope or a bare profile object. path NULL: the default
 * thread count's. TS_ERR_NOT_FOUND when the file is absent, TS_ERR_FORMAT naming the field when it
 * is malformed, TS_ERR_UNSUPPORTED for a newer version. */
ts_status ts_hwinfo_load(const char *path, ts_machine_profile *p);
/* True when p was measured on this CPU model and kernel level (ts_provenance_matches with
 * TS_PROV_THREADS), at this format version, with `threads` threads (<= 0: the default count). */
bool ts_hwinfo_matches(const ts_machine_profile *p, int threads);
/* The profile's key: 16 hex digits and a NUL, the one hash (ts_hash) of its identifying fields
 * (cpu, vendor, isa, kernels, threads, version, date, host) and its figures (peaks, bandwidths,
 * cache sizes). A plan records it (ts_provenance.profile) to say which profile it was made with;
 * it survives a save/load round trip. */
ts_status ts_hwinfo_profile_key(const ts_machine_profile *p, char key[17]);
/* The key of this machine's stored profile for `threads` threads (<= 0: the default count) when one
 * is stored and matches; "" otherwise. Never measures (planning does not start a measurement of the
 * machine) and never fails. */
void ts_hwinfo_profile_key_here(int threads, char key[17]);
/* The stored profile of the ctx's thread count (the artifact store's get()) when it matches, else
 * measures and stores it; a corrupt or foreign file is moved aside with a note on stderr and
 * re-measured. A failed store (read-only cache) is reported on stderr and does not fail the call.
 * A matching profile that was
 * measured on a busy machine is re-measured once the machine is quiet (ts_hwinfo_should_refresh),
 * and the two are merged by ts_hwinfo_merge_max: a peak measured low under load would otherwise
 * inflate every later "% of peak". */
ts_status ts_hwinfo_get(const ts_context *ctx, ts_machine_profile *p);

/* True when p was measured on a busy machine: other processes took over a quarter of its online
 * CPUs during the measurement (other_cpus), or, where that is unknown, the load average was above
 * half of them when it began (the load average lags by a minute: it misses a job that started just
 * before). */
bool ts_hwinfo_busy(const ts_machine_profile *p);
/* True when p was measured busy (ts_hwinfo_busy) and the machine is quiet now (load_now below a
 * quarter of cpus_now). Unknown loads never refresh. */
bool ts_hwinfo_should_refresh(const ts_machine_profile *p, double load_now, int cpus_now);
/* Peaks and bandwidths are ceilings: a lower reading is interference. Keeps, per figure, the higher
 * of dst and other (both must describe the same machine: ts_hwinfo_matches); provenance (date,
 * load) stays dst's. */
void ts_hwinfo_merge_max(ts_machine_profile *dst, const ts_machine_profile *other);
/* The current 1-minute load average (-1 when unavailable). */
double ts_hwinfo_load_now(void);

/* The profile's JSON object (as `tessera hwinfo --json` prints it) in a malloc'd NUL-terminated
 * string (*json; the caller free()s it; TS_ERR_OOM on allocation failure), and back (TS_ERR_FORMAT
 * naming the bad field, or for text that is not JSON; TS_ERR_UNSUPPORTED for a newer version). */
ts_status ts_hwinfo_to_json(const ts_machine_profile *p, char **json);
ts_status ts_hwinfo_from_json(const char *json, ts_machine_profile *p);

/* Cache sizes in bytes from /sys/devices/system/cpu/cpu0/cache (sysconf fallback), read once per
 * process (the profile's l1d/l2/l3_bytes); 0 = unknown. Any pointer may be NULL. */
void ts_hwinfo_cache_sizes(int64_t *l1d, int64_t *l2, int64_t *l3);
/* How a kernel or planner sizes a block by this machine's caches: ref_value x (this machine's level
 * `level` cache, 1 = L1d, 2, 3) / ref_size, clamped to [lo, hi]; exactly ref_value when the size is
 * unknown (and on the reference machine, whose cache is ref_size). Cheap after the first call. */
int64_t ts_hwinfo_cache_scaled(int level, int64_t ref_size, int64_t ref_value, int64_t lo, int64_t hi);

/* Building blocks, for benchmarks that want one figure (both run in the calling process):
 * fp32 FMA GFLOP/s of `isa`'s loop with nthreads threads, best of `runs` runs of duration_s each;
 * TS_ERR_UNSUPPORTED when this CPU lacks `isa`. */
ts_status ts_hwinfo_peak_gflops(ts_isa isa, int nthreads, double duration_s, int runs, double *gflops);
/* Sustained read GB/s over a buffer of `bytes` (0 = default size) with nthreads threads. */
ts_status ts_hwinfo_read_gbs(int nthreads, size_t bytes, double duration_s, int runs, double *gbs);
/* One-way time in ns for a cache line written by one thread to reach another (two OpenMP threads
 * passing a counter back and forth; best of 5 runs of 2000 round trips, ~1-5 ms). Where it is tens
 * of ns the two threads share a last-level cache; ~150 ns and more, the line crosses between
 * caches (on an AMD EPYC VM the host moves the vCPUs between one CCD and two, and the read
 * bandwidth of two threads moves with it: 33-35 against 55-65 GB/s, docs/notes/BENCHMARKS.md). Needs two
 * threads running at once: TS_ERR_UNSUPPORTED when a team of two cannot be had, TS_ERR_TIMEOUT when
 * a partner stalls for over 20 ms or a run takes 100 ms, three times (the machine is busy). */
ts_status ts_hwinfo_xfer_ns(double *ns);
/* What a transfer time says: 1 the threads share a last-level cache (below 60 ns), -1 they do not
 * (above 100 ns), 0 unknown (0 or less) or in between. */
int ts_hwinfo_xfer_shared(double ns);

#ifdef __cplusplus
}
#endif
#endif
