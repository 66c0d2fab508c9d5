/* tessera hybrid: CPU-accelerator hybrid scheduling of MapReduce jobs, after Hybrid Hadoop (HPC Asia
 * 2021; Cluster Computing 2024). The container pool is fixed once a job starts; what the controller
 * decides is the role of each container's next task: a CPU map task, or a task that feeds the
 * accelerator (its host part: read and pack the block; then it waits for the device). It
 *   1. picks the initial execution mode (CPU, GPU or hybrid) and the number of device-fed
 *      containers from per-class throughput estimates (a short probe and the device's curves),
 *   2. moves containers between the roles during the job from a monitor feed (device busy
 *      fraction, device queue length, finished-task times), and
 *   3. balances the tail: the last tasks go to the class that finishes them first, and the very
 *      last one is split so both classes finish together.
 *
 * A device is either a real one or a modelled one: a pipeline of three engines (host-to-device
 * copy, compute, device-to-host copy), each FIFO, with service times from measured curves
 * (scripts/gpu-check.sh on a real GPU stores them as the "hybrid-device" artifact) and an optional
 * co-tenant that takes a share of the compute engine over given intervals. Every report of a run
 * on a modelled device says so.
 *
 * Engines: `local` (threads as containers, in-process) and `spark` (Apache Spark standalone; the
 * controller is served over TCP to the Spark tasks, see ts_hybrid_serve). Jobs: wordcount, grep,
 * kmeans (iterative), gemm (batched dense-layer inference, the compute-heavy job).
 *
 * Thread safety: a controller (ts_hybrid_ctl) and a device queue (ts_hybrid_devq) may be called
 * from any number of threads (each has its own lock); job inputs are immutable once made. */
#ifndef TESSERA_HYBRID_H
#define TESSERA_HYBRID_H

#include <stdio.h>

#include "tessera/core.h"
#include "tessera/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- jobs ---------------------------------------------------------------------------------- */

typedef enum ts_hybrid_job_kind {
  TS_HYBRID_WORDCOUNT = 0,
  TS_HYBRID_GREP = 1,
  TS_HYBRID_KMEANS = 2,
  TS_HYBRID_GEMM = 3,
  TS_HYBRID_NJOBS = 4
} ts_hybrid_job_kind;

const char *ts_hybrid_job_name(ts_hybrid_job_kind k);
ts_status ts_hybrid_job_parse(const char *name, ts_hybrid_job_kind *k);

/* The cost of one task, as the device model and the controller see it. `units` is the job's work
 * measure (bytes for the text jobs, FLOPs for kmeans and gemm): CPU time is taken as proportional
 * to it. */
typedef struct ts_hybrid_work {
  double units;
  double bytes_in, bytes_out; /* host <-> device traffic */
  double scan_bytes;          /* bytes a streaming kernel reads (text jobs) */
  double flops;               /* arithmetic (kmeans, gemm) */
} ts_hybrid_work;

/* A job: its input cut into blocks (one task each), and for kmeans its rounds. Made by
 * ts_hybrid_job_open from a spec:
 *   wordcount, grep: a text file path; grep's pattern from `pattern` (default "love")
 *   kmeans: "gen:points=N,d=D,k=K,seed=S" (points drawn per block from a seeded mixture)
 *   gemm:   "gen:records=N,in=K,out=M,seed=S[,batches=B1/B2/...]" (records in blocks of the listed
 *           batch sizes, cycled; one size by default) */
typedef struct ts_hybrid_job ts_hybrid_job;

typedef struct ts_hybrid_job_opts {
  ts_hybrid_job_kind kind;
  const char *input; /* path or gen: spec */
  int blocks;        /* tasks per round (text jobs: cut at line ends; 0 = 2 MiB blocks) */
  int rounds;        /* kmeans iterations (default 5); 1 for the others */
  int repeat;        /* text jobs: the file repeated this many times (to size a job) */
  const char *pattern;
} ts_hybrid_job_opts;

ts_status ts_hybrid_job_open(const ts_hybrid_job_opts *o, ts_hybrid_job **job);
void ts_hybrid_job_close(ts_hybrid_job *job);
int ts_hybrid_job_blocks(const ts_hybrid_job *job);
int ts_hybrid_job_rounds(const ts_hybrid_job *job);
ts_hybrid_job_kind ts_hybrid_job_kind_of(const ts_hybrid_job *job);
ts_hybrid_work ts_hybrid_job_work(const ts_hybrid_job *job, int block);

