/* The reference pass (prepare), the probe, and the local engine: containers as threads, the
 * controller, the modelled device and its monitor. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hybrid/hybrid_internal.h"
#include "io/json_internal.h"

/* ---- files (ts_read_file, ts_write_file_atomic, ts_mkdirs from the core) ---- */

ts_status ts__hybrid_dev_result(const char *work, int round, int block, char **out, size_t *len) {
  char path[4200];
  snprintf(path, sizeof path, "%s/dev/%d-%d.txt", work, round, block);
  return ts_read_file(path, out, len);
}

/* ---- prepare ------------------------------------------------------------------------------- */

typedef struct prep {
  const ts_hybrid_job *job;
  const char *work;
  const double *cent;
  int round, next, n;
  pthread_mutex_t mu;
  double *cpu_s, *feed_s;
  char **res;
  size_t *len;
  ts_status err;
  ts_progress *prog;
  int done;
} prep;

static void *prep_worker(void *arg) {
  prep *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    int b = p->err == TS_OK && p->next < p->n ? p->next++ : -1;
    pthread_mutex_unlock(&p->mu);
    if (b < 0) break;
    double t0 = ts_now();
    ts_status s = ts_hybrid_job_map(p->job, b, p->cent, &p->res[b], &p->len[b]);
    double t1 = ts_now();
    volatile uint64_t h = ts_hybrid_job_feed(p->job, b);
    (void)h;
    double t2 = ts_now();
    char path[4200];
    snprintf(path, sizeof path, "%s/dev/%d-%d.txt", p->work, p->round, b);
    if (s == TS_OK) s = ts_write_file_atomic(path, p->res[b], p->len[b]);
    pthread_mutex_lock(&p->mu);
    p->cpu_s[b] = t1 - t0;
    p->feed_s[b] = t2 - t1;
    if (s != TS_OK && p->err == TS_OK) p->err = s;
    p->done++;
    if (p->prog) ts_progress_update(p->prog, p->done);
    pthread_mutex_unlock(&p->mu);
  }
  return NULL;
}

static bool prepared_already(const char *work, const char *job_json) {
  char path[4200], *old = NULL;
  size_t n;
  snprintf(path, sizeof path, "%s/job.json", work);
  if (ts_read_file(path, &old, &n) != TS_OK) return false;
  bool same = strcmp(old, job_json) == 0;
  free(old);
  snprintf(path, sizeof path, "%s/prepare.json", work);
  return same && access(path, R_OK) == 0;
}

