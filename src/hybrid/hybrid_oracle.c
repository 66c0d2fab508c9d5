/* The offline oracle: the best static split of a job's tasks between the CPU and the device, from
 * the measured CPU time of every task and the device model, knowing the co-tenant in advance. For
 * each count k of device-fed containers, tasks are ranked by their CPU time over their device
 * bottleneck time and every prefix of the ranking is tried as the device's set: the device's side
 * is simulated (k feeders taking the set in input order, three FIFO engines, the co-tenant), the
 * CPU's is the longest-processing-time schedule on min(S - k, C) cores, bounded below by all host
 * work (CPU tasks and feeds) over C cores. What the oracle has that the controller has not: every
 * task's CPU time and the co-tenant's intervals in advance, and the freedom to give each class its
 * tasks in any order (the engines start tasks in input order; a job whose cheap-on-device tasks
 * all come late is where that freedom shows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hybrid/hybrid_internal.h"

typedef struct rank {
  double r;
  int i;
} rank;

static int rank_cmp(const void *a, const void *b) {
  const rank *x = a, *y = b;
  return (x->r < y->r) - (x->r > y->r); /* descending */
}

static int dbl_desc(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

static double sim_device(int n, const uint8_t *set, const double *dev_s, const double *feed_s, int k,
                         const ts_hybrid_tenant *ten, int nten, double *feeder) {
  if (k <= 0) return 0;
  for (int f = 0; f < k; f++) feeder[f] = 0;
  double fr[3] = {0, 0, 0}, end = 0;
  for (int i = 0; i < n; i++) {
    if (!set[i]) continue;
    int f = 0;
    for (int g = 1; g < k; g++)
      if (feeder[g] < feeder[f]) f = g;
    double a = fmax(feeder[f] + feed_s[i], fr[0]) + dev_s[3 * i];
    double b = ts__hybrid_kernel_end(ten, nten, 0, fmax(a, fr[1]), dev_s[3 * i + 1]);
    double e = fmax(b, fr[2]) + dev_s[3 * i + 2];
    fr[0] = a, fr[1] = b, fr[2] = e;
    feeder[f] = e;
    if (e > end) end = e;
  }
  return end;
}

/* longest processing time first on m machines (sorted descending) */
static double lpt(int m, const double *sorted, int cnt, double *load) {
  if (cnt == 0) return 0;
  if (m <= 0) return INFINITY;
  for (int j = 0; j < m; j++) load[j] = 0;
  double mx = 0;
  for (int i = 0; i < cnt; i++) {
    int b = 0;
    for (int j = 1; j < m; j++)
      if (load[j] < load[b]) b = j;
    load[b] += sorted[i];
    if (load[b] > mx) mx = load[b];
  }
  return mx;
}

ts_status ts_hybrid_oracle(int n, const double *cpu_s, const double *dev_s, const double *feed_s, int slots, int cores,
                           const ts_hybrid_tenant *tenant, int ntenant, double *makespan, int *k_out, int *ndev_out,
                           uint8_t *dev_set) {
  if (n < 1 || slots < 1 || cores < 1) return ts_error(TS_ERR_INVALID_ARG, "hybrid oracle: empty job or pool");
  rank *rk = malloc((size_t)n * sizeof *rk);
  uint8_t *set = calloc((size_t)n, 1), *best = calloc((size_t)n, 1);
  double *load = malloc((size_t)(slots + cores) * sizeof *load), *cs = malloc((size_t)n * sizeof *cs);
  if (!rk || !set || !best || !load || !cs) {
    free(rk), free(set), free(best), free(load), free(cs);
    return ts_error(TS_ERR_OOM, "hybrid oracle: out of memory");
  }
  for (int i = 0; i < n; i++) {
    double b = fmax(dev_s[3 * i], fmax(dev_s[3 * i + 1], dev_s[3 * i + 2]));
    rk[i] = (rank){cpu_s[i] / fmax(b, 1e-12), i};
  }
  qsort(rk, (size_t)n, sizeof *rk, rank_cmp);
  double bm = INFINITY;
  int bk = 0, bn = 0;
  for (int k = 0; k <= slots; k++) {
    int m = slots - k < cores ? slots - k : cores;
    for (int j = (k == 0 ? 0 : 1); j <= (k == 0 ? 0 : n); j++) {
      memset(set, 0, (size_t)n);
      for (int q = 0; q < j; q++) set[rk[q].i] = 1;
      double host = 0;
      int cnt = 0;
      for (int i = 0; i < n; i++) {
        if (set[i]) host += feed_s[i];
        else cs[cnt++] = cpu_s[i], host += cpu_s[i];
      }
      qsort(cs, (size_t)cnt, sizeof *cs, dbl_desc);
      double cpu = fmax(lpt(m, cs, cnt, load), host / cores);
      double ms = fmax(cpu, sim_device(n, set, dev_s, feed_s, k, tenant, ntenant, load + cores));
      if (ms < bm) {
        bm = ms, bk = k, bn = j;
        memcpy(best, set, (size_t)n);
      }
    }
  }
  *makespan = bm;
  if (k_out) *k_out = bk;
  if (ndev_out) *ndev_out = bn;
  if (dev_set) memcpy(dev_set, best, (size_t)n);
  free(rk), free(set), free(best), free(load), free(cs);
  return TS_OK;
}
