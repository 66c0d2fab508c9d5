/* The scheduler's two CBC models (formulation: tessera/attn_sched.h): the aggregated one (every
 * panel in its best configuration; exact P||Cmax over a[p,q] and M) and the full one (x[i,c] piece
 * choices, y[p,h] pass heights, a[p,q], w[p,q], M). Both are warm-started from the solution they are
 * given, with threads relabelled by first use so it satisfies the symmetry rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/sched_internal.h"

/* Threads relabelled by first use along the rank order (so panel of rank r uses a thread <= r). */
static void relabel(const ts__sched *S, const int32_t *thread, int32_t *out) {
  int32_t map[TS_ATTN_THREAD_MAX];
  for (int q = 0; q < S->P; q++) map[q] = -1;
  int32_t next = 0;
  for (int64_t r = 0; r < S->pb->npanels; r++) {
    int64_t p = S->rank[r];
    if (map[thread[p]] < 0) map[thread[p]] = next++;
    out[p] = map[thread[p]];
  }
}

static void fill_info(ts_ilp *m, const ts_ilp_result *res, ts_attn_sched_info *info) {
  info->ilp_vars = ts_ilp_num_vars(m);
  info->ilp_rows = ts_ilp_num_rows(m);
  info->ilp_status = res->status;
  info->ilp_seconds = res->seconds;
  info->ilp_nodes = res->nodes;
  if (isfinite(res->objective) && isfinite(res->bound) && res->objective != 0)
    info->ilp_gap = fabs(res->objective - res->bound) / fabs(res->objective);
}

/* a[p][q] variables (q <= pos[p], else -1) and M, shared by both models. */
static ts_status add_assign_vars(const ts__sched *S, ts_ilp *m, double scale, int *av, int *Mv) {
  for (int64_t p = 0; p < S->pb->npanels; p++)
    for (int q = 0; q < S->P; q++) {
      av[p * S->P + q] = -1;
      if (q <= S->pos[p]) TS_TRY(ts_ilp_add_binary(m, NULL, 0.0, &av[p * S->P + q]));
    }
  double lsum = 0, lmax = 0; /* M >= the lower bound (valid: every panel's load is >= its best) */
  for (int64_t p = 0; p < S->pb->npanels; p++) lsum += S->lbest[p], lmax = S->lbest[p] > lmax ? S->lbest[p] : lmax;
  double lb = lsum / S->P > lmax ? lsum / S->P : lmax;
  return ts_ilp_add_continuous(m, "M", scale * lb * (1 - 1e-9), INFINITY, 1.0, Mv);
}

static ts_status solve(ts_ilp *m, const ts_attn_sched_opts *o, const double *w, ts_ilp_result *res, ts_attn_sched_info *info) {
  ts_ilp_set_warm_start(m, w, ts_ilp_num_vars(m));
  ts_ilp_options io;
  ts_ilp_options_default(&io);
  io.time_limit = o->time_limit;
  io.rel_gap = o->rel_gap;
  ts_status st = ts_ilp_solve(m, &io, res);
  fill_info(m, res, info);
  return st;
}

/* thread[p] = the q with the largest a[p][q] in the solution. */
static void read_threads(const ts__sched *S, const int *av, const double *x, int32_t *thread) {
  for (int64_t p = 0; p < S->pb->npanels; p++) {
    int bq = -1;
    for (int q = 0; q < S->P; q++)
      if (av[p * S->P + q] >= 0 && (bq < 0 || x[av[p * S->P + q]] > x[av[p * S->P + bq]])) bq = q;
    thread[p] = bq;
  }
}

ts_status ts__sched_ilp_aggregated(const ts__sched *S, const ts_attn_sched_opts *o, double scale, int *tile, int *height,
                                   int32_t *thread, ts_attn_sched_info *info) {
  const int64_t np = S->pb->npanels;
  const int P = S->P;
  int *av = malloc((size_t)(np * P) * sizeof *av), Mv = -1;
  int32_t *rel = malloc((size_t)np * sizeof *rel);
  double *w = NULL, *gl = calloc((size_t)P, sizeof *gl);
  ts_ilp_row rb = {0};
  ts_ilp *m = NULL;
  ts_ilp_result res = {0};
  ts_status st = TS_OK;
  if (!av || !rel || !gl) st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the aggregated model (%lld panels)", (long long)np);
  if (st == TS_OK) st = ts_ilp_create(&m);
  if (st == TS_OK) st = add_assign_vars(S, m, scale, av, &Mv);
  for (int64_t p = 0; p < np && st == TS_OK; p++) { /* one thread per panel */
    for (int q = 0; q < P && st == TS_OK; q++)
      if (av[p * P + q] >= 0) st = ts_ilp_row_push(&rb, av[p * P + q], 1.0);
    if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_EQ, 1.0);
  }
  for (int q = 0; q < P && st == TS_OK; q++) { /* thread loads <= M */
    for (int64_t p = 0; p < np && st == TS_OK; p++)
      if (av[p * P + q] >= 0) st = ts_ilp_row_push(&rb, av[p * P + q], scale * S->lbest[p]);
    if (st == TS_OK) st = ts_ilp_row_push(&rb, Mv, -1.0);
    if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_LE, 0.0);
  }
  if (st == TS_OK && !(w = calloc((size_t)ts_ilp_num_vars(m), sizeof *w)))
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the warm start");
  if (st == TS_OK) { /* warm start: the given assignment (its panels' best-configuration loads) */
    relabel(S, thread, rel);
    double mk = 0;
    for (int64_t p = 0; p < np; p++) w[av[p * P + rel[p]]] = 1.0, gl[rel[p]] += scale * S->lbest[p];
    for (int q = 0; q < P; q++) mk = gl[q] > mk ? gl[q] : mk;
    w[Mv] = mk;
    st = solve(m, o, w, &res, info);
  }
  if (st == TS_OK) {
    read_threads(S, av, res.x, thread);
    for (int64_t p = 0; p < np; p++) {
      ts__sched_config(S, p, S->best_h[p], tile);
      if (height) height[p] = S->best_h[p];
    }
  }
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);
  free(av), free(rel), free(w), free(gl), ts_ilp_row_free(&rb);
  return st;
}

