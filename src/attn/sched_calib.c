/* Measurements the scheduler makes on the workload itself (tessera/attn_sched.h,
 * ts_attn_sched_opts.calibrate_d):
 *  - CALIBRATION: the pure configurations are planned and timed on one thread, and each family's
 *    costs are scaled by measured / predicted. The block cost model (analytic or profiled on
 *    in-cache blocks) misses what differs between families on a real mask: K/V rows streamed from
 *    L2/L3 instead of L1, the lanes an 8-row sub-tile leaves idle (free on Zen 4's half-rate zmm
 *    FMAs, not on Zen 5's full-rate ones), and the call and item overheads of thousands of small
 *    segments.
 *  - GUARD: the solved schedule is timed against the pure compact configurations (everything in
 *    passes of one height) and the block-skip schedules of the fixed tiles the cost model ranks
 *    cheapest on this (reordered) mask, and the fastest is kept: the per-piece choices rest on a
 *    model of blocks timed alone, which misprices thousands of small pieces (window2d k = 7: a
 *    schedule with 1467 standalone 16 x 128 pieces measured 0.99 ms where everything merged at 16
 *    rows took 0.64 and fixed 16 x 16 tiles 0.92, one head, one thread), and on masks where one
 *    tile fits everywhere (a band: window1d) the fixed tile can win.
 * All timings: plans side by side in interleaved rounds, compared by the median of their ratios to
 * the first plan within a round (ts__attn_time_plans), thread CPU time on one thread (a preempted
 * call still reads its own run time), batch 1. Calibration: one head (it scales per-thread costs).
 * Guard: ts_attn_sched_opts.calibrate_heads heads (default 1; <= GUARD_HEADS and GUARD_TOKENS). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/profile_internal.h"
#include "attn/sched_internal.h"

/* Rounds of the interleaved timings. */
#define CALIB_ROUNDS 7
/* Fixed tiles the guard times, and the margin a fixed tile must win by to replace the schedule
 * (below it the difference is noise, and the solved schedule keeps its thread assignment). */
#define GUARD_TILES 3
#define GUARD_MARGIN 0.03
/* A near tie (the best alternative faster than the schedule, but not by the margin) is timed
 * again, the two plans alone over this many rounds, and decided on that reading: with 7 rounds the
 * median ratio of one plan pair moves by a few percent from run to run, so a candidate 4-6% faster
 * (vitdet's block-aligned panels) was kept or dropped by chance. */
#define GUARD_RETIME_ROUNDS 21
/* DIAG passes are timed when their cells, priced TS__ATTN_DIAG_COST each, are below this factor
 * times the 16-row compact passes' (the price is a one-machine average: near ties get measured) */
#define GUARD_DIAG_SLACK 1.25
/* At most this many heads in the guard's executes, and heads x tokens at most GUARD_TOKENS (its
 * time grows with them: 4 heads of 64^2 tokens, 1 of 128^2). */
#define GUARD_HEADS 8
#define GUARD_TOKENS 16384

/* Pure configuration c of pb into choice/height: c < nh everything merged into passes of height c,
 * c = nh every piece standalone at its cheapest tile (residue passes at heights[0], or MIXED).
 * *pred: the configuration's predicted total; *pred_r (c = nh): the part that is residue passes. */
static void pure_config(const ts_attn_sched_problem *pb, int c, int *choice, int *height, double *pred, double *pred_r) {
  const int64_t ni = pb->npieces, np = pb->npanels;
  const int nh = pb->nheights, nt = pb->ntiles;
  *pred = *pred_r = 0;
  for (int64_t i = 0; i < ni; i++) {
    if (c < nh) {
      choice[i] = nt + c, *pred += pb->merge[i * nh + c];
      continue;
    }
    int best = 0;
    for (int t = 1; t < nt; t++)
      if (pb->cost[i * nt + t] < pb->cost[i * nt + best]) best = t;
    choice[i] = best, *pred += pb->cost[i * nt + best];
  }
  for (int64_t p = 0; p < np; p++) {
    if (c < nh) {
      height[p] = c, *pred += pb->open ? pb->open[p * nh + c] : 0.0;
      continue;
    }
    bool open = nh > 0 && pb->must_open && pb->must_open[p];
    height[p] = open ? 0 : -1;
    if (open && pb->open) *pred_r += pb->open[p * nh];
    if (pb->base) *pred += pb->base[p];
  }
}

