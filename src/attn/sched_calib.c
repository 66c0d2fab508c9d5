/* Measurements the scheduler makes on the workload itself (tessera/attn_sched.h,
 * ts_attn_sched_opts.calibrate_d):
 *  - CALIBRATION: the pure configurations are planned and timed on one thread, and each family's
 *    costs are scaled by measured / predicted. The block cost model (analytic or profiled on
 *    in-cache blocks) misses what differs between families on a real mask: K/V rows streamed from
 *    L2/L3 instead of L1, the lanes an 8-row sub-tile leaves idle (free on Zen 4's half-rate zmm
 *    FMAs, not on Zen 5's full-rate ones), and the call and item overheads of thousands of small
 *    segments.
 *  - GUARD: the solved schedule is timed against the block-skip schedules of the fixed tiles the
 *    cost model ranks cheapest on this (reordered) mask, and the fastest is kept: on masks where
 *    one tile fits everywhere (a band: window1d) the per-block model can rank a mix of tiles and
 *    passes above it when it is not, and a measurement settles it.
 * All timings: plans side by side in interleaved rounds, fastest call each (ts__attn_time_plans),
 * thread CPU time, batch = heads = 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "attn/sched_internal.h"

/* Rounds of the interleaved timings. */
#define CALIB_ROUNDS 5
/* Fixed tiles the guard times, and the margin a fixed tile must win by to replace the schedule
 * (below it the difference is noise, and the solved schedule keeps its thread assignment). */
#define GUARD_TILES 3
#define GUARD_MARGIN 0.03

ts_status ts__sched_calibrate(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                              double *scale) {
  const int64_t ni = pb->npieces, np = pb->npanels, n = B->mask->rows;
  const int nh = pb->nheights, nt = pb->ntiles, nconf = nh + 1;
  ts__attn_timer T;
  TS_TRY(ts__attn_timer_init(&T, n, o->calibrate_d, o->calibrate_dtype, 1, 1, 0.0, false));
  int *choice = malloc((size_t)(ni ? ni : 1) * sizeof *choice), *height = malloc((size_t)np * sizeof *height);
  ts_attn_plan *plans[5] = {0};
  double pred[5] = {0}, meas[5], pred_r = 0;
  ts_status st = choice && height ? TS_OK : ts_error(TS_ERR_OOM, "attn calibration: cannot allocate %lld pieces", (long long)ni);
  for (int c = 0; c < nconf && st == TS_OK; c++) { /* c < nh: everything merged at height c; c = nh: standalone */
    for (int64_t i = 0; i < ni; i++) {
      if (c < nh) {
        choice[i] = nt + c, pred[c] += pb->merge[i * nh + c];
        continue;
      }
      int best = 0; /* every piece standalone at its cheapest tile; residue passes at heights[0] (or MIXED) */
      for (int t = 1; t < nt; t++)
        if (pb->cost[i * nt + t] < pb->cost[i * nt + best]) best = t;
      choice[i] = best, pred[c] += pb->cost[i * nt + best];
    }
    for (int64_t p = 0; p < np; p++) {
      if (c < nh) {
        height[p] = c, pred[c] += pb->open ? pb->open[p * nh + c] : 0.0;
        continue;
      }
      bool open = nh > 0 && pb->must_open && pb->must_open[p];
      height[p] = open ? 0 : -1;
      if (open && pb->open) pred_r += pb->open[p * nh];
      if (pb->base) pred[c] += pb->base[p];
    }
    ts_attn_schedule s;
    st = ts__sched_build_schedule(B, choice, height, &s);
    if (st == TS_OK) {
      st = ts_attn_plan_create(&plans[c], T.ctx, &s, B->mask, T.d);
      ts_attn_schedule_free(&s);
    }
  }
  if (st == TS_OK) st = ts__attn_time_plans(&T, plans, nconf, n, CALIB_ROUNDS, meas);
  if (st == TS_OK) {
    for (int h = 0; h < nh; h++) scale[1 + h] = pred[h] > 0 ? meas[h] / pred[h] : 1.0;
    /* standalone: measured = s_blk * pred_s + s_0 * pred_r; s_blk at least a tenth of the mean scale */
    double ps = pred[nh], rest = meas[nh] - (nh > 0 ? scale[1] : 0.0) * pred_r;
    double lo = 0.1 * meas[nh] / (ps + pred_r > 0 ? ps + pred_r : 1);
    scale[0] = ps > 0 ? (rest / ps > lo ? rest / ps : lo) : 1.0;
  }
  for (int c = 0; c < nconf; c++) ts_attn_plan_destroy(plans[c]);
  free(choice), free(height);
  ts__attn_timer_free(&T);
  return st;
}

