/* Internals of the hybrid room shared by its files: the job's layout, the engines' task records and
 * report, the TCP service of the Spark engine. */
#ifndef TS_HYBRID_INTERNAL_H
#define TS_HYBRID_INTERNAL_H

#include <stdio.h>

#include "core/artifact_internal.h"
#include "tessera/hybrid.h"

extern const ts__artifact_kind ts__hybrid_device_kind;

double ts__hybrid_kernel_end(const ts_hybrid_tenant *ten, int n, double epoch, double start, double work);

/* The job's options as JSON (work_dir/job.json, so `tessera hybrid task` re-opens the same job). */
ts_status ts__hybrid_job_to_json(const ts_hybrid_job *job, char **json);
ts_status ts__hybrid_job_from_file(const char *path, ts_hybrid_job **job);

/* One finished task, for the report and the timeline. */
typedef struct ts__hybrid_rec {
  int round, task, slot;
  ts_hybrid_class cls;
  double dev_frac;
  double t0, t1;             /* start, end (seconds from the run's start) */
  double dev_submit, dev_end; /* device part, when there is one */
  double cpu_s, feed_s;
} ts__hybrid_rec;

/* What a run measured, turned into the report (hybrid_report.c). */
typedef struct ts__hybrid_result {
  const char *engine;
  const ts_hybrid_job *job;
  const ts_hybrid_device_model *dev;
  const ts_hybrid_run_opts *o;
  int slots, cores;
  const char *init_mode;
  int init_k;
  double init_pred;
  double makespan;
  double round_s[64];
  int nrounds;
  ts__hybrid_rec *rec;
  int nrec;
  const ts_hybrid_event *ev;
  int nev;
  const double *kern_s, *kern_e; /* the modelled device's compute intervals (absolute) */
  int nkern;
  double epoch;
  const ts_hybrid_tenant *tenant;
  int ntenant;
  double oracle_makespan;
  int oracle_k, oracle_ndev;
  bool output_ok;
  char output_note[256];
  double probe_cpu_s_per_unit, probe_feed_s_per_unit;
} ts__hybrid_result;

ts_status ts__hybrid_report(const ts__hybrid_result *r, char **json);
ts_status ts__hybrid_svg(const ts__hybrid_result *r, char **svg);

/* The oracle for a prepared job: per-task CPU and feed times measured by this run where it ran the
 * task on that class (rec, nrec; may be 0), else by the reference pass (work_dir/prepare.json);
 * device times from the model. */
ts_status ts__hybrid_oracle_for(const ts_hybrid_job *job, const char *work_dir, const ts_hybrid_device_model *dev,
                                int slots, int cores, const ts_hybrid_tenant *ten, int nten, const ts__hybrid_rec *rec,
                                int nrec, double *makespan, int *k, int *ndev);
/* The probe: CPU and feed cost per unit, the median over the first min(8, n) blocks' timings in
 * prepare.json. */
ts_status ts__hybrid_probe(const ts_hybrid_job *job, const char *work_dir, double *cpu_s_per_unit,
                           double *feed_s_per_unit);
/* The modelled device's result of (round, block): the prepared text. */
ts_status ts__hybrid_dev_result(const char *work_dir, int round, int block, char **out, size_t *len);

/* A task's work: CPU part on [0, 1 - dev_frac) of the block; the device part is the prepared result
 * for the rest; returns the text result of the whole block (the device's share of a split block is
 * computed on the host afterwards from the CPU kernels: a modelled device has no silicon; its time
 * is the model's). */
ts_status ts__hybrid_cpu_part(const ts_hybrid_job *job, int block, double frac, const double *centroids, char **out,
                              size_t *len);

/* The host part of feeding the share [f0, f1) of a block to the device (read + pack). */
uint64_t ts__hybrid_feed_part(const ts_hybrid_job *job, int block, double f0, double f1);

/* What both engines set up before a run (pool, device model, co-tenant, reference pass, probe,
 * tasks, the controller's options) and conclude after it (oracle, the controller's decisions, the
 * device's kernels -> report and timeline). `res` points into the struct: do not move it. */
typedef struct ts__hybrid_run {
  int S, C, n, R;
  ts_hybrid_device_model dev;
  ts_hybrid_tenant ten[TS_HYBRID_MAX_TENANT];
  int nten;
  ts_hybrid_task *tasks;
  ts_hybrid_ctl_opts co;
  ts__hybrid_result res;
  ts_hybrid_event ev[256];
} ts__hybrid_run;
/* *run is malloc'd (free() it and its tasks); NULL on failure. */
ts_status ts__hybrid_setup(const ts_hybrid_job *job, const ts_hybrid_run_opts *o, const char *engine, ts__hybrid_run **run);
ts_status ts__hybrid_conclude(ts__hybrid_run *run, const ts_hybrid_ctl *ctl, ts_hybrid_devq *q, double epoch,
                              ts__hybrid_rec *rec, int nrec, char **report, char **svg);
ts_status ts__hybrid_resolve_pool(const ts_hybrid_run_opts *o, int *slots, int *cores);
/* Sleeps until t (ts_now's clock, CLOCK_MONOTONIC: the same in every process on this machine). */
void ts__hybrid_sleep_until(double t);
ts_status ts__hybrid_make_tasks(const ts_hybrid_job *job, const ts_hybrid_device_model *dev, ts_hybrid_task **tasks);
/* Compares a run's output with work_dir/reference.txt byte for byte. */
ts_status ts__hybrid_check_output(const char *work, const char *out, size_t len, bool *ok, char *note, size_t cap);

/* For the tests: gemm's weights (in x out), the record range of a block, one record. */
const float *ts__hybrid_gemm_layout(const ts_hybrid_job *job, int block, int *in, int *out, int64_t *r0, int64_t *r1);
void ts__hybrid_gemm_record(const ts_hybrid_job *job, int64_t r, float *x);

/* kmeans' clusters and dimensions (gemm: in and out). */
void ts__hybrid_job_kd(const ts_hybrid_job *job, int *k, int *d);

/* A kmeans job's centroids file (k x d of the job) into a malloc'd array. */
ts_status ts__hybrid_centroids_load(const ts_hybrid_job *job, const char *path, double **c);

/* The word table (hybrid_words.c). */
typedef struct ts__wc_ent {
  const char *w;
  uint32_t len;
  int64_t n;
} ts__wc_ent;
typedef struct ts__wc_map {
  ts__wc_ent *e;
  size_t cap, used;
  char *own; /* copies of keys for a table that outlives its text (the reducer's) */
  size_t own_len, own_cap;
} ts__wc_map;
/* Adds n to word w (the key points at w: it must outlive the table). */
ts_status ts__wc_add(ts__wc_map *m, const char *w, size_t len, int64_t n);
/* The same with the key copied into the table's arena. */
ts_status ts__wc_add_owned(ts__wc_map *m, const char *w, size_t len, int64_t n);
/* Sorted "word\tcount\n" lines (malloc'd). */
ts_status ts__wc_emit(ts__wc_map *m, char **out, size_t *len);
void ts__wc_free(ts__wc_map *m);

#endif