ts_status ts_hybrid_prepare(const ts_hybrid_job *job, const char *work, int threads, bool quiet) {
  char *jj = NULL;
  TS_TRY(ts_mkdirs(work));
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/dev", work);
  TS_TRY(ts_mkdirs(dir));
  TS_TRY(ts__hybrid_job_to_json(job, &jj));
  if (prepared_already(work, jj)) {
    free(jj);
    return TS_OK;
  }
  int n = ts_hybrid_job_blocks(job), R = ts_hybrid_job_rounds(job);
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  prep p = {.job = job, .work = work, .n = n};
  pthread_mutex_init(&p.mu, NULL);
  p.cpu_s = calloc((size_t)n, sizeof *p.cpu_s);
  p.feed_s = calloc((size_t)n, sizeof *p.feed_s);
  p.res = calloc((size_t)n, sizeof *p.res);
  p.len = calloc((size_t)n, sizeof *p.len);
  double *cpu0 = calloc((size_t)n, sizeof *cpu0), *feed0 = calloc((size_t)n, sizeof *feed0);
  double *cent = NULL;
  int k = 0, d = 0;
  ts_hybrid_reducer *red = NULL;
  ts_status s = (p.cpu_s && p.feed_s && p.res && p.len && cpu0 && feed0) ? TS_OK : ts_error(TS_ERR_OOM, "hybrid: out of memory");
  if (s == TS_OK && ts_hybrid_job_kind_of(job) == TS_HYBRID_KMEANS) {
    s = ts_hybrid_job_centroids0(job, &cent, &k, &d);
    snprintf(dir, sizeof dir, "%s/centroids-0.txt", work);
    if (s == TS_OK) s = ts_hybrid_centroids_write(dir, cent, k, d);
  }
  if (s == TS_OK) s = ts_hybrid_reducer_create(job, &red);
  ts_progress prog;
  if (!quiet) ts_progress_begin(&prog, "hybrid prepare (reference pass)", (int64_t)n * R);
  for (int r = 0; s == TS_OK && r < R; r++) {
    p.round = r;
    p.next = 0;
    p.cent = cent;
    p.prog = quiet ? NULL : &prog;
    p.done = r * n;
    pthread_t th[64];
    int started = 0;
    for (int t = 0; t < threads; t++)
      if (pthread_create(&th[t], NULL, prep_worker, &p) == 0) started++;
    if (started == 0) prep_worker(&p);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    s = p.err;
    for (int b = 0; s == TS_OK && b < n; b++) {
      s = ts_hybrid_reducer_add(red, p.res[b], p.len[b]);
      cpu0[b] += p.cpu_s[b] / R;
      feed0[b] += p.feed_s[b] / R;
    }
    for (int b = 0; b < n; b++) free(p.res[b]), p.res[b] = NULL;
    if (s == TS_OK && cent) {
      s = ts_hybrid_reducer_next_round(red, cent);
      snprintf(dir, sizeof dir, "%s/ref-centroids-%d.txt", work, r + 1);
      if (s == TS_OK) s = ts_hybrid_centroids_write(dir, cent, k, d);
    }
  }
  if (!quiet) ts_progress_end(&prog);
  if (s == TS_OK) {
    char *out = NULL;
    size_t len = 0;
    s = ts_hybrid_reducer_result(red, cent, &out, &len);
    snprintf(dir, sizeof dir, "%s/reference.txt", work);
    if (s == TS_OK) s = ts_write_file_atomic(dir, out, len);
    free(out);
  }
  if (s == TS_OK) {
    cJSON *o = cJSON_CreateObject();
    cJSON *units = cJSON_AddArrayToObject(o, "units");
    for (int b = 0; b < n; b++) cJSON_AddItemToArray(units, cJSON_CreateNumber(ts_hybrid_job_work(job, b).units));
    cJSON_AddItemToObject(o, "cpu_s", cJSON_CreateDoubleArray(cpu0, n));
    cJSON_AddItemToObject(o, "feed_s", cJSON_CreateDoubleArray(feed0, n));
    cJSON_AddNumberToObject(o, "threads", threads);
    snprintf(dir, sizeof dir, "%s/prepare.json", work);
    s = ts__json_write_file(dir, o);
    cJSON_Delete(o);
    snprintf(dir, sizeof dir, "%s/job.json", work);
    if (s == TS_OK) s = ts_write_file_atomic(dir, jj, strlen(jj));
  }
  ts_hybrid_reducer_destroy(red);
  pthread_mutex_destroy(&p.mu);
  free(p.cpu_s), free(p.feed_s), free(p.res), free(p.len), free(cpu0), free(feed0), free(cent), free(jj);
  return s;
}

static ts_status read_prepare(const ts_hybrid_job *job, const char *work, double *cpu_s, double *feed_s) {
  char path[4200];
  snprintf(path, sizeof path, "%s/prepare.json", work);
  cJSON *o = NULL;
  TS_TRY(ts__json_read_file(path, &o));
  int n = ts_hybrid_job_blocks(job);
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "cpu_s"), *f = cJSON_GetObjectItemCaseSensitive(o, "feed_s");
  ts_status s = TS_OK;
  if (!cJSON_IsArray(c) || !cJSON_IsArray(f) || cJSON_GetArraySize(c) != n || cJSON_GetArraySize(f) != n)
    s = ts_error(TS_ERR_FORMAT, "%s: cpu_s and feed_s must be arrays of %d numbers", path, n);
  for (int b = 0; s == TS_OK && b < n; b++) {
    const cJSON *x = cJSON_GetArrayItem(c, b), *y = cJSON_GetArrayItem(f, b);
    if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y) || !(x->valuedouble > 0) || !(y->valuedouble >= 0))
      s = ts_error(TS_ERR_FORMAT, "%s: block %d's times are not positive numbers", path, b);
    else
      cpu_s[b] = x->valuedouble, feed_s[b] = y->valuedouble;
  }
  cJSON_Delete(o);
  return s;
}

