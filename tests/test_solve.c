/* Solvers vs brute force on random small instances (fixed seeds): ILP (binary, integer, one
 * continuous variable; <=, >=, == rows; min/max), knapsack, multiple-choice, partition DPs,
 * Pareto ranks and hypervolume; plus warm starts, time limits, LPs, bad inputs, and GA/NSGA-II
 * on problems with known optima and fronts. Coefficients are multiples of 1/8 or 1/2, so sums
 * are exact; the 1e-6 tolerance on ILP objectives only absorbs CBC's own rounding. */
#include "solve/ilp_internal.h" /* ts__ilp_warm, ts__ilp_verdict: CBC outcomes it rarely gives */
#include "tessera/solve.h"
#include "tst.h"

static int64_t rint_in(ts_rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)ts_rng_below(r, (uint64_t)(hi - lo + 1));
}

/* The result holds a solution that passes the model's own check. */
static bool checked(const ts_ilp *m, const ts_ilp_result *res) {
  bool f = false;
  return res->x && ts_ilp_check(m, res->x, res->nvars, &f, NULL, 0) == TS_OK && f;
}

/* ---- ILP vs brute force ----------------------------------------------------------------- */

#define MV 16
#define MR 6
typedef struct rinst {
  int nv, nint; /* variables 0..nint-1 are binary/integer, nint (if < nv) is continuous */
  int kind[MV];
  double lo[MV], hi[MV], obj[MV];
  int nrows, cmp[MR];
  double a[MR][MV], rhs[MR];
  bool max;
} rinst;

static void gen_inst(ts_rng *r, rinst *p) {
  memset(p, 0, sizeof *p);
  int nb = (int)rint_in(r, 1, 10), ni = (int)rint_in(r, 0, 2), nc = (int)rint_in(r, 0, 1);
  p->nint = nb + ni, p->nv = nb + ni + nc, p->max = ts_rng_below(r, 2);
  double x0[MV];
  for (int j = 0; j < p->nv; j++) {
    p->kind[j] = j < nb ? TS_ILP_BINARY : j < p->nint ? TS_ILP_INTEGER : TS_ILP_CONTINUOUS;
    p->lo[j] = j < nb ? 0 : j < p->nint ? (double)rint_in(r, -2, 1) : -3;
    p->hi[j] = j < nb ? 1 : j < p->nint ? p->lo[j] + (double)rint_in(r, 0, 3) : 5;
    p->obj[j] = (double)rint_in(r, -80, 80) / 8;
    x0[j] = j < p->nint ? (double)rint_in(r, (int64_t)p->lo[j], (int64_t)p->hi[j]) : (double)rint_in(r, -6, 10) / 2;
  }
  bool random_rhs = ts_rng_below(r, 4) == 0;
  p->nrows = (int)rint_in(r, 1, MR);
  for (int i = 0; i < p->nrows; i++) {
    double act = 0;
    for (int j = 0; j < p->nv; j++) {
      if (ts_rng_below(r, 3) == 0) continue;
      p->a[i][j] = j < p->nint ? (double)rint_in(r, -5, 5) : (double)rint_in(r, -4, 4) / 2;
      act += p->a[i][j] * x0[j];
    }
    p->cmp[i] = (int)ts_rng_below(r, 3);
    double slack = (double)rint_in(r, 0, 3);
    p->rhs[i] = random_rhs ? (double)rint_in(r, -6, 6)
                : p->cmp[i] == TS_ILP_LE ? act + slack
                : p->cmp[i] == TS_ILP_GE ? act - slack
                                         : act + (ts_rng_below(r, 5) == 0 ? 1 : 0);
  }
}

/* Best objective by enumeration of the integer part; the continuous variable (if any) is
 * then a 1-D LP: an interval from the rows, the objective picks an end. */
static bool brute_inst(const rinst *p, double *best) {
  int64_t combos = 1;
  for (int j = 0; j < p->nint; j++) combos *= (int64_t)(p->hi[j] - p->lo[j] + 1);
  bool found = false;
  double x[MV];
  for (int64_t c = 0; c < combos; c++) {
    int64_t t = c;
    for (int j = 0; j < p->nint; j++) {
      int64_t span = (int64_t)(p->hi[j] - p->lo[j] + 1);
      x[j] = p->lo[j] + (double)(t % span), t /= span;
    }
    bool ok = true;
    double ylo = -3, yhi = 5;
    for (int i = 0; i < p->nrows && ok; i++) {
      double s = 0;
      for (int j = 0; j < p->nint; j++) s += p->a[i][j] * x[j];
      double ay = p->nv > p->nint ? p->a[i][p->nint] : 0, res = p->rhs[i] - s;
      if (ay == 0) {
        ok = p->cmp[i] == TS_ILP_LE ? 0 <= res : p->cmp[i] == TS_ILP_GE ? 0 >= res : res == 0;
        continue;
      }
      double v = res / ay;
      bool upper = (p->cmp[i] == TS_ILP_LE) == (ay > 0);
      if (p->cmp[i] == TS_ILP_EQ) ylo = fmax(ylo, v), yhi = fmin(yhi, v);
      else if (upper) yhi = fmin(yhi, v);
      else ylo = fmax(ylo, v);
    }
    if (!ok || ylo > yhi + 1e-12) continue;
    double val = 0;
    for (int j = 0; j < p->nint; j++) val += p->obj[j] * x[j];
    if (p->nv > p->nint) {
      double cy = p->obj[p->nint];
      val += cy * ((cy > 0) != p->max ? ylo : yhi);
    }
    if (!found || (p->max ? val > *best : val < *best)) *best = val;
    found = true;
  }
  return found;
}

static ts_ilp *build_inst(const rinst *p) {
  ts_ilp *m = NULL;
  if (ts_ilp_create(&m) != TS_OK) return NULL;
  for (int j = 0; j < p->nv; j++)
    ts_ilp_add_var(m, (ts_ilp_var_kind)p->kind[j], NULL, p->lo[j], p->hi[j], p->obj[j], NULL);
  int idx[MV];
  for (int j = 0; j < p->nv; j++) idx[j] = j;
  for (int i = 0; i < p->nrows; i++) /* dense rows: add_row drops the zeros */
    ts_ilp_add_row(m, NULL, p->nv, idx, p->a[i], (ts_ilp_cmp)p->cmp[i], p->rhs[i], NULL);
  ts_ilp_set_maximize(m, p->max);
  return m;
}