/* One block's map result as text (the format `tessera hybrid task` prints; see docs/FORMATS.md):
 * computed by the CPU kernels. For kmeans, `centroids` (k * d doubles) are the round's. *out is
 * malloc'd. */
ts_status ts_hybrid_job_map(const ts_hybrid_job *job, int block, const double *centroids, char **out, size_t *len);
/* The host part of a device-fed task: the bytes it would copy to the device (read + pack). Returns
 * a checksum so the work cannot be optimized away. */
uint64_t ts_hybrid_job_feed(const ts_hybrid_job *job, int block);

/* Reduction of map results, in block order (deterministic: the Spark driver reduces the same way).
 * kmeans: ts_hybrid_reduce_round gives the next centroids. */
typedef struct ts_hybrid_reducer ts_hybrid_reducer;
ts_status ts_hybrid_reducer_create(const ts_hybrid_job *job, ts_hybrid_reducer **r);
void ts_hybrid_reducer_destroy(ts_hybrid_reducer *r);
ts_status ts_hybrid_reducer_add(ts_hybrid_reducer *r, const char *text, size_t len);
/* kmeans: the next centroids from the round's sums (old centroid kept for an empty cluster), and
 * the sums reset. Other jobs: nothing. */
ts_status ts_hybrid_reducer_next_round(ts_hybrid_reducer *r, double *centroids);
/* The final result as text (wordcount: sorted `word\tcount` lines; grep: `matches\tN`; gemm:
 * `gemm\tN\tSUM`; kmeans: the centroids file format). */
ts_status ts_hybrid_reducer_result(ts_hybrid_reducer *r, const double *centroids, char **out, size_t *len);
/* kmeans initial centroids (k * d; the first point of the first k blocks' streams) */
ts_status ts_hybrid_job_centroids0(const ts_hybrid_job *job, double **centroids, int *k, int *d);
ts_status ts_hybrid_centroids_write(const char *path, const double *c, int k, int d);
ts_status ts_hybrid_centroids_read(const char *path, int k, int d, double *c);

/* ---- device model -------------------------------------------------------------------------- */

#define TS_HYBRID_CURVE_MAX 24
/* Seconds as a function of size (bytes or FLOPs), piecewise linear in log-log between measured
 * points, linear in size beyond the last (throughput constant), constant below the first. */
typedef struct ts_hybrid_curve {
  int n;
  double x[TS_HYBRID_CURVE_MAX], y[TS_HYBRID_CURVE_MAX];
} ts_hybrid_curve;
double ts_hybrid_curve_eval(const ts_hybrid_curve *c, double x);

typedef struct ts_hybrid_device_model {
  char name[128];
  char source[256]; /* where the curves come from */
  bool measured;    /* false: derived from datasheets, not measured on the device */
  ts_hybrid_curve h2d, d2h, gemm, scan;
  double launch_s;
  double scan_factor[TS_HYBRID_NJOBS]; /* kernel bytes per input byte (text jobs) */
  double gemm_factor[TS_HYBRID_NJOBS]; /* kernel FLOPs per counted FLOP (kmeans, gemm) */
} ts_hybrid_device_model;

/* The model compiled in (an NVIDIA H100 PCIe from its datasheet; measured = false). */
void ts_hybrid_device_default(ts_hybrid_device_model *m);
/* From JSON (the format in docs/FORMATS.md, "hybrid-device"); a clear error on bad input. */
ts_status ts_hybrid_device_from_json(const char *json, ts_hybrid_device_model *m);
ts_status ts_hybrid_device_to_json(const ts_hybrid_device_model *m, char **json);
/* The model a run uses: `path` when given, else the newest "hybrid-device" artifact (measured by
 * scripts/gpu-check.sh), else the default. */
ts_status ts_hybrid_device_load(const char *path, ts_hybrid_device_model *m);
/* Unloaded service times of one task on the three engines: [h2d, kernel, d2h] seconds. */
void ts_hybrid_device_times(const ts_hybrid_device_model *m, ts_hybrid_job_kind job, const ts_hybrid_work *w,
                            double t[3]);

/* A co-tenant's use of the compute engine: share in [0, 1) over [t0, t1) seconds from the
 * queue's epoch. "T0:T1:SHARE[,...]" parses to an array. */
