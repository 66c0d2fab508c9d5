/* The controller: the initial mode and device-fed container count from a throughput model, role
 * changes from the monitor, earliest-finish placement and a split of the last task in the tail.
 *
 * Throughput model for k device-fed containers (of S, on C cores), per mean remaining task: a feeder
 * cycles through its host part f, then the three engines (h, x, d: copy in, kernel, copy out); the
 * engines pipeline, so the device completes min(k / (f + h + x + d), 1 / max(h, x, d)) tasks/s; the
 * feeders' host work takes dev_rate * f cores from the C; the CPU containers (S - k of them) run on
 * what is left: cpu_rate = min(S - k, C - dev_rate * f) / c. The kernel time x is the model's, times
 * the observed model error, stretched by the co-tenant's share the monitor reports. The means are
 * over the next 2S unstarted tasks (at least 8): a job whose task sizes change is planned for its
 * current phase. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid/hybrid_internal.h"

#define MAX_EVENTS 256
#define EWMA 0.3
#define HIST 512 /* monitor samples kept (the co-tenant's share over time) */
#define PEND 256 /* device tasks whose kernel time awaits the monitor's verdict */
#define GUARD 0.25 /* seconds of monitor samples around a task that must show no co-tenant */

typedef struct pending {
  double t0, t1, err;
} pending;

struct ts_hybrid_ctl {
  pthread_mutex_t mu;
  ts_hybrid_ctl_opts o;
  int n;
  ts_hybrid_task *t;
  uint8_t *state; /* 0 unstarted, 1 running, 2 done */
  uint8_t *cls;
  double *frac, *contention;
  int unstarted, run_cpu, run_dev;
  double cpu_unit, feed_unit, kerr;
  double tenant; /* the co-tenant's share, from the monitor */
  double hist_t[HIST], hist_v[HIST];
  int nhist;
  pending pend[PEND];
  int npend;
  double busy, own;
  int queued;
  double dev_free[3]; /* the controller's own prediction of the engines */
  int k;
  int k0;
  int done_since; /* tasks finished since the last role change */
  double tenant_at; /* the co-tenant's share at the last role change */
  const char *mode0;
  double pred0;
  ts_hybrid_event ev[MAX_EVENTS];
  int nev;
};

typedef struct means {
  double c, f, h, x, d;
} means;

static means remaining_means(const ts_hybrid_ctl *c) {
  means m = {0};
  int cnt = 0, window = 2 * c->o.slots > 8 ? 2 * c->o.slots : 8;
  for (int i = 0; i < c->n && cnt < window; i++) { /* the next tasks: tasks start in input order */
    if (c->state[i] != 0) continue;
    m.c += c->t[i].units;
    m.h += c->t[i].dev_s[0];
    m.x += c->t[i].dev_s[1];
    m.d += c->t[i].dev_s[2];
    cnt++;
  }
  if (cnt == 0) { /* between rounds or at the end: all tasks' means */
    for (int i = 0; i < c->n; i++) {
      m.c += c->t[i].units;
      m.h += c->t[i].dev_s[0];
      m.x += c->t[i].dev_s[1];
      m.d += c->t[i].dev_s[2];
    }
    cnt = c->n;
  }
  double u = m.c / cnt;
  m.c = u * c->cpu_unit;
  m.f = u * c->feed_unit;
  m.h /= cnt;
  m.x = m.x / cnt * c->kerr / (1 - c->tenant);
  m.d /= cnt;
  return m;
}

/* tasks per second with k device-fed containers; *dev gets the device's part */
static double throughput(const ts_hybrid_ctl *c, const means *m, int k, double *dev) {
  int S = c->o.slots;
  double C = c->o.cores;
  double lat = m->f + m->h + m->x + m->d, bott = fmax(m->h, fmax(m->x, m->d));
  double dr = 0;
  if (k > 0 && lat > 0) dr = fmin(k / lat, bott > 0 ? 1 / bott : INFINITY);
  double host = C - dr * m->f;
  if (host < 0) { /* the feeders alone saturate the host */
    dr = C / m->f;
    host = 0;
  }
  double cores = fmin((double)(S - k), host);
  double cr = m->c > 0 ? cores / m->c : 0;
  if (dev) *dev = dr;
  return dr + cr;
}

static int best_k(const ts_hybrid_ctl *c, double *pred) {
  means m = remaining_means(c);
  int best = 0;
  double bt = throughput(c, &m, 0, NULL);
  for (int k = 1; k <= c->o.slots; k++) {
    double t = throughput(c, &m, k, NULL);
    if (t > bt * 1.01) bt = t, best = k;
  }
  if (pred) *pred = bt;
  return best;
}