static void test_ilp_brute(void) {
  ts_rng r;
  ts_rng_seed(&r, 2024);
  int infeasible = 0, with_cont = 0, bad = 0;
  for (int it = 0; it < 200; it++) {
    rinst p;
    gen_inst(&r, &p);
    double want = 0;
    bool feas = brute_inst(&p, &want);
    ts_ilp *m = build_inst(&p);
    ts_ilp_result res;
    ts_status st = ts_ilp_solve(m, NULL, &res);
    bool ok = !feas ? st == TS_ERR_INFEASIBLE && res.status == TS_ILP_INFEASIBLE && !res.x
                    : st == TS_OK && res.status == TS_ILP_OPTIMAL && checked(m, &res) &&
                          fabs(res.objective - want) <= 1e-6 && fabs(ts_ilp_eval(m, res.x) - res.objective) <= 1e-9;
    for (int j = 0; ok && feas && j < p.nint; j++) ok = res.x[j] == floor(res.x[j]); /* exactly integral */
    infeasible += !feas, with_cont += feas && p.nv > p.nint;
    if (!ok && bad++ < 5)
      CHECK(0, "instance %d (%d vars, %d rows, %s): brute %s %g, ilp %s (%s) obj %g: %s", it, p.nv, p.nrows,
            p.max ? "max" : "min", feas ? "feasible" : "infeasible", want, ts_strerror(st),
            ts_ilp_status_name(res.status), res.objective, ts_last_error());
    ts_ilp_result_free(&res);
    ts_ilp_destroy(m);
  }
  CHECK(bad == 0, "%d of 200 random ILPs disagree with brute force", bad);
  CHECK(infeasible >= 10 && with_cont >= 40, "coverage: %d infeasible, %d with a continuous variable", infeasible,
        with_cont);
}

/* ---- ILP: LPs, warm start, time limit, errors -------------------------------------------- */

static void test_ilp_lp(void) {
  /* max 3x + 2y  s.t. x + y <= 4, x + 3y <= 6, x <= 3  ->  x = 3, y = 1, objective 11 */
  ts_ilp *m;
  CHECK_OK(ts_ilp_create(&m));
  int x, y;
  CHECK_OK(ts_ilp_add_continuous(m, "x", 0, INFINITY, 3, &x));
  CHECK_OK(ts_ilp_add_continuous(m, "y", 0, INFINITY, 2, &y));
  int v[2] = {x, y};
  CHECK_OK(ts_ilp_add_row(m, "a", 2, v, (double[]){1, 1}, TS_ILP_LE, 4, NULL));
  CHECK_OK(ts_ilp_add_row(m, "b", 2, v, (double[]){1, 3}, TS_ILP_LE, 6, NULL));
  CHECK_OK(ts_ilp_add_row(m, "c", 1, v, (double[]){1}, TS_ILP_LE, 3, NULL));
  ts_ilp_set_maximize(m, true);
  ts_ilp_result res;
  CHECK_OK(ts_ilp_solve(m, NULL, &res));
  CHECK(res.status == TS_ILP_OPTIMAL && res.nvars == 2 && fabs(res.objective - 11) < 1e-7 &&
            fabs(res.x[0] - 3) < 1e-7 && fabs(res.x[1] - 1) < 1e-7,
        "LP: %s obj %g", ts_ilp_status_name(res.status), res.objective);
  ts_ilp_result_free(&res);
  /* The same LP made infeasible, then unbounded (the two verdicts must not be confused). */
  int r2;
  CHECK_OK(ts_ilp_add_row(m, "d", 2, v, (double[]){1, 1}, TS_ILP_GE, 5, &r2));
  CHECK_STATUS(ts_ilp_solve(m, NULL, &res), TS_ERR_INFEASIBLE);
  CHECK(res.status == TS_ILP_INFEASIBLE && !res.x, "LP infeasible status %s", ts_ilp_status_name(res.status));
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);
  CHECK_OK(ts_ilp_create(&m));
  CHECK_OK(ts_ilp_add_continuous(m, "x", 0, INFINITY, 1, &x));
  CHECK_OK(ts_ilp_add_integer(m, "k", 0, INFINITY, 1, &y));
  CHECK_OK(ts_ilp_add_row(m, "a", 2, (int[]){x, y}, (double[]){1, -1}, TS_ILP_LE, 2, NULL));
  ts_ilp_set_maximize(m, true);
  CHECK_STATUS(ts_ilp_solve(m, NULL, &res), TS_ERR_SOLVER);
  CHECK(res.status == TS_ILP_UNBOUNDED, "unbounded MIP: %s", ts_ilp_status_name(res.status));
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);
  /* No rows at all: the box decides; no variables at all: the empty assignment. */
  CHECK_OK(ts_ilp_create(&m));
  CHECK_OK(ts_ilp_add_integer(m, "a", -3.5, 7.2, 2, NULL)); /* bounds round inward to [-3, 7] */
  CHECK_OK(ts_ilp_add_continuous(m, "b", -1, 2.5, -1, NULL));
  CHECK_OK(ts_ilp_solve(m, NULL, &res));
  CHECK(res.status == TS_ILP_OPTIMAL && res.objective == -8.5 && res.x[0] == -3, "box: %g", res.objective);
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);
  CHECK_OK(ts_ilp_create(&m));
  CHECK_OK(ts_ilp_solve(m, NULL, &res));
  CHECK(res.status == TS_ILP_OPTIMAL && res.objective == 0, "empty model");
  ts_ilp_result_free(&res);
  CHECK_OK(ts_ilp_add_row(m, "impossible", 0, NULL, NULL, TS_ILP_GE, 1, NULL));
  CHECK_STATUS(ts_ilp_solve(m, NULL, &res), TS_ERR_INFEASIBLE);
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);
}

/* Multi-dimensional knapsack (dims rows, capacity half of each row's total) with values
 * correlated to weights: hard for branch and bound. x0 (may be NULL) gets a greedy solution. */
static ts_ilp *hard_knapsack(int n, int dims, uint64_t seed, double *x0) {
  ts_rng r;
  ts_rng_seed(&r, seed);
  ts_ilp *m;
  if (ts_ilp_create(&m) != TS_OK) return NULL;
  double w[8][64], cap[8];
  int idx[64];
  for (int j = 0; j < n; j++) {
    double s = 0;
    for (int d = 0; d < dims; d++) s += (w[d][j] = (double)rint_in(&r, 100, 999));
    ts_ilp_add_binary(m, NULL, s / dims + (double)rint_in(&r, 0, 50), &idx[j]);
  }
  for (int d = 0; d < dims; d++) {
    double total = 0;
    for (int j = 0; j < n; j++) total += w[d][j];
    ts_ilp_add_row(m, NULL, n, idx, w[d], TS_ILP_LE, cap[d] = floor(total / 2), NULL);
  }
  ts_ilp_set_maximize(m, true);
  double used[8] = {0};
  for (int j = 0; x0 && j < n; j++) {
    bool fits = true;
    for (int d = 0; d < dims; d++) fits = fits && used[d] + w[d][j] <= cap[d];
    x0[j] = fits;
    for (int d = 0; fits && d < dims; d++) used[d] += w[d][j];
  }
  return m;
}