/* Candidate c of piece i as a choice: c < k its c-th cheapest tile, else merged at height c - k. */
static int cand_choice(const ts__sched *S, int64_t i, int c) {
  return c < S->k ? S->cand[i * S->k + c] : S->pb->ntiles + (c - S->k);
}

/* Appends -L_p(x, y) (panel p's load without its base, scaled) to the row being built. */
static ts_status push_load(const ts__sched *S, ts_ilp_row *rb, const int *xv, const int *yv, int64_t p, double scale) {
  const ts_attn_sched_problem *pb = S->pb;
  const int nh = S->nh, nc = S->k + nh;
  for (int64_t x = S->pstart[p]; x < S->pstart[p + 1]; x++)
    for (int c = 0; c < nc; c++) {
      int64_t i = S->plist[x];
      TS_TRY(ts_ilp_row_push(rb, xv[i * nc + c], -scale * ts__sched_choice(pb, i, cand_choice(S, i, c))));
    }
  for (int h = 0; h < nh; h++) TS_TRY(ts_ilp_row_push(rb, yv[p * nh + h], -scale * ts__sched_open(pb, p, h)));
  return TS_OK;
}

ts_status ts__sched_ilp_full(const ts__sched *S, const ts_attn_sched_opts *o, double scale, int *tile, int *height,
                             int32_t *thread, ts_attn_sched_info *info) {
  const ts_attn_sched_problem *pb = S->pb;
  const int64_t np = pb->npanels, ni = pb->npieces;
  const int P = S->P, nh = S->nh, nc = S->k + nh;
  const double eps = o->tie_break > 0 ? o->tie_break : 0.0;
  int *xv = malloc((size_t)(ni ? ni * nc : 1) * sizeof *xv), *yv = malloc((size_t)(np * (nh ? nh : 1)) * sizeof *yv);
  int *av = malloc((size_t)(np * P) * sizeof *av), *wv = malloc((size_t)(np * P) * sizeof *wv), Mv = -1;
  int32_t *rel = malloc((size_t)np * sizeof *rel);
  double *w = NULL, *gl = calloc((size_t)P, sizeof *gl), bsum = 0;
  ts_ilp_row rb = {0};
  ts_ilp *m = NULL;
  ts_ilp_result res = {0};
  ts_status st = TS_OK;
  if (!xv || !yv || !av || !wv || !rel || !gl) st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the full model");
  if (st == TS_OK) st = ts_ilp_create(&m);
  for (int64_t i = 0; i < ni && st == TS_OK; i++)
    for (int c = 0; c < nc && st == TS_OK; c++)
      st = ts_ilp_add_binary(m, NULL, eps * scale * ts__sched_choice(pb, i, cand_choice(S, i, c)), &xv[i * nc + c]);
  for (int64_t p = 0; p < np && st == TS_OK; p++)
    for (int h = 0; h < nh && st == TS_OK; h++) st = ts_ilp_add_binary(m, NULL, eps * scale * ts__sched_open(pb, p, h), &yv[p * nh + h]);
  if (st == TS_OK) st = add_assign_vars(S, m, scale, av, &Mv);
  for (int64_t p = 0; p < np && st == TS_OK; p++)
    for (int q = 0; q < P && st == TS_OK; q++) {
      wv[p * P + q] = -1;
      if (av[p * P + q] >= 0) st = ts_ilp_add_continuous(m, NULL, 0.0, scale * S->umax[p], 0.0, &wv[p * P + q]);
    }
  for (int64_t i = 0; i < ni && st == TS_OK; i++) { /* one choice per piece; merged only at an open height */
    for (int c = 0; c < nc && st == TS_OK; c++) st = ts_ilp_row_push(&rb, xv[i * nc + c], 1.0);
    if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_EQ, 1.0);
    for (int h = 0; h < nh && st == TS_OK; h++) {
      st = ts_ilp_row_push(&rb, xv[i * nc + S->k + h], 1.0);
      if (st == TS_OK) st = ts_ilp_row_push(&rb, yv[pb->piece_panel[i] * nh + h], -1.0);
      if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_LE, 0.0);
    }
  }
  for (int64_t p = 0; p < np && st == TS_OK; p++) { /* at most one height (exactly one with residue); one thread */
    if (nh > 0) {
      for (int h = 0; h < nh && st == TS_OK; h++) st = ts_ilp_row_push(&rb, yv[p * nh + h], 1.0);
      if (st == TS_OK) st = ts_ilp_row_add(m, &rb, ts__sched_must(pb, p) ? TS_ILP_EQ : TS_ILP_LE, 1.0);
    }
    for (int q = 0; q < P && st == TS_OK; q++)
      if (av[p * P + q] >= 0) st = ts_ilp_row_push(&rb, av[p * P + q], 1.0);
    if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_EQ, 1.0);
  }
  for (int64_t p = 0; p < np && st == TS_OK; p++) /* w[p,q] - L_p - U_p a[p,q] >= base_p - U_p */
    for (int q = 0; q < P && st == TS_OK; q++) {
      if (av[p * P + q] < 0) continue;
      double U = scale * S->umax[p];
      st = push_load(S, &rb, xv, yv, p, scale);
      if (st == TS_OK) st = ts_ilp_row_push(&rb, wv[p * P + q], 1.0);
      if (st == TS_OK) st = ts_ilp_row_push(&rb, av[p * P + q], -U);
      if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_GE, scale * ts__sched_base(pb, p) - U);
    }
  for (int64_t p = 0; p < np; p++) bsum += scale * ts__sched_base(pb, p);
  for (int64_t p = 0; p < np && st == TS_OK; p++) st = push_load(S, &rb, xv, yv, p, scale); /* P M - sum L >= sum base */
  if (st == TS_OK) st = ts_ilp_row_push(&rb, Mv, P);
  if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_GE, bsum);
  for (int q = 0; q < P && st == TS_OK; q++) { /* sum_p w[p,q] <= M */
    for (int64_t p = 0; p < np && st == TS_OK; p++)
      if (wv[p * P + q] >= 0) st = ts_ilp_row_push(&rb, wv[p * P + q], 1.0);
    if (st == TS_OK) st = ts_ilp_row_push(&rb, Mv, -1.0);
    if (st == TS_OK) st = ts_ilp_row_add(m, &rb, TS_ILP_LE, 0.0);
  }
  if (st == TS_OK && !(w = calloc((size_t)ts_ilp_num_vars(m), sizeof *w)))
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the warm start");
  if (st == TS_OK) { /* warm start: the given solution */
    relabel(S, thread, rel);
    bool ok = true;
    for (int64_t p = 0; p < np; p++) {
      double L = ts__sched_base(pb, p);
      int h = height ? height[p] : -1;
      if (h >= 0) w[yv[p * nh + h]] = 1.0, L += ts__sched_open(pb, p, h);
      for (int64_t x = S->pstart[p]; x < S->pstart[p + 1]; x++) {
        int64_t i = S->plist[x];
        int found = -1;
        for (int c = 0; c < nc; c++)
          if (cand_choice(S, i, c) == tile[i]) found = c;
        if (found < 0) ok = false;
        else w[xv[i * nc + found]] = 1.0, L += ts__sched_choice(pb, i, tile[i]);
      }
      w[av[p * P + rel[p]]] = 1.0;
      w[wv[p * P + rel[p]]] = scale * L;
      gl[rel[p]] += scale * L;
    }
    double mk = 0;
    for (int q = 0; q < P; q++) mk = gl[q] > mk ? gl[q] : mk;
    w[Mv] = mk;
    if (!ok) memset(w, 0, (size_t)ts_ilp_num_vars(m) * sizeof *w); /* no valid start: CBC alone (rejected as infeasible) */
    st = solve(m, o, w, &res, info);
  }
  if (st == TS_OK) {
    read_threads(S, av, res.x, thread);
    for (int64_t i = 0; i < ni; i++) {
      int bc = 0;
      for (int c = 1; c < nc; c++)
        if (res.x[xv[i * nc + c]] > res.x[xv[i * nc + bc]]) bc = c;
      tile[i] = cand_choice(S, i, bc);
    }
    for (int64_t p = 0; height && p < np; p++) {
      height[p] = -1;
      for (int h = 0; h < nh; h++)
        if (res.x[yv[p * nh + h]] > 0.5) height[p] = h;
    }
  }
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);
  free(xv), free(yv), free(av), free(wv), free(rel), free(w), free(gl), ts_ilp_row_free(&rb);
  return st;
}