/* Plans pure configuration c (see pure_config) on T's context. */
static ts_status pure_plan(const ts__sched_build *B, const ts_attn_sched_problem *pb, int c, ts__attn_timer *T, int *choice,
                           int *height, double *pred, double *pred_r, ts_attn_plan **plan, ts_attn_schedule *keep) {
  pure_config(pb, c, choice, height, pred, pred_r);
  ts_attn_schedule s;
  TS_TRY(ts__sched_build_schedule(B, choice, height, &s));
  ts_status st = ts_attn_plan_create(plan, T->ctx, &s, B->mask, T->d);
  if (keep && st == TS_OK) *keep = s;
  else ts_attn_schedule_free(&s);
  return st;
}

ts_status ts__sched_calibrate(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                              double *scale) {
  const int64_t ni = pb->npieces, np = pb->npanels, n = B->mask->rows;
  const int nh = pb->nheights, nconf = nh + 1;
  ts__attn_timer T;
  TS_TRY(ts__attn_timer_init(&T, n, o->calibrate_d, o->calibrate_dtype, 1, 1, 0.0, false));
  ts_status sp = ts__attn_timer_set_pass(&T, o->calibrate_pass);
  if (sp != TS_OK) {
    ts__attn_timer_free(&T);
    return sp;
  }
  int *choice = malloc((size_t)(ni ? ni : 1) * sizeof *choice), *height = malloc((size_t)np * sizeof *height);
  ts_attn_plan *plans[5] = {0};
  double pred[5] = {0}, meas[5], pred_r = 0, unused;
  ts_status st = choice && height ? TS_OK : ts_error(TS_ERR_OOM, "attn calibration: cannot allocate %lld pieces", (long long)ni);
  for (int c = 0; c < nconf && st == TS_OK; c++)
    st = pure_plan(B, pb, c, &T, choice, height, &pred[c], c == nh ? &pred_r : &unused, &plans[c], NULL);
  /* the residue passes of the standalone configuration priced as they run (their own keys only):
   * pb->open[.][0] is the pass's cost beyond the pieces' marginals, which also holds the keys the
   * pieces share, and made standalone blocks look ~40% cheaper than measured (window2d k = 13) */
  if (st == TS_OK && nh > 0 && n >= TS__ATTN_RUN) st = ts__sched_cover_price(B, o->heights[0], NULL, &pred_r);
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

/* 16-row DIAG passes over the panels of s, items of bc offsets, run dynamically. */
static ts_status diag_schedule(const ts_attn_schedule *s, int32_t bc, ts_attn_schedule *g) {
  TS_TRY(ts_attn_schedule_alloc(g, s->n, s->npanels, s->npanels));
  for (int64_t p = 0; p < s->npanels; p++) {
    g->panels[p] = (ts_attn_panel){s->panels[p].r0, s->panels[p].nr, p, 1};
    g->segs[p] = (ts_attn_segment){s->panels[p].r0, s->panels[p].nr, 0, (int32_t)s->n, 16, bc, TS_ATTN_SEG_DIAG};
  }
  return TS_OK;
}

static int cmp_i32(const void *a, const void *b) {
  const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}
/* The panel [cuts[p], cuts[p + 1]) holding row v (cuts ascending from 0, v >= 0). */
static int64_t panel_of(const int32_t *cuts, int64_t nc, int32_t v) {
  int64_t lo = 0, hi = nc;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (cuts[mid] <= v) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/* Block-aligned panels (a guard candidate): the solve's blocks (B->blocks, which its 128-row panels
 * cut into pieces) with panels cut wherever a block starts or ends, and each block's part of a
 * panel one tile segment of BLOCK_BR rows whose column tile spans the block (up to TS_ATTN_TILE_MAX
 * keys; wider blocks take several). A window-like block then runs in full-width 64-row sub-tiles
 * over all its keys at once, where 128-row panels cut it into partial sub-tiles and the solver's
 * menu (bc <= 128) into two or more column tiles (vitdet at 64^2, windows of 196 keys: 1.05-1.11x
 * the solved schedule, docs/notes/BENCHMARKS.md). Blocks narrower than BLOCK_MIN_COLS (a few global
 * tokens' columns down many rows) cut no panel; their segments cover the rows they meet. A COMPACT
 * segment over all columns takes whatever the blocks leave. *ok false, no schedule: no blocks, or
 * panels under BLOCK_MIN_ROWS rows on average. */
#define BLOCK_BR 64
#define BLOCK_MIN_ROWS 16
#define BLOCK_MIN_COLS 16
static ts_status block_panels(const ts__sched_build *B, const ts_attn_sched_opts *o, ts_attn_schedule *g, bool *ok) {
  *ok = false;
  const int64_t nb = B->nblocks, n = B->mask->rows;
  if (nb < 1 || !B->blocks) return TS_OK;
  const ts_block *b = B->blocks;
  int32_t *cuts = malloc((size_t)(2 * nb + 2) * sizeof *cuts);
  int64_t *cnt = NULL;
  ts_status st = cuts ? TS_OK : ts_error(TS_ERR_OOM, "attn guard: cannot allocate %lld blocks", (long long)nb);
  int64_t nc = 0;
  if (st == TS_OK) {
    cuts[nc++] = 0, cuts[nc++] = (int32_t)n;
    for (int64_t k = 0; k < nb; k++) /* thin blocks (a few global columns) cut no panel: they start mid-panel */
      if (b[k].cols >= BLOCK_MIN_COLS) cuts[nc++] = (int32_t)b[k].row0, cuts[nc++] = (int32_t)(b[k].row0 + b[k].rows);
    qsort(cuts, (size_t)nc, sizeof *cuts, cmp_i32);
    int64_t u = 0;
    for (int64_t k = 0; k < nc; k++)
      if (u == 0 || cuts[k] != cuts[u - 1]) cuts[u++] = cuts[k];
    nc = u; /* panels: [cuts[p], cuts[p + 1]) */
  }
  const int64_t np = nc - 1;
  if (st == TS_OK && np >= 1 && n / np >= BLOCK_MIN_ROWS) {
    cnt = calloc((size_t)np + 1, sizeof *cnt);
    if (!cnt) st = ts_error(TS_ERR_OOM, "attn guard: cannot allocate %lld panels", (long long)np);
    for (int64_t k = 0; k < nb && st == TS_OK; k++) /* segments per panel: the panels each block spans */
      for (int64_t p = panel_of(cuts, nc, (int32_t)b[k].row0); p < np && cuts[p] < b[k].row0 + b[k].rows; p++) cnt[p + 1]++;
    for (int64_t p = 0; p < np && st == TS_OK; p++) cnt[p + 1] += cnt[p] + 1; /* + the COMPACT residue */
    if (st == TS_OK) st = ts_attn_schedule_alloc(g, n, np, cnt[np]);
    for (int64_t p = 0; p < np && st == TS_OK; p++) {
      g->panels[p] = (ts_attn_panel){.r0 = cuts[p], .nr = cuts[p + 1] - cuts[p], .seg0 = cnt[p], .nseg = cnt[p + 1] - cnt[p]};
      g->segs[cnt[p + 1] - 1] = (ts_attn_segment){.r0 = cuts[p], .nr = cuts[p + 1] - cuts[p], .c0 = 0, .nc = (int32_t)n,
                                                  .br = o->nheights > 0 ? o->heights[0] : 16, .bc = o->compact_bc,
                                                  .kind = TS_ATTN_SEG_COMPACT};
    }
    int64_t *fill = st == TS_OK ? malloc((size_t)np * sizeof *fill) : NULL;
    if (st == TS_OK && !fill) st = ts_error(TS_ERR_OOM, "attn guard: cannot allocate %lld panels", (long long)np);
    for (int64_t p = 0; p < np && st == TS_OK; p++) fill[p] = cnt[p];
    for (int64_t k = 0; k < nb && st == TS_OK; k++) {
      const int32_t b0 = (int32_t)b[k].row0, b1 = (int32_t)(b[k].row0 + b[k].rows), w = (int32_t)b[k].cols;
      const int32_t bc = w >= TS_ATTN_TILE_MAX ? TS_ATTN_TILE_MAX : (w + 15) / 16 * 16;
      for (int64_t p = panel_of(cuts, nc, b0); p < np && cuts[p] < b1; p++) {
        const int32_t r0 = cuts[p] > b0 ? cuts[p] : b0, r1 = cuts[p + 1] < b1 ? cuts[p + 1] : b1;
        g->segs[fill[p]++] = (ts_attn_segment){.r0 = r0, .nr = r1 - r0, .c0 = (int32_t)b[k].col0, .nc = w, .br = BLOCK_BR,
                                               .bc = bc, .kind = TS_ATTN_SEG_MIXED};
      }
    }
    free(fill);
    *ok = st == TS_OK;
    if (st != TS_OK) ts_attn_schedule_free(g);
  }
  free(cuts), free(cnt);
  return st;
}

/* The heads of the guard's executes: calibrate_heads, at most GUARD_HEADS and GUARD_TOKENS heads x
 * tokens. */
static int64_t guard_heads(const ts_attn_sched_opts *o, int64_t n) {
  int64_t H = o->calibrate_heads < 1 ? 1 : o->calibrate_heads > GUARD_HEADS ? GUARD_HEADS : o->calibrate_heads;
  if (H > 1 && H * n > GUARD_TOKENS) H = GUARD_TOKENS / n > 1 ? GUARD_TOKENS / n : 1;
  return H;
}

ts_status ts__sched_diag_first(const ts__sched_build *B, const ts_attn_sched_opts *o, const ts_attn_schedule *s, bool *wins) {
  *wins = false;
  if (!(B->diag_ratio < 1.0)) return TS_OK; /* not predicted to win outright */
  const int64_t n = B->mask->rows;
  ts__attn_timer T;
  memset(&T, 0, sizeof T);
  ts_attn_schedule g = {0};
  ts_attn_plan *plans[2] = {0};
  double meas[2];
  ts_status st = ts__attn_timer_init_heads(&T, n, o->calibrate_d, o->calibrate_dtype, guard_heads(o, n));
  if (st == TS_OK) st = ts__attn_timer_set_pass(&T, o->calibrate_pass);
  if (st == TS_OK) st = diag_schedule(s, o->compact_bc, &g);
  if (st == TS_OK) st = ts_attn_plan_create(&plans[0], T.ctx, s, B->mask, T.d);
  if (st == TS_OK) st = ts_attn_plan_create(&plans[1], T.ctx, &g, B->mask, T.d);
  if (st == TS_OK) st = ts__attn_time_plans(&T, plans, 2, n, CALIB_ROUNDS, meas);
  if (st == TS_OK) *wins = meas[1] < (1 - GUARD_MARGIN) * meas[0];
  ts_attn_plan_destroy(plans[0]), ts_attn_plan_destroy(plans[1]);
  ts_attn_schedule_free(&g);
  if (T.ctx) ts__attn_timer_free(&T);
  return st;
}

ts_status ts__sched_guard(const ts__sched_build *B, const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o,
                          ts_attn_schedule *s, ts_attn_sched_info *info) {
  const ts_bitmap *mask = B->mask;
  const int64_t n = mask->rows, ni = pb->npieces, np = pb->npanels;
  const int nmenu = B->nmenu, nf = nmenu < GUARD_TILES ? nmenu : GUARD_TILES, nh = pb->nheights;
  const ts_attn_tile *menu = B->menu;
  ts_attn_cost_fn cost = o->cost ? o->cost : ts_attn_cost_default;
  /* candidates: [0] the solved schedule, [1 .. nh] everything in passes of each height, then the
   * nf fixed tiles the model ranks cheapest, then (ndg = 1) DIAG passes of 16 rows on the solved
   * schedule's panels, when their cells at TS__ATTN_DIAG_COST come within GUARD_DIAG_SLACK of the
   * 16-row compact passes' (sliding windows in the natural order) */
  const int ndg = B->diag_ratio < GUARD_DIAG_SLACK ? 1 : 0;
  double *pred = malloc((size_t)nmenu * sizeof *pred), meas[1 + 4 + GUARD_TILES + 2], unused;
  int *choice = malloc((size_t)(ni ? ni : 1) * sizeof *choice), *height = malloc((size_t)np * sizeof *height);
  int best[GUARD_TILES];
  ts_attn_schedule cand[1 + 4 + GUARD_TILES + 2];
  ts_attn_plan *plans[1 + 4 + GUARD_TILES + 2] = {0};
  memset(cand, 0, sizeof cand);
  /* then (nbk = 1) the blocks on block-aligned panels, last */
  bool have_bk = false;
  ts_status sb = block_panels(B, o, &cand[1 + nh + nf + ndg], &have_bk);
  const int nbk = have_bk ? 1 : 0, nc = 1 + nh + nf + ndg + nbk, idg = 1 + nh + nf, ibk = idg + ndg;
  ts__attn_timer T;
  memset(&T, 0, sizeof T);
  ts_status st = sb != TS_OK ? sb
                 : pred && choice && height ? TS_OK
                                            : ts_error(TS_ERR_OOM, "attn guard: cannot allocate %d predictions", nmenu);
  for (int t = 0; t < nmenu && st == TS_OK; t++) { /* the model's total of each fixed tile on this mask */
    ts_attn_schedule b;
    st = ts_attn_schedule_blockskip(&b, n, menu[t].br, menu[t].bc);
    if (st == TS_OK) st = ts_attn_schedule_predict(&b, mask, cost, o->cost_user, 1, NULL, &pred[t]);
    ts_attn_schedule_free(&b);
  }
  for (int g = 0; g < nf && st == TS_OK; g++) { /* the nf cheapest (selection; ties: menu order) */
    best[g] = -1;
    for (int t = 0; t < nmenu; t++) {
      bool used = false;
      for (int u = 0; u < g; u++) used |= best[u] == t;
      if (!used && (best[g] < 0 || pred[t] < pred[best[g]])) best[g] = t;
    }
    st = ts_attn_schedule_blockskip(&cand[1 + nh + g], n, menu[best[g]].br, menu[best[g]].bc);
  }
  if (st == TS_OK) st = ts__attn_timer_init_heads(&T, n, o->calibrate_d, o->calibrate_dtype, guard_heads(o, n));
  if (st == TS_OK) st = ts__attn_timer_set_pass(&T, o->calibrate_pass);
  if (st == TS_OK) st = ts_attn_plan_create(&plans[0], T.ctx, s, mask, T.d);
  for (int h = 0; h < nh && st == TS_OK; h++)
    st = pure_plan(B, pb, h, &T, choice, height, &unused, &unused, &plans[1 + h], &cand[1 + h]);
  for (int g = 0; g < nf && st == TS_OK; g++) st = ts_attn_plan_create(&plans[1 + nh + g], T.ctx, &cand[1 + nh + g], mask, T.d);
  if (ndg && st == TS_OK) st = diag_schedule(s, o->compact_bc, &cand[idg]); /* over the solved schedule's panels */
  if (ndg && st == TS_OK) st = ts_attn_plan_create(&plans[idg], T.ctx, &cand[idg], mask, T.d);
  if (nbk && st == TS_OK) st = ts_attn_plan_create(&plans[ibk], T.ctx, &cand[ibk], mask, T.d);
  if (st == TS_OK) st = ts__attn_time_plans(&T, plans, nc, n, CALIB_ROUNDS, meas);
  if (st == TS_OK) {
    int w = 0, wf = 1 + nh;
    for (int c = 1; c < nc; c++)
      if (meas[c] < meas[w]) w = c;
    for (int c = 1 + nh; c < 1 + nh + nf; c++)
      if (meas[c] < meas[wf]) wf = c;
    if (w > 0 && meas[w] >= (1 - GUARD_MARGIN) * meas[0]) { /* a near tie: time the two again, longer */
      ts_attn_plan *pair[2] = {plans[0], plans[w]};
      double m2[2];
      st = ts__attn_time_plans(&T, pair, 2, n, GUARD_RETIME_ROUNDS, m2);
      if (st == TS_OK) {
        /* the other candidates keep their first-reading ratio to the schedule, put on the second
         * reading's scale: readings of different rounds on a shared machine are not comparable */
        double k = m2[0] / meas[0];
        for (int c = 1; c < nc; c++)
          if (c != w) meas[c] *= k;
        meas[0] = m2[0], meas[w] = m2[1], info->guard_retimed = true;
      }
    }
    info->guarded = true;
    info->guard_schedule_s = meas[0];
    info->guard_fixed_s = nf > 0 ? meas[wf] : 1e300;
    info->guard_diag_s = ndg ? meas[idg] : 0.0;
    info->guard_blocks_s = nbk ? meas[ibk] : 0.0;
    if (st == TS_OK && w > 0 && meas[w] < (1 - GUARD_MARGIN) * meas[0]) { /* an alternative wins: it replaces the schedule */
      ts_attn_schedule_free(s);
      *s = cand[w];
      memset(&cand[w], 0, sizeof cand[w]);
      info->guard_fallback_s = meas[w];
      info->block_panels = nbk && w == ibk;
      if (info->block_panels) info->fallback = (ts_attn_tile){BLOCK_BR, TS_ATTN_TILE_MAX}, info->fallback_kind = TS_ATTN_SEG_MIXED;
      else if (w > nh + nf) info->fallback = (ts_attn_tile){16, o->compact_bc}, info->fallback_kind = TS_ATTN_SEG_DIAG;
      else if (w > nh) info->fallback = menu[best[w - 1 - nh]], info->fallback_kind = TS_ATTN_SEG_MIXED;
      else info->fallback = (ts_attn_tile){o->heights[w - 1], o->compact_bc}, info->fallback_kind = TS_ATTN_SEG_COMPACT;
    }
  }
  for (int c = 0; c < nc; c++) {
    ts_attn_plan_destroy(plans[c]);
    if (c > 0) ts_attn_schedule_free(&cand[c]);
  }
  if (T.ctx) ts__attn_timer_free(&T);
  free(pred), free(choice), free(height);
  return st;
}