/* Market split (Cornuejols-Dawande): equality rows with coefficients 0..99 whose right-hand
 * sides come from a hidden 0/1 vector xs; feasible but very hard to find by branch and bound. */
/* A malloc'd copy of x (m's nvars values); NULL for NULL. */
static double *copy_x(const ts_ilp *m, const double *x) {
  double *c = x ? malloc(sizeof(double) * (size_t)(m->nvars ? m->nvars : 1)) : NULL;
  if (c) memcpy(c, x, sizeof(double) * (size_t)m->nvars);
  return c;
}

/* A solver's solution x corrupted the way a faulty solver could return it: variable 0 outside its
 * bounds (a copy; NULL for NULL). */
static double *corrupted(const ts_ilp *m, const double *x) {
  double *c = copy_x(m, x);
  if (c && m->nvars > 0) c[0] = m->hi[0] + 1 + fabs(m->hi[0]);
  return c;
}

/* What ts_ilp_solve makes of a solver that returned x (taken over; NULL: no solution and no
 * verdict) for m, with m's warm start. */
static ts_status verdict(const ts_ilp *m, double *x, ts_ilp_result *res) {
  memset(res, 0, sizeof *res);
  res->status = TS_ILP_ERROR, res->objective = NAN, res->bound = NAN, res->nvars = m->nvars;
  double *warm = NULL;
  ts_status s = ts__ilp_warm(m, &warm);
  if (s != TS_OK) {
    free(x);
    return s;
  }
  res->warm_start_used = warm != NULL;
  ts__ilp_outcome cb = {.x = x, .bound = NAN};
  return ts__ilp_verdict(m, &cb, warm, 0, ts_now(), res);
}

static ts_ilp *market_split(int n, int dims, uint64_t seed, double *xs) {
  ts_rng r;
  ts_rng_seed(&r, seed);
  ts_ilp *m;
  if (ts_ilp_create(&m) != TS_OK) return NULL;
  int idx[64];
  for (int j = 0; j < n; j++) {
    xs[j] = (double)ts_rng_below(&r, 2);
    ts_ilp_add_binary(m, NULL, (double)rint_in(&r, 1, 9), &idx[j]);
  }
  for (int d = 0; d < dims; d++) {
    double a[64], b = 0;
    for (int j = 0; j < n; j++) b += (a[j] = (double)rint_in(&r, 0, 99)) * xs[j];
    ts_ilp_add_row(m, NULL, n, idx, a, TS_ILP_EQ, b, NULL);
  }
  ts_ilp_set_maximize(m, true);
  return m;
}

static void test_ilp_limits(void) {
  /* Time limit in elapsed seconds on an instance CBC cannot finish in 0.5 s; a warm start. */
  double x0[64];
  ts_ilp *m = hard_knapsack(60, 5, 1, x0);
  CHECK_OK(ts_ilp_set_warm_start(m, x0, 60));
  ts_ilp_options o;
  ts_ilp_options_default(&o);
  o.time_limit = 0.5;
  ts_ilp_result res;
  double t0 = ts_now();
  CHECK_OK(ts_ilp_solve(m, &o, &res));
  double wall = ts_now() - t0;
  CHECK((res.status == TS_ILP_FEASIBLE || res.status == TS_ILP_OPTIMAL) && checked(m, &res) && res.warm_start_used &&
            res.objective >= ts_ilp_eval(m, x0) - 1e-9 && res.bound >= res.objective - 1e-6,
        "time-limited: %s obj %g bound %g warm %g", ts_ilp_status_name(res.status), res.objective, res.bound,
        ts_ilp_eval(m, x0));
  /* No assertion on the elapsed time (a loaded machine may take any time): the outcome above is what
   * counts, a verified solution at least as good as the warm start. res.seconds is the solver's own
   * account. */
  CHECK(res.seconds >= 0 && isfinite(res.seconds), "solve time %g", res.seconds);
  printf("ilp 60x5 knapsack, 0.5 s limit: %s in %.2f s wall, obj %.1f bound %.1f (greedy %.1f), %lld nodes\n",
         ts_ilp_status_name(res.status), wall, res.objective, res.bound, ts_ilp_eval(m, x0), (long long)res.nodes);
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);

  /* No solution within the limit: TS_ERR_TIMEOUT; the same model with its hidden solution as
   * warm start: TS_OK with a verified solution at least as good. */
  double xs[64];
  m = market_split(30, 4, 2, xs);
  o.time_limit = 0.3;
  ts_status st = ts_ilp_solve(m, &o, &res);
  CHECK((st == TS_ERR_TIMEOUT && res.status == TS_ILP_NO_SOLUTION && !res.x) || (st == TS_OK && res.x),
        "market split without warm start: %s (%s)", ts_strerror(st), ts_ilp_status_name(res.status));
  ts_ilp_result_free(&res);
  CHECK_OK(ts_ilp_set_warm_start(m, xs, 30));
  CHECK_OK(ts_ilp_solve(m, &o, &res));
  CHECK(checked(m, &res) && res.warm_start_used && res.objective >= ts_ilp_eval(m, xs) - 1e-9, "market split, warm");
  ts_ilp_result_free(&res);
  /* CBC failing: a dropped solution -> the warm start comes back; a corrupted solution is caught
   * by the check (TS_ERR_SOLVER) or replaced by the warm start. */
  CHECK_OK(ts_ilp_solve(m, &o, &res));
  double *sol = corrupted(m, res.x);
  ts_ilp_result_free(&res);
  for (int fault = 1; fault <= 2; fault++) {
    CHECK_OK(verdict(m, fault == 2 ? copy_x(m, sol) : NULL, &res));
    CHECK(res.from_warm_start && res.status == TS_ILP_FEASIBLE && res.x && memcmp(res.x, xs, 30 * sizeof(double)) == 0,
          "fault %d: the warm start comes back", fault);
    ts_ilp_result_free(&res);
  }
  free(sol);
  rinst p;
  ts_rng r;
  ts_rng_seed(&r, 5);
  do gen_inst(&r, &p);
  while (!brute_inst(&p, &(double){0}));
  ts_ilp *m2 = build_inst(&p);
  double bad_start[MV] = {2}; /* variable 0 is binary: outside its bounds, so ignored */
  CHECK_OK(ts_ilp_set_warm_start(m2, bad_start, p.nv));
  CHECK_OK(ts_ilp_solve(m2, NULL, &res));
  CHECK(!res.warm_start_used && !res.from_warm_start && checked(m2, &res), "infeasible warm start ignored");
  ts_ilp_result_free(&res);
  CHECK_OK(ts_ilp_set_warm_start(m2, NULL, 0));
  CHECK_OK(ts_ilp_solve(m2, NULL, &res));
  sol = corrupted(m2, res.x);
  ts_ilp_result_free(&res);
  CHECK_ERR_CONTAINS(verdict(m2, sol, &res), "does not check out");
  CHECK(res.status == TS_ILP_ERROR && !res.x, "corrupted solution without warm start");
  ts_ilp_result_free(&res);
  CHECK_STATUS(verdict(m2, NULL, &res), TS_ERR_SOLVER);
  ts_ilp_result_free(&res);
  /* Two CBC threads and a relative gap still give a verified answer. */
  o.threads = 2, o.rel_gap = 1e-3, o.time_limit = 5;
  CHECK_OK(ts_ilp_solve(m2, &o, &res));
  CHECK(checked(m2, &res), "threads=2 result feasible");
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m2);
  ts_ilp_destroy(m);
}