ts_status ts_hybrid_ctl_create(ts_hybrid_ctl **out, const ts_hybrid_ctl_opts *o, const ts_hybrid_task *tasks, int n) {
  *out = NULL;
  if (!o || n < 1 || !tasks) return ts_error(TS_ERR_INVALID_ARG, "hybrid controller: no tasks");
  if (o->slots < 1 || o->slots > 4096 || o->cores < 1 || o->cores > 4096)
    return ts_error(TS_ERR_INVALID_ARG, "hybrid controller: slots %d and cores %d must be in 1..4096", o->slots, o->cores);
  if (o->mode == TS_HYBRID_MODE_STATIC && (o->static_k < 0 || o->static_k > o->slots))
    return ts_error(TS_ERR_INVALID_ARG, "hybrid controller: static:%d outside 0..%d containers", o->static_k, o->slots);
  if (!(o->cpu_s_per_unit > 0) || !(o->feed_s_per_unit >= 0) || !isfinite(o->cpu_s_per_unit) || !isfinite(o->feed_s_per_unit))
    return ts_error(TS_ERR_INVALID_ARG, "hybrid controller: the probe's costs must be positive and finite");
  for (int i = 0; i < n; i++)
    if (!(tasks[i].units > 0) || !isfinite(tasks[i].units) || !(tasks[i].dev_s[0] >= 0) || !(tasks[i].dev_s[1] >= 0) ||
        !(tasks[i].dev_s[2] >= 0))
      return ts_error(TS_ERR_INVALID_ARG, "hybrid controller: task %d has a bad cost", i);
  ts_hybrid_ctl *c = calloc(1, sizeof *c);
  if (!c) return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  c->t = malloc((size_t)n * sizeof *c->t);
  c->state = calloc((size_t)n, 1);
  c->cls = calloc((size_t)n, 1);
  c->frac = calloc((size_t)n, sizeof *c->frac);
  c->contention = calloc((size_t)n, sizeof *c->contention);
  if (!c->t || !c->state || !c->cls || !c->frac || !c->contention) {
    ts_hybrid_ctl_destroy(c);
    return ts_error(TS_ERR_OOM, "hybrid: out of memory");
  }
  memcpy(c->t, tasks, (size_t)n * sizeof *tasks);
  pthread_mutex_init(&c->mu, NULL);
  c->o = *o;
  if (!(c->o.hysteresis > 0)) c->o.hysteresis = 0.05;
  c->n = n;
  c->unstarted = n;
  c->cpu_unit = o->cpu_s_per_unit;
  c->feed_unit = o->feed_s_per_unit;
  c->kerr = 1;
  switch (o->mode) {
  case TS_HYBRID_MODE_CPU: c->k = 0; break;
  case TS_HYBRID_MODE_GPU: c->k = o->slots; break;
  case TS_HYBRID_MODE_STATIC: c->k = o->static_k; break;
  default: c->k = best_k(c, NULL); break;
  }
  means m = remaining_means(c);
  c->pred0 = throughput(c, &m, c->k, NULL);
  c->k0 = c->k;
  c->mode0 = c->k == 0 ? "cpu" : c->k == o->slots ? "gpu" : "hybrid";
  *out = c;
  return TS_OK;
}

void ts_hybrid_ctl_destroy(ts_hybrid_ctl *c) {
  if (!c) return;
  if (c->t) pthread_mutex_destroy(&c->mu);
  free(c->t);
  free(c->state);
  free(c->cls);
  free(c->frac);
  free(c->contention);
  free(c);
}

void ts_hybrid_ctl_initial(const ts_hybrid_ctl *c, const char **mode, int *k, double *pred) {
  if (mode) *mode = c->mode0;
  if (k) *k = c->k0;
  if (pred) *pred = c->pred0;
}

void ts_hybrid_ctl_round(ts_hybrid_ctl *c, double now) {
  pthread_mutex_lock(&c->mu);
  memset(c->state, 0, (size_t)c->n);
  c->unstarted = c->n;
  c->run_cpu = c->run_dev = 0;
  for (int i = 0; i < 3; i++) c->dev_free[i] = now;
  pthread_mutex_unlock(&c->mu);
}

static void record(ts_hybrid_ctl *c, double now, int to, const char *why) {
  c->done_since = 0;
  c->tenant_at = c->tenant;
  if (c->nev < MAX_EVENTS) {
    ts_hybrid_event *e = &c->ev[c->nev++];
    e->t = now;
    e->from_k = c->k;
    e->to_k = to;
    snprintf(e->reason, sizeof e->reason, "%s", why);
  }
  c->k = to;
}