ts_status ts__hybrid_probe(const ts_hybrid_job *job, const char *work, double *cpu_u, double *feed_u) {
  int n = ts_hybrid_job_blocks(job);
  double *c = malloc((size_t)n * sizeof *c), *f = malloc((size_t)n * sizeof *f);
  ts_status s = c && f ? read_prepare(job, work, c, f) : ts_error(TS_ERR_OOM, "hybrid: out of memory");
  if (s == TS_OK) { /* the median cost per unit over the first blocks (the first ones warm up) */
    int m = n < 8 ? n : 8;
    double cu[8], fu[8];
    for (int b = 0; b < m; b++) {
      double u = ts_hybrid_job_work(job, b).units;
      cu[b] = c[b] / u;
      fu[b] = f[b] / u;
    }
    *cpu_u = ts_median(cu, m);
    *feed_u = ts_median(fu, m);
  }
  free(c);
  free(f);
  return s;
}

ts_status ts__hybrid_oracle_for(const ts_hybrid_job *job, const char *work, const ts_hybrid_device_model *dev, int slots,
                                int cores, const ts_hybrid_tenant *ten, int nten, const ts__hybrid_rec *rec, int nrec,
                                double *makespan, int *k, int *ndev) {
  int n = ts_hybrid_job_blocks(job), R = ts_hybrid_job_rounds(job);
  double *c = malloc((size_t)n * sizeof *c), *f = malloc((size_t)n * sizeof *f), *d = malloc((size_t)n * 3 * sizeof *d);
  double *mc = calloc((size_t)n * 4, sizeof *mc); /* the run's own: CPU sum, count, feed sum, count */
  ts_status s = c && f && d && mc ? read_prepare(job, work, c, f) : ts_error(TS_ERR_OOM, "hybrid: out of memory");
  /* the task times this run measured replace the reference pass's: a CPU time where the block ran on
   * a CPU container (with no more containers than cores: shared cores would inflate it), a feed
   * time where it fed the device; averaged over rounds */
  for (int i = 0; s == TS_OK && i < nrec; i++) {
    const ts__hybrid_rec *e = &rec[i];
    if (e->task < 0 || e->task >= n) continue;
    double cf = 1 - e->dev_frac;
    if (e->cls != TS_HYBRID_DEV && cf > 0.05 && slots <= cores && e->cpu_s > 0)
      mc[4 * e->task] += e->cpu_s / cf, mc[4 * e->task + 1] += 1;
    if (e->cls != TS_HYBRID_CPU && e->dev_frac > 0.05 && e->feed_s > 0)
      mc[4 * e->task + 2] += e->feed_s / e->dev_frac, mc[4 * e->task + 3] += 1;
  }
  for (int b = 0; s == TS_OK && b < n; b++) {
    if (mc[4 * b + 1] > 0) c[b] = mc[4 * b] / mc[4 * b + 1];
    if (mc[4 * b + 3] > 0) f[b] = mc[4 * b + 2] / mc[4 * b + 3];
  }
  free(mc);
  for (int b = 0; s == TS_OK && b < n; b++) {
    ts_hybrid_work w = ts_hybrid_job_work(job, b);
    ts_hybrid_device_times(dev, ts_hybrid_job_kind_of(job), &w, d + 3 * b);
  }
  double total = 0;
  for (int r = 0; s == TS_OK && r < R; r++) {
    ts_hybrid_tenant sh[TS_HYBRID_MAX_TENANT];
    for (int i = 0; i < nten; i++) sh[i] = (ts_hybrid_tenant){ten[i].t0 - total, ten[i].t1 - total, ten[i].share};
    double ms;
    s = ts_hybrid_oracle(n, c, d, f, slots, cores, sh, nten, &ms, k, ndev, NULL);
    total += ms;
  }
  *makespan = total;
  free(c), free(f), free(d);
  return s;
}

