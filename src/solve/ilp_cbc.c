/* ts_ilp_solve: hands the model to a fresh COIN-OR CBC 2.10 model (C interface), solves it
 * with an elapsed-time limit, and checks what comes back before trusting it.
 *
 * CBC facts this file relies on (verified against the Debian 2.10.8 build):
 *  - Cbc_solve() on a model without integer columns does not run CbcMain1: it calls Clp
 *    directly, prints Clp's log on stdout whatever the log level, ignores the time limit and
 *    reports an unbounded LP as "infeasible". A fixed integer column (bounds [0,0], in no row)
 *    sends pure LPs through CbcMain1 too.
 *  - Setting column names without row names crashes ClpPresolve (out-of-bounds name vector):
 *    we name every column and every row, with our own short unique names ("c<j>", "r<i>").
 *  - "-threads 1" starts one worker thread besides the main one; "-threads 0" (the default) is
 *    single-threaded, so threads == 1 passes nothing.
 *  - The time limit counts CPU time unless "-timeMode elapsed" is given.
 *  - Cbc_setMIPStartI looks columns up by name (hence the names above).
 *  - CoinUtils 2.11.4 leaks 384-576 bytes per solve in implied_free_action::presolve (Clp
 *    presolve run by CglPreProcess inside CbcMain1). Sanitizer builds exempt exactly the
 *    allocations made during Cbc_solve on this thread from leak reports (__lsan_disable):
 *    a suppressions file cannot, because ASan's fast unwinder stops at libstdc++'s operator
 *    new (no frame pointers in these libraries), so it could only match every C++ allocation.
 */
#include <coin/Cbc_C_Interface.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "solve/ilp_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define TS_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TS_LSAN 1
#endif
#endif
#ifdef TS_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* CbcMain1 keeps file-level static state in 2.10: one solve at a time per process. */
static pthread_mutex_t cbc_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- progress: a side thread redraws elapsed time while CBC blocks the caller ------------- */

typedef struct progress_thread {
  ts_progress p;
  atomic_bool stop;
  double limit;
  pthread_t th;
  bool running;
} progress_thread;