/* Re-plans k from the estimates and the monitor (auto mode only); locked. */
static void replan(ts_hybrid_ctl *c, double now) {
  if (c->o.mode != TS_HYBRID_MODE_AUTO || c->unstarted == 0) return;
  /* no flapping: a new change needs new evidence, 2S finished tasks or the co-tenant's share moved
   * by 10 points (two near-equal options otherwise swap on the estimates' noise) */
  if (c->nev > 0 && c->done_since < 2 * c->o.slots && fabs(c->tenant - c->tenant_at) < 0.1) return;
  means m = remaining_means(c);
  double cur = throughput(c, &m, c->k, NULL);
  double pred;
  int k = best_k(c, &pred);
  if (k == c->k || !(pred > cur * (1 + c->o.hysteresis))) return;
  /* the monitor's gate on more feeders: only while the device has room (fewer: the model's call) */
  if (k > c->k && c->busy > 0.97 && c->queued > c->k) return;
  char why[128];
  snprintf(why, sizeof why, "busy %.0f%%, co-tenant %.0f%%, kernel %.3g ms, CPU %.3g ms per task: +%.0f%%", 100 * c->busy,
           100 * c->tenant, 1e3 * m.x, 1e3 * m.c, 100 * (pred / cur - 1));
  record(c, now, k, why);
}

/* The device's predicted completion of a task (share fr of task i) started now; locked. */
static double dev_finish(const ts_hybrid_ctl *c, int i, double fr, double now, double free_at[3]) {
  double f = fr * c->t[i].units * c->feed_unit;
  double h = fr * c->t[i].dev_s[0], x = fr * c->t[i].dev_s[1] * c->kerr / (1 - c->tenant), d = fr * c->t[i].dev_s[2];
  /* the engines' free times: the controller's own reservations, but no later than the running
   * device tasks need at today's estimates (the one in service half done): reservations made under
   * an older, higher estimate must not hold the device busy in the prediction */
  double q = c->run_dev > 0 ? c->run_dev - 0.5 : 0, st[3] = {c->t[i].dev_s[0], c->t[i].dev_s[1] * c->kerr / (1 - c->tenant),
                                                             c->t[i].dev_s[2]}, fa[3];
  for (int e = 0; e < 3; e++) fa[e] = fmin(c->dev_free[e], now + q * st[e]);
  double a = fmax(now + f, fa[0]) + h;
  double b = fmax(a, fa[1]) + x;
  double e = fmax(b, fa[2]) + d;
  if (free_at) free_at[0] = a, free_at[1] = b, free_at[2] = e;
  return e;
}

static double cpu_contention(const ts_hybrid_ctl *c) {
  double load = c->run_cpu + 1;
  return load > c->o.cores ? load / c->o.cores : 1;
}

ts_status ts_hybrid_ctl_start(ts_hybrid_ctl *c, double now, int i, ts_hybrid_decision *d) {
  if (i < 0 || i >= c->n) return ts_error(TS_ERR_INVALID_ARG, "hybrid controller: task %d out of 0..%d", i, c->n - 1);
  pthread_mutex_lock(&c->mu);
  if (c->state[i] == 1) { /* a retry: the first attempt is gone */
    if (c->cls[i] == TS_HYBRID_CPU) c->run_cpu--;
    else c->run_dev--;
  } else if (c->state[i] == 0) {
    c->unstarted--;
  }
  if (c->run_dev == 0) /* the engines are idle */
    for (int e = 0; e < 3; e++) c->dev_free[e] = now;
  ts_hybrid_decision dd = {TS_HYBRID_CPU, 0};
  switch (c->o.mode) {
  case TS_HYBRID_MODE_CPU: break;
  case TS_HYBRID_MODE_GPU: dd.cls = TS_HYBRID_DEV, dd.dev_frac = 1; break;
  case TS_HYBRID_MODE_STATIC:
    if (c->run_dev < c->o.static_k) dd.cls = TS_HYBRID_DEV, dd.dev_frac = 1;
    break;
  default: {
    bool tail = c->o.tail && c->unstarted < c->o.slots;
    if (c->o.tail && !tail) {
      /* also the tail when one CPU task would outlast the remaining work at the planned rate */
      means m = remaining_means(c);
      double rate = throughput(c, &m, c->k, NULL);
      tail = rate > 0 && c->t[i].units * c->cpu_unit * cpu_contention(c) > (c->unstarted + 1) / rate;
    }
    if (tail) {
      /* tail: the class that finishes this task first; the last task split so both end together */
      double cont = cpu_contention(c), cpu_end = now + c->t[i].units * c->cpu_unit * cont;
      double dev_end = dev_finish(c, i, 1, now, NULL);
      dd.cls = dev_end < cpu_end ? TS_HYBRID_DEV : TS_HYBRID_CPU;
      dd.dev_frac = dd.cls == TS_HYBRID_DEV ? 1 : 0;
      if (c->unstarted == 0 && c->run_cpu < c->o.cores) {
        double lo = 0, hi = 1;
        for (int it = 0; it < 40; it++) {
          double f = 0.5 * (lo + hi);
          double ce = now + (1 - f) * c->t[i].units * c->cpu_unit * cont, de = dev_finish(c, i, f, now, NULL);
          if (de > ce) hi = f;
          else lo = f;
        }
        double f = 0.5 * (lo + hi);
        if (f > 0.05 && f < 0.95) dd.cls = TS_HYBRID_SPLIT, dd.dev_frac = f;
      }
    } else if (c->run_dev < c->k) {
      dd.cls = TS_HYBRID_DEV, dd.dev_frac = 1;
    }
  }
  }
  if (dd.cls != TS_HYBRID_CPU) {
    double fa[3];
    dev_finish(c, i, dd.dev_frac, now, fa);
    memcpy(c->dev_free, fa, sizeof fa);
  }
  c->contention[i] = cpu_contention(c);
  c->state[i] = 1;
  c->cls[i] = (uint8_t)dd.cls;
  c->frac[i] = dd.dev_frac;
  if (dd.cls == TS_HYBRID_CPU) c->run_cpu++;
  else c->run_dev++;
  pthread_mutex_unlock(&c->mu);
  *d = dd;
  return TS_OK;
}