/* ---- the local engine ---------------------------------------------------------------------- */

typedef struct local {
  const ts_hybrid_job *job;
  const ts_hybrid_run_opts *o;
  ts_hybrid_ctl *ctl;
  ts_hybrid_devq *q;
  const ts_hybrid_task *tasks;
  char **devres;
  size_t *devlen;
  const double *cent;
  int round, next, n;
  double epoch;
  pthread_mutex_t mu;
  char **res;
  size_t *len;
  ts__hybrid_rec *rec;
  int nrec, caprec;
  ts_status err;
  atomic_int stop_monitor;
  ts_progress *prog;
  int done;
} local;

void ts__hybrid_sleep_until(double t) {
  double now = ts_now();
  if (t <= now) return;
  struct timespec ts;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec > 999999999L) ts.tv_nsec = 999999999L;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

typedef struct slot_arg {
  local *L;
  int slot;
} slot_arg;

static void *slot_worker(void *arg) {
  slot_arg *sa = arg;
  local *L = sa->L;
  for (;;) {
    pthread_mutex_lock(&L->mu);
    int i = L->err == TS_OK && L->next < L->n ? L->next++ : -1;
    pthread_mutex_unlock(&L->mu);
    if (i < 0) break;
    double t0 = ts_now();
    ts_hybrid_decision d;
    ts_status s = ts_hybrid_ctl_start(L->ctl, t0, i, &d);
    ts__hybrid_rec r = {.round = L->round, .task = i, .slot = sa->slot, .cls = d.cls, .dev_frac = d.dev_frac};
    ts_hybrid_done dn = {.task = i, .cls = d.cls, .dev_frac = d.dev_frac};
    char *out = NULL;
    size_t len = 0;
    double done_at = 0;
    if (s == TS_OK && d.cls != TS_HYBRID_CPU) {
      double f0 = 1 - d.dev_frac;
      volatile uint64_t h = ts__hybrid_feed_part(L->job, i, f0, 1);
      (void)h;
      double t1 = ts_now();
      dn.feed_s = t1 - t0;
      double t[3];
      for (int e = 0; e < 3; e++) t[e] = L->tasks[i].dev_s[e] * d.dev_frac;
      done_at = ts_hybrid_devq_submit(L->q, t1, t, &dn.kernel_s);
      r.dev_submit = t1 - L->epoch;
      r.dev_end = done_at - L->epoch;
      dn.dev_s = done_at - t1;
    }
    if (s == TS_OK && d.cls != TS_HYBRID_DEV) {
      double c0 = ts_now();
      s = ts__hybrid_cpu_part(L->job, i, 1 - d.dev_frac, L->cent, &out, &len);
      dn.cpu_s = ts_now() - c0;
      if (d.cls == TS_HYBRID_SPLIT) free(out), out = NULL; /* the block's result is the prepared one */
    }
    if (s == TS_OK && d.cls != TS_HYBRID_CPU) {
      ts__hybrid_sleep_until(done_at);
      out = malloc(L->devlen[i] + 1);
      if (!out) s = ts_error(TS_ERR_OOM, "hybrid: out of memory");
      else memcpy(out, L->devres[i], L->devlen[i] + 1), len = L->devlen[i];
    }
    double t2 = ts_now();
    if (s == TS_OK) ts_hybrid_ctl_done(L->ctl, t2, &dn);
    r.t0 = t0 - L->epoch;
    r.t1 = t2 - L->epoch;
    r.cpu_s = dn.cpu_s;
    r.feed_s = dn.feed_s;
    pthread_mutex_lock(&L->mu);
    if (s != TS_OK) {
      if (L->err == TS_OK) L->err = s;
      free(out);
    } else {
      L->res[i] = out;
      L->len[i] = len;
      if (L->nrec == L->caprec) {
        int cap = L->caprec ? 2 * L->caprec : 256;
        ts__hybrid_rec *nr = realloc(L->rec, (size_t)cap * sizeof *nr);
        if (nr) L->rec = nr, L->caprec = cap;
      }
      if (L->nrec < L->caprec) L->rec[L->nrec++] = r;
      L->done++;
      if (L->prog) ts_progress_update(L->prog, L->done);
    }
    pthread_mutex_unlock(&L->mu);
  }
  return NULL;
}