typedef struct ts_hybrid_tenant {
  double t0, t1, share;
} ts_hybrid_tenant;
#define TS_HYBRID_MAX_TENANT 8
ts_status ts_hybrid_tenant_parse(const char *spec, ts_hybrid_tenant *t, int *n);

/* The modelled device: three FIFO engines on the monotonic clock (ts_now). */
typedef struct ts_hybrid_devq ts_hybrid_devq;
ts_status ts_hybrid_devq_create(ts_hybrid_devq **q, const ts_hybrid_tenant *tenant, int ntenant, double epoch);
void ts_hybrid_devq_destroy(ts_hybrid_devq *q);
/* Reserves the engines for a task submitted at `now` with service times t[3]; returns the time it
 * completes; `served` (may be NULL) gets the kernel time after the tenant's share. */
double ts_hybrid_devq_submit(ts_hybrid_devq *q, double now, const double t[3], double *served);
/* The monitor (as a GPU's per-process accounting gives it): compute-engine busy fraction over
 * [now - window, now] in all (*busy: own kernels and the co-tenant's) and of this job's kernels
 * alone (*own), and the number of tasks submitted and not yet complete at `now`. */
void ts_hybrid_devq_monitor(ts_hybrid_devq *q, double now, double window, double *busy, double *own, int *queued);
/* The compute engine's intervals so far (for the timeline): arrays owned by the queue, valid until
 * the next submit. */
int ts_hybrid_devq_kernels(ts_hybrid_devq *q, const double **start, const double **end);

/* ---- controller ---------------------------------------------------------------------------- */

typedef enum ts_hybrid_mode {
  TS_HYBRID_MODE_AUTO = 0, /* estimate, monitor, tail balancing */
  TS_HYBRID_MODE_CPU,      /* every task on the CPU */
  TS_HYBRID_MODE_GPU,      /* every task feeds the device */
  TS_HYBRID_MODE_STATIC    /* static_k containers feed the device, the rest CPU; no monitor */
} ts_hybrid_mode;

typedef enum ts_hybrid_class { TS_HYBRID_CPU = 0, TS_HYBRID_DEV = 1, TS_HYBRID_SPLIT = 2 } ts_hybrid_class;

typedef struct ts_hybrid_ctl_opts {
  int slots;               /* containers (fixed for the job) */
  int cores;               /* cores the CPU tasks share (<= slots is the usual) */
  ts_hybrid_mode mode;
  int static_k;            /* TS_HYBRID_MODE_STATIC */
  bool tail;               /* tail balancing (auto: on) */
  double cpu_s_per_unit;   /* the probe's CPU cost of one unit on one core */
  double feed_s_per_unit;  /* the probe's host cost of feeding one unit to the device */
  double hysteresis;       /* a role change needs this relative throughput gain (default 0.05) */
} ts_hybrid_ctl_opts;

/* What the controller knows of a task before it runs: its units and the model's unloaded device
 * service times. */
typedef struct ts_hybrid_task {
  double units;
  double dev_s[3];
} ts_hybrid_task;

typedef struct ts_hybrid_decision {
  ts_hybrid_class cls;
  double dev_frac; /* TS_HYBRID_SPLIT: the share of the block that goes to the device */
} ts_hybrid_decision;

/* What a finished task reports (the monitor's finished-task times). */
typedef struct ts_hybrid_done {
  int task;
  ts_hybrid_class cls;
  double dev_frac;
  double cpu_s;    /* CPU part's time */
  double feed_s;   /* host part of the device share */
  double dev_s;    /* device part: submit to completion */
  double kernel_s; /* the kernel's service time (after any co-tenant's share) */
} ts_hybrid_done;

typedef struct ts_hybrid_event {
  double t;
  int from_k, to_k;
  char reason[128];
} ts_hybrid_event;