ts_status ts__sched_guard(const ts_bitmap *mask, const ts_attn_sched_opts *o, const ts_attn_tile *menu, int nmenu,
                          ts_attn_schedule *s, ts_attn_sched_info *info) {
  const int64_t n = mask->rows;
  const int ng = nmenu < GUARD_TILES ? nmenu : GUARD_TILES;
  ts_attn_cost_fn cost = o->cost ? o->cost : ts_attn_cost_default;
  double *pred = malloc((size_t)nmenu * sizeof *pred);
  int best[GUARD_TILES];
  ts_attn_schedule fs[GUARD_TILES] = {{0}};
  ts_attn_plan *plans[GUARD_TILES + 1] = {0};
  double meas[GUARD_TILES + 1];
  ts__attn_timer T;
  memset(&T, 0, sizeof T);
  ts_status st = pred ? TS_OK : ts_error(TS_ERR_OOM, "attn guard: cannot allocate %d predictions", nmenu);
  for (int t = 0; t < nmenu && st == TS_OK; t++) { /* the model's total of each fixed tile on this mask */
    ts_attn_schedule b;
    st = ts_attn_schedule_blockskip(&b, n, menu[t].br, menu[t].bc);
    if (st == TS_OK) st = ts_attn_schedule_predict(&b, mask, cost, o->cost_user, 1, NULL, &pred[t]);
    ts_attn_schedule_free(&b);
  }
  for (int g = 0; g < ng && st == TS_OK; g++) { /* the ng cheapest (selection; ties: menu order) */
    best[g] = -1;
    for (int t = 0; t < nmenu; t++) {
      bool used = false;
      for (int u = 0; u < g; u++) used |= best[u] == t;
      if (!used && (best[g] < 0 || pred[t] < pred[best[g]])) best[g] = t;
    }
    st = ts_attn_schedule_blockskip(&fs[g], n, menu[best[g]].br, menu[best[g]].bc);
  }
  if (st == TS_OK) st = ts__attn_timer_init(&T, n, o->calibrate_d, o->calibrate_dtype, 1, 1, 0.0, false);
  if (st == TS_OK) st = ts_attn_plan_create(&plans[0], T.ctx, s, mask, T.d);
  for (int g = 0; g < ng && st == TS_OK; g++) st = ts_attn_plan_create(&plans[1 + g], T.ctx, &fs[g], mask, T.d);
  if (st == TS_OK) st = ts__attn_time_plans(&T, plans, 1 + ng, n, CALIB_ROUNDS, meas);
  if (st == TS_OK) {
    int w = 0;
    for (int g = 1; g <= ng; g++)
      if (meas[g] < meas[w]) w = g;
    info->guarded = true;
    info->guard_schedule_s = meas[0];
    info->guard_fixed_s = w ? meas[w] : 1e300;
    for (int g = 1; g <= ng; g++) info->guard_fixed_s = meas[g] < info->guard_fixed_s ? meas[g] : info->guard_fixed_s;
    if (w > 0 && meas[w] < (1 - GUARD_MARGIN) * meas[0]) { /* a fixed tile wins: it replaces the schedule */
      ts_attn_schedule_free(s);
      *s = fs[w - 1];
      memset(&fs[w - 1], 0, sizeof fs[w - 1]);
      info->fallback = menu[best[w - 1]];
    }
  }
  for (int g = 0; g <= ng; g++) ts_attn_plan_destroy(plans[g]);
  for (int g = 0; g < ng; g++) ts_attn_schedule_free(&fs[g]);
  if (T.ctx) ts__attn_timer_free(&T);
  free(pred);
  return st;
}