static void *monitor_worker(void *arg) {
  local *L = arg;
  double period = L->o->monitor_period_s > 0 ? L->o->monitor_period_s : 0.025;
  double window = period * 4;
  while (!L->stop_monitor) {
    ts__hybrid_sleep_until(ts_now() + period);
    double now = ts_now(), busy, own;
    int queued;
    ts_hybrid_devq_monitor(L->q, now, window, &busy, &own, &queued);
    ts_hybrid_ctl_monitor(L->ctl, now, busy, own, queued);
  }
  return NULL;
}

static ts_status load_devres(const char *work, int round, int n, char **res, size_t *len) {
  for (int b = 0; b < n; b++) {
    free(res[b]);
    res[b] = NULL;
    TS_TRY(ts__hybrid_dev_result(work, round, b, &res[b], &len[b]));
  }
  return TS_OK;
}

ts_status ts__hybrid_resolve_pool(const ts_hybrid_run_opts *o, int *slots, int *cores) {
  int c = o->cores > 0 ? o->cores : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (c < 1) c = 1;
  int s = o->slots > 0 ? o->slots : c; /* one container per core, as Hadoop's default */
  if (s > 256 || c > 256) return ts_error(TS_ERR_INVALID_ARG, "hybrid: slots %d / cores %d above 256", s, c);
  *slots = s;
  *cores = c;
  return TS_OK;
}

ts_status ts__hybrid_make_tasks(const ts_hybrid_job *job, const ts_hybrid_device_model *dev, ts_hybrid_task **tasks) {
  int n = ts_hybrid_job_blocks(job);
  ts_hybrid_task *t = malloc((size_t)n * sizeof *t);
  if (!t) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  for (int b = 0; b < n; b++) {
    ts_hybrid_work w = ts_hybrid_job_work(job, b);
    t[b].units = w.units;
    ts_hybrid_device_times(dev, ts_hybrid_job_kind_of(job), &w, t[b].dev_s);
  }
  *tasks = t;
  return TS_OK;
}

ts_status ts__hybrid_check_output(const char *work, const char *out, size_t len, bool *ok, char *note, size_t cap) {
  char path[4200], *ref = NULL;
  size_t rn = 0;
  snprintf(path, sizeof path, "%s/reference.txt", work);
  TS_TRY(ts_read_file(path, &ref, &rn));
  *ok = rn == len && memcmp(ref, out, len) == 0;
  if (*ok) snprintf(note, cap, "identical to the reference pass (%zu bytes)", len);
  else {
    size_t i = 0;
    while (i < rn && i < len && ref[i] == out[i]) i++;
    snprintf(note, cap, "differs from the reference pass at byte %zu (%zu vs %zu bytes)", i, len, rn);
  }
  free(ref);
  return TS_OK;
}

static ts_status setup(const ts_hybrid_job *job, const ts_hybrid_run_opts *o, const char *engine, ts__hybrid_run *r) {
  if (!o->work_dir) return ts_error(TS_ERR_INVALID_ARG, "hybrid: a work directory is needed");
  TS_TRY(ts__hybrid_resolve_pool(o, &r->S, &r->C));
  TS_TRY(ts_hybrid_device_load(o->device_path, &r->dev));
  TS_TRY(ts_hybrid_tenant_parse(o->tenant, r->ten, &r->nten));
  TS_TRY(ts_hybrid_prepare(job, o->work_dir, r->C, o->quiet));
  r->n = ts_hybrid_job_blocks(job);
  r->R = ts_hybrid_job_rounds(job);
  r->res = (ts__hybrid_result){.engine = engine, .job = job, .dev = &r->dev, .o = o, .slots = r->S, .cores = r->C,
                               .tenant = r->ten, .ntenant = r->nten, .nrounds = r->R};
  TS_TRY(ts__hybrid_probe(job, o->work_dir, &r->res.probe_cpu_s_per_unit, &r->res.probe_feed_s_per_unit));
  TS_TRY(ts__hybrid_make_tasks(job, &r->dev, &r->tasks));
  r->co = (ts_hybrid_ctl_opts){.slots = r->S, .cores = r->C, .mode = o->mode, .static_k = o->static_k,
                               .tail = o->mode == TS_HYBRID_MODE_AUTO, .cpu_s_per_unit = r->res.probe_cpu_s_per_unit,
                               .feed_s_per_unit = r->res.probe_feed_s_per_unit};
  return TS_OK;
}

