/* Planner driver: for each reordering candidate, the row order (ts_reorder in rectangular mode on
 * the cout x cin connectivity: only the row order matters to the partitions, the union of a
 * partition is read in ascending channel order whatever the column order), the knapsack's
 * partition sizes for that order, the greedy assignment (consecutive chunks of the order), then
 * the neighbourhood ILPs on the most promising candidates (and on `none`, kept for the
 * "with vs without reordering" comparison). The cheapest predicted assignment wins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gconv/gconv_internal.h"
#include "tessera/measure.h"

const char *ts_gconv_solver_name(ts_gconv_solver s) {
  return s == TS_GCONV_SOLVER_ILP ? "ilp" : s == TS_GCONV_SOLVER_GREEDY ? "greedy" : "?";
}

ts_status ts_gconv_solver_parse(const char *name, ts_gconv_solver *out) {
  if (name && strcmp(name, "ilp") == 0) *out = TS_GCONV_SOLVER_ILP;
  else if (name && strcmp(name, "greedy") == 0) *out = TS_GCONV_SOLVER_GREEDY;
  else return ts_error(TS_ERR_INVALID_ARG, "gconv solver '%s' is not one of ilp, greedy", name ? name : "(null)");
  return TS_OK;
}

void ts_gconv_plan_opts_default(ts_gconv_plan_opts *o) {
  memset(o, 0, sizeof *o);
  const ts_reorder_method ms[] = {TS_REORDER_NONE, TS_REORDER_RCM, TS_REORDER_HC, TS_REORDER_IC};
  memcpy(o->methods, ms, sizeof ms);
  o->nmethods = 4;
  o->solver = TS_GCONV_SOLVER_ILP;
  o->time_limit = 1.0;
  o->ilp_candidates = 2;
  o->max_rows = 32;
  o->ilp_group = 2;
  o->keep_none = true;
  o->seed = 1;
}

static ts_status check_opts(const ts_gconv_plan_opts *o) {
  if (o->nmethods < 1 || o->nmethods > TS_GCONV_MAX_CANDIDATES)
    return ts_error(TS_ERR_INVALID_ARG, "gconv plan: %d reorder candidates (1..%d)", o->nmethods, TS_GCONV_MAX_CANDIDATES);
  for (int i = 0; i < o->nmethods; i++) {
    ts_reorder_method m = o->methods[i];
    if (m < 0 || m >= TS_REORDER_METHOD_COUNT || m == TS_REORDER_AUTO || m == TS_REORDER_MORTON || m == TS_REORDER_HILBERT || m == TS_REORDER_RASTER)
      return ts_error(TS_ERR_INVALID_ARG, "gconv plan: reorder candidate '%s' does not apply to a connectivity (none, rcm, hc, ic, metis)",
                      ts_reorder_method_name(m));
    for (int j = 0; j < i; j++)
      if (o->methods[j] == m)
        return ts_error(TS_ERR_INVALID_ARG, "gconv plan: reorder candidate '%s' given twice", ts_reorder_method_name(m));
  }
  if (!(o->time_limit > 0) || o->time_limit > 3600)
    return ts_error(TS_ERR_INVALID_ARG, "gconv plan: time_limit must be in (0, 3600] s, got %g", o->time_limit);
  if (o->max_rows < 1 || o->max_rows > TS_GCONV_PROFILE_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "gconv plan: max_rows must be in [1, %d], got %d", TS_GCONV_PROFILE_MAX, o->max_rows);
  if (o->ilp_group < 2 || o->ilp_group > 4)
    return ts_error(TS_ERR_INVALID_ARG, "gconv plan: ilp_group must be in [2, 4], got %d", o->ilp_group);
  if (o->ilp_candidates < 0 || o->ilp_candidates > TS_GCONV_MAX_CANDIDATES)
    return ts_error(TS_ERR_INVALID_ARG, "gconv plan: ilp_candidates must be in [0, %d], got %d", TS_GCONV_MAX_CANDIDATES,
                    o->ilp_candidates);
  if (o->solver != TS_GCONV_SOLVER_ILP && o->solver != TS_GCONV_SOLVER_GREEDY)
    return ts_error(TS_ERR_INVALID_ARG, "gconv plan: solver %d out of range", (int)o->solver);
  return TS_OK;
}

void ts_gconv_plan_free(ts_gconv_plan *p) {
  if (!p) return;
  ts_free(p->parts), ts_free(p->rows_buf), ts_free(p->in_buf);
  ts_free(p->none_parts), ts_free(p->none_rows_buf), ts_free(p->none_in_buf);
  memset(p, 0, sizeof *p);
}

ts_status ts_gconv_plan_validate(const ts_gconv_plan *p, const ts_csr *conn) {
  if (!p) return ts_error(TS_ERR_INVALID_ARG, "gconv plan: NULL");
  TS_TRY(ts_gconv_conn_check(&p->layer, conn));
  TS_TRY(ts__gconv_parts_check(p->parts, p->nparts, conn, "gconv plan"));
  if (p->none_nparts) TS_TRY(ts__gconv_parts_check(p->none_parts, p->none_nparts, conn, "gconv plan (none)"));
  return TS_OK;
}

uint64_t ts_gconv_plan_key(const ts_gconv_layer *l, const ts_csr *conn, const ts_gconv_cost *m,
                           const ts_gconv_plan_opts *o) {
  ts_gconv_plan_opts d;
  if (!o) ts_gconv_plan_opts_default(&d), o = &d;
  ts_hash h;
  ts_hash_init(&h, "gconv-plan");
  ts_hash_i64(&h, TS__GCONV_PLANNER_VERSION);
  ts_hash_i64(&h, (int64_t)ts_gconv_conn_hash(conn));
  const int64_t ly[] = {l->n, l->cin, l->cout, l->h, l->w, l->ksize, l->stride};
  ts_hash_bytes(&h, ly, sizeof ly);
  ts_hash_str(&h, ts_gconv_cost_source(m)), ts_hash_str(&h, ts_cpu()->model);
  const int64_t ints[] = {o->nmethods, (int64_t)o->solver, o->ilp_candidates, o->max_rows, o->ilp_group, o->keep_none};
  ts_hash_bytes(&h, ints, sizeof ints);
  for (int i = 0; i < o->nmethods; i++) ts_hash_i64(&h, (int64_t)o->methods[i]);
  ts_hash_f64(&h, o->time_limit);
  ts_hash_i64(&h, (int64_t)o->seed);
  return h.h;
}

/* Row order of one candidate into order [cout]. */
static ts_status row_order(const ts_csr *conn, ts_reorder_method method, uint64_t seed, int32_t *order,
                           int32_t *colscratch) {
  if (method == TS_REORDER_NONE) {
    ts_perm_identity(order, conn->rows);
    return TS_OK;
  }
  ts_reorder_opts ro;
  ts_reorder_opts_default(&ro);
  ro.method = method;
  ro.mode = TS_REORDER_MODE_RECTANGULAR;
  ro.seed = seed;
  ro.dense_frac = 0; /* connectivity rows have similar degrees: no "global tokens" */
  return ts_reorder(conn, &ro, order, colscratch, NULL);
}