static void *progress_main(void *arg) {
  progress_thread *pt = arg;
  while (!atomic_load(&pt->stop)) {
    double el = ts_now() - pt->p.t0;
    int64_t done = pt->limit > 0 ? (int64_t)(el * 1000) : 0;
    if (pt->limit > 0 && done > pt->p.total) done = pt->p.total;
    ts_progress_update(&pt->p, done);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void progress_start(progress_thread *pt, double limit) {
  memset(pt, 0, sizeof *pt);
  pt->limit = limit;
  ts_progress_begin(&pt->p, "ilp (cbc)", limit > 0 ? (int64_t)(limit * 1000) : 1);
  atomic_store(&pt->stop, false);
  pt->running = pthread_create(&pt->th, NULL, progress_main, pt) == 0;
}

static void progress_stop(progress_thread *pt) {
  if (!pt->running) return;
  atomic_store(&pt->stop, true);
  pthread_join(pt->th, NULL);
  ts_progress_end(&pt->p);
}

/* ---- building the CBC model --------------------------------------------------------------- */

static double coin_bound(double v) { return v == INFINITY ? DBL_MAX : v == -INFINITY ? -DBL_MAX : v; }

/* Column-major copy of the rows plus bounds and names. ncols = nvars (+1 dummy integer column
 * when the model has no integer variable). */
static ts_status build_cbc(const ts_ilp *m, Cbc_Model *cbc, bool add_dummy) {
  int ncols = m->nvars + (add_dummy ? 1 : 0);
  ts_status st = TS_OK;
  CoinBigIndex *start = calloc((size_t)ncols + 1, sizeof *start);
  int *index = malloc(sizeof(int) * (size_t)(m->nnz ? m->nnz : 1));
  double *value = malloc(sizeof(double) * (size_t)(m->nnz ? m->nnz : 1));
  double *clb = malloc(sizeof(double) * (size_t)ncols), *cub = malloc(sizeof(double) * (size_t)ncols);
  double *obj = malloc(sizeof(double) * (size_t)ncols);
  double *rlb = malloc(sizeof(double) * (size_t)(m->nrows ? m->nrows : 1));
  double *rub = malloc(sizeof(double) * (size_t)(m->nrows ? m->nrows : 1));
  if (!start || !index || !value || !clb || !cub || !obj || !rlb || !rub) {
    st = ts_error(TS_ERR_OOM, "ILP: out of memory building the CBC model (%d columns, %lld entries)", ncols,
                  (long long)m->nnz);
    goto done;
  }
  if (m->nnz > (int64_t)0x7fffffff) {
    st = ts_error(TS_ERR_OVERFLOW, "ILP: %lld matrix entries exceed CBC's 32-bit index", (long long)m->nnz);
    goto done;
  }
  for (int64_t k = 0; k < m->nnz; k++) start[m->col[k] + 1]++;
  for (int j = 0; j < ncols; j++) start[j + 1] += start[j];
  {
    CoinBigIndex *fill = malloc(sizeof(CoinBigIndex) * (size_t)ncols);
    if (!fill) {
      st = ts_error(TS_ERR_OOM, "ILP: out of memory building the CBC model");
      goto done;
    }
    memcpy(fill, start, sizeof(CoinBigIndex) * (size_t)ncols);
    for (int r = 0; r < m->nrows; r++)
      for (int64_t k = m->row_start[r]; k < m->row_start[r + 1]; k++) {
        CoinBigIndex at = fill[m->col[k]]++;
        index[at] = r, value[at] = m->val[k];
      }
    free(fill);
  }
  for (int j = 0; j < m->nvars; j++) clb[j] = coin_bound(m->lo[j]), cub[j] = coin_bound(m->hi[j]), obj[j] = m->obj[j];
  if (add_dummy) clb[m->nvars] = cub[m->nvars] = obj[m->nvars] = 0;
  for (int r = 0; r < m->nrows; r++) {
    rlb[r] = m->cmp[r] == TS_ILP_LE ? -DBL_MAX : m->rhs[r];
    rub[r] = m->cmp[r] == TS_ILP_GE ? DBL_MAX : m->rhs[r];
  }
  Cbc_loadProblem(cbc, ncols, m->nrows, start, index, value, clb, cub, obj, rlb, rub);
  char name[24];
  for (int j = 0; j < ncols; j++) {
    if (j == m->nvars || ts__ilp_is_int(m, j)) Cbc_setInteger(cbc, j);
    snprintf(name, sizeof name, "c%d", j);
    Cbc_setColName(cbc, j, name);
  }
  for (int r = 0; r < m->nrows; r++) {
    snprintf(name, sizeof name, "r%d", r);
    Cbc_setRowName(cbc, r, name);
  }
  Cbc_setObjSense(cbc, m->maximize ? -1 : 1);
done:
  free(start), free(index), free(value), free(clb), free(cub), free(obj), free(rlb), free(rub);
  return st;
}

static void set_param_d(Cbc_Model *cbc, const char *name, double v) {
  char buf[48];
  snprintf(buf, sizeof buf, "%.9g", v);
  Cbc_setParameter(cbc, name, buf);
}

static ts_status check_options(const ts_ilp_options *o) {
  if (isnan(o->time_limit)) return ts_error(TS_ERR_INVALID_ARG, "ILP options: time_limit is NaN");
  if (!(o->rel_gap >= 0 && o->rel_gap < 1))
    return ts_error(TS_ERR_INVALID_ARG, "ILP options: rel_gap %g outside [0, 1)", o->rel_gap);
  if (o->threads < 1 || o->threads > 1024)
    return ts_error(TS_ERR_INVALID_ARG, "ILP options: threads %d outside [1, 1024]", o->threads);
  if (o->log_level < 0 || o->log_level > 4)
    return ts_error(TS_ERR_INVALID_ARG, "ILP options: log_level %d outside [0, 4]", o->log_level);
  return TS_OK;
}

/* What CBC reported, read while its model is alive. */
static ts_status run_cbc(const ts_ilp *m, const ts_ilp_options *o, const double *warm, double t0, ts__ilp_outcome *out) {
  bool any_int = false;
  for (int j = 0; j < m->nvars && !any_int; j++) any_int = ts__ilp_is_int(m, j);
  Cbc_Model *cbc = Cbc_newModel();
  if (!cbc) return ts_error(TS_ERR_OOM, "ILP: CBC could not create a model");
  ts_status st = build_cbc(m, cbc, !any_int);
  if (st != TS_OK) {
    Cbc_deleteModel(cbc);
    return st;
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%d", o->log_level);
  Cbc_setParameter(cbc, "log", buf);
  Cbc_setParameter(cbc, "slog", o->log_level > 1 ? "1" : "0");
  Cbc_setParameter(cbc, "timeMode", "elapsed");
  /* CBC 2.10 (Debian's libcbc3) can dereference NULL in CglPreProcess::postProcess when the time
   * limit stops the search inside the root node of a preprocessed model: reproduced on gconv's
   * assignment ILPs under ASan in 4 of 6 runs, 0 of 6 with preprocessing off. Every ILP tessera
   * builds is a small assignment model that comes with a greedy warm start, where Cgl's
   * preprocessing buys little, so it is off whenever a time limit can stop the search. */
  if (o->time_limit > 0) Cbc_setParameter(cbc, "preprocess", "off");
  if (o->time_limit > 0) set_param_d(cbc, "sec", fmax(o->time_limit - (ts_now() - t0), 0.01));
  if (o->rel_gap > 0) set_param_d(cbc, "ratio", o->rel_gap);
  if (o->threads > 1) {
    snprintf(buf, sizeof buf, "%d", o->threads);
    Cbc_setParameter(cbc, "threads", buf);
  }
  if (warm) {
    /* The MIP start fixes the integer columns; CBC computes continuous ones itself. */
    int nint = 0;
    int *idx = malloc(sizeof(int) * (size_t)(m->nvars + 1));
    double *v = malloc(sizeof(double) * (size_t)(m->nvars + 1));
    if (!idx || !v) {
      free(idx), free(v), Cbc_deleteModel(cbc);
      return ts_error(TS_ERR_OOM, "ILP: out of memory for the warm start");
    }
    for (int j = 0; j < m->nvars; j++)
      if (ts__ilp_is_int(m, j)) idx[nint] = j, v[nint] = nearbyint(warm[j]), nint++;
    if (nint) Cbc_setMIPStartI(cbc, nint, idx, v);
    free(idx), free(v);
  }

  pthread_mutex_lock(&cbc_lock);
#ifdef TS_LSAN
  __lsan_disable();
#endif
  Cbc_solve(cbc);
#ifdef TS_LSAN
  __lsan_enable();
#endif
  pthread_mutex_unlock(&cbc_lock);

  out->optimal = Cbc_isProvenOptimal(cbc) != 0;
  out->unbounded = Cbc_isContinuousUnbounded(cbc) != 0 || Cbc_secondaryStatus(cbc) == 7;
  out->infeasible = !out->unbounded && Cbc_isProvenInfeasible(cbc) != 0;
  out->time_hit = Cbc_isSecondsLimitReached(cbc) != 0 || Cbc_secondaryStatus(cbc) == 4;
  out->abandoned = Cbc_isAbandoned(cbc) != 0;
  out->nodes = Cbc_getNodeCount(cbc);
  double b = Cbc_getBestPossibleObjValue(cbc);
  out->bound = isfinite(b) && fabs(b) < 1e300 ? b : NAN;
  const double *best = Cbc_bestSolution(cbc);
  if (best) {
    out->x = malloc(sizeof(double) * (size_t)(m->nvars ? m->nvars : 1));
    if (!out->x) {
      Cbc_deleteModel(cbc);
      return ts_error(TS_ERR_OOM, "ILP: out of memory copying the solution");
    }
    memcpy(out->x, best, sizeof(double) * (size_t)m->nvars);
  }
  Cbc_deleteModel(cbc);
  return TS_OK;
}

/* Better in the model's sense by more than a relative 1e-9. */
static bool better(const ts_ilp *m, double a, double b) {
  double eps = 1e-9 * (1 + fabs(b));
  return m->maximize ? a > b + eps : a < b - eps;
}

static ts_status finish(ts_ilp_result *res, ts_ilp_status s, double *x, const ts_ilp *m, double t0) {
  res->status = s;
  res->x = x;
  res->objective = x ? ts_ilp_eval(m, x) : NAN;
  res->seconds = ts_now() - t0;
  if (x && better(m, res->objective, res->bound)) res->bound = NAN; /* a bound the solution beats is none */
  return TS_OK;
}

ts_status ts__ilp_warm(const ts_ilp *m, double **out) {
  *out = NULL;
  if (!m->warm || m->warm_n != m->nvars) return TS_OK;
  double *warm = malloc(sizeof(double) * (size_t)(m->nvars ? m->nvars : 1));
  if (!warm) return ts_error(TS_ERR_OOM, "ILP: out of memory");
  memcpy(warm, m->warm, sizeof(double) * (size_t)m->nvars);
  ts__ilp_snap(m, warm);
  if (!ts__ilp_feasible(m, warm, NULL, 0)) free(warm), warm = NULL;
  *out = warm;
  return TS_OK;
}

ts_status ts__ilp_verdict(const ts_ilp *m, ts__ilp_outcome *cb, double *warm, double time_limit, double t0, ts_ilp_result *res) {
  char why[256];
  res->nodes = cb->nodes;
  res->bound = cb->bound;
  /* Never trust the returned vector blindly: snap, then check every bound, integer and row. */
  bool cand_ok = false;
  if (cb->x) {
    ts__ilp_snap(m, cb->x);
    cand_ok = ts__ilp_feasible(m, cb->x, why, sizeof why);
  }
  if (cand_ok) {
    if (warm && better(m, ts_ilp_eval(m, warm), ts_ilp_eval(m, cb->x))) {
      free(cb->x);
      res->from_warm_start = true;
      return finish(res, TS_ILP_FEASIBLE, warm, m, t0);
    }
    free(warm);
    return finish(res, cb->optimal ? TS_ILP_OPTIMAL : TS_ILP_FEASIBLE, cb->x, m, t0);
  }
  bool had_x = cb->x != NULL;
  free(cb->x);
  if (warm) { /* CBC failed or found nothing: the caller still gets the best known solution */
    res->from_warm_start = true;
    return finish(res, TS_ILP_FEASIBLE, warm, m, t0);
  }
  res->seconds = ts_now() - t0;
  res->bound = cb->time_hit ? res->bound : NAN; /* only a stopped search leaves a meaningful bound */
  if (had_x) {
    res->status = TS_ILP_ERROR;
    return ts_error(TS_ERR_SOLVER, "CBC returned a solution that does not check out: %s", why);
  }
  if (cb->unbounded) {
    res->status = TS_ILP_UNBOUNDED;
    return ts_error(TS_ERR_SOLVER, "ILP is unbounded: the %s can improve without limit (%d variables, %d rows)",
                    m->maximize ? "maximum" : "minimum", m->nvars, m->nrows);
  }
  if (cb->infeasible) {
    res->status = TS_ILP_INFEASIBLE;
    return ts_error(TS_ERR_INFEASIBLE, "ILP is infeasible (%d variables, %d rows)", m->nvars, m->nrows);
  }
  if (cb->time_hit) {
    res->status = TS_ILP_NO_SOLUTION;
    return ts_error(TS_ERR_TIMEOUT, "ILP: time limit of %g s reached before any feasible solution was found",
                    time_limit);
  }
  res->status = TS_ILP_ERROR;
  return ts_error(TS_ERR_SOLVER, "CBC stopped without a solution or a verdict%s",
                  cb->abandoned ? " (abandoned on numerical difficulties)" : "");
}

ts_status ts_ilp_solve(ts_ilp *m, const ts_ilp_options *opt, ts_ilp_result *res) {
  if (!res) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_solve: result is NULL");
  memset(res, 0, sizeof *res);
  res->status = TS_ILP_ERROR, res->objective = NAN, res->bound = NAN;
  if (!m) return ts_error(TS_ERR_INVALID_ARG, "ts_ilp_solve: model is NULL");
  res->nvars = m->nvars;
  ts_ilp_options defaults;
  ts_ilp_options_default(&defaults);
  const ts_ilp_options *o = opt ? opt : &defaults;
  TS_TRY(check_options(o));
  double t0 = ts_now();

  /* The caller's warm start is the fallback answer when it checks out. */
  double *warm = NULL;
  TS_TRY(ts__ilp_warm(m, &warm));
  res->warm_start_used = warm != NULL;

  char why[256];
  if (m->nvars == 0) { /* nothing to decide: the empty assignment either satisfies the rows or not */
    double *x = malloc(1);
    if (!x) return ts_error(TS_ERR_OOM, "ILP: out of memory");
    free(warm);
    if (ts__ilp_feasible(m, x, why, sizeof why)) {
      res->bound = 0;
      return finish(res, TS_ILP_OPTIMAL, x, m, t0);
    }
    free(x);
    res->status = TS_ILP_INFEASIBLE;
    return ts_error(TS_ERR_INFEASIBLE, "ILP with no variables is infeasible: %s", why);
  }

  progress_thread pt;
  if (o->progress) progress_start(&pt, o->time_limit);
  ts__ilp_outcome cb = {0};
  ts_status st = run_cbc(m, o, warm, t0, &cb);
  if (o->progress) progress_stop(&pt);
  if (st != TS_OK) {
    free(warm);
    return st;
  }
  return ts__ilp_verdict(m, &cb, warm, o->time_limit, t0, res);
}