ts_status ts__hybrid_setup(const ts_hybrid_job *job, const ts_hybrid_run_opts *o, const char *engine, ts__hybrid_run **out) {
  *out = NULL;
  ts__hybrid_run *r = calloc(1, sizeof *r);
  if (!r) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  ts_status s = setup(job, o, engine, r);
  if (s != TS_OK) {
    free(r->tasks);
    free(r);
    return s;
  }
  *out = r;
  return TS_OK;
}

ts_status ts__hybrid_conclude(ts__hybrid_run *r, const ts_hybrid_ctl *ctl, ts_hybrid_devq *q, double epoch,
                              ts__hybrid_rec *rec, int nrec, char **report, char **svg) {
  ts__hybrid_result *res = &r->res;
  TS_TRY(ts__hybrid_oracle_for(res->job, res->o->work_dir, &r->dev, r->S, r->C, r->ten, r->nten, rec, nrec,
                               &res->oracle_makespan, &res->oracle_k, &res->oracle_ndev));
  ts_hybrid_ctl_initial(ctl, &res->init_mode, &res->init_k, &res->init_pred);
  res->nev = ts_hybrid_ctl_events(ctl, r->ev, 256);
  if (res->nev > 256) res->nev = 256;
  res->ev = r->ev;
  res->rec = rec;
  res->nrec = nrec;
  res->nkern = ts_hybrid_devq_kernels(q, &res->kern_s, &res->kern_e);
  res->epoch = epoch;
  TS_TRY(ts__hybrid_report(res, report));
  if (svg) {
    ts_status s = ts__hybrid_svg(res, svg);
    if (s != TS_OK) {
      free(*report);
      *report = NULL;
      return s;
    }
  }
  return TS_OK;
}

