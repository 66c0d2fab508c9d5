/* The scheduler's core: greedy (cheapest tiles + LPT) and the CBC ILP over (piece tile, panel
 * thread) minimizing the predicted makespan; formulation in tessera/attn_sched.h. Costs are scaled
 * so the lower bound is 1000 inside the model (CBC's tolerances are absolute). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/attn_sched.h"

const char *ts_attn_solver_name(ts_attn_solver s) { return s == TS_ATTN_SOLVER_ILP ? "ilp" : "greedy"; }

ts_status ts_attn_solver_parse(const char *name, ts_attn_solver *out) {
  if (name && strcmp(name, "greedy") == 0) *out = TS_ATTN_SOLVER_GREEDY;
  else if (name && strcmp(name, "ilp") == 0) *out = TS_ATTN_SOLVER_ILP;
  else return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: unknown solver '%s' (greedy, ilp)", name ? name : "(null)");
  return TS_OK;
}

void ts_attn_sched_opts_default(ts_attn_sched_opts *o) {
  memset(o, 0, sizeof *o);
  o->solver = TS_ATTN_SOLVER_ILP;
  o->blocks = ts_attn_blocks_opts_default();
  o->time_limit = 2.0;
  o->k_tiles = 3;
  o->max_tile_vars = 2000;
  o->tie_break = 1e-4;
}

/* Working state shared by the solvers. cand[i][0..k) are piece i's candidate tiles, cheapest first. */
typedef struct sp {
  const ts_attn_sched_problem *pb;
  int P, k;
  int *cand;        /* [npieces][k] */
  double *lmin;     /* [npanels] load with cheapest tiles */
  double *umax;     /* [npanels] load with the dearest candidates */
  int64_t *rank;    /* [npanels] panel indices by decreasing lmin */
  int64_t *pos;     /* [npanels] inverse of rank */
} sp;

static double base_of(const ts_attn_sched_problem *pb, int64_t p) { return pb->base ? pb->base[p] : 0.0; }
static double cost_of(const ts_attn_sched_problem *pb, int64_t i, int t) { return pb->cost[i * pb->ntiles + t]; }

typedef struct rank_key { double load; int64_t p; } rank_key;
static int cmp_desc(const void *a, const void *b) {
  const rank_key *x = a, *y = b;
  if (x->load != y->load) return x->load > y->load ? -1 : 1;
  return (x->p > y->p) - (x->p < y->p);
}

/* Thread loads of an assignment; returns the makespan, *total the sum. */
static double eval(const sp *S, const int *tile, const int32_t *thread, double *loads, double *total) {
  const ts_attn_sched_problem *pb = S->pb;
  double *L = calloc((size_t)pb->npanels, sizeof *L);
  for (int q = 0; q < S->P; q++) loads[q] = 0;
  double tot = 0, mk = 0;
  if (!L) return NAN;
  for (int64_t p = 0; p < pb->npanels; p++) L[p] = base_of(pb, p);
  for (int64_t i = 0; i < pb->npieces; i++) L[pb->piece_panel[i]] += cost_of(pb, i, tile[i]);
  for (int64_t p = 0; p < pb->npanels; p++) loads[thread[p]] += L[p], tot += L[p];
  for (int q = 0; q < S->P; q++) mk = loads[q] > mk ? loads[q] : mk;
  free(L);
  *total = tot;
  return mk;
}

static void greedy(const sp *S, int *tile, int32_t *thread, double *loads) {
  const ts_attn_sched_problem *pb = S->pb;
  for (int64_t i = 0; i < pb->npieces; i++) tile[i] = S->cand[i * S->k];
  for (int q = 0; q < S->P; q++) loads[q] = 0;
  for (int64_t r = 0; r < pb->npanels; r++) { /* LPT */
    int64_t p = S->rank[r];
    int best = 0;
    for (int q = 1; q < S->P; q++)
      if (loads[q] < loads[best]) best = q;
    thread[p] = best;
    loads[best] += S->lmin[p];
  }
}