/* The largest co-tenant share the monitor reported over [t0, t1] (and the sample before t0). */
static double tenant_max(const ts_hybrid_ctl *c, double t0, double t1) {
  double mx = 0;
  int m = c->nhist < HIST ? c->nhist : HIST;
  for (int q = 0; q < m; q++) {
    int i = (c->nhist - 1 - q) % HIST;
    if (c->hist_t[i] > t1) continue;
    mx = fmax(mx, c->hist_v[i]);
    if (c->hist_t[i] < t0) break;
  }
  return mx;
}

void ts_hybrid_ctl_done(ts_hybrid_ctl *c, double now, const ts_hybrid_done *r) {
  if (r->task < 0 || r->task >= c->n) return;
  pthread_mutex_lock(&c->mu);
  int i = r->task;
  if (c->state[i] == 1) {
    if (c->cls[i] == TS_HYBRID_CPU) c->run_cpu--;
    else c->run_dev--;
    c->state[i] = 2;
    c->done_since++;
    double fr = c->frac[i];
    double cu = (1 - fr) * c->t[i].units;
    if (cu > 0 && r->cpu_s > 0) {
      double per_core = r->cpu_s / cu / c->contention[i];
      c->cpu_unit = (1 - EWMA) * c->cpu_unit + EWMA * per_core;
    }
    double du = fr * c->t[i].units;
    if (du > 0 && r->feed_s > 0) c->feed_unit = (1 - EWMA) * c->feed_unit + EWMA * (r->feed_s / du);
    double px = fr * c->t[i].dev_s[1];
    if (px > 0 && r->kernel_s > 0) {
      /* the model's own error, learnt only while no co-tenant was seen around the task's time on
       * the device (the monitor averages over a window, so a share changing under a kernel would
       * be mistaken for model error); under a co-tenant the monitor's share stretches the model */
      /* the model's own error, learnt only from tasks around which the monitor saw no co-tenant:
       * kept aside until the monitor has reported past the task's end (it averages over a window,
       * so a co-tenant arriving under a kernel shows up late and would be taken for model error);
       * under a co-tenant the monitor's share stretches the model instead */
      if (c->npend < PEND) c->pend[c->npend++] = (pending){now - r->dev_s, now, r->kernel_s / px};
    }
    replan(c, now);
  }
  pthread_mutex_unlock(&c->mu);
}

void ts_hybrid_ctl_monitor(ts_hybrid_ctl *c, double now, double busy, double own, int queued) {
  pthread_mutex_lock(&c->mu);
  c->busy = busy;
  c->own = own;
  c->queued = queued;
  double ten = busy - own;
  c->tenant = fmin(fmax(ten < 0.02 ? 0 : ten, 0), 0.99);
  c->hist_t[c->nhist % HIST] = now;
  c->hist_v[c->nhist % HIST] = c->tenant;
  c->nhist++;
  int keep = 0;
  for (int q = 0; q < c->npend; q++) {
    pending p = c->pend[q];
    if (p.t1 + GUARD > now) c->pend[keep++] = p; /* not yet seen past its end */
    else if (tenant_max(c, p.t0 - GUARD, p.t1 + GUARD) < 0.02)
      c->kerr = (1 - EWMA) * c->kerr + EWMA * fmin(fmax(p.err, 0.05), 50);
  }
  c->npend = keep;
  replan(c, now);
  pthread_mutex_unlock(&c->mu);
}

int ts_hybrid_ctl_events(const ts_hybrid_ctl *c, ts_hybrid_event *ev, int cap) {
  int n = c->nev < cap ? c->nev : cap;
  if (ev && n > 0) memcpy(ev, c->ev, (size_t)n * sizeof *ev);
  return c->nev;
}

int ts_hybrid_ctl_target(const ts_hybrid_ctl *c) { return c->k; }
