/* plan3d timing models: the 1F1B pipeline event simulation and the alpha-beta ring all-reduce. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan3d/plan3d_internal.h"

double ts_p3_allreduce_time(double bytes, int d, ts_p3_link link, int sharing) {
  if (d <= 1 || bytes <= 0) return 0;
  if (sharing < 1) sharing = 1;
  double bw = link.ar_bandwidth > 0 ? link.ar_bandwidth : link.bandwidth;
  double lat = link.ar_bandwidth > 0 ? link.ar_latency : link.latency;
  return 2.0 * (d - 1) / d * bytes * sharing / bw + 2.0 * (d - 1) * lat;
}

/* Stage s's k-th op in 1F1B order: warm-up forwards, then forward/backward pairs, then the
 * remaining backwards. *mb gets its micro-batch. */
static bool op_of(int S, int m, int s, int k, int *mb) {
  int w = S - s - 1 < m ? S - s - 1 : m;
  if (k < w) {
    *mb = k;
    return false;
  }
  int j = k - w;
  int steady = 2 * (m - w);
  if (j < steady) {
    *mb = j % 2 == 0 ? w + j / 2 : j / 2;
    return j % 2 == 1;
  }
  *mb = m - w + (j - steady);
  return true;
}

ts_status ts_p3_simulate_1f1b(int S, int m, const double *fwd, const double *bwd, const double *p2p, double *makespan,
                              ts_p3_event *events) {
  if (!fwd || !bwd || !makespan) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_simulate_1f1b: NULL argument");
  if (S < 1 || m < 1) return ts_error(TS_ERR_INVALID_ARG, "ts_p3_simulate_1f1b: %d stages, %d micro-batches", S, m);
  size_t n = (size_t)S * m;
  double *fend = malloc(n * sizeof *fend), *bend = malloc(n * sizeof *bend);
  double *free_at = calloc((size_t)S, sizeof *free_at);
  int *next = calloc((size_t)S, sizeof *next);
  if (!fend || !bend || !free_at || !next) {
    free(fend), free(bend), free(free_at), free(next);
    return ts_error(TS_ERR_OOM, "out of memory simulating %d stages x %d micro-batches", S, m);
  }
  for (size_t i = 0; i < n; i++) fend[i] = bend[i] = NAN;
  size_t done = 0, total = 2 * n;
  double end = 0;
  while (done < total) {
    size_t before = done;
    for (int s = 0; s < S; s++) {
      /* run stage s as far as its inputs allow */
      while (next[s] < 2 * m) {
        int mb;
        bool back = op_of(S, m, s, next[s], &mb);
        double ready;
        if (!back) {
          if (s == 0) ready = 0;
          else if (isnan(fend[(size_t)(s - 1) * m + mb])) break;
          else ready = fend[(size_t)(s - 1) * m + mb] + (p2p ? p2p[s - 1] : 0);
        } else {
          if (s == S - 1) ready = fend[(size_t)s * m + mb]; /* its own forward, earlier in order */
          else if (isnan(bend[(size_t)(s + 1) * m + mb])) break;
          else ready = bend[(size_t)(s + 1) * m + mb] + (p2p ? p2p[s] : 0);
        }
        double st = ready > free_at[s] ? ready : free_at[s];
        double en = st + (back ? bwd[s] : fwd[s]);
        (back ? bend : fend)[(size_t)s * m + mb] = en;
        free_at[s] = en;
        if (events) events[(size_t)2 * m * s + next[s]] = (ts_p3_event){s, mb, back, st, en};
        if (en > end) end = en;
        next[s]++;
        done++;
      }
    }
    if (done == before) break; /* cannot happen for 1F1B; guarded against an endless loop */
  }
  free(fend), free(bend), free(free_at), free(next);
  if (done < total) return ts_error(TS_ERR_INTERNAL, "1F1B simulation deadlocked after %zu of %zu ops", done, total);
  *makespan = end;
  return TS_OK;
}
