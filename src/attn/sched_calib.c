/* Calibration of the scheduler's cost families on the workload itself (tessera/attn_sched.h,
 * ts_attn_sched_opts.calibrate_d): the pure configurations are planned and timed on one thread,
 * and each family's costs are scaled by measured / predicted. The block cost model (analytic or
 * profiled on in-cache blocks) misses what differs between families on a real mask: K/V rows
 * streamed from L2/L3 instead of L1 (a pass of 8 rows reloads every key twice as often as one of
 * 16), the softmax of an 8-row sub-tile running 16-lane vectors, and the call and item overheads of
 * thousands of small segments. */
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "attn/sched_internal.h"

/* Plans the configuration (choice[x] per piece, height[p] per panel) and times it. */
static ts_status time_config(ts__attn_timer *T, const ts__sched_build *B, const int *choice, const int *height, double *sec) {
  ts_attn_schedule s;
  TS_TRY(ts__sched_build_schedule(B, choice, height, &s));
  ts_attn_plan *pl = NULL;
  ts_status st = ts_attn_plan_create(&pl, T->ctx, &s, B->mask, T->d);
  if (st == TS_OK) st = ts__attn_time_plan(T, pl, s.n, sec);
  ts_attn_plan_destroy(pl);
  ts_attn_schedule_free(&s);
  return st;
}

ts_status ts__sched_calibrate(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                              double *scale) {
  const int64_t ni = pb->npieces, np = pb->npanels;
  const int nh = pb->nheights, nt = pb->ntiles;
  ts__attn_timer T;
  TS_TRY(ts__attn_timer_init(&T, B->mask->rows, o->calibrate_d, o->calibrate_dtype, 1, 3, 0.0, false));
  int *choice = malloc((size_t)(ni ? ni : 1) * sizeof *choice), *height = malloc((size_t)np * sizeof *height);
  ts_status st = choice && height ? TS_OK : ts_error(TS_ERR_OOM, "attn calibration: cannot allocate %lld pieces", (long long)ni);
  double pred_s = 0, pred_r = 0, meas;
  for (int h = 0; h < nh && st == TS_OK; h++) { /* everything merged at height h */
    double pred = 0;
    for (int64_t i = 0; i < ni; i++) choice[i] = nt + h, pred += pb->merge[i * nh + h];
    for (int64_t p = 0; p < np; p++) height[p] = h, pred += pb->open ? pb->open[p * nh + h] : 0.0;
    st = time_config(&T, B, choice, height, &meas);
    scale[1 + h] = pred > 0 ? meas / pred : 1.0;
  }
  if (st == TS_OK) { /* every piece standalone at its cheapest tile; residue passes at heights[0] (or MIXED) */
    for (int64_t i = 0; i < ni; i++) {
      int best = 0;
      for (int t = 1; t < nt; t++)
        if (pb->cost[i * nt + t] < pb->cost[i * nt + best]) best = t;
      choice[i] = best, pred_s += pb->cost[i * nt + best];
    }
    for (int64_t p = 0; p < np; p++) {
      bool open = nh > 0 && pb->must_open && pb->must_open[p];
      height[p] = open ? 0 : -1;
      if (open && pb->open) pred_r += pb->open[p * nh];
      if (pb->base) pred_s += pb->base[p];
    }
    st = time_config(&T, B, choice, height, &meas);
    /* measured = s_blk * pred_s + s_0 * pred_r; s_blk at least a tenth of the mean scale */
    double rest = meas - (nh > 0 ? scale[1] : 0.0) * pred_r, lo = 0.1 * meas / (pred_s + pred_r > 0 ? pred_s + pred_r : 1);
    scale[0] = pred_s > 0 ? (rest / pred_s > lo ? rest / pred_s : lo) : 1.0;
  }
  free(choice), free(height);
  ts__attn_timer_free(&T);
  return st;
}