/* The ILP; on success fills tile/thread with its solution. */
static ts_status ilp(const sp *S, const ts_attn_sched_opts *o, const int32_t *gthread, double scale,
                     int *tile, int32_t *thread, ts_attn_sched_info *info) {
  const ts_attn_sched_problem *pb = S->pb;
  const int P = S->P;
  const int64_t np = pb->npanels, ni = pb->npieces;
  int64_t nx = 0;
  for (int64_t i = 0; i < ni; i++) nx += S->k > 1 ? S->k : 0;
  const bool fixed = S->k <= 1 || nx > o->max_tile_vars;
  info->tiles_fixed = fixed;
  const int kk = fixed ? 1 : S->k;
  /* variable indices: x[i][c] (c < kk, only when !fixed), a[p][q], y[p][q] (only when !fixed), M */
  int *xv = NULL, *av = malloc((size_t)(np * P) * sizeof *av), *yv = malloc((size_t)(np * P) * sizeof *yv);
  int rowcap = (int)(ni * kk + np * 2 + 8);
  int *rv = malloc((size_t)rowcap * sizeof *rv);
  double *rc = malloc((size_t)rowcap * sizeof *rc), *Lc = calloc((size_t)np, sizeof *Lc);
  ts_ilp *m = NULL;
  ts_ilp_result res = {0};
  double *w = NULL;
  ts_status st = TS_OK;
  if (!fixed && !(xv = malloc((size_t)(ni * kk) * sizeof *xv))) st = TS_ERR_OOM;
  if (!av || !yv || !rv || !rc || !Lc || st != TS_OK) {
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the ILP index arrays (%lld panels)", (long long)np);
    goto done;
  }
  if ((st = ts_ilp_create(&m)) != TS_OK) goto done;
  double eps = o->tie_break > 0 ? o->tie_break : 0.0;
  for (int64_t i = 0; i < ni && !fixed; i++)
    for (int c = 0; c < kk; c++)
      if ((st = ts_ilp_add_binary(m, NULL, eps * scale * cost_of(pb, i, S->cand[i * S->k + c]), &xv[i * kk + c])) != TS_OK)
        goto done;
  for (int64_t p = 0; p < np; p++)
    for (int q = 0; q < P; q++) {
      av[p * P + q] = yv[p * P + q] = -1;
      if (q > S->pos[p]) continue; /* symmetry breaking */
      if ((st = ts_ilp_add_binary(m, NULL, 0.0, &av[p * P + q])) != TS_OK) goto done;
      if (!fixed && (st = ts_ilp_add_continuous(m, NULL, 0.0, scale * S->umax[p], 0.0, &yv[p * P + q])) != TS_OK) goto done;
    }
  double lb = 0, lsum = 0;
  for (int64_t p = 0; p < np; p++) lsum += S->lmin[p], lb = S->lmin[p] > lb ? S->lmin[p] : lb;
  lb = lsum / P > lb ? lsum / P : lb;
  int Mv;
  if ((st = ts_ilp_add_continuous(m, "M", scale * lb * (1 - 1e-9), INFINITY, 1.0, &Mv)) != TS_OK) goto done;
  /* constant part of each panel load: base + (fixed tiles) the cheapest piece costs */
  for (int64_t p = 0; p < np; p++) Lc[p] = base_of(pb, p);
  if (fixed)
    for (int64_t i = 0; i < ni; i++) Lc[pb->piece_panel[i]] += cost_of(pb, i, S->cand[i * S->k]);
  for (int64_t i = 0; i < ni && !fixed; i++) { /* one tile per piece */
    for (int c = 0; c < kk; c++) rv[c] = xv[i * kk + c], rc[c] = 1.0;
    if ((st = ts_ilp_add_row(m, NULL, kk, rv, rc, TS_ILP_EQ, 1.0, NULL)) != TS_OK) goto done;
  }
  for (int64_t p = 0; p < np; p++) { /* one thread per panel */
    int nz = 0;
    for (int q = 0; q < P; q++)
      if (av[p * P + q] >= 0) rv[nz] = av[p * P + q], rc[nz++] = 1.0;
    if ((st = ts_ilp_add_row(m, NULL, nz, rv, rc, TS_ILP_EQ, 1.0, NULL)) != TS_OK) goto done;
  }
  /* pieces of each panel (for the load rows) */
  int64_t *pstart = calloc((size_t)np + 1, sizeof *pstart), *plist = malloc((size_t)(ni ? ni : 1) * sizeof *plist);
  if (!pstart || !plist) {
    free(pstart), free(plist);
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the panel piece lists");
    goto done;
  }
  for (int64_t i = 0; i < ni; i++) pstart[pb->piece_panel[i] + 1]++;
  for (int64_t p = 0; p < np; p++) pstart[p + 1] += pstart[p];
  for (int64_t i = 0; i < ni; i++) plist[pstart[pb->piece_panel[i]]++] = i; /* pstart[p] -> end of p */
  for (int64_t p = np; p > 0; p--) pstart[p] = pstart[p - 1];
  pstart[0] = 0;
  if (!fixed) {
    /* y[p,q] - sum c x - U a[p,q] >= Lc_p - U */
    int cap2 = 0;
    for (int64_t p = 0; p < np; p++) {
      int64_t len = (pstart[p + 1] - pstart[p]) * kk + 2;
      if (len > cap2) cap2 = (int)len;
    }
    if (cap2 > rowcap) {
      int *r2 = realloc(rv, (size_t)cap2 * sizeof *rv);
      if (r2) rv = r2;
      double *c2 = r2 ? realloc(rc, (size_t)cap2 * sizeof *rc) : NULL;
      if (c2) rc = c2;
      if (!r2 || !c2) st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate an ILP row of %d entries", cap2);
    }
    for (int64_t p = 0; p < np && st == TS_OK; p++)
      for (int q = 0; q < P && st == TS_OK; q++) {
        if (av[p * P + q] < 0) continue;
        int nz = 0;
        double U = scale * S->umax[p];
        for (int64_t x = pstart[p]; x < pstart[p + 1]; x++)
          for (int c = 0; c < kk; c++) rv[nz] = xv[plist[x] * kk + c], rc[nz++] = -scale * cost_of(pb, plist[x], S->cand[plist[x] * S->k + c]);
        rv[nz] = yv[p * P + q], rc[nz++] = 1.0;
        rv[nz] = av[p * P + q], rc[nz++] = -U;
        st = ts_ilp_add_row(m, NULL, nz, rv, rc, TS_ILP_GE, scale * Lc[p] - U, NULL);
      }
    /* P M - sum c x >= sum Lc */
    if (st == TS_OK) {
      int64_t nz = 0;
      double csum = 0;
      int *r3 = malloc((size_t)(ni * kk + 1) * sizeof *r3);
      double *c3 = malloc((size_t)(ni * kk + 1) * sizeof *c3);
      if (!r3 || !c3) st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the ILP sum row");
      for (int64_t i = 0; i < ni && st == TS_OK; i++)
        for (int c = 0; c < kk; c++) r3[nz] = xv[i * kk + c], c3[nz++] = -scale * cost_of(pb, i, S->cand[i * S->k + c]);
      for (int64_t p = 0; p < np; p++) csum += scale * Lc[p];
      if (st == TS_OK) {
        r3[nz] = Mv, c3[nz++] = P;
        st = ts_ilp_add_row(m, "sum", (int)nz, r3, c3, TS_ILP_GE, csum, NULL);
      }
      free(r3), free(c3);
    }
  }
  /* thread loads <= M */
  for (int q = 0; q < P && st == TS_OK; q++) {
    int nz = 0;
    for (int64_t p = 0; p < np; p++) {
      if (av[p * P + q] < 0) continue;
      if (nz + 2 > rowcap) break; /* cannot happen: rowcap >= np + 2 */
      if (fixed) rv[nz] = av[p * P + q], rc[nz++] = scale * Lc[p];
      else rv[nz] = yv[p * P + q], rc[nz++] = 1.0;
    }
    rv[nz] = Mv, rc[nz++] = -1.0;
    st = ts_ilp_add_row(m, NULL, nz, rv, rc, TS_ILP_LE, 0.0, NULL);
  }
  free(pstart), free(plist);
  if (st != TS_OK) goto done;
  /* warm start: the greedy solution */
  int nv = ts_ilp_num_vars(m);
  if (!(w = calloc((size_t)nv, sizeof *w))) {
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the warm start");
    goto done;
  }
  double *gl = calloc((size_t)P, sizeof *gl), gmk = 0;
  if (!gl) {
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate thread loads");
    goto done;
  }
  for (int64_t i = 0; i < ni && !fixed; i++) w[xv[i * kk]] = 1.0; /* candidate 0 = cheapest = greedy's tile */
  for (int64_t p = 0; p < np; p++) {
    int q = gthread[p];
    if (av[p * P + q] >= 0) w[av[p * P + q]] = 1.0;
    if (!fixed) w[yv[p * P + q]] = scale * S->lmin[p];
    gl[q] += scale * S->lmin[p];
  }
  for (int q = 0; q < P; q++) gmk = gl[q] > gmk ? gl[q] : gmk;
  free(gl);
  w[Mv] = gmk;
  ts_ilp_set_warm_start(m, w, nv);
  ts_ilp_options io;
  ts_ilp_options_default(&io);
  io.time_limit = o->time_limit;
  info->ilp_vars = nv;
  info->ilp_rows = ts_ilp_num_rows(m);
  st = ts_ilp_solve(m, &io, &res);
  info->ilp_status = res.status;
  info->ilp_seconds = res.seconds;
  info->ilp_nodes = res.nodes;
  if (isfinite(res.objective) && isfinite(res.bound) && res.objective != 0)
    info->ilp_gap = fabs(res.objective - res.bound) / fabs(res.objective);
  if (st != TS_OK) goto done;
  for (int64_t i = 0; i < ni; i++) {
    int bc = 0;
    for (int c = 1; c < kk && !fixed; c++)
      if (res.x[xv[i * kk + c]] > res.x[xv[i * kk + bc]]) bc = c;
    tile[i] = S->cand[i * S->k + bc];
  }
  for (int64_t p = 0; p < np; p++) {
    int bq = -1;
    for (int q = 0; q < P; q++)
      if (av[p * P + q] >= 0 && (bq < 0 || res.x[av[p * P + q]] > res.x[av[p * P + bq]])) bq = q;
    thread[p] = bq;
  }
done:
  ts_ilp_result_free(&res);
  ts_ilp_destroy(m);
  free(xv), free(av), free(yv), free(rv), free(rc), free(Lc), free(w);
  return st;
}