static void test_ilp_errors(void) {
  ts_ilp *m;
  ts_ilp_result res;
  CHECK_STATUS(ts_ilp_create(NULL), TS_ERR_INVALID_ARG);
  CHECK_OK(ts_ilp_create(&m));
  int x, y;
  CHECK_OK(ts_ilp_add_binary(m, "x", 1, &x));
  CHECK_OK(ts_ilp_add_integer(m, "y", 0, 4, 1, &y));
  CHECK_ERR_CONTAINS(ts_ilp_add_row(m, "r", 2, (int[]){0, 7}, (double[]){1, 1}, TS_ILP_LE, 1, NULL), "variable 7");
  CHECK_ERR_CONTAINS(ts_ilp_add_row(m, "r", 1, (int[]){-1}, (double[]){1}, TS_ILP_LE, 1, NULL), "variable -1");
  CHECK_ERR_CONTAINS(ts_ilp_add_row(m, "nanrow", 1, (int[]){0}, (double[]){NAN}, TS_ILP_LE, 1, NULL), "nanrow");
  CHECK_STATUS(ts_ilp_add_row(m, "r", 1, (int[]){0}, (double[]){1}, TS_ILP_LE, INFINITY, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_add_row(m, "r", 1, (int[]){0}, (double[]){1}, (ts_ilp_cmp)9, 1, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_add_row(m, "r", 2, NULL, NULL, TS_ILP_LE, 1, NULL), TS_ERR_INVALID_ARG);
  CHECK_ERR_CONTAINS(ts_ilp_add_integer(m, "z", 3, 2, 0, NULL), "'z'");
  CHECK_STATUS(ts_ilp_add_integer(m, "z", 2.2, 2.8, 0, NULL), TS_ERR_INVALID_ARG); /* no integer inside */
  CHECK_STATUS(ts_ilp_add_continuous(m, "z", NAN, 1, 0, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_add_continuous(m, "z", 0, 1, INFINITY, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_add_var(m, (ts_ilp_var_kind)5, "z", 0, 1, 0, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_set_obj(m, 2, 1), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_set_obj(m, 0, NAN), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_set_warm_start(m, (double[]){1}, 1), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_set_warm_start(m, (double[]){1, NAN}, 2), TS_ERR_INVALID_ARG);
  CHECK(ts_ilp_num_vars(m) == 2 && ts_ilp_num_rows(m) == 0, "failed calls leave the model unchanged");
  /* Duplicates are summed, zeros dropped: 2x + (y - y) + x <= 2 is 3x <= 2, so x = 0. */
  CHECK_OK(ts_ilp_add_row(m, "dup", 4, (int[]){x, y, y, x}, (double[]){2, 1, -1, 1}, TS_ILP_LE, 2, NULL));
  ts_ilp_set_maximize(m, true);
  CHECK_OK(ts_ilp_solve(m, NULL, &res));
  CHECK(res.x && res.x[0] == 0 && res.x[1] == 4 && res.objective == 4, "duplicate entries summed");
  ts_ilp_result_free(&res);
  bool feas = true;
  char why[128];
  CHECK_OK(ts_ilp_check(m, (double[]){1, 0.5}, 2, &feas, why, sizeof why));
  CHECK(!feas && strstr(why, "'y'"), "check names the fractional variable: %s", why);
  CHECK_OK(ts_ilp_check(m, (double[]){1, 0}, 2, &feas, why, sizeof why));
  CHECK(!feas && strstr(why, "dup"), "check names the violated row: %s", why);
  CHECK_STATUS(ts_ilp_check(m, (double[]){1}, 1, &feas, NULL, 0), TS_ERR_INVALID_ARG);
  ts_ilp_options o;
  ts_ilp_options_default(&o);
  o.threads = 0;
  CHECK_ERR_CONTAINS(ts_ilp_solve(m, &o, &res), "threads");
  o.threads = 1, o.rel_gap = -1;
  CHECK_ERR_CONTAINS(ts_ilp_solve(m, &o, &res), "rel_gap");
  o.rel_gap = 0, o.time_limit = NAN;
  CHECK_STATUS(ts_ilp_solve(m, &o, &res), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_ilp_solve(NULL, NULL, &res), TS_ERR_INVALID_ARG);
  CHECK(res.status == TS_ILP_ERROR && !res.x && isnan(res.objective), "result initialized on error");
  ts_ilp_destroy(m);
  ts_ilp_destroy(NULL);
}

/* ---- knapsack DPs vs brute force ----------------------------------------------------------- */

/* Next vector of the mixed-radix count k[i] = 0..c[i]; false after the last one. */
static bool odometer(int64_t *k, const int64_t *c, int n) {
  int i = 0;
  while (i < n && k[i] == c[i]) k[i++] = 0;
  return i < n && ++k[i];
}

/* Best value over all multiplicity vectors 0..c[i]; c = 1: 0/1 knapsack. */
static double brute_knapsack(int n, const int64_t *w, const double *v, const int64_t *c, int64_t cap) {
  double best = 0;
  int64_t k[16] = {0};
  do {
    int64_t sw = 0;
    double sv = 0;
    for (int i = 0; i < n; i++) sw += k[i] * w[i], sv += (double)k[i] * v[i];
    if (sw <= cap && sv > best) best = sv;
  } while (odometer(k, c, n));
  return best;
}

static void test_knapsack(void) {
  ts_rng r;
  ts_rng_seed(&r, 77);
  int bad = 0;
  for (int it = 0; it < 500; it++) {
    bool bounded = it % 2;
    int n = (int)(bounded ? rint_in(&r, 1, 5) : rint_in(&r, 0, 14));
    int64_t w[16], c[16], take[16], cap = rint_in(&r, 0, bounded ? 60 : 100);
    double v[16], got = NAN;
    bool ch[16];
    for (int i = 0; i < n; i++) w[i] = rint_in(&r, 0, bounded ? 12 : 30), c[i] = bounded ? rint_in(&r, 0, 6) : 1;
    for (int i = 0; i < n; i++) v[i] = (double)rint_in(&r, -40, 160) / 8;
    double want = brute_knapsack(n, w, v, c, cap);
    ts_status st = bounded ? ts_knapsack_bounded(n, w, v, c, cap, take, &got) : ts_knapsack_01(n, w, v, cap, ch, &got);
    int64_t sw = 0;
    double sv = 0;
    bool in_range = true;
    for (int i = 0; i < n; i++) {
      if (!bounded) take[i] = ch[i];
      sw += take[i] * w[i], sv += (double)take[i] * v[i], in_range &= take[i] >= 0 && take[i] <= c[i];
    }
    /* sums of multiples of 1/8: exact in any order */
    if ((st != TS_OK || got != want || sv != got || sw > cap || !in_range) && bad++ < 3)
      CHECK(0, "%s knapsack %d: want %g got %g (selection %g, weight %lld/%lld)", bounded ? "bounded" : "0/1", it, want,
            got, sv, (long long)sw, (long long)cap);
  }
  CHECK(bad == 0, "%d of 500 0/1 and bounded knapsacks disagree with brute force", bad);
  /* Size guard and bad inputs. */
  int64_t big[3] = {400000000000LL, 400000000000LL, 300000000000LL};
  CHECK_ERR_CONTAINS(ts_knapsack_01(3, big, (double[]){1, 2, 3}, 1000000000000LL, NULL, NULL), "limit");
  CHECK_STATUS(ts_knapsack_01(1, (int64_t[]){-1}, (double[]){1}, 5, NULL, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_knapsack_01(1, (int64_t[]){1}, (double[]){NAN}, 5, NULL, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_knapsack_01(1, (int64_t[]){1}, (double[]){1}, -5, NULL, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_knapsack_bounded(1, (int64_t[]){1}, (double[]){1}, (int64_t[]){-2}, 5, NULL, NULL),
               TS_ERR_INVALID_ARG);
}

static void test_knapsack_mc(void) {
  ts_rng r;
  ts_rng_seed(&r, 99);
  int bad = 0, infeasible = 0;
  for (int it = 0; it < 300; it++) {
    int K = (int)rint_in(&r, 0, 5), start[6] = {0};
    int64_t w[24], cap = rint_in(&r, 0, 40);
    double v[24];
    for (int k = 0; k < K; k++) start[k + 1] = start[k] + (int)rint_in(&r, 1, 4);
    for (int j = 0; j < start[K]; j++) w[j] = rint_in(&r, 0, 15), v[j] = (double)rint_in(&r, -80, 80) / 8;
    bool maximize = ts_rng_below(&r, 2), found = false;
    double want = 0, got = NAN, sv = 0;
    int64_t pick[5] = {0}, last[5], sw = 0;
    for (int k = 0; k < K; k++) last[k] = start[k + 1] - start[k] - 1;
    do {
      int64_t pw = 0;
      double pv = 0;
      for (int k = 0; k < K; k++) pw += w[start[k] + pick[k]], pv += v[start[k] + pick[k]];
      if (pw <= cap && (!found || (maximize ? pv > want : pv < want))) want = pv, found = true;
    } while (odometer(pick, last, K));
    int choice[5];
    ts_status st = ts_knapsack_mc(K, start, w, v, cap, maximize, choice, &got);
    bool ok = found ? st == TS_OK && fabs(got - want) < 1e-9 : st == TS_ERR_INFEASIBLE;
    for (int k = 0; found && ok && k < K; k++) {
      ok = choice[k] >= start[k] && choice[k] < start[k + 1];
      if (ok) sw += w[choice[k]], sv += v[choice[k]];
    }
    ok = ok && (!found || (sw <= cap && fabs(sv - got) < 1e-9));
    infeasible += !found;
    if (!ok && bad++ < 3) CHECK(0, "MCK %d (K %d, %s): want %s %g, got %s %g", it, K, maximize ? "max" : "min",
                                found ? "" : "infeasible", want, ts_strerror(st), got);
  }
  CHECK(bad == 0 && infeasible >= 10, "%d of 300 multiple-choice knapsacks disagree (%d infeasible)", bad, infeasible);
  CHECK_STATUS(ts_knapsack_mc(2, (int[]){0, 1, 1}, (int64_t[]){1}, (double[]){1}, 5, false, NULL, NULL),
               TS_ERR_INVALID_ARG); /* empty class */
  CHECK_ERR_CONTAINS(ts_knapsack_mc(2, (int[]){0, 1, 2}, (int64_t[]){1LL << 40, 1LL << 40}, (double[]){1, 1},
                                    1LL << 42, false, NULL, NULL),
                     "limit");
}

/* Cheapest multiset of sizes summing to total with at most pmax parts (0: any), by walking all
 * count vectors; INFINITY when there is none. */
static double brute_partition(int64_t total, int m, const int64_t *sz, const double *c, int64_t pmax) {
  int64_t k[4] = {0}, lim[4] = {0};
  for (int j = 0; j < m; j++) lim[j] = total / sz[j];
  double best = INFINITY;
  do {
    int64_t sum = 0, parts = 0;
    double cost = 0;
    for (int j = 0; j < m; j++) sum += k[j] * sz[j], parts += k[j], cost += (double)k[j] * c[j];
    if (sum == total && (pmax == 0 || parts <= pmax) && cost < best) best = cost;
  } while (odometer(k, lim, m));
  return best;
}

static void test_partition(void) {
  ts_rng r;
  ts_rng_seed(&r, 31);
  int bad = 0, infeasible = 0;
  for (int it = 0; it < 300; it++) {
    int m = (int)rint_in(&r, 1, 4);
    int64_t sz[4], total = rint_in(&r, 0, 40), pmax = ts_rng_below(&r, 2) ? 0 : rint_in(&r, 1, 8), counts[4];
    double c[4];
    bool even = ts_rng_below(&r, 6) == 0; /* only even sizes: odd totals are impossible */
    for (int j = 0; j < m; j++) sz[j] = rint_in(&r, 1, 12) * (even ? 2 : 1), c[j] = (double)rint_in(&r, -8, 80) / 8;
    double want = brute_partition(total, m, sz, c, pmax), got = NAN;
    ts_status st = ts_partition_min_cost(total, m, sz, c, pmax, counts, &got);
    int64_t sum = 0, parts = 0;
    double cost = 0;
    for (int j = 0; st == TS_OK && j < m; j++)
      sum += counts[j] * sz[j], parts += counts[j], cost += (double)counts[j] * c[j];
    bool ok = want == INFINITY ? st == TS_ERR_INFEASIBLE
                               : st == TS_OK && fabs(got - want) < 1e-9 && sum == total && fabs(cost - got) < 1e-9 &&
                                     (pmax == 0 || parts <= pmax);
    infeasible += want == INFINITY;
    if (!ok && bad++ < 3)
      CHECK(0, "partition %d: total %lld, %d sizes, max parts %lld: want %g got %s %g", it, (long long)total, m,
            (long long)pmax, want, ts_strerror(st), got);
  }
  CHECK(bad == 0 && infeasible >= 10, "%d of 300 partitions disagree (%d infeasible)", bad, infeasible);
  /* Group-convolution shape: 96 channels from sizes {8, 16, 24, 32}; cost = 1 + size/16 per
   * group, so fewer, larger groups win: three groups of 32. Ties prefer fewer parts. */
  int64_t sizes[4] = {8, 16, 24, 32}, counts[4];
  double cost[4] = {1.5, 2, 2.5, 3}, best;
  CHECK_OK(ts_partition_min_cost(96, 4, sizes, cost, 0, counts, &best));
  CHECK(best == 9 && counts[3] == 3 && counts[0] + counts[1] + counts[2] == 0, "96 channels: cost %g", best);
  CHECK_OK(ts_partition_min_cost(96, 4, sizes, (double[]){1, 2, 3, 4}, 0, counts, &best));
  CHECK(best == 12 && counts[3] == 3, "tie on cost prefers fewer parts (%lld x 32)", (long long)counts[3]);
  CHECK_STATUS(ts_partition_min_cost(96, 4, sizes, cost, 2, counts, &best), TS_ERR_INFEASIBLE);
  CHECK_STATUS(ts_partition_min_cost(10, 1, (int64_t[]){0}, (double[]){1}, 0, NULL, NULL), TS_ERR_INVALID_ARG);
  CHECK_ERR_CONTAINS(ts_partition_min_cost(1LL << 40, 1, (int64_t[]){3}, (double[]){1}, 0, NULL, NULL), "limit");
}

/* ---- Pareto helpers vs brute force ---------------------------------------------------------- */

static bool dom(const double *a, const double *b, int m) {
  bool strict = false;
  for (int k = 0; k < m; k++) {
    if (a[k] > b[k]) return false;
    strict |= a[k] < b[k];
  }
  return strict;
}

static void test_pareto(void) {
  ts_rng r;
  ts_rng_seed(&r, 4);
  int bad = 0;
  for (int it = 0; it < 200; it++) {
    int n = (int)rint_in(&r, 0, 60), m = (int)rint_in(&r, 1, 4), rank[60], want[60], idx[60], cnt = -1, nf = -1;
    double f[240];
    for (int i = 0; i < n * m; i++) f[i] = (double)rint_in(&r, 0, 6); /* small range: ties, duplicates */
    int front = n > 0; /* brute force: a point's front is the longest chain of points dominating it */
    for (int i = 0; i < n; i++) want[i] = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
          if (dom(f + j * m, f + i * m, m) && want[j] + 1 > want[i]) want[i] = want[j] + 1, changed = true;
    }
    for (int i = 0; i < n; i++) front = want[i] + 1 > front ? want[i] + 1 : front;
    ts_status st = ts_pareto_rank(f, n, m, rank, &nf);
    bool ok = st == TS_OK && nf == front;
    for (int i = 0; ok && i < n; i++) ok = rank[i] == want[i];
    CHECK_OK(ts_pareto_front(f, n, m, idx, &cnt));
    int c0 = 0;
    for (int i = 0; i < n; i++)
      if (want[i] == 0) ok = ok && c0 < cnt && idx[c0++] == i;
    ok = ok && c0 == cnt;
    if (!ok && bad++ < 3) CHECK(0, "pareto rank %d (n %d, m %d) differs from brute force", it, n, m);

    if (m == 2) { /* hypervolume vs counting dominated cells of a 0.5 grid (coordinates are integers) */
      double ref[2] = {5.5, 5.0}, hv = NAN, area = 0;
      for (double x = 0; x < ref[0]; x += 0.5)
        for (double y = 0; y < ref[1]; y += 0.5) {
          bool covered = false;
          for (int i = 0; i < n && !covered; i++) covered = f[2 * i] <= x && f[2 * i + 1] <= y;
          area += covered ? 0.25 : 0;
        }
      CHECK_OK(ts_hypervolume_2d(f, n, ref, &hv));
      if (fabs(hv - area) > 1e-9 && bad++ < 3) CHECK(0, "hypervolume %d: %g vs brute %g", it, hv, area);
    }
  }
  CHECK(bad == 0, "%d pareto/hypervolume mismatches", bad);
  double pts[8] = {1, 3, 2, 2, 3, 1, 3.5, 3.5}, hv, cd[4];
  CHECK_OK(ts_hypervolume_2d(pts, 4, (double[]){4, 4}, &hv));
  CHECK(hv == 6, "hypervolume of a staircase: %g (want 6)", hv);
  double line[8] = {0, 3, 1, 2, 2, 1, 3, 0};
  CHECK_OK(ts_pareto_crowding(line, 4, 2, (int[]){0, 1, 2, 3}, 4, cd));
  CHECK(cd[0] == INFINITY && cd[3] == INFINITY && fabs(cd[1] - 4.0 / 3) < 1e-12 && fabs(cd[2] - 4.0 / 3) < 1e-12,
        "crowding %g %g", cd[1], cd[2]);
  CHECK_STATUS(ts_pareto_rank((double[]){1, NAN}, 1, 2, (int[1]){0}, NULL), TS_ERR_INVALID_ARG);
  CHECK_STATUS(ts_hypervolume_2d(pts, 4, (double[]){INFINITY, 4}, &hv), TS_ERR_INVALID_ARG);
}

/* ---- GA / NSGA-II ---------------------------------------------------------------------------- */

static ts_status zdt1(const double *x, int n, double *f, void *user) {
  double s = 0;
  for (int i = 1; i < n; i++) s += x[i];
  double g = 1 + 9 * s / (n - 1);
  f[0] = x[0], f[1] = g * (1 - sqrt(x[0] / g));
  return TS_OK;
}

static void test_nsga2_zdt1(void) {
  enum { N = 12 };
  double lo[N], hi[N];
  for (int i = 0; i < N; i++) lo[i] = 0, hi[i] = 1;
  ts_ga_problem p = {.ngenes = N, .nobj = 2, .lo = lo, .hi = hi, .eval = zdt1};
  ts_ga_options o;
  ts_ga_options_default(&o);
  o.nsga2 = true, o.population = 100, o.generations = 250, o.seed = 11;
  ts_ga_result res;
  CHECK_OK(ts_ga_run(&p, &o, &res));
  /* The true front is f2 = 1 - sqrt(f1), f1 in [0, 1]; the vertical gap bounds each point's
   * distance to it, so their mean bounds the generational distance. */
  double gd = 0, hv = 0, fmin = 1, fmax = 0;
  for (int i = 0; i < res.n; i++) {
    const double *f = res.f + 2 * i;
    gd += fabs(f[1] - (1 - sqrt(f[0]))) / res.n;
    fmin = fmin < f[0] ? fmin : f[0], fmax = fmax > f[0] ? fmax : f[0];
  }
  CHECK_OK(ts_hypervolume_2d(res.f, res.n, (double[]){1.1, 1.1}, &hv));
  double hv_true = 0.1 + 2.0 / 3 + 0.11; /* integral of (1.1 - (1 - sqrt a)) over [0,1] + 0.1 x 1.1 */
  printf("nsga-ii zdt1 (%d genes, pop %d, %d gens): %d front points, GD <= %.2e, HV %.4f of %.4f, f1 in [%.3f, %.3f]\n",
         N, o.population, res.generations, res.n, gd, hv, hv_true, fmin, fmax);
  CHECK(res.n >= 50 && gd < 5e-3 && hv > 0.97 * hv_true && fmin < 0.01 && fmax > 0.95,
        "ZDT1: %d points, GD %g, HV %g (true %g), f1 range [%g, %g]", res.n, gd, hv, hv_true, fmin, fmax);
  ts_ga_result_free(&res);
}

/* Discrete bi-objective problem small enough to enumerate: 5 integer genes in [0, 4],
 * f1 = sum (x - t1)^2, f2 = sum w (x - t2)^2. */
static const double T1[5] = {0, 4, 1, 3, 2}, T2[5] = {4, 0, 3, 0, 4}, W2[5] = {1, 2, 1, 3, 1};
static ts_status quad2(const double *x, int n, double *f, void *user) {
  f[0] = f[1] = 0;
  for (int i = 0; i < n; i++) f[0] += (x[i] - T1[i]) * (x[i] - T1[i]), f[1] += W2[i] * (x[i] - T2[i]) * (x[i] - T2[i]);
  return TS_OK;
}

static bool has_pt(const double *set, int n, const double *q) {
  for (int t = 0; t < n; t++)
    if (set[2 * t] == q[0] && set[2 * t + 1] == q[1]) return true;
  return false;
}

static void test_nsga2_discrete(void) {
  static double all[3125 * 2];
  int idx[3125], nfront = 0;
  for (int c = 0; c < 3125; c++) {
    double x[5];
    for (int i = 0, t = c; i < 5; i++, t /= 5) x[i] = t % 5;
    quad2(x, 5, all + 2 * c, NULL);
  }
  CHECK_OK(ts_pareto_front(all, 3125, 2, idx, &nfront));
  /* distinct objective vectors of the exact front */
  double front[3125 * 2];
  int nd = 0;
  for (int k = 0; k < nfront; k++)
    if (!has_pt(front, nd, all + 2 * idx[k])) memcpy(front + 2 * nd++, all + 2 * idx[k], 2 * sizeof(double));
  double lo[5] = {0, 0, 0, 0, 0}, hi[5] = {4, 4, 4, 4, 4};
  bool integer[5] = {1, 1, 1, 1, 1};
  ts_ga_problem p = {.ngenes = 5, .nobj = 2, .lo = lo, .hi = hi, .integer = integer, .eval = quad2};
  ts_ga_options o;
  ts_ga_options_default(&o);
  o.nsga2 = true, o.population = 80, o.generations = 150, o.seed = 3;
  ts_ga_result res;
  CHECK_OK(ts_ga_run(&p, &o, &res));
  int on_front = 0, covered = 0;
  for (int i = 0; i < res.n; i++) {
    on_front += has_pt(front, nd, res.f + 2 * i);
    for (int g = 0; g < 5; g++) CHECK(res.x[5 * i + g] == floor(res.x[5 * i + g]), "integer gene");
  }
  for (int t = 0; t < nd; t++) covered += has_pt(res.f, res.n, front + 2 * t);
  printf("nsga-ii discrete: exact front %d objective vectors; found %d points, %d on it, %d of %d covered\n", nd, res.n,
         on_front, covered, nd);
  CHECK(on_front == res.n && covered >= (9 * nd + 9) / 10, "discrete front: %d/%d on front, %d/%d covered", on_front,
        res.n, covered, nd);
  ts_ga_result_free(&res);
}

/* Single objective, permutation genome: closed tour through 8 random cities. */
static double city[8][2];
static ts_status tour(const double *x, int n, double *f, void *user) {
  int seen = 0;
  for (int i = 0; i < n; i++) seen |= x[i] >= 0 && x[i] < n ? 1 << (int)x[i] : 1 << 30;
  if (seen != (1 << n) - 1) return ts_error(TS_ERR_INTERNAL, "genome is not a permutation");
  f[0] = 0;
  for (int i = 0; i < n; i++) {
    const double *a = city[(int)x[i]], *b = city[(int)x[(i + 1) % n]];
    f[0] += hypot(a[0] - b[0], a[1] - b[1]);
  }
  return TS_OK;
}

static double brute_tour(int *perm, int k, int n) {
  if (k == n) {
    double x[8], f;
    for (int i = 0; i < n; i++) x[i] = perm[i];
    tour(x, n, &f, NULL);
    return f;
  }
  double best = INFINITY;
  for (int i = k; i < n; i++) {
    int t = perm[k];
    perm[k] = perm[i], perm[i] = t;
    double v = brute_tour(perm, k + 1, n);
    best = v < best ? v : best;
    perm[i] = perm[k], perm[k] = t;
  }
  return best;
}

static _Atomic int eval_calls;
static int fail_at;
static double seen_best;
static ts_status mixed(const double *x, int n, double *f, void *user) {
  if (fail_at && ++eval_calls == fail_at) return ts_error(TS_ERR_INVALID_ARG, "planted failure");
  f[0] = 0;
  for (int i = 0; i < n; i++) f[0] += (x[i] - (i < 6 ? i - 3 : 0.25 * i)) * (x[i] - (i < 6 ? i - 3 : 0.25 * i));
  if (!fail_at && f[0] < seen_best) seen_best = f[0]; /* serial runs only */
  return TS_OK;
}

static void test_ga_single(void) {
  ts_rng r;
  ts_rng_seed(&r, 8);
  for (int i = 0; i < 8; i++) city[i][0] = ts_rng_uniform(&r), city[i][1] = ts_rng_uniform(&r);
  int perm[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  double opt = brute_tour(perm, 1, 8);
  ts_ga_problem p = {.ngenes = 8, .nobj = 1, .permutation = true, .eval = tour};
  ts_ga_options o;
  ts_ga_options_default(&o);
  o.population = 60, o.generations = 120, o.seed = 5;
  ts_ga_result a, b, c;
  CHECK_OK(ts_ga_run(&p, &o, &a));
  CHECK(a.n == 60 && fabs(a.f[0] - opt) < 1e-12, "TSP-8: GA %g vs optimum %g", a.f[0], opt);
  for (int i = 1; i < a.n; i++) CHECK(a.f[i] >= a.f[i - 1], "sorted best first");
  CHECK_OK(ts_ga_run(&p, &o, &b));
  o.threads = 2;
  CHECK_OK(ts_ga_run(&p, &o, &c));
  CHECK(memcmp(a.x, b.x, sizeof(double) * 480) == 0 && memcmp(a.x, c.x, sizeof(double) * 480) == 0 &&
            memcmp(a.f, c.f, sizeof(double) * 60) == 0,
        "same seed, same result (1 and 2 threads)");
  ts_ga_result_free(&a), ts_ga_result_free(&b), ts_ga_result_free(&c);

  /* Mixed genome: 6 integers in [-10, 10] aiming at -3..2, 4 reals in [-5, 5] aiming at 1.5..2.25.
   * elite = 0 and one-point crossover: the best ever seen must still come back first. */
  double lo[10], hi[10];
  bool integer[10];
  for (int i = 0; i < 10; i++) lo[i] = i < 6 ? -10 : -5, hi[i] = i < 6 ? 10 : 5, integer[i] = i < 6;
  ts_ga_problem q = {.ngenes = 10, .nobj = 1, .lo = lo, .hi = hi, .integer = integer, .eval = mixed};
  ts_ga_options_default(&o);
  o.elite = 0, o.crossover = TS_GA_CROSS_ONE_POINT, o.generations = 150, o.seed = 9;
  seen_best = INFINITY;
  CHECK_OK(ts_ga_run(&q, &o, &a));
  bool ints_exact = true;
  for (int i = 0; i < 6; i++) ints_exact &= a.x[i] == i - 3;
  CHECK(ints_exact && a.f[0] < 0.1 && a.f[0] == seen_best, "mixed genome: f %g (best seen %g)", a.f[0], seen_best);
  ts_ga_result_free(&a);
  /* Uniform crossover with a seeded initial optimum: elitism keeps it. */
  double init[10] = {-3, -2, -1, 0, 1, 2, 1.5, 1.75, 2, 2.25};
  o.elite = 2, o.crossover = TS_GA_CROSS_UNIFORM, o.generations = 5, o.initial = init, o.n_initial = 1;
  CHECK_OK(ts_ga_run(&q, &o, &a));
  CHECK(a.f[0] == 0 && memcmp(a.x, init, sizeof init) == 0, "seeded optimum kept");
  ts_ga_result_free(&a);
  init[0] = 0.5; /* fractional integer gene */
  CHECK_ERR_CONTAINS(ts_ga_run(&q, &o, &a), "initial genome 0");
  /* A failing callback stops the run with its status and message (also from a worker thread). */
  o.n_initial = 0, o.threads = 2, fail_at = 50, eval_calls = 0;
  CHECK_ERR_CONTAINS(ts_ga_run(&q, &o, &a), "planted failure");
  fail_at = 0;
  CHECK(a.n == 0 && !a.x, "no result after a failure");
  /* Bad problems and options. */
  ts_ga_options_default(&o);
  o.population = 7;
  CHECK_ERR_CONTAINS(ts_ga_run(&q, &o, &a), "population");
  o.population = 100, q.nobj = 2;
  CHECK_ERR_CONTAINS(ts_ga_run(&q, &o, &a), "nsga2");
  q.nobj = 1, lo[0] = 11;
  CHECK_ERR_CONTAINS(ts_ga_run(&q, &o, &a), "gene 0");
  CHECK_STATUS(ts_ga_run(NULL, &o, &a), TS_ERR_INVALID_ARG);
}

/* The row builder: terms pushed past its first growth reach the model as one row, the builder is
 * empty and reusable after each add, and a bad term fails the add without adding a row. */
static void test_ilp_row_builder(void) {
  ts_ilp *m = NULL;
  CHECK_OK(ts_ilp_create(&m));
  enum { N = 150 };
  int v[N];
  for (int i = 0; i < N; i++) CHECK_OK(ts_ilp_add_binary(m, NULL, -1.0, &v[i])); /* maximize the count */
  ts_ilp_row r = {0};
  for (int i = 0; i < N; i++) CHECK_OK(ts_ilp_row_push(&r, v[i], 1.0));
  CHECK(r.n == N && r.cap >= N, "builder holds %d of %d terms", r.n, N);
  CHECK_OK(ts_ilp_row_add(m, &r, TS_ILP_LE, 100.0)); /* sum x <= 100 */
  CHECK(r.n == 0 && ts_ilp_num_rows(m) == 1, "builder emptied after add");
  CHECK_OK(ts_ilp_row_push(&r, v[0], 1.0));
  CHECK_OK(ts_ilp_row_push(&r, v[1], 1.0));
  CHECK_OK(ts_ilp_row_add(m, &r, TS_ILP_EQ, 0.0)); /* x0 = x1 = 0 */
  CHECK_OK(ts_ilp_row_push(&r, N + 7, 1.0));       /* no such variable */
  CHECK_ERR_CONTAINS(ts_ilp_row_add(m, &r, TS_ILP_LE, 1.0), "names variable");
  CHECK(r.n == 0 && ts_ilp_num_rows(m) == 2, "a failed add adds no row and empties the builder");
  ts_ilp_result res;
  CHECK_OK(ts_ilp_solve(m, NULL, &res));
  CHECK(res.x && res.objective == -100 && res.x[0] == 0 && res.x[1] == 0, "rows from the builder hold (objective %g)",
        res.objective);
  ts_ilp_result_free(&res);
  ts_ilp_row_free(&r);
  CHECK(!r.vars && !r.coefs && r.n == 0 && r.cap == 0, "freed builder is zeroed");
  ts_ilp_row_free(NULL);
  CHECK_STATUS(ts_ilp_row_push(NULL, 0, 1.0), TS_ERR_INVALID_ARG);
  ts_ilp_destroy(m);
}

int main(void) {
  double t0 = ts_now();
  test_ilp_brute();
  test_ilp_lp();
  test_ilp_limits();
  test_ilp_errors();
  test_ilp_row_builder();
  double t1 = ts_now();
  test_knapsack();
  test_knapsack_mc();
  test_partition();
  test_pareto();
  double t2 = ts_now();
  test_nsga2_zdt1();
  test_nsga2_discrete();
  test_ga_single();
  printf("times: ilp %.2f s, dp + pareto %.2f s, ga %.2f s\n", t1 - t0, t2 - t1, ts_now() - t2);
  return tst_finish();
}