/* A candidate's two starts: the knapsack's sizes dealt in order (ka), and the optimal cut of the
 * order into segments (seg); `best` points at the cheaper one after the ILP (or the greedy). */
typedef struct cand_work {
  ts__gconv_assign ka, seg;
  double ka_cost, seg_cost;
  ts__gconv_assign *best;
} cand_work;

static void pick_best(cand_work *w) { w->best = w->seg_cost < w->ka_cost ? &w->seg : &w->ka; }

/* ts__gconv_assign_cost gives INFINITY when it cannot allocate its scratch arrays: that is out of
 * memory, not a price (a plan must not depend on which allocation failed) */
static ts_status priced(double cost) {
  return isinf(cost) ? ts_error(TS_ERR_OOM, "gconv plan: out of memory pricing partitions") : TS_OK;
}

ts_status ts_gconv_plan_make(const ts_gconv_layer *l, const ts_csr *conn, const ts_gconv_cost *m,
                             const ts_gconv_plan_opts *o, ts_gconv_plan *out) {
  if (!out) return ts_error(TS_ERR_INVALID_ARG, "gconv plan: NULL output");
  memset(out, 0, sizeof *out);
  TS_TRY(ts_gconv_conn_check(l, conn));
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "gconv plan: no cost model");
  ts_gconv_plan_opts d;
  if (!o) ts_gconv_plan_opts_default(&d), o = &d;
  TS_TRY(check_opts(o));
  const double t0 = ts_now();
  ts__gconv_rowbits rb;
  TS_TRY(ts__gconv_rowbits_make(conn, &rb));
  const int nc = o->nmethods;
  cand_work W[TS_GCONV_MAX_CANDIDATES];
  memset(W, 0, sizeof W);
  int32_t *order = ts_malloc((size_t)l->cout * sizeof(int32_t)), *cols = ts_malloc((size_t)l->cin * sizeof(int32_t));
  int32_t *sizes = ts_malloc((size_t)l->cout * sizeof(int32_t));
  ts_status s = order && cols && sizes ? TS_OK : TS_ERR_OOM;
  ts_progress pr;
  if (o->progress) ts_progress_begin(&pr, "gconv plan", 2 * nc);
  out->best_none = -1;
  for (int i = 0; s == TS_OK && i < nc; i++) {
    ts_gconv_candidate *c = &out->cand[i];
    c->method = o->methods[i];
    if (c->method == TS_REORDER_NONE) out->best_none = i;
    double t = ts_now();
    s = row_order(conn, c->method, o->seed, order, cols);
    c->reorder_ms = (ts_now() - t) * 1e3;
    int32_t np = 0;
    t = ts_now();
    if (s == TS_OK) s = ts__gconv_knapsack_sizes(l, &rb, order, m, o->max_rows, sizes, &np);
    c->knapsack_ms = (ts_now() - t) * 1e3;
    t = ts_now();
    if (s == TS_OK) s = ts__gconv_greedy(order, l->cout, sizes, np, &W[i].ka);
    if (s == TS_OK) s = ts__gconv_segment(l, &rb, order, m, o->max_rows, sizes, &np);
    if (s == TS_OK) s = ts__gconv_greedy(order, l->cout, sizes, np, &W[i].seg);
    c->greedy_ms = (ts_now() - t) * 1e3;
    if (s == TS_OK) {
      W[i].ka_cost = ts__gconv_assign_cost(l, &rb, m, &W[i].ka);
      W[i].seg_cost = ts__gconv_assign_cost(l, &rb, m, &W[i].seg);
      s = priced(W[i].ka_cost);
      if (s == TS_OK) s = priced(W[i].seg_cost);
      pick_best(&W[i]);
      c->knapsack_pred_ms = W[i].ka_cost * 1e3, c->segment_pred_ms = W[i].seg_cost * 1e3;
      c->greedy_pred_ms = c->pred_ms = (W[i].best == &W[i].seg ? W[i].seg_cost : W[i].ka_cost) * 1e3;
    }
    if (o->progress) ts_progress_update(&pr, i + 1);
  }
  out->ncand = nc;
  /* ILP on the ilp_candidates best greedy candidates, and on `none` */
  if (s == TS_OK && o->solver == TS_GCONV_SOLVER_ILP) {
    int rank[TS_GCONV_MAX_CANDIDATES];
    for (int i = 0; i < nc; i++) rank[i] = i;
    for (int i = 1; i < nc; i++)
      for (int j = i; j > 0 && out->cand[rank[j]].greedy_pred_ms < out->cand[rank[j - 1]].greedy_pred_ms; j--) {
        int t = rank[j];
        rank[j] = rank[j - 1], rank[j - 1] = t;
      }
    for (int r = 0; s == TS_OK && r < nc; r++) {
      int i = rank[r];
      if (r >= o->ilp_candidates && i != out->best_none) continue;
      ts_gconv_candidate *c = &out->cand[i];
      /* the knapsack's sizes first (the ILP re-deals channels at those sizes); the segment cut
       * with the time left when it is still the cheaper */
      ts__gconv_ilp_stats st, st2;
      const double ti = ts_now();
      s = ts__gconv_ilp_improve(l, conn, &rb, m, o->ilp_group, o->time_limit, &W[i].ka, &st);
      if (s == TS_OK) W[i].ka_cost = ts__gconv_assign_cost(l, &rb, m, &W[i].ka);
      if (s == TS_OK) s = priced(W[i].ka_cost);
      /* the segment cut's turn only when a solve as long as the longest so far still fits */
      const double left = o->time_limit - (ts_now() - ti);
      if (s == TS_OK && W[i].seg_cost < W[i].ka_cost && left > 0.01 && left > st.max_solve_s) {
        s = ts__gconv_ilp_improve(l, conn, &rb, m, o->ilp_group, left, &W[i].seg, &st2);
        if (s == TS_OK) W[i].seg_cost = ts__gconv_assign_cost(l, &rb, m, &W[i].seg);
        if (s == TS_OK) s = priced(W[i].seg_cost);
        st.solves += st2.solves, st.improved += st2.improved, st.timeout |= st2.timeout;
      }
      pick_best(&W[i]);
      c->ilp_ran = true;
      c->ilp_ms = (ts_now() - ti) * 1e3;
      c->ilp_solves = st.solves;
      c->ilp_improved = st.improved;
      c->ilp_timeout = st.timeout;
      c->pred_ms = (W[i].best == &W[i].seg ? W[i].seg_cost : W[i].ka_cost) * 1e3;
      if (o->progress) ts_progress_update(&pr, nc + r + 1);
    }
  }
  if (o->progress) ts_progress_end(&pr);
  int win = 0;
  for (int i = 1; s == TS_OK && i < nc; i++)
    if (out->cand[i].pred_ms < out->cand[win].pred_ms) win = i;
  for (int i = 0; s == TS_OK && i < nc; i++) {
    out->cand[i].segment_won = W[i].best == &W[i].seg;
    out->cand[i].nparts = 0;
    for (int32_t p = 0; p < W[i].best->nparts; p++) out->cand[i].nparts += W[i].best->size[p] > 0;
  }
  if (s == TS_OK) s = ts__gconv_assign_to_parts(&rb, W[win].best, &out->parts, &out->rows_buf, &out->in_buf, &out->nparts);
  if (s == TS_OK && o->keep_none && out->best_none >= 0 && out->best_none != win)
    s = ts__gconv_assign_to_parts(&rb, W[out->best_none].best, &out->none_parts, &out->none_rows_buf, &out->none_in_buf,
                                  &out->none_nparts);
  for (int i = 0; i < nc; i++) ts__gconv_assign_free(&W[i].ka), ts__gconv_assign_free(&W[i].seg);
  ts_free(order), ts_free(cols), ts_free(sizes);
  ts__gconv_rowbits_free(&rb);
  if (s != TS_OK) {
    ts_gconv_plan_free(out);
    return s == TS_ERR_OOM ? ts_error(TS_ERR_OOM, "gconv plan: out of memory") : s;
  }
  out->layer = *l;
  out->nnz = conn->nnz;
  out->conn_hash = ts_gconv_conn_hash(conn);
  out->method = out->cand[win].method;
  out->solver = o->solver;
  out->pred_ms = out->cand[win].pred_ms;
  out->dense_pred_ms = ts_gconv_cost_part(m, l, l->cout, l->cin) * 1e3;
  snprintf(out->cost_source, sizeof out->cost_source, "%s", ts_gconv_cost_source(m));
  snprintf(out->cpu_model, sizeof out->cpu_model, "%s", ts_cpu()->model);
  out->key = ts_gconv_plan_key(l, conn, m, o);
  out->plan_ms = (ts_now() - t0) * 1e3;
  return TS_OK;
}