static ts_status check_problem(const ts_attn_sched_problem *pb, const ts_attn_sched_opts *o, int P) {
  if (!pb || pb->npanels < 1 || pb->npieces < 0 || pb->ntiles < 1 || (pb->npieces > 0 && (!pb->piece_panel || !pb->cost)))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: empty or incomplete problem");
  if (P < 1 || P > TS_ATTN_THREAD_MAX)
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: threads = %d is not in [1, %d]", P, TS_ATTN_THREAD_MAX);
  if (o->solver == TS_ATTN_SOLVER_ILP && !(o->time_limit > 0))
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: time_limit = %g must be > 0", o->time_limit);
  if ((int64_t)P * pb->npanels > 10000000)
    return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: %lld panels x %d threads is too large", (long long)pb->npanels, P);
  for (int64_t i = 0; i < pb->npieces; i++) {
    if (pb->piece_panel[i] < 0 || pb->piece_panel[i] >= pb->npanels)
      return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: piece %lld: panel %lld is not in [0, %lld)", (long long)i,
                      (long long)pb->piece_panel[i], (long long)pb->npanels);
    for (int t = 0; t < pb->ntiles; t++)
      if (!(cost_of(pb, i, t) >= 0) || !isfinite(cost_of(pb, i, t)))
        return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: piece %lld tile %d: cost %g is not finite and >= 0", (long long)i, t,
                        cost_of(pb, i, t));
  }
  for (int64_t p = 0; p < pb->npanels; p++)
    if (!(base_of(pb, p) >= 0) || !isfinite(base_of(pb, p)))
      return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: panel %lld: base cost %g is not finite and >= 0", (long long)p,
                      base_of(pb, p));
  return TS_OK;
}