typedef struct ts_hybrid_ctl ts_hybrid_ctl;
ts_status ts_hybrid_ctl_create(ts_hybrid_ctl **c, const ts_hybrid_ctl_opts *o, const ts_hybrid_task *tasks, int n);
void ts_hybrid_ctl_destroy(ts_hybrid_ctl *c);
/* The initial decision: mode name ("cpu", "gpu", "hybrid") and device-fed containers. */
void ts_hybrid_ctl_initial(const ts_hybrid_ctl *c, const char **mode, int *k, double *pred_units_per_s);
/* A new round of the same tasks (kmeans): every task unstarted again; estimates kept. */
void ts_hybrid_ctl_round(ts_hybrid_ctl *c, double now);
/* A container starts `task` (any order; a retry of a task restarts it): its role. */
ts_status ts_hybrid_ctl_start(ts_hybrid_ctl *c, double now, int task, ts_hybrid_decision *d);
void ts_hybrid_ctl_done(ts_hybrid_ctl *c, double now, const ts_hybrid_done *done);
/* The monitor feed: the device's busy fraction in all and of this job's kernels, its queue. */
void ts_hybrid_ctl_monitor(ts_hybrid_ctl *c, double now, double busy, double own, int queued);
/* Role changes so far (copied into ev, at most cap; returns the count) and the current target. */
int ts_hybrid_ctl_events(const ts_hybrid_ctl *c, ts_hybrid_event *ev, int cap);
int ts_hybrid_ctl_target(const ts_hybrid_ctl *c);

/* ---- oracle -------------------------------------------------------------------------------- */

/* The offline split from measured task times: cpu_s[i] (one core), dev_s[i*3..] (unloaded engine
 * times), the tenant; the best over device-fed container counts and device sets (tasks ranked by
 * CPU time over device bottleneck time, every prefix tried). Sets *makespan, *k, *ndev; dev_set
 * (may be NULL, n bytes) marks the device's tasks. */
ts_status ts_hybrid_oracle(int n, const double *cpu_s, const double *dev_s, const double *feed_s, int slots, int cores,
                           const ts_hybrid_tenant *tenant, int ntenant, double *makespan, int *k, int *ndev,
                           uint8_t *dev_set);

/* ---- runs ---------------------------------------------------------------------------------- */

typedef struct ts_hybrid_run_opts {
  ts_hybrid_mode mode;
  int static_k;
  int slots, cores;            /* 0: cores = online CPUs, slots = cores (one container per core) */
  const char *device_path;     /* NULL: ts_hybrid_device_load's choice */
  const char *tenant;          /* NULL or "T0:T1:SHARE,..." */
  const char *work_dir;        /* prepare's outputs (device results, reference); NULL: a temp dir */
  bool quiet;                  /* no progress on stderr */
  double monitor_period_s;     /* default 0.025 (the monitor averages over 4 periods) */
} ts_hybrid_run_opts;

/* The reference pass every run starts with, outside the timed job: each block's CPU time (the
 * oracle's input; `prepare_threads` blocks at once, one per core) and map result. On a modelled
 * device the device-fed tasks return these results (the model has no silicon to compute on), after
 * the modelled time; the reference output is the reduction of all of them. Files in work_dir:
 * dev/R-I.txt, reference.txt, centroids-R.txt, prepare.json. */
ts_status ts_hybrid_prepare(const ts_hybrid_job *job, const char *work_dir, int threads, bool quiet);

/* A local run: `slots` threads, the controller, the modelled device. The report is JSON (see
 * docs/FORMATS.md, "hybrid report"); svg (may be NULL) gets the timeline. */
ts_status ts_hybrid_run_local(const ts_hybrid_job *job, const ts_hybrid_run_opts *o, char **report_json, char **svg);

/* The Spark engine: the same prepare, controller and modelled device, served over TCP on
 * 127.0.0.1 to the Spark tasks; runs `python driver --master URL --tessera SELF --connect ADDR
 * --work DIR --job J --blocks N --rounds R [--dynamic-allocation] --out DIR/output-spark.txt` (the
 * driver: tools/hybrid/spark_job.py) and reports as the local engine does, with the driver's wall
 * time as the makespan. */
typedef struct ts_hybrid_spark_opts {
  const char *master;      /* default spark://127.0.0.1:7077 */
  const char *python;      /* default bench/peers/.venv-spark/bin/python under the source tree */
  const char *driver;      /* default tools/hybrid/spark_job.py under the source tree */
  bool dynamic_allocation; /* Spark's own elastic executors (the baseline) */
} ts_hybrid_spark_opts;
ts_status ts_hybrid_run_spark(const ts_hybrid_job *job, const ts_hybrid_run_opts *o, const ts_hybrid_spark_opts *so,
                              char **report_json, char **svg);

/* One task of a Spark run (`tessera hybrid task`): asks the controller at `connect` (HOST:PORT) for
 * its role, does its part (CPU map; host feed and the modelled device's wait) and writes the block's
 * map result to `out`. */
ts_status ts_hybrid_task_run(const char *connect, const char *work_dir, int round, int block, const char *slot, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