ts_status ts_hybrid_run_local(const ts_hybrid_job *job, const ts_hybrid_run_opts *o, char **report, char **svg) {
  *report = NULL;
  if (svg) *svg = NULL;
  ts__hybrid_run *run;
  TS_TRY(ts__hybrid_setup(job, o, "local", &run));
  int n = run->n, R = run->R, S = run->S;
  ts_hybrid_task *tasks = run->tasks;
  ts__hybrid_result *res = &run->res;
  ts_hybrid_ctl_opts co = run->co;
  ts_hybrid_tenant *ten = run->ten;
  int nten = run->nten;
  local L = {.job = job, .o = o, .tasks = tasks, .n = n};
  pthread_mutex_init(&L.mu, NULL);
  L.devres = calloc((size_t)n, sizeof *L.devres);
  L.devlen = calloc((size_t)n, sizeof *L.devlen);
  L.res = calloc((size_t)n, sizeof *L.res);
  L.len = calloc((size_t)n, sizeof *L.len);
  double *cent = NULL;
  ts_hybrid_reducer *red = NULL;
  ts_status s = L.devres && L.devlen && L.res && L.len ? TS_OK : ts_error(TS_ERR_OOM, "hybrid: out of memory");
  if (s == TS_OK) s = ts_hybrid_ctl_create(&L.ctl, &co, tasks, n);
  if (s == TS_OK && ts_hybrid_job_kind_of(job) == TS_HYBRID_KMEANS) {
    char path[4200];
    snprintf(path, sizeof path, "%s/centroids-0.txt", o->work_dir);
    s = ts__hybrid_centroids_load(job, path, &cent);
  }
  if (s == TS_OK) s = ts_hybrid_reducer_create(job, &red);
  if (s == TS_OK) s = load_devres(o->work_dir, 0, n, L.devres, L.devlen);
  if (s == TS_OK && ts_hybrid_job_kind_of(job) == TS_HYBRID_GEMM) {
    /* the containers start before the job: oneDNN's first call compiles its kernels (tens of ms),
     * paid here and not by the first CPU task */
    char *w = NULL;
    size_t wl;
    double one = 1.0 / fmax(1.0, ts_hybrid_job_work(job, 0).bytes_in / 4096.0);
    s = ts__hybrid_cpu_part(job, 0, one, NULL, &w, &wl);
    free(w);
  }
  ts_progress prog;
  if (s == TS_OK && !o->quiet) ts_progress_begin(&prog, "hybrid run (local)", (int64_t)n * R);
  L.prog = o->quiet ? NULL : &prog;
  L.epoch = ts_now();
  if (s == TS_OK) s = ts_hybrid_devq_create(&L.q, ten, nten, L.epoch);
  pthread_t mon;
  bool mon_on = s == TS_OK && o->mode == TS_HYBRID_MODE_AUTO && pthread_create(&mon, NULL, monitor_worker, &L) == 0;
  for (int r = 0; s == TS_OK && r < R; r++) {
    if (r > 0) s = load_devres(o->work_dir, r, n, L.devres, L.devlen); /* outside the round's time */
    double r0 = ts_now();
    ts_hybrid_ctl_round(L.ctl, r0);
    L.round = r;
    L.next = 0;
    L.cent = cent;
    pthread_t th[256];
    slot_arg sa[256];
    int started = 0;
    for (int t = 0; s == TS_OK && t < S; t++) {
      sa[t] = (slot_arg){&L, t};
      if (pthread_create(&th[t], NULL, slot_worker, &sa[t]) == 0) started++;
      else break;
    }
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    double r1 = ts_now();
    if (s == TS_OK && started < S) s = ts_error(TS_ERR_INTERNAL, "hybrid: could start only %d of %d containers", started, S);
    if (s == TS_OK) s = L.err;
    res->round_s[r < 64 ? r : 63] = r1 - r0;
    res->makespan += r1 - r0;
    for (int b = 0; s == TS_OK && b < n; b++) s = ts_hybrid_reducer_add(red, L.res[b], L.len[b]);
    for (int b = 0; b < n; b++) free(L.res[b]), L.res[b] = NULL;
    if (s == TS_OK && cent) s = ts_hybrid_reducer_next_round(red, cent);
  }
  if (mon_on) {
    L.stop_monitor = 1;
    pthread_join(mon, NULL);
  }
  if (L.prog) ts_progress_end(&prog);
  char *out = NULL;
  size_t olen = 0;
  if (s == TS_OK) s = ts_hybrid_reducer_result(red, cent, &out, &olen);
  if (s == TS_OK) s = ts__hybrid_check_output(o->work_dir, out, olen, &res->output_ok, res->output_note, sizeof res->output_note);
  if (s == TS_OK) {
    char path[4200];
    snprintf(path, sizeof path, "%s/output-local.txt", o->work_dir);
    s = ts_write_file_atomic(path, out, olen);
  }
  if (s == TS_OK) s = ts__hybrid_conclude(run, L.ctl, L.q, L.epoch, L.rec, L.nrec, report, svg);
  free(out);
  ts_hybrid_reducer_destroy(red);
  ts_hybrid_devq_destroy(L.q);
  ts_hybrid_ctl_destroy(L.ctl);
  for (int b = 0; b < n; b++) {
    if (L.devres) free(L.devres[b]);
    if (L.res) free(L.res[b]);
  }
  free(L.devres), free(L.devlen), free(L.res), free(L.len), free(L.rec), free(cent), free(tasks);
  free(run);
  pthread_mutex_destroy(&L.mu);
  if (s != TS_OK && *report) free(*report), *report = NULL;
  return s;
}