ts_status ts_attn_sched_problem_solve(const ts_attn_sched_problem *pb, const ts_attn_sched_opts *opts, int *tile,
                                      int32_t *thread, ts_attn_sched_info *info_out) {
  double t0 = ts_now();
  ts_attn_sched_opts o;
  if (opts) o = *opts;
  else ts_attn_sched_opts_default(&o);
  if (o.threads < 0) return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: threads = %d must be >= 0 (0: default)", o.threads);
  int P = o.threads > 0 ? o.threads : ts_default_threads();
  TS_TRY(check_problem(pb, &o, P));
  if ((pb->npieces > 0 && !tile) || !thread) return ts_error(TS_ERR_INVALID_ARG, "attn scheduler: NULL tile/thread output");
  ts_attn_sched_info info;
  memset(&info, 0, sizeof info);
  info.threads = P;
  info.npanels = pb->npanels;
  info.npieces = pb->npieces;
  info.ilp_makespan = info.ilp_gap = NAN;
  sp S = {.pb = pb, .P = P, .k = o.k_tiles < 1 ? 1 : o.k_tiles > pb->ntiles ? pb->ntiles : o.k_tiles};
  const int64_t np = pb->npanels, ni = pb->npieces;
  S.cand = malloc((size_t)(ni ? ni : 1) * (size_t)S.k * sizeof *S.cand);
  S.lmin = calloc((size_t)np, sizeof *S.lmin);
  S.umax = calloc((size_t)np, sizeof *S.umax);
  S.rank = malloc((size_t)np * sizeof *S.rank);
  S.pos = malloc((size_t)np * sizeof *S.pos);
  int *itile = malloc((size_t)(ni ? ni : 1) * sizeof *itile);
  int32_t *ithread = malloc((size_t)np * sizeof *ithread);
  double *loads = calloc((size_t)P, sizeof *loads);
  ts_status st = TS_OK;
  if (!S.cand || !S.lmin || !S.umax || !S.rank || !S.pos || !itile || !ithread || !loads) {
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the working arrays (%lld pieces)", (long long)ni);
    goto done;
  }
  for (int64_t p = 0; p < np; p++) S.lmin[p] = S.umax[p] = base_of(pb, p);
  for (int64_t i = 0; i < ni; i++) { /* k cheapest tiles by selection (k is small); ties: menu order */
    int *c = S.cand + i * S.k;
    for (int j = 0; j < S.k; j++) {
      int best = -1;
      for (int t = 0; t < pb->ntiles; t++) {
        bool used = false;
        for (int u = 0; u < j; u++) used |= c[u] == t;
        if (!used && (best < 0 || cost_of(pb, i, t) < cost_of(pb, i, best))) best = t;
      }
      c[j] = best;
    }
    S.lmin[pb->piece_panel[i]] += cost_of(pb, i, c[0]);
    S.umax[pb->piece_panel[i]] += cost_of(pb, i, c[S.k - 1]);
  }
  rank_key *rk = malloc((size_t)np * sizeof *rk);
  if (!rk) {
    st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate %lld panel keys", (long long)np);
    goto done;
  }
  for (int64_t p = 0; p < np; p++) rk[p] = (rank_key){S.lmin[p], p};
  qsort(rk, (size_t)np, sizeof *rk, cmp_desc);
  for (int64_t r = 0; r < np; r++) S.rank[r] = rk[r].p, S.pos[rk[r].p] = r;
  free(rk);
  double lsum = 0, lmax = 0;
  for (int64_t p = 0; p < np; p++) lsum += S.lmin[p], lmax = S.lmin[p] > lmax ? S.lmin[p] : lmax;
  info.lower_bound = lsum / P > lmax ? lsum / P : lmax;

  greedy(&S, tile, thread, loads);
  info.greedy_makespan = info.makespan = eval(&S, tile, thread, loads, &info.greedy_total);
  info.total = info.greedy_total;
  info.solver = TS_ATTN_SOLVER_GREEDY;
  /* One thread: makespan = total, minimized by the cheapest tiles, i.e. greedy is optimal. */
  if (o.solver == TS_ATTN_SOLVER_ILP && P > 1) {
    double scale = info.lower_bound > 0 ? 1000.0 / info.lower_bound : 1.0;
    info.ilp_run = true;
    /* With x variables (the weak big-M model), first solve the aggregated model (tiles at their
     * cheapest: strong, usually proven at once) in up to half the time. Its optimum is the full
     * model's too (see the header), so when it is proven the full model is skipped (unless
     * opts.full_model); otherwise its assignment, when better than LPT, starts the full model. */
    int64_t nx = S.k > 1 ? ni * S.k : 0;
    const int32_t *start = thread;
    int32_t *start_copy = NULL;
    ts_status si = TS_ERR_SOLVER;
    bool done1 = false;
    if (S.k > 1 && nx <= o.max_tile_vars) {
      ts_attn_sched_opts o1 = o;
      ts_attn_sched_info i1 = info;
      o1.max_tile_vars = -1;
      o1.time_limit = o.time_limit / 2;
      double t1 = ts_now(), tot1;
      si = ilp(&S, &o1, thread, scale, itile, ithread, &i1);
      double stage1_s = ts_now() - t1;
      if (si == TS_OK && i1.ilp_status == TS_ILP_OPTIMAL && !o.full_model) {
        info = i1; /* the answer; evaluated below like any ILP answer */
        info.ilp_seconds = stage1_s;
        done1 = true;
      } else {
        if (si == TS_OK && eval(&S, itile, ithread, loads, &tot1) < info.greedy_makespan * (1 - 1e-12)) {
          if (!(start_copy = malloc((size_t)np * sizeof *start_copy))) {
            st = ts_error(TS_ERR_OOM, "attn scheduler: cannot allocate the ILP start");
            goto done;
          }
          memcpy(start_copy, ithread, (size_t)np * sizeof *start_copy);
          start = start_copy;
        }
        o.time_limit -= stage1_s;
        if (o.time_limit < 1e-3) o.time_limit = 1e-3;
        info.ilp_seconds = stage1_s;
      }
    }
    if (!done1) {
      double s1 = info.ilp_seconds;
      si = ilp(&S, &o, start, scale, itile, ithread, &info);
      info.ilp_seconds += s1;
    }
    free(start_copy);
    if (si == TS_OK) {
      double itot, imk = eval(&S, itile, ithread, loads, &itot);
      info.ilp_makespan = imk;
      double tol = 1e-9 * (info.greedy_makespan > 0 ? info.greedy_makespan : 1);
      if (imk < info.greedy_makespan - tol || (imk <= info.greedy_makespan + tol && itot < info.greedy_total - tol)) {
        memcpy(tile, itile, (size_t)ni * sizeof *tile);
        memcpy(thread, ithread, (size_t)np * sizeof *thread);
        info.makespan = imk;
        info.total = itot;
        info.solver = TS_ATTN_SOLVER_ILP;
        info.ilp_improved = true;
      }
    } else if (si == TS_ERR_OOM) {
      st = si;
    }
  }
done:
  info.ms = (ts_now() - t0) * 1e3;
  if (info_out) *info_out = info;
  free(S.cand), free(S.lmin), free(S.umax), free(S.rank), free(S.pos), free(itile), free(ithread), free(loads);
  return st;
}
